#!/usr/bin/env bash
# bench-torchscript.sh measures, in one run on this machine, how fast a
# pytorch_cpu_1.10 service serves a TorchScript ResNet-18 (libtorch through
# the shim) and prints a markdown table for BENCHMARKS.md:
#   a. the in-process ceiling: python3-torch running the TorchScript module
#      in a loop at batch BATCH with THREADS intra-op threads, as it is and
#      with OMP_WAIT_POLICY=PASSIVE (on a contended host libgomp's spinning
#      threads slow it down); the faster of the two is the ceiling;
#   b. the server, TorchScript, dynamic batching on (max_batch_size BATCH)
#      and off, CLIENTS closed-loop clients each sending one image;
#   c. the server, the ONNX export of the same network on ONNX Runtime,
#      batching on, the same clients;
#   and, to tell where time goes, the processor's Run in a Go loop with no
#   HTTP (`eas-server bench --in-process`) for both files.
# Each round measures every point back to back; the ratios are taken within
# a round and the median round is reported (the machine is shared).
# ResNet-18 (torchvision 0.14, random seeded weights) is generated into a
# temporary directory by scripts/bench-torchscript.py, never committed.
# Before measuring, both services' answers to one image are checked against
# python3-torch's.
#
# Usage: scripts/bench-torchscript.sh [DURATION]   (default 20s per point)
# Env: BATCH (images per in-process run and max_batch_size, default 8),
# THREADS (intra-op threads: metadata.cpu and torch.set_num_threads, default
# 2), CLIENTS (default 64), ROUNDS (default 3), WARMUP (default 3s),
# BATCH_TIMEOUT (max_batch_timeout ms, default 20), FORMAT (torch or
# kserve-binary, default torch), PREBUILT=1 (use bin/ as it is),
# SERVER_CPUS / CLIENT_CPUS (taskset lists, as in bench-batching.sh),
# PY (default /usr/bin/python3), PORT (default 18092).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-20s}
WARMUP=${WARMUP:-3s}
BATCH=${BATCH:-8}
THREADS=${THREADS:-2}
CLIENTS=${CLIENTS:-64}
ROUNDS=${ROUNDS:-3}
BATCH_TIMEOUT=${BATCH_TIMEOUT:-20}
FORMAT=${FORMAT:-torch}
PORT=${PORT:-18092}
PY=${PY:-/usr/bin/python3}
secs() { # 20s -> 20 (python's loop takes seconds)
	[[ "$1" =~ ^[0-9]+(\.[0-9]+)?s$ ]] || { echo "durations are seconds such as 20s, got $1" >&2; exit 2; }
	echo "${1%s}"
}
dur_s=$(secs "$DUR")
warm_s=$(secs "$WARMUP")
srv_pin=(); cli_pin=()
[[ -n "${SERVER_CPUS:-}" ]] && srv_pin=(taskset -c "$SERVER_CPUS")
[[ -n "${CLIENT_CPUS:-}" ]] && cli_pin=(taskset -c "$CLIENT_CPUS")

if [[ -z "${PREBUILT:-}" ]]; then
	make -s build >/dev/null
	bash scripts/install-test-deps.sh
fi

