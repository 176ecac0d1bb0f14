#!/usr/bin/env bash
# bench-batch-inference.sh: a batch-inference model class (a numpy MLP,
# scripts/bench-batch-inference/model.py, one 512-float row per request)
# served by eas-server with batching on (the @batching max_batch_size 32,
# ModelHost's 5 ms wait) and off (model_config max_batch_size 1), next to
# batch-inference's own ModelHost on and off behind a minimal http.server
# (scripts/bench-batch-inference/modelhost_server.py), under the same load:
# `eas-server bench --format kserve-json --tensor x:FP32:1x512`, closed loop,
# at 1 and 32 clients. The Python side is the pinned venv of
# scripts/python-venv.sh batch-inference for all four, with one BLAS thread
# (OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1: 32 concurrent calls each
# spinning BLAS threads on a small machine measure the oversubscription).
# Usage: scripts/bench-batch-inference.sh [DURATION]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-6s}
PORT=${PORT:-18095}
MHPORT=${MHPORT:-18096}
VENV=${EAS_PYVENV_DIR:-$HOME/.cache/eas-server/pyvenv}/batch-inference
PY=$VENV/bin/python
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
bash scripts/python-venv.sh batch-inference >&2
[[ -n "${PREBUILT:-}" ]] || make -s build >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

model=$PWD/scripts/bench-batch-inference/model.py
rpc='"rpc":{"worker_threads":32,"max_queue_size":1024,"keepalive":60000}'
cat >"$work/on.json" <<JSON
{"name":"mlp_on","processor_path":"$model","processor_type":"python","token":"bench","metadata":{"instance":1,$rpc}}
JSON
cat >"$work/off.json" <<JSON
{"name":"mlp_off","processor_path":"$model","processor_type":"python","token":"bench",
 "model_config":{"max_batch_size":1},"metadata":{"instance":1,$rpc}}
JSON
EAS_PYTHON=$PY ./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn \
	--deploy "$work/on.json" --deploy "$work/off.json" &
pids+=($!)
wait_ready "$PORT" 60 "" "${pids[0]}"

B="./bin/eas-server bench --token bench -o json -d $DUR --warmup 2s --format kserve-json --tensor x:FP32:1x512"
results=()
for c in 1 32; do
	for svc in mlp_on mlp_off; do
		echo "measuring: eas-server $svc, $c clients" >&2
		before=$(batch_stats "$PORT" "$svc")
		r=$($B --endpoint "http://127.0.0.1:$PORT" --service "$svc" -c $c | field throughput_rps)
		after=$(batch_stats "$PORT" "$svc")
		results+=("eas-server:$svc $c $r $before $after")
	done
done
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true

for mode in on off; do
	$PY scripts/bench-batch-inference/modelhost_server.py "$MHPORT" "$mode" &
	mh=$!
	pids+=($mh)
	for _ in $(seq 1 100); do curl -fs "127.0.0.1:$MHPORT/" >/dev/null 2>&1 && break; sleep 0.1; done
	for c in 1 32; do
		echo "measuring: ModelHost $mode behind http.server, $c clients" >&2
		r=$($B --url "http://127.0.0.1:$MHPORT/v2/models/mlp/infer" -c $c | field throughput_rps)
		results+=("modelhost:$mode $c $r 0 0 0 0")
	done
	kill "$mh"; wait "$mh" 2>/dev/null || true
done

python3 - "$DUR" "${results[@]}" <<'PYEOF'
import sys
dur = sys.argv[1]
print(f"{dur} per measurement after 2 s warm-up, KServe v2 JSON bodies of one 1x512 FP32 row, closed loop.\n")
print("| server | batching | 1 client | 32 clients | mean batch at 32 |")
print("|---|---|---|---|---|")
rows = {}
for r in sys.argv[2:]:
    name, c, rps, s0, n0, s1, n1 = r.split()
    mean = (float(s1) - float(s0)) / max(float(n1) - float(n0), 1) if float(n1) > float(n0) else None
    rows.setdefault(name, {})[int(c)] = (float(rps), mean)
label = {"eas-server:mlp_on": ("eas-server (python, batch-inference class)", "on: @batching max_batch_size 32, 5 ms"),
         "eas-server:mlp_off": ("eas-server (python, batch-inference class)", "off: model_config max_batch_size 1"),
         "modelhost:on": ("ModelHost behind http.server", "on: ModelHost(max_batch_size=32, wait_ms=5)"),
         "modelhost:off": ("model.predict_batch behind http.server", "off")}
for k, (srv, b) in label.items():
    if k not in rows:
        continue
    one, many = rows[k].get(1, (0, None)), rows[k].get(32, (0, None))
    mb = f"{many[1]:.1f}" if many[1] is not None else "n/a"
    print(f"| {srv} | {b} | {one[0]:.0f} req/s | {many[0]:.0f} req/s | {mb} |")
PYEOF
