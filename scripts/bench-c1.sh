#!/usr/bin/env bash
# bench-c1.sh measures what batching adds at concurrency 1 (issue 32) the
# way the independent check did: Debian's hey, one client, one server per
# build with the 3x2048x2048 MLP of bench-batching.sh deployed twice
# (batching on and off, the same service.json settings, worker_threads 1),
# the trimmed mean (10% cut at each end) of hey's per-request times. Each
# round measures every build, off then on, the builds' order reversed every
# other round; each build's result is the median of the rounds' on - off.
#
# Usage: scripts/bench-c1.sh ROUNDS DURATION COMMIT...   (e.g. 3 5s faa749c HEAD)
# Each COMMIT is built from `git archive` into a temporary directory (the
# working tree is never used). Env: WORKERS (rpc.worker_threads, default 1),
# PY (python3 with onnx and numpy, default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh
(($# >= 3)) || { echo "usage: $0 ROUNDS DURATION COMMIT..." >&2; exit 2; }
ROUNDS=$1; DUR=$2; shift 2
PY=${PY:-/usr/bin/python3}
WORKERS=${WORKERS:-1}
command -v hey >/dev/null || { echo "hey is missing: apt-get install -y hey" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

builds=()
for c in "$@"; do
	d="$work/build-$(git rev-parse --short "$c")"
	mkdir -p "$d" && git archive "$c" | tar -x -C "$d"
	(cd "$d" && go build -trimpath -o bin/eas-server ./cmd/eas-server)
	builds+=("$d")
done
$PY scripts/gen-test-models.py --bench-mlp "$work/mlp2048.onnx" >/dev/null
for b in on off; do
	bt=false; [[ $b == on ]] && bt=true
	cat >"$work/mlp_$b.json" <<J
{"name":"mlp_$b","processor":"pytorch_cpu_1.10","model_path":"$work/mlp2048.onnx","token":"bench",
 "metadata":{"instance":1,"cpu":2,"rpc":{"batching":$bt,"max_batch_size":64,"max_batch_timeout":20,
 "worker_threads":$WORKERS,"max_queue_size":1024,"keepalive":60000}}}
J
done
lib=$PWD/third_party/onnxruntime/lib/libonnxruntime.so
ports=()
for i in "${!builds[@]}"; do
	port=$((18500 + i))
	ONNXRUNTIME_LIB=$lib "${builds[$i]}/bin/eas-server" serve --listen 127.0.0.1:$port --state-dir "$work/state-$i" \
		--log-level warn --deploy "$work/mlp_on.json" --deploy "$work/mlp_off.json" >"$work/server-$i.log" 2>&1 &
	pids+=($!)
	wait_ready "$port" 60 "$work/server-$i.log" "${pids[-1]}"
	ports+=("$port")
done

# The body: the Torch protobuf of one 1x2048 FP32 row that `eas-server
# bench --tensor input:FP32:1x2048` sends, caught by a one-shot listener.
$PY - "$work/body.pb" 18599 <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        open(sys.argv[1], "wb").write(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), H).handle_request()
PY
cap=$!
sleep 0.5
"${builds[0]}/bin/eas-server" bench --url http://127.0.0.1:18599/ --tensor input:FP32:1x2048 -c 1 -d 100ms --warmup 0s >/dev/null 2>&1 || true
wait "$cap"

trimmed() { # port service -> trimmed mean of per-request ms
	local url=http://127.0.0.1:$1/api/predict/$2
	hey -z 1s -c 1 -m POST -D "$work/body.pb" -H "Authorization: bench" "$url" >/dev/null
	hey -z "$DUR" -c 1 -m POST -D "$work/body.pb" -H "Authorization: bench" -o csv "$url" >"$work/out.csv"
	$PY - "$work/out.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))[1:]
bad = {r[6] for r in rows} - {"200"}
if bad: sys.exit(f"non-200 answers: {bad}")
t = sorted(float(r[0]) * 1000 for r in rows); k = len(t) // 10
print(f"{statistics.mean(t[k:len(t) - k]):.4f}")
PY
}
declare -A diffs
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	order=("${!builds[@]}"); ((r % 2 == 0)) && order=($(printf '%s\n' "${!builds[@]}" | tac))
	for i in "${order[@]}"; do
		off=$(trimmed "${ports[$i]}" mlp_off); on=$(trimmed "${ports[$i]}" mlp_on)
		d=$($PY -c "print(f'{$on - $off:+.3f}')")
		diffs[$i]+="$d "
		echo "round $r, $(basename "${builds[$i]}"): off $off ms, on $on ms, on - off $d ms (load $(cut -d' ' -f1 /proc/loadavg))"
	done
done
for i in "${!builds[@]}"; do
	echo "$(basename "${builds[$i]}"): on - off by round ${diffs[$i]}-> median $(printf '%s\n' ${diffs[$i]} | sort -g | sed -n "$(((ROUNDS + 1) / 2))p") ms"
done
