#!/usr/bin/env bash
# bench-custom.sh measures custom processors through the full stack (HTTP,
# router, scheduler, worker process and back) against the built-in echo
# processor in the same server: the example C echo processor
# (examples/custom/cpp_echo) and the example Python echo processor
# (examples/custom/python_echo: 2 worker processes, 1 thread each), at 1
# and 64 clients, three alternating rounds (built-in, C, Python), with
# `eas-server bench` (closed loop). All three services get metadata.rpc.worker_threads
# $WORKERS (32): a custom processor's run waits a round trip to its worker, so it needs more
# runs in flight than the instant built-in echo to keep the worker busy.
# Usage: scripts/bench-custom.sh [DURATION]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

DUR=${1:-10s}
PORT=${PORT:-18094}
PY=${PY:-python3}

if [[ -z "${PREBUILT:-}" ]]; then
	make -s build examples >/dev/null
fi

work=$(mktemp -d)
cleanup() {
	[[ -n "${srv_pid:-}" ]] && kill "$srv_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

WORKERS=${WORKERS:-32}
rpc="\"rpc\":{\"worker_threads\":$WORKERS,\"max_queue_size\":1024,\"keepalive\":60000}"
cat >"$work/echo.json" <<JSON
{"name":"echo","processor":"echo","token":"bench","metadata":{"instance":1,$rpc}}
JSON
cat >"$work/cpp_echo.json" <<JSON
{"name":"cpp_echo","processor_path":"$PWD/examples/custom/cpp_echo/build/libecho.so","processor_type":"cpp",
 "token":"bench","metadata":{"instance":1,$rpc}}
JSON
cat >"$work/python_echo.json" <<JSON
{"name":"python_echo","processor_path":"$PWD/examples/custom/python_echo/app.py","processor_type":"python",
 "token":"bench","metadata":{"instance":1,$rpc}}
JSON

./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn \
	--deploy "$work/echo.json" --deploy "$work/cpp_echo.json" --deploy "$work/python_echo.json" &
srv_pid=$!
wait_ready "$PORT" 20 "" "$srv_pid"

printf '[{"x":1}]' >"$work/body.json"
B="./bin/eas-server bench --endpoint http://127.0.0.1:$PORT --token bench -o json -d $DUR --warmup 2s --body $work/body.json"
rounds=()
for round in 1 2 3; do
	for c in 64 1; do
		echo "measuring: round $round, $c clients: built-in echo, C echo, Python echo" >&2
		e=$($B --service echo -c $c | field throughput_rps)
		x=$($B --service cpp_echo -c $c | field throughput_rps)
		p=$($B --service python_echo -c $c | field throughput_rps)
		rounds+=("$c $e $x $p")
	done
done

$PY - "$DUR" "$WORKERS" "${rounds[@]}" <<'PYEOF'
import sys
dur, workers = sys.argv[1], sys.argv[2]
rounds = [list(map(float, r.split())) for r in sys.argv[3:]]
print(f"{dur} per measurement, 2 s warm-up, body [{{\"x\":1}}], worker_threads {workers} for all three services.\n")
print("| measure | result | target | |")
print("|---|---|---|---|")
for c in (1, 64):
    rs = [r for r in rounds if r[0] == c]
    ratio = sorted(rs, key=lambda r: r[2] / r[1])
    mid = ratio[len(ratio) // 2]
    each = ", ".join(f"{r[2] / r[1]:.0%}" for r in rs)
    target = ">= 70%" if c == 64 else "reported"
    mark = ("met" if mid[2] / mid[1] >= 0.7 else "**missed**") if c == 64 else ""
    print(f"| C echo vs built-in echo, {c} client{'s' if c > 1 else ''} (rounds: {each}) | {mid[2]:.0f} vs {mid[1]:.0f} req/s = **{mid[2] / mid[1]:.0%}** | {target} | {mark} |")
for c in (1, 64):
    rs = sorted((r for r in rounds if r[0] == c), key=lambda r: r[3])
    mid = rs[len(rs) // 2]
    each = ", ".join(f"{r[3]:.0f}" for r in rounds if r[0] == c)
    target = ">= 5000 req/s" if c == 64 else "reported"
    mark = ("met" if mid[3] >= 5000 else "**missed**") if c == 64 else ""
    print(f"| Python echo (2 processes), {c} client{'s' if c > 1 else ''} (rounds: {each}) | **{mid[3]:.0f} req/s** ({mid[3] / mid[1]:.0%} of built-in) | {target} | {mark} |")
PYEOF
