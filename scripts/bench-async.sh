#!/usr/bin/env bash
# bench-async.sh measures an asynchronous echo service (BENCHMARKS.md) at
# 64 producers (tools/queuebench, closed-loop puts): the queue's put
# capacity (puts into the sink, which nothing consumes) and, end to end,
# puts per second and the latency from put to answer with the echo
# processor answering (one websocket watcher on the sink). Queues in the
# embedded store (group commit; then one fsync per put:
# serve --queue-fsync-each-put) and on a NATS JetStream server
# (serve --queue-broker, Debian's nats-server). The built-in synchronous
# echo through the same HTTP stack at 64 clients is the ceiling of any put.
# Usage: scripts/bench-async.sh [DURATION]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DUR=${1:-10s}
PRODUCERS=${PRODUCERS:-64}
PORT=${PORT:-18096}
NATS_PORT=${NATS_PORT:-18097}
PY=${PY:-python3}

if [[ -z "${PREBUILT:-}" ]]; then
	make -s build >/dev/null
	bash scripts/install-test-deps.sh
fi
go build -o bin/queuebench ./tools/queuebench

work=$(mktemp -d)
cleanup() {
	[[ -n "${srv_pid:-}" ]] && kill "$srv_pid" 2>/dev/null || true
	[[ -n "${nats_pid:-}" ]] && kill "$nats_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/echo.json" <<JSON
{"name":"echo","processor":"echo","token":"bench","metadata":{"instance":1,"rpc":{"worker_threads":8,"max_queue_size":4096}}}
JSON
printf 'x%.0s' $(seq 1 64) >"$work/body"
cat >"$work/async.json" <<JSON
{"name":"aecho","processor":"echo","token":"bench",
 "metadata":{"instance":2,"type":"Async","rpc":{"worker_threads":32,"keepalive":60000}},
 "queue":{"source":{"max_length":10000000},"sink":{"max_length":10000000}}}
JSON

nats=$(command -v nats-server || echo /usr/sbin/nats-server)
"$nats" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$work/nats" >/dev/null 2>&1 &
nats_pid=$!

measure() { # name, serve flags...
	local name=$1
	shift
	rm -rf "$work/state"
	./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn --deploy "$work/async.json" --deploy "$work/echo.json" "$@" &
	srv_pid=$!
	for _ in $(seq 1 300); do
		curl -fs -H 'Authorization: bench' "127.0.0.1:$PORT/api/predict/aecho?_attrs_=true" >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "measuring: $name: puts into the sink, then end to end, $PRODUCERS producers, $DUR each" >&2
	./bin/queuebench -url "http://127.0.0.1:$PORT/api/predict/aecho/sink" -token bench -producers "$PRODUCERS" -d "$DUR" -puts-only >"$work/$name-puts.json"
	# Empty the sink, so the end-to-end watcher sees only its own answers.
	curl -fs -X DELETE -H 'Authorization: bench' "127.0.0.1:$PORT/api/predict/aecho/sink?_index_=4611686018427387904&_trunc_=true" >/dev/null
	./bin/queuebench -url "http://127.0.0.1:$PORT/api/predict/aecho" -token bench -producers "$PRODUCERS" -d "$DUR" >"$work/$name.json"
	if [[ $name == embedded ]]; then
		./bin/eas-server bench --endpoint "http://127.0.0.1:$PORT" --service echo --token bench --body "$work/body" -c "$PRODUCERS" -d "$DUR" --warmup 2s -o json >"$work/echo.json.out"
	fi
	kill "$srv_pid"
	wait "$srv_pid" 2>/dev/null || true
	srv_pid=
}
measure embedded
measure fsync_each --queue-fsync-each-put
measure jetstream --queue-broker "nats://127.0.0.1:$NATS_PORT"

$PY - "$work" "$DUR" "$PRODUCERS" <<'PYEOF'
import json, sys
work, dur, producers = sys.argv[1:4]
echo = json.load(open(f"{work}/echo.json.out"))[0]["throughput_rps"]
rows = [("embedded store, group commit", "embedded", ">= 20000 puts/s"),
        ("embedded store, fsync per put (--queue-fsync-each-put)", "fsync_each", "reported"),
        ("NATS JetStream 2.9 (--queue-broker)", "jetstream", "reported")]
print(f"{producers} producers, {dur} per measurement, 64-byte bodies; async echo with 2 instances x window 32.")
print(f"Ceiling: the built-in synchronous echo through the same HTTP stack, {producers} clients: {echo:.0f} req/s.\n")
print("| queues | put capacity (puts/s into the sink) | end to end: puts/s | put -> answer p50 / p99 | answered | target |")
print("|---|---|---|---|---|---|")
for label, key, target in rows:
    p = json.load(open(f"{work}/{key}-puts.json"))
    r = json.load(open(f"{work}/{key}.json"))
    mark = ""
    if key == "embedded":
        mark = " met" if p["puts_per_second"] >= 20000 else " **missed**"
    print(f"| {label} | **{p['puts_per_second']:.0f}** ({p['puts_per_second']/echo:.0%} of the echo ceiling; p50 {p['put_p50_ms']:.1f} ms) | "
          f"{r['puts_per_second']:.0f} | {r['e2e_p50_ms']:.1f} / {r['e2e_p99_ms']:.1f} ms | {r['answers']} of {r['puts']} | {target}{mark} |")
PYEOF
