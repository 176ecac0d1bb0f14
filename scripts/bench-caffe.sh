#!/usr/bin/env bash
# bench-caffe.sh measures, in one run on this machine, the caffe_cpu
# processor (deploy.prototxt + .caffemodel translated to ONNX, run on ONNX
# Runtime) and prints a markdown table for BENCHMARKS.md:
#   a. ours vs OpenCV's DNN module on the same two files, the same number of
#      threads, batch 1 and 16, for ResNet-50 and BVLC GoogLeNet: ours is
#      the processor's Run in a Go loop (`eas-server bench --in-process`,
#      metadata.cpu THREADS), OpenCV is engines/caffe/testdata/opencv_ref.py bench
#      (cv2.setNumThreads THREADS); each round measures ours and then OpenCV
#      back to back, and the median round's ratio is reported (target 1.5x);
#   b. dynamic batching on vs off through HTTP for one net (HTTP_NET, default
#      googlenet, the lighter of the two): two services of the same files,
#      rpc.batching true and false, the same metadata.cpu, CLIENTS closed-loop
#      clients each sending one image as an EAS Caffe PredictRequest to
#      /api/predict/NAME (`eas-server bench --format caffe`).
# The definitions are the published ones of the conformance folder (outside
# the repository, read where they are); their weights are random
# (tools/caffeweights, seed 1), written into a temporary directory.
#
# Usage: scripts/bench-caffe.sh [DURATION]   (default 10s per point)
# Env: THREADS (metadata.cpu and OpenCV's threads, default 2), ROUNDS
# (default 3), WARMUP (default 2s; OpenCV warms up with 3 forward passes),
# HTTP_DUR (the load generator's window in b, default DURATION: at 64
# clients a request waits seconds, and only requests that start and end
# inside the window give latencies), CLIENTS (default 64), MAX_BATCH
# (max_batch_size, default 16),
# BATCH_TIMEOUT (max_batch_timeout ms, default 20), HTTP_NET (googlenet or
# resnet50), NETS_DIR (the published definitions, default
# ../shared/conformance/caffe), PREBUILT=1 (use bin/ as it is: no Go
# toolchain needed), SERVER_CPUS / CLIENT_CPUS (taskset lists, as in
# bench-batching.sh), PY (python with numpy and cv2, default /usr/bin/python3
# with Debian's python3-opencv), PORT (default 18098).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-10s}
HTTP_DUR=${HTTP_DUR:-$DUR}
WARMUP=${WARMUP:-2s}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-64}
MAX_BATCH=${MAX_BATCH:-16}
BATCH_TIMEOUT=${BATCH_TIMEOUT:-20}
HTTP_NET=${HTTP_NET:-googlenet}
NETS_DIR=${NETS_DIR:-$PWD/../shared/conformance/caffe}
PORT=${PORT:-18098}
PY=${PY:-/usr/bin/python3}
secs() { # 10s -> 10 (opencv_ref.py takes seconds)
	[[ "$1" =~ ^[0-9]+(\.[0-9]+)?s$ ]] || { echo "durations are seconds such as 10s, got $1" >&2; exit 2; }
	echo "${1%s}"
}
dur_s=$(secs "$DUR")
secs "$WARMUP" >/dev/null
secs "$HTTP_DUR" >/dev/null
srv_pin=(); cli_pin=()
[[ -n "${SERVER_CPUS:-}" ]] && srv_pin=(taskset -c "$SERVER_CPUS")
[[ -n "${CLIENT_CPUS:-}" ]] && cli_pin=(taskset -c "$CLIENT_CPUS")

