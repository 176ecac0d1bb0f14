#!/usr/bin/env bash
# bench-async.sh measures an asynchronous echo service (BENCHMARKS.md):
# puts per second and the latency from put to answer, at 64 producers
# (tools/queuebench: closed-loop puts, one websocket watcher on the sink),
# with the queues in the embedded store (one fsync per batch of concurrent
# puts, then one per put: serve --queue-fsync-each-put) and on a NATS
# JetStream server (serve --queue-broker, Debian's nats-server).
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

cat >"$work/async.json" <<JSON
{"name":"aecho","processor":"echo","token":"bench",
 "metadata":{"instance":2,"type":"Async","rpc":{"worker_threads":32,"keepalive":60000}},
 "queue":{"source":{"max_length":1000000},"sink":{"max_length":1000000}}}
JSON

nats=$(command -v nats-server || echo /usr/sbin/nats-server)
"$nats" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$work/nats" >/dev/null 2>&1 &
nats_pid=$!

measure() { # name, serve flags...
	local name=$1
	shift
	rm -rf "$work/state"
	./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn --deploy "$work/async.json" "$@" &
	srv_pid=$!
	for _ in $(seq 1 300); do
		curl -fs -H 'Authorization: bench' "127.0.0.1:$PORT/api/predict/aecho?_attrs_=true" >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "measuring: $name, $PRODUCERS producers, $DUR" >&2
	./bin/queuebench -url "http://127.0.0.1:$PORT/api/predict/aecho" -token bench -producers "$PRODUCERS" -d "$DUR" >"$work/$name.json"
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
rows = [("embedded store, fsync per batch of puts", "embedded", ">= 20000 puts/s"),
        ("embedded store, fsync per put (--queue-fsync-each-put)", "fsync_each", "reported"),
        ("NATS JetStream 2.9 (--queue-broker)", "jetstream", "reported")]
print(f"{producers} producers, {dur} of puts, 64-byte bodies, echo with 2 instances x window 32.\n")
print("| queues | puts/s | put p50 / p99 | put -> answer p50 / p99 | answers | target |")
print("|---|---|---|---|---|---|")
for label, key, target in rows:
    r = json.load(open(f"{work}/{key}.json"))
    mark = ""
    if key == "embedded":
        mark = " met" if r["puts_per_second"] >= 20000 else " **missed**"
    print(f"| {label} | **{r['puts_per_second']:.0f}** | {r['put_p50_ms']:.2f} / {r['put_p99_ms']:.2f} ms | "
          f"{r['e2e_p50_ms']:.1f} / {r['e2e_p99_ms']:.1f} ms | {r['answers']} of {r['puts']} | {target}{mark} |")
PYEOF
