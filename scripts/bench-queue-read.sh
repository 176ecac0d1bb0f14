#!/usr/bin/env bash
# bench-queue-read.sh measures the sink's reads (BENCHMARKS.md, "Reading
# the sink"): put -> answer round trips per second at 32 clients, each
# reading its answer as the README says (GET <sink>?requestId=<id>&
# _timeout_=30s, tools/queuebench -read), on an empty sink, on a sink of
# 40,000 entries, and on that sink with 200 websocket watchers whose tag
# filter matches nothing; then the peak RSS that four parallel JSON reads
# of a sink of 160 MiB (20 entries of 8 MiB) add to the server, each
# reading the whole sink page by page (X-Eas-Queueservice-Next-Index).
# EAS_BIN runs another build of the server (an older one, to compare).
# Usage: scripts/bench-queue-read.sh [DURATION]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DUR=${1:-10s}
CLIENTS=${CLIENTS:-32}
FILL=${FILL:-40000}
WATCHERS=${WATCHERS:-200}
PORT=${PORT:-18098}
PY=${PY:-python3}
EAS_BIN=${EAS_BIN:-./bin/eas-server}
source scripts/benchlib.sh

if [[ -z "${PREBUILT:-}" && $EAS_BIN == ./bin/eas-server ]]; then
	make -s build >/dev/null
fi
go build -o bin/queuebench ./tools/queuebench

work=$(mktemp -d)
cleanup() {
	[[ -n "${srv_pid:-}" ]] && kill "$srv_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/async.json" <<JSON
{"name":"aecho","processor":"echo","token":"bench",
 "metadata":{"instance":2,"type":"Async","rpc":{"worker_threads":32,"keepalive":60000}},
 "queue":{"source":{"max_length":1000000},"sink":{"max_length":1000000}}}
JSON
base="127.0.0.1:$PORT/api/predict/aecho"
auth=(-H 'Authorization: bench')

"$EAS_BIN" serve --listen "127.0.0.1:$PORT" --state-dir "$work/state" --log-level warn --deploy "$work/async.json" >"$work/log" 2>&1 &
srv_pid=$!
wait_ready "$PORT" 60 "$work/log" "$srv_pid"

truncate_sink() { curl -fs -X DELETE "${auth[@]}" "$base/sink?_index_=4611686018427387904&_trunc_=true" >/dev/null; }
roundtrips() { # name, queuebench flags...
	local name=$1
	shift
	echo "measuring: $name, $CLIENTS clients, $DUR" >&2
	if ! timeout 120 ./bin/queuebench -url "http://$base" -token bench -producers "$CLIENTS" -d "$DUR" -read "$@" >"$work/$name.json" 2>"$work/$name.err"; then
		# A server that cannot answer within 30 s (or 120 s in all) is a
		# result too.
		$PY -c 'import json,sys; print(json.dumps({"error": open(sys.argv[1]).read().strip() or "timed out after 120 s"}))' "$work/$name.err" >"$work/$name.json"
	fi
}

roundtrips empty
truncate_sink
echo "filling the sink with $FILL entries" >&2
./bin/queuebench -url "http://$base/sink" -token bench -producers 32 -fill "$FILL" >/dev/null
roundtrips full
roundtrips watchers -watchers "$WATCHERS"

# Peak RSS: 20 entries of 8 MiB, then four readers of the whole sink.
truncate_sink
head -c $((8 << 20)) /dev/urandom >"$work/8m"
for _ in $(seq 1 20); do
	curl -fs "${auth[@]}" --data-binary @"$work/8m" "$base/sink" >/dev/null
done
read_all() { # reader: reads the sink in JSON, page by page, to its end
	local from=0 pages=0 bytes=0
	while :; do
		local out
		out=$(curl -fs "${auth[@]}" -H 'Accept: application/json' -D "$work/h$1" -o /dev/null -w '%{size_download}' "$base/sink?_length_=20&_index_=$from")
		pages=$((pages + 1)) bytes=$((bytes + out))
		from=$(awk 'tolower($1)=="x-eas-queueservice-next-index:"{print $2+0}' "$work/h$1")
		[[ -z $from ]] && break
	done
	echo "$pages $bytes" >"$work/read$1"
}
status_kb() { awk -v k="$1:" '$1==k{print $2}' "/proc/$srv_pid/status"; }
rss_before=$(status_kb VmRSS)
echo 5 >"/proc/$srv_pid/clear_refs" # the peak (VmHWM) starts again from now
start=$EPOCHREALTIME
readers=()
for r in 1 2 3 4; do
	read_all "$r" &
	readers+=($!)
done
wait "${readers[@]}"
secs=$($PY -c "print($EPOCHREALTIME - $start)")
peak=$(status_kb VmHWM)
kill "$srv_pid"
wait "$srv_pid" 2>/dev/null || true
srv_pid=

$PY - "$work" "$DUR" "$CLIENTS" "$FILL" "$WATCHERS" "$rss_before" "$peak" "$secs" <<'PYEOF'
import json, sys
work, dur, clients, fill, watchers, rss, peak, secs = sys.argv[1:9]
r = {n: json.load(open(f"{work}/{n}.json")) for n in ("empty", "full", "watchers")}
e = r["empty"]["round_trips_per_second"]
print(f"put -> answer, GET sink?requestId=<id>&_timeout_=30s, {clients} clients, {dur} each:")
print("| sink | round trips/s | p50 / p99 ms | vs empty | goal |")
print("|---|---|---|---|---|")
for n, label, goal in (("empty", "empty", ""), ("full", f"{int(fill):,} entries", "within 2x of empty"),
                       ("watchers", f"{int(fill):,} entries + {watchers} watchers matching nothing", "within 2x of empty")):
    x = r[n]
    if "error" in x:
        print(f"| {label} | failed: {x['error']} | | | {goal} (**missed**) |")
        continue
    ratio = x["round_trips_per_second"] / e if e else 0
    ok = "" if not goal else (" (met)" if ratio >= 0.5 else " (**missed**)")
    print(f"| {label} | {x['round_trips_per_second']:.0f} | {x['p50_ms']:.1f} / {x['p99_ms']:.1f} | {ratio:.2f}x | {goal}{ok} |")
stray = r["watchers"].get("watcher_frames")
if stray:
    print(f"the non-matching watchers received {stray} frames: the filter is broken")
reads = [open(f"{work}/read{i}").read().split() for i in range(1, 5)]
raise_mib = (int(peak) - int(rss)) / 1024
print(f"\nfour parallel JSON reads of a sink of 160 MiB (20 x 8 MiB), page by page: "
      f"{', '.join(f'{p} pages / {int(b) / 2**20:.0f} MiB' for p, b in reads)} in {float(secs):.1f} s")
print(f"RSS before {int(rss) / 1024:.0f} MiB, peak during {int(peak) / 1024:.0f} MiB: raised by {raise_mib:.0f} MiB "
      f"(goal < 1024 MiB{': met' if raise_mib < 1024 else ': **missed**'})")
PYEOF