work=$(mktemp -d)
cleanup() {
	if [[ -n "${srv_pid:-}" ]]; then kill "$srv_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "generating ResNet-18 (TorchScript and ONNX) into $work" >&2
gen=$($PY scripts/bench-torchscript.py gen "$work")
jget() { $PY -c "import json,sys; print(json.load(sys.stdin)$1)"; }
ts_model=$(jget "['torchscript']" <<<"$gen")
onnx_model=$(jget "['onnx']" <<<"$gen")
onnx_error=$(jget ".get('onnx_error', '')" <<<"$gen")
[[ -n "$onnx_error" ]] && echo "torch.onnx.export failed: $onnx_error (the ONNX points are skipped)" >&2

svc() { # name model batching [model_config]
	local mc='{}'
	[[ $# -ge 4 ]] && mc=$4
	cat >"$work/$1.json" <<EOF
{"name":"$1","processor":"pytorch_cpu_1.10","model_path":"$2","token":"bench","model_config":$mc,
 "metadata":{"instance":1,"cpu":$THREADS,"rpc":{"batching":$3,"max_batch_size":$BATCH,"max_batch_timeout":$BATCH_TIMEOUT,
 "worker_threads":1,"max_queue_size":1024,"keepalive":600000}}}
EOF
}
svc ts_on "$ts_model" true
svc ts_off "$ts_model" false
svc ts_opt "$ts_model" true '{"torchscript_optimize":"inference"}'
deploy=(--deploy "$work/ts_on.json" --deploy "$work/ts_off.json" --deploy "$work/ts_opt.json")
if [[ -n "$onnx_model" ]]; then
	svc onnx_on "$onnx_model" true
	deploy+=(--deploy "$work/onnx_on.json")
fi

"${srv_pin[@]}" ./bin/eas-server serve --listen "127.0.0.1:$PORT" --state-dir "$work/state" --log-level warn "${deploy[@]}" 2>"$work/server.log" &
srv_pid=$!
wait_ready "$PORT" 60 "$work/server.log" "$srv_pid"

check=("$ts_model" bench "http://127.0.0.1:$PORT/v2/models/ts_on/infer" x "http://127.0.0.1:$PORT/v2/models/ts_off/infer" x)
[[ -n "$onnx_model" ]] && check+=("http://127.0.0.1:$PORT/v2/models/onnx_on/infer" input)
$PY scripts/bench-torchscript.py check "${check[@]}"

tck=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$srv_pid/stat"; }
stats() { # service -> batch_sum batch_count compute_sum compute_count
	curl -fs "127.0.0.1:$PORT/metrics" | awk -v s="{service=\"$1\"}" '
		$1 == "eas_batch_size_sum" s {bs = $2} $1 == "eas_batch_size_count" s {bc = $2}
		$1 == "eas_compute_seconds_sum" s {cs = $2} $1 == "eas_compute_seconds_count" s {cc = $2}
		END {print bs + 0, bc + 0, cs + 0, cc + 0}'
}
results="$work/results.jsonl"
http_point() { # round service input -> one JSON line in $results
	local bs0 bc0 cs0 cc0 bs1 bc1 cs1 cc1 t0 t1 out
	read -r bs0 bc0 cs0 cc0 < <(stats "$2")
	t0=$(ticks)
	out=$("${cli_pin[@]}" ./bin/eas-server bench --endpoint "http://127.0.0.1:$PORT" --token bench -o json \
		-d "$DUR" --warmup "$WARMUP" --service "$2" --format "$FORMAT" --tensor "$3:FP32:1x3x224x224" -c "$CLIENTS")
	t1=$(ticks)
	read -r bs1 bc1 cs1 cc1 < <(stats "$2")
	# The metrics and CPU ticks span the warm-up too: they give means, not totals.
	$PY -c '
import json, sys
r = json.loads(sys.argv[1])[0]
bs0, bc0, cs0, cc0, bs1, bc1, cs1, cc1, t0, t1, tck, wall = map(float, sys.argv[4:])
bad = r["requests"] - r["ok"]
n, st = r["requests"], r["by_status"]
if bad: sys.exit(f"{sys.argv[3]}: {bad} of {n} requests failed: {st}")
print(json.dumps({"round": int(sys.argv[2]), "point": sys.argv[3], "ips": r["throughput_rps"], "p50": r["p50_ms"],
                  "p99": r["p99_ms"], "batch": (bs1 - bs0) / max(1, bc1 - bc0),
                  "run_ms": 1000 * (cs1 - cs0) / max(1, cc1 - cc0), "cores": (t1 - t0) / tck / wall}))' \
		"$out" "$1" "$2" "$bs0" "$bc0" "$cs0" "$cc0" "$bs1" "$bc1" "$cs1" "$cc1" "$t0" "$t1" "$tck" \
		"$($PY -c "print($dur_s + $warm_s)")" >>"$results"
}
go_inproc() { # round point model input
	local out
	out=$("${srv_pin[@]}" /usr/bin/time -f '%U %S %e' -o "$work/time" ./bin/eas-server bench --in-process "$3" \
		--processor pytorch_cpu_1.10 --cpu "$THREADS" --tensor "$4:FP32:${BATCH}x3x224x224" -d "$DUR" --warmup "$WARMUP" -o json)
	$PY -c '
import json, sys
r = json.loads(sys.argv[1]); u, s, e = map(float, open(sys.argv[4]).read().split()[-3:])
print(json.dumps({"round": int(sys.argv[2]), "point": sys.argv[3], "ips": r["rows_per_second"], "batch": r["batch"],
                  "run_ms": r["mean_run_ms"], "cores": (u + s) / e}))' "$out" "$1" "$2" "$work/time" >>"$results"
}
py_inproc() { # round point [VAR=value for the environment]
	local out
	out=$(env "${@:3}" "${srv_pin[@]}" "$PY" scripts/bench-torchscript.py inproc "$ts_model" "$BATCH" "$THREADS" "$dur_s" "$warm_s")
	$PY -c '
import json, sys
r = json.loads(sys.argv[1])
print(json.dumps({"round": int(sys.argv[2]), "point": sys.argv[3], "ips": r["rows_per_second"], "batch": r["batch"],
                  "run_ms": r["mean_run_ms"], "cores": r["cores"]}))' "$out" "$1" "$2" >>"$results"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$ROUNDS"); do
	echo "round $round of $ROUNDS: python3-torch in-process" >&2
	py_inproc "$round" py
	echo "round $round: python3-torch in-process, OMP_WAIT_POLICY=PASSIVE" >&2
	py_inproc "$round" py_passive OMP_WAIT_POLICY=PASSIVE
	echo "round $round: Go in-process TorchScript" >&2
	go_inproc "$round" go_ts "$ts_model" x
	echo "round $round: HTTP TorchScript, batching on, $CLIENTS clients" >&2
	http_point "$round" ts_on x
	echo "round $round: python3-torch in-process, frozen and optimized for inference (both OMP policies)" >&2
	py_inproc "$round" py_opt EAS_BENCH_OPTIMIZE=inference
	py_inproc "$round" py_opt_passive EAS_BENCH_OPTIMIZE=inference OMP_WAIT_POLICY=PASSIVE
	echo "round $round: HTTP TorchScript optimized for inference, batching on, $CLIENTS clients" >&2
	http_point "$round" ts_opt x
	if [[ -n "$onnx_model" ]]; then
		echo "round $round: HTTP ONNX, batching on, $CLIENTS clients" >&2
		http_point "$round" onnx_on input
		echo "round $round: Go in-process ONNX" >&2
		go_inproc "$round" go_onnx "$onnx_model" input
	fi
	echo "round $round: HTTP TorchScript, batching off, $CLIENTS clients" >&2
	http_point "$round" ts_off x
done

load1=$(cut -d' ' -f1-3 /proc/loadavg)
$PY - "$results" "$load0" "$load1" "$BATCH" "$THREADS" "$CLIENTS" "$DUR" "$WARMUP" "$BATCH_TIMEOUT" "$FORMAT" "$onnx_error" "$*" <<'EOF'
import json, os, statistics, sys
path, load0, load1, batch, threads, clients, dur, warmup, timeout, fmt, onnx_error, args = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
rounds = sorted({r["round"] for r in rows})
by = {(r["round"], r["point"]): r for r in rows}
have_onnx = any(r["point"] == "onnx_on" for r in rows)
def mark(ok): return "met" if ok else "**missed**"
def med(xs): return statistics.median(xs)
cmd = "scripts/bench-torchscript.sh" + (f" {args}" if args else "")
print(f"Command: `{cmd}`. ResNet-18 (torchvision 0.14, random seeded weights), 3x224x224 float32 images;"
      f" batch {batch}, {threads} intra-op threads, {clients} closed-loop clients sending one image each"
      f" ({fmt} bodies), max_batch_size {batch}, max_batch_timeout {timeout} ms, worker_threads 1;"
      f" {dur} per point after {warmup} of warm-up; {len(rounds)} rounds, every point once per round."
      f" Load average (1, 5, 15 min) {load0} at the start of the rounds, {load1} at the end"
      f" ({os.cpu_count()} CPUs; the harness itself keeps about 2 busy).\n")
names = [("py", "python3-torch, TorchScript module in a loop (in-process ceiling)"),
         ("py_passive", "the same with `OMP_WAIT_POLICY=PASSIVE` (OpenMP threads sleep instead of spinning)"),
         ("go_ts", "`eas-server bench --in-process`, TorchScript (processor Run, no HTTP)"),
         ("py_opt", "python3-torch, the module frozen + `optimize_for_inference`, in a loop"),
         ("py_opt_passive", "the same with `OMP_WAIT_POLICY=PASSIVE`"),
         ("ts_on", "HTTP, TorchScript, batching on"),
         ("ts_opt", "HTTP, TorchScript with `torchscript_optimize: inference`, batching on"),
         ("ts_off", "HTTP, TorchScript, batching off"),
         ("onnx_on", "HTTP, ONNX export on ONNX Runtime, batching on"),
         ("go_onnx", "`eas-server bench --in-process`, ONNX export (processor Run, no HTTP)")]
print("| point | images/s: median (each round) | p50 ms | p99 ms | images per run | ms per run | CPU cores used |")
print("|---|---|---|---|---|---|---|")
for key, label in names:
    rs = [by[(n, key)] for n in rounds if (n, key) in by]
    if not rs: continue
    f = lambda k, fmt="{:.0f}": fmt.format(med([r[k] for r in rs])) if k in rs[0] else "-"
    each = ", ".join(f"{r['ips']:.1f}" for r in rs)
    print(f"| {label} | **{med([r['ips'] for r in rs]):.1f}** ({each}) | {f('p50')} | {f('p99')} |"
          f" {f('batch', '{:.1f}')} | {f('run_ms')} | {f('cores', '{:.2f}')} |")
print()
def ratio(a, b):
    rs = [by[(n, a)]["ips"] / max(by[(n, b)]["ips"], 1e-9) for n in rounds if (n, a) in by and (n, b) in by]
    return med(rs), ", ".join(f"{x:.2f}" for x in rs)
print("| ratio (within each round; median, then each round) | result | target | |")
print("|---|---|---|---|")
for n in rounds:  # the ceiling of a round is the faster of the two python3-torch runs
    by[(n, "ceiling")] = max((by[(n, k)] for k in ("py", "py_passive")), key=lambda r: r["ips"])
    if (n, "py_opt") in by:
        by[(n, "ceiling_opt")] = max((by[(n, k)] for k in ("py_opt", "py_opt_passive")), key=lambda r: r["ips"])
r, each = ratio("ts_on", "ceiling")
print(f"| batched HTTP TorchScript vs in-process python3-torch (the faster of its two runs), batch {batch} | **{100*r:.0f}%** ({each}) | >= 80% | {mark(r >= .8)} |")
r, each = ratio("ts_opt", "ceiling_opt")
print(f"| batched HTTP TorchScript, optimized for inference, vs python3-torch running the same optimized module | **{100*r:.0f}%** ({each}) | >= 80% | {mark(r >= .8)} |")
r, each = ratio("py_passive", "py")
print(f"| python3-torch with `OMP_WAIT_POLICY=PASSIVE` vs without | {r:.2f}x ({each}) | diagnostic | |")
if have_onnx:
    r, each = ratio("ts_on", "onnx_on")
    print(f"| batched HTTP TorchScript vs batched HTTP ONNX (same network) | **{r:.2f}x** ({each}) | >= 1.0x | {mark(r >= 1)} |")
    r, each = ratio("ts_opt", "onnx_on")
    print(f"| batched HTTP TorchScript optimized for inference vs batched HTTP ONNX | **{r:.2f}x** ({each}) | >= 1.0x | {mark(r >= 1)} |")
else:
    print(f"| batched HTTP TorchScript vs ONNX | not measured: torch.onnx.export failed: {onnx_error} | >= 1.0x | |")
r, each = ratio("ts_on", "ts_off")
print(f"| TorchScript batching on vs off, {clients} clients | **{r:.2f}x** ({each}) | reported | |")
r, each = ratio("go_ts", "py")
print(f"| Go in-process TorchScript vs python3-torch (same libtorch) | {100*r:.0f}% ({each}) | diagnostic | |")
r, each = ratio("ts_on", "go_ts")
print(f"| batched HTTP TorchScript vs Go in-process TorchScript | {100*r:.0f}% ({each}) | diagnostic | |")
if have_onnx:
    r, each = ratio("go_ts", "go_onnx")
    print(f"| Go in-process TorchScript vs Go in-process ONNX | {r:.2f}x ({each}) | diagnostic | |")
EOF
