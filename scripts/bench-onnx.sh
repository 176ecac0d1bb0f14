#!/usr/bin/env bash
# bench-onnx.sh measures the test MLP (processors/onnx/testdata/mlp.onnx,
# 16->32->8 fp32) at batch 1 and 64: one in-process ONNX Runtime run vs one
# HTTP round trip through the whole server (Torch protobuf, concurrency 1),
# and prints a markdown table for BENCHMARKS.md.
# Usage: scripts/bench-onnx.sh [DURATION]   (default 10s per measurement)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh
DUR=${1:-10s}
PORT=${PORT:-18092}
PY=/usr/bin/python3
MODEL=processors/onnx/testdata/mlp.onnx
make -s build >/dev/null
work=$(mktemp -d)
trap 'kill ${srv_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/mlp.json" <<JSON
{"name":"mlp","processor":"pytorch_cpu_1.10","model_path":"$PWD/$MODEL","token":"bench","metadata":{"instance":1,"cpu":1}}
JSON
./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn --deploy "$work/mlp.json" 2>/dev/null &
srv_pid=$!
wait_ready "$PORT" 10 "" "$srv_pid"
echo "| batch | in-process ORT, ms per run | HTTP round trip (Torch protobuf), p50 ms | p99 ms | overhead p50 |"
echo "|---|---|---|---|---|"
for n in 1 64; do
	inp=$(./bin/eas-server bench --in-process "$MODEL" --cpu 1 --tensor "input:FP32:${n}x16" -d "$DUR" --warmup 1s -o json)
	http=$(./bin/eas-server bench --endpoint "http://127.0.0.1:$PORT" --service mlp --token bench \
		--tensor "input:FP32:${n}x16" -c 1 -d "$DUR" --warmup 1s -o json)
	$PY - "$n" "$inp" "$http" <<'PYEOF'
import json, sys
n = sys.argv[1]; inp = json.loads(sys.argv[2]); http = json.loads(sys.argv[3])[0]
print(f"| {n} | {inp['mean_run_ms']:.4f} | {http['p50_ms']:.3f} | {http['p99_ms']:.3f} | {http['p50_ms']-inp['mean_run_ms']:.3f} ms |")
PYEOF
done