# name -> the definition: exactly one .prototxt in its folder.
declare -A defs
for pair in resnet50:resnet50 googlenet:bvlc_googlenet; do
	name=${pair%%:*}
	shopt -s nullglob
	found=("$NETS_DIR/${pair#*:}"/*.prototxt)
	shopt -u nullglob
	[[ ${#found[@]} -eq 1 ]] || { echo "want one .prototxt in $NETS_DIR/${pair#*:}, found ${#found[@]} (set NETS_DIR)" >&2; exit 1; }
	defs[$name]=${found[0]}
done
[[ -n "${defs[$HTTP_NET]:-}" ]] || { echo "HTTP_NET: want resnet50 or googlenet, got $HTTP_NET" >&2; exit 2; }
$PY -c 'import cv2, numpy' 2>/dev/null || { echo "$PY cannot import cv2 and numpy: install python3-opencv (apt-get install python3-opencv)" >&2; exit 1; }

if [[ -z "${PREBUILT:-}" ]]; then
	make -s build >/dev/null
	go build -o bin/caffeweights ./tools/caffeweights
fi

work=$(mktemp -d)
cleanup() {
	if [[ -n "${srv_pid:-}" ]]; then kill "$srv_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

# One folder per net, as model_path wants it: the definition and its weights.
for name in resnet50 googlenet; do
	mkdir -p "$work/$name"
	cp "${defs[$name]}" "$work/$name/deploy.prototxt"
	echo "writing random weights for $name" >&2
	./bin/caffeweights -o "$work/$name/weights.caffemodel" -seed 1 "$work/$name/deploy.prototxt"
done

svc() { # name batching
	cat >"$work/$1.json" <<EOF
{"name":"$1","processor":"caffe_cpu","model_path":"$work/$HTTP_NET","token":"bench",
 "metadata":{"instance":1,"cpu":$THREADS,"rpc":{"batching":$2,"max_batch_size":$MAX_BATCH,"max_batch_timeout":$BATCH_TIMEOUT,
 "worker_threads":1,"max_queue_size":1024,"keepalive":600000}}}
EOF
}
svc caffe_on true
svc caffe_off false
echo "starting the server ($HTTP_NET as caffe_on and caffe_off)" >&2
"${srv_pin[@]}" ./bin/eas-server serve --listen "127.0.0.1:$PORT" --state-dir "$work/state" --log-level warn \
	--deploy "$work/caffe_on.json" --deploy "$work/caffe_off.json" 2>"$work/server.log" &
srv_pid=$!
wait_ready "$PORT" 120 "$work/server.log" "$srv_pid"

# What a failed request says: one image as KServe v2 JSON, sent with curl.
explain() { # service
	$PY -c 'import json; print(json.dumps({"inputs": [{"name": "data", "shape": [1, 3, 224, 224], "datatype": "FP32", "data": [0.5] * (3 * 224 * 224)}]}))' >"$work/one.json"
	echo "one request to $1 (KServe v2 JSON, one 3x224x224 image of 0.5):" >&2
	curl -s -H 'Authorization: bench' -H 'Content-Type: application/json' --data-binary @"$work/one.json" \
		"127.0.0.1:$PORT/v2/models/$1/infer" | head -c 2000 >&2
	echo >&2
	echo "server log:" >&2
	tail -n 20 "$work/server.log" >&2
}
stats() { # service -> answered_200 answered_other batch_sum batch_count compute_sum
	curl -fs "127.0.0.1:$PORT/metrics" | awk -v s="service=\"$1\"" '
		$1 ~ /^eas_requests_total\{/ && index($1, s) { if (index($1, "code=\"200\"")) ok += $2; else bad += $2 }
		$1 == "eas_batch_size_sum{" s "}" {bs = $2} $1 == "eas_batch_size_count{" s "}" {bc = $2}
		$1 == "eas_compute_seconds_sum{" s "}" {cs = $2}
		END {print ok + 0, bad + 0, bs + 0, bc + 0, cs + 0}'
}
results="$work/results.jsonl"
# The images/s of an HTTP point are the server's: answers counted in
# /metrics over the whole bench call (warm-up, window and the drain after
# it) divided by its wall time. The load generator counts only requests
# that start and end inside its window, which undercounts by about
# latency/window, and at 64 clients on these nets a request waits seconds
# (64 images queued at some tens of images/s). Its p50/p99 are reported.
http_point() { # round service clients duration warmup -> one JSON line in $results
	local s0 s1 t0 t1 out
	s0=$(stats "$2")
	t0=$(date +%s.%N)
	out=$("${cli_pin[@]}" ./bin/eas-server bench --endpoint "http://127.0.0.1:$PORT" --token bench -o json \
		-d "$4" --warmup "$5" --service "$2" --format caffe --tensor "data:FP32:1x3x224x224" -c "$3")
	t1=$(date +%s.%N)
	s1=$(stats "$2")
	$PY -c '
import json, sys
r = json.loads(sys.argv[1])[0]
ok0, bad0, bs0, bc0, cs0 = map(float, sys.argv[4].split())
ok1, bad1, bs1, bc1, cs1 = map(float, sys.argv[5].split())
wall = float(sys.argv[7]) - float(sys.argv[6])
n, p50, st = r["requests"], r["p50_ms"], r["by_status"]
window_bad = n - r["ok"]
if window_bad or bad1 > bad0 or ok1 == ok0:
    sys.exit(f"{sys.argv[3]}: {ok1 - ok0:.0f} answered 200 and {bad1 - bad0:.0f} other codes by the server;"
             f" in the load generator window {window_bad} of {n} failed (by status: {st})")
if n < 2 * int(sys.argv[8]):
    print(f"warning: {sys.argv[3]}: only {n} requests started and ended inside the load generator window;"
          f" at {sys.argv[8]} clients and {(ok1 - ok0) / wall:.1f} images/s a request takes about"
          f" {int(sys.argv[8]) * wall / (ok1 - ok0):.1f} s: its p50/p99 need a longer HTTP_DUR", file=sys.stderr)
print(json.dumps({"part": "http", "round": int(sys.argv[2]), "point": sys.argv[3], "ips": (ok1 - ok0) / wall,
                  "window_ips": r["throughput_rps"], "n": r["requests"], "p50": r["p50_ms"], "p99": r["p99_ms"],
                  "batch": (bs1 - bs0) / max(1, bc1 - bc0), "run_ms": 1000 * (cs1 - cs0) / max(1, bc1 - bc0),
                  "busy": (cs1 - cs0) / wall}))' \
		"$out" "$1" "$2" "$s0" "$s1" "$t0" "$t1" "$3" >>"$results" || { explain "$2"; exit 1; }
}
echo "checking both services answer" >&2
for s in caffe_on caffe_off; do
	http_point 0 "$s" 1 3s 1s
done
: >"$results"

ours() { # net batch -> records/s
	"${srv_pin[@]}" ./bin/eas-server bench --in-process "$work/$1" --processor caffe_cpu --cpu "$THREADS" \
		--tensor "data:FP32:${2}x3x224x224" -d "$DUR" --warmup "$WARMUP" -o json |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["rows_per_second"])'
}
opencv() { # net batch -> records/s
	"${srv_pin[@]}" "$PY" engines/caffe/testdata/opencv_ref.py bench "$work/$1/deploy.prototxt" "$work/$1/weights.caffemodel" \
		--input data --shape 3,224,224 --batch "$2" --threads "$THREADS" --seconds "$dur_s" |
		$PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["records_per_s"])'
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$ROUNDS"); do
	for net in resnet50 googlenet; do
		for b in 1 16; do
			echo "round $round of $ROUNDS: $net batch $b: ours (in-process), then OpenCV" >&2
			o=$(ours "$net" "$b")
			c=$(opencv "$net" "$b")
			echo "{\"part\": \"vs\", \"round\": $round, \"net\": \"$net\", \"batch\": $b, \"ours\": $o, \"opencv\": $c}" >>"$results"
		done
	done
	echo "round $round of $ROUNDS: HTTP $HTTP_NET, $CLIENTS clients, batching on, then off" >&2
	http_point "$round" caffe_on "$CLIENTS" "$HTTP_DUR" "$WARMUP"
	http_point "$round" caffe_off "$CLIENTS" "$HTTP_DUR" "$WARMUP"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

cv=$($PY -c 'import cv2; print(cv2.__version__)')
$PY - "$results" "$load0" "$load1" "$THREADS" "$CLIENTS" "$MAX_BATCH" "$BATCH_TIMEOUT" "$HTTP_NET" "$DUR" "$HTTP_DUR" "$WARMUP" "$cv" "$*" <<'EOF'
import json, os, sys
path, load0, load1, threads, clients, maxb, timeout, http_net, dur, http_dur, warmup, cv, args = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
label = {"resnet50": "ResNet-50", "googlenet": "GoogLeNet"}
def mark(ok): return "met" if ok else "**missed**"
def median_round(rs, ratio):
    s = sorted(rs, key=ratio)
    return s[len(s) // 2]
cmd = "scripts/bench-caffe.sh" + (f" {args}" if args else "")
nrounds = len({r["round"] for r in rows})
print(f"Command: `{cmd}`. Published ResNet-50 and BVLC GoogLeNet definitions with random weights"
      f" (tools/caffeweights, seed 1), 3x224x224 float32 inputs; {threads} threads on both sides"
      f" (caffe_cpu metadata.cpu {threads}; OpenCV {cv} DNN, cv2.setNumThreads({threads}));"
      f" {dur} per point after {warmup} of warm-up (OpenCV: 3 forward passes); {nrounds} rounds,"
      f" ours then OpenCV back to back, the median round's ratio. Batching: {label[http_net]},"
      f" {clients} closed-loop clients sending one image each (an EAS Caffe PredictRequest to /api/predict), max_batch_size {maxb},"
      f" max_batch_timeout {timeout} ms, worker_threads 1, {http_dur} windows; images/s counted by the server (/metrics) over each"
      f" load run's wall time, latencies from the load generator's window. Load average (1, 5, 15 min) {load0} at the"
      f" start, {load1} at the end ({os.cpu_count()} CPUs).\n")
print("| measure | result | target | |")
print("|---|---|---|---|")
for net in ("resnet50", "googlenet"):
    for b in (1, 16):
        rs = [r for r in rows if r["part"] == "vs" and r["net"] == net and r["batch"] == b]
        if not rs: continue
        ratio = lambda r: r["ours"] / max(r["opencv"], 1e-9)
        m = median_round(rs, ratio)
        each = ", ".join(f"{ratio(r):.2f}" for r in rs)
        print(f"| {label[net]}, batch {b}: caffe_cpu in-process vs OpenCV DNN (rounds: {each})"
              f" | {m['ours']:.1f} vs {m['opencv']:.1f} records/s = **{ratio(m):.2f}x** | >= 1.5x | {mark(ratio(m) >= 1.5)} |")
by = {(r["round"], r["point"]): r for r in rows if r["part"] == "http"}
pairs = [(by[(n, "caffe_on")], by[(n, "caffe_off")]) for n in sorted({r["round"] for r in rows})
         if (n, "caffe_on") in by and (n, "caffe_off") in by]
if pairs:
    ratio = lambda p: p[0]["ips"] / max(p[1]["ips"], 1e-9)
    on, off = median_round(pairs, ratio)
    each = ", ".join(f"{ratio(p):.2f}" for p in pairs)
    print(f"| {label[http_net]} over HTTP, batching on vs off, {clients} clients (rounds: {each})"
          f" | {on['ips']:.1f} vs {off['ips']:.1f} images/s = **{ratio((on, off)):.2f}x** | reported | |")
    def lat(r):
        if not r["n"]: return "none inside the window"
        return f"{r['p50']:.0f} / {r['p99']:.0f} ms of {r['n']}"
    print(f"| p50 / p99 at {clients} clients, batching on (off), the same round"
          f" | **{lat(on)}** ({lat(off)}) | reported | |")
    print(f"| batching on: images per run, ms per run, ONNX Runtime busy (off: the same)"
          f" | {on['batch']:.1f}, {on['run_ms']:.0f} ms, {100*on['busy']:.0f}% ({off['batch']:.1f}, {off['run_ms']:.0f} ms, {100*off['busy']:.0f}%) | diagnostic | |")
EOF
