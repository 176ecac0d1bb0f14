#!/usr/bin/env bash
# bench-batching.sh measures, in one run on this machine, the ratios of
# issues 4 and 13 and prints them as a markdown table for BENCHMARKS.md
# (the ratios against a peer as the median of three alternating rounds):
#   1. batching on vs off at 64 concurrent clients (same worker count),
#   2. batched HTTP throughput vs in-process ONNX Runtime at the same batch size,
#   3. p50 latency at concurrency 1, batching on vs off,
#   4. the echo processor through the whole stack vs a bare gin echo handler.
# The model is the 3x2048x2048 fp32 MLP (about 50 MB of weights), generated
# into a temporary directory, never committed.
#
# Usage: scripts/bench-batching.sh [DURATION]   (default 10s per measurement)
# Env: SERVER_CPUS / CLIENT_CPUS (taskset lists: pin the server, the gin
# peer and the in-process runs to one set of cores and the load generator to
# another, on machines with more cores), PREBUILT=1 (use bin/ as it is: no
# Go toolchain needed), PY (python with onnx and numpy, default /usr/bin/python3),
# WORKERS (rpc.worker_threads, default 1), CPU (metadata.cpu = ORT
# intra-op threads per run, default 2: one run uses both cores), MAX_BATCH (default 64).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-10s}
WORKERS=${WORKERS:-1}
CPU=${CPU:-2}
MAX_BATCH=${MAX_BATCH:-64}
BATCH_TIMEOUT=${BATCH_TIMEOUT:-20}
PORT=${PORT:-18090}
PEER_PORT=${PEER_PORT:-18091}
PY=${PY:-/usr/bin/python3}
srv_pin=(); cli_pin=()
[[ -n "${SERVER_CPUS:-}" ]] && srv_pin=(taskset -c "$SERVER_CPUS")
[[ -n "${CLIENT_CPUS:-}" ]] && cli_pin=(taskset -c "$CLIENT_CPUS")

if [[ -z "${PREBUILT:-}" ]]; then
	make -s build >/dev/null
	bash scripts/install-test-deps.sh
	go build -o bin/ginecho ./tools/ginecho
fi

