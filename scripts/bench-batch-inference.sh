#!/usr/bin/env bash
# bench-batch-inference.sh: batch-inference model classes served by
# eas-server with batching on (the @batching max_batch_size 32, ModelHost's
# 5 ms wait) and off (model_config max_batch_size 1), next to
# batch-inference's own ModelHost on and off behind a minimal http.server
# (scripts/bench-batch-inference/modelhost_server.py), under the same load:
# `eas-server bench --format kserve-json`, closed loop, at 1 and 32 clients.
# Two models: a numpy MLP (scripts/bench-batch-inference/model.py, one
# 1x512 row per request, on the venv of scripts/python-venv.sh
# batch-inference) and batch-inference's PyTorch fully-connected example
# (model_torch.py, one 1x2048 row, on the batch-inference-torch venv:
# Debian's python3-torch; skipped where it cannot import torch). All Python
# runs with one BLAS thread (OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1: 32
# concurrent calls each spinning BLAS threads on a small machine measure
# the oversubscription).
# Usage: scripts/bench-batch-inference.sh [DURATION]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-6s}
PORT=${PORT:-18095}
MHPORT=${MHPORT:-18096}
ROOT=${EAS_PYVENV_DIR:-$HOME/.cache/eas-server/pyvenv}
PY=python3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
bash scripts/python-venv.sh batch-inference batch-inference-torch >&2
[[ -n "${PREBUILT:-}" ]] || make -s build >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

results=()
# bench_model NAME VENV MODEL_FILE TENSOR [torch]
bench_model() {
	local name=$1 py=$ROOT/$2/bin/python model=$PWD/scripts/bench-batch-inference/$3 tensor=$4 kind=${5:-}
	local rpc='"rpc":{"worker_threads":32,"max_queue_size":1024,"keepalive":60000}'
	cat >"$work/on.json" <<JSON
{"name":"${name}_on","processor_path":"$model","processor_type":"python","token":"bench","metadata":{"instance":1,$rpc}}
JSON
	cat >"$work/off.json" <<JSON
{"name":"${name}_off","processor_path":"$model","processor_type":"python","token":"bench",
 "model_config":{"max_batch_size":1},"metadata":{"instance":1,$rpc}}
JSON
	rm -rf "$work/state"
	EAS_PYTHON=$py ./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn \
		--deploy "$work/on.json" --deploy "$work/off.json" &
	local srv=$!
	pids+=($srv)
	wait_ready "$PORT" 60 "" "$srv"
	local B="./bin/eas-server bench --token bench -o json -d $DUR --warmup 2s --format kserve-json --tensor $tensor"
	for c in 1 32; do
		for svc in ${name}_on ${name}_off; do
			echo "measuring: $name, eas-server $svc, $c clients" >&2
			local before after r
			before=$(batch_stats "$PORT" "$svc")
			r=$($B --endpoint "http://127.0.0.1:$PORT" --service "$svc" -c $c | field throughput_rps)
			after=$(batch_stats "$PORT" "$svc")
			results+=("$name eas-server:${svc##*_} $c $r $before $after")
		done
	done
	kill "$srv"; wait "$srv" 2>/dev/null || true
	for mode in on off; do
		"$py" scripts/bench-batch-inference/modelhost_server.py "$MHPORT" "$mode" $kind &
		local mh=$!
		pids+=($mh)
		for _ in $(seq 1 100); do curl -fs "127.0.0.1:$MHPORT/" >/dev/null 2>&1 && break; sleep 0.1; done
		for c in 1 32; do
			echo "measuring: $name, ModelHost $mode behind http.server, $c clients" >&2
			r=$($B --url "http://127.0.0.1:$MHPORT/v2/models/m/infer" -c $c | field throughput_rps)
			results+=("$name modelhost:$mode $c $r 0 0 0 0")
		done
		kill "$mh"; wait "$mh" 2>/dev/null || true
	done
}

bench_model mlp batch-inference model.py x:FP32:1x512
if "$ROOT/batch-inference-torch/bin/python" -c "import torch" 2>/dev/null; then
	bench_model fc batch-inference-torch model_torch.py input:FP32:1x2048 torch
else
	echo "skipping the PyTorch model: the batch-inference-torch venv cannot import torch (Debian's python3-torch)" >&2
fi

$PY - "$DUR" "${results[@]}" <<'PYEOF'
import sys
dur = sys.argv[1]
print(f"{dur} per measurement after 2 s warm-up, KServe v2 JSON bodies of one FP32 row, closed loop.\n")
print("| model | server | batching | 1 client | 32 clients | mean batch at 32 |")
print("|---|---|---|---|---|---|")
rows = {}
for r in sys.argv[2:]:
    model, name, c, rps, s0, n0, s1, n1 = r.split()
    mean = (float(s1) - float(s0)) / (float(n1) - float(n0)) if float(n1) > float(n0) else None
    rows.setdefault((model, name), {})[int(c)] = (float(rps), mean)
models = {"mlp": "numpy MLP 512-2048-512", "fc": "PyTorch FC 2048-1024"}
label = {"eas-server:on": ("eas-server", "on: @batching max_batch_size 32, 5 ms"),
         "eas-server:off": ("eas-server", "off: model_config max_batch_size 1"),
         "modelhost:on": ("ModelHost behind http.server", "on: ModelHost(max_batch_size=32, wait_ms=5)"),
         "modelhost:off": ("predict_batch behind http.server", "off")}
for m, mname in models.items():
    for k, (srv, b) in label.items():
        if (m, k) not in rows:
            continue
        one, many = rows[(m, k)].get(1, (0, None)), rows[(m, k)].get(32, (0, None))
        mb = f"{many[1]:.1f}" if many[1] is not None else "n/a"
        print(f"| {mname} | {srv} | {b} | {one[0]:.0f} req/s | {many[0]:.0f} req/s | {mb} |")
PYEOF