work=$(mktemp -d)
cleanup() {
	[[ -n "${srv_pid:-}" ]] && kill "$srv_pid" 2>/dev/null || true
	[[ -n "${peer_pid:-}" ]] && kill "$peer_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

$PY scripts/gen-test-models.py --bench-mlp "$work/mlp2048.onnx" >/dev/null

svc() { # name batching
	cat >"$work/$1.json" <<EOF
{"name":"$1","processor":"pytorch_cpu_1.10","model_path":"$work/mlp2048.onnx","token":"bench",
 "metadata":{"instance":1,"cpu":$CPU,"rpc":{"batching":$2,"max_batch_size":$MAX_BATCH,"max_batch_timeout":$BATCH_TIMEOUT,
 "worker_threads":$WORKERS,"max_queue_size":1024,"keepalive":60000}}}
EOF
}
svc mlp_on true
svc mlp_off false
cat >"$work/echo.json" <<EOF
{"name":"echo","processor":"echo","token":"bench","metadata":{"instance":1,"rpc":{"worker_threads":8,"max_queue_size":4096,"keepalive":60000}}}
EOF

"${srv_pin[@]}" ./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn \
	--deploy "$work/mlp_on.json" --deploy "$work/mlp_off.json" --deploy "$work/echo.json" &
srv_pid=$!
"${srv_pin[@]}" ./bin/ginecho --listen 127.0.0.1:$PEER_PORT &
peer_pid=$!
wait_ready "$PORT" 20 "" "$srv_pid"

B="${cli_pin[*]} ./bin/eas-server bench --endpoint http://127.0.0.1:$PORT --token bench -o json -d $DUR --warmup 2s"

echo "measuring: batching off, 64 clients" >&2
off64=$($B --service mlp_off --tensor input:FP32:1x2048 -c 64)
# The two ratios against a peer are measured in three alternating rounds
# (server, then peer, back to back) and the median round is reported: on a
# shared machine the load moves between measurements, and pairing them
# keeps that out of the ratio.
inprocess() { # batch -> rows/s of $WORKERS parallel in-process runs
	local js
	js=$(for _ in $(seq 1 "$WORKERS"); do
		"${srv_pin[@]}" ./bin/eas-server bench --in-process "$work/mlp2048.onnx" --processor onnx_cpu --cpu "$CPU" \
			--tensor "input:FP32:${1}x2048" -d "$DUR" --warmup 2s -o json &
	done; wait)
	$PY -c "
import json,sys
dec=json.JSONDecoder(); s=sys.argv[1]; i=0; total=0
while i < len(s):
    while i < len(s) and s[i].isspace(): i+=1
    if i>=len(s): break
    o,i=dec.raw_decode(s,i); total+=o['rows_per_second']
print(total)" "$js"
}
on_rounds=()
for round in 1 2 3; do
	echo "measuring: round $round: batching on, 64 clients, then in-process ONNX Runtime at its mean batch" >&2
	read -r s0 c0 < <(batch_stats "$PORT" mlp_on)
	on=$($B --service mlp_on --tensor input:FP32:1x2048 -c 64)
	read -r s1 c1 < <(batch_stats "$PORT" mlp_on)
	mb=$($PY -c "print(max(1, round(($s1-$s0)/max(1,$c1-$c0))))")
	ip=$(inprocess "$mb")
	on_rounds+=("$(field throughput_rps <<<"$on") $mb $ip $(field p99_ms <<<"$on")")
done
echo "measuring: concurrency 1, batching off and on, three alternating rounds" >&2
p_off=(); p_on=()
for _ in 1 2 3; do
	p_off+=("$($B --service mlp_off --tensor input:FP32:1x2048 -c 1 | field p50_ms)")
	p_on+=("$($B --service mlp_on --tensor input:FP32:1x2048 -c 1 | field p50_ms)")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
printf '[{"x":1}]' >"$work/body.json"
echo_rounds=()
for round in 1 2 3; do
	echo "measuring: round $round: echo, full stack then bare gin, 32 clients" >&2
	e=$($B --service echo --body "$work/body.json" -c 32 | field throughput_rps)
	g=$(${cli_pin[*]} ./bin/eas-server bench --url "http://127.0.0.1:$PEER_PORT/api/predict/echo" --body "$work/body.json" -o json -d "$DUR" --warmup 2s -c 32 | field throughput_rps)
	echo_rounds+=("$e $g")
done

t_off64=$(field throughput_rps <<<"$off64"); p99_off64=$(field p99_ms <<<"$off64")
p_off1=$(median "${p_off[@]}"); p_on1=$(median "${p_on[@]}")
$PY - "$t_off64" "$p99_off64" "$p_off1" "$p_on1" "$WORKERS" "$CPU" "$MAX_BATCH" "$DUR" \
	"${on_rounds[@]}" -- "${echo_rounds[@]}" <<'EOF'
import sys
off64, p99off, poff, pon = map(float, sys.argv[1:5])
workers, cpu, maxb, dur = sys.argv[5:9]
rest = sys.argv[9:]
cut = rest.index("--")
on_rounds = [list(map(float, r.split())) for r in rest[:cut]]      # rows/s, mean batch, in-process rows/s, p99 ms
echo_rounds = [list(map(float, r.split())) for r in rest[cut+1:]]  # echo req/s, gin req/s
def mark(ok): return "met" if ok else "**missed**"
def median_round(rounds, ratio):
    rs = sorted(rounds, key=ratio)
    return rs[len(rs)//2], [ratio(r) for r in rounds]
print(f"Settings: worker_threads={workers}, metadata.cpu={cpu} (ORT intra-op threads per run), max_batch_size={maxb}, {dur} per measurement.\n")
print("| measure | result | target | |")
print("|---|---|---|---|")
(on64, mb, inproc, p99on), ratios = median_round(on_rounds, lambda r: r[0] / r[2])
r = on64 / off64
print(f"| batching on vs off, 64 clients | {on64:.0f} vs {off64:.0f} rows/s = **{r:.2f}x** | >= 5x | {mark(r >= 5)} |")
r = on64 / inproc
spread = ", ".join(f"{100*x:.0f}%" for x in ratios)
print(f"| batched HTTP vs in-process ORT at batch {mb:.0f} (median of 3 rounds: {spread}) | {on64:.0f} vs {inproc:.0f} rows/s = **{100*r:.0f}%** | >= 80% | {mark(r >= .8)} |")
d = pon - poff
print(f"| p50 at concurrency 1 (median of 3 alternating runs), on - off | {pon:.3f} - {poff:.3f} ms = **{d:+.3f} ms** | <= 0.1 ms | {mark(d <= .1)} |")
(echo, gin), ratios = median_round(echo_rounds, lambda r: r[0] / r[1])
r = echo / gin
spread = ", ".join(f"{100*x:.0f}%" for x in ratios)
print(f"| echo through the stack vs bare gin, 32 clients (median of 3 rounds: {spread}) | {echo:.0f} vs {gin:.0f} req/s = **{100*r:.0f}%** | >= 90% | {mark(r >= .9)} |")
print(f"| p99 at 64 clients, batching on (off) | **{p99on:.1f} ms** ({p99off:.1f} ms) | reported | |")
EOF
