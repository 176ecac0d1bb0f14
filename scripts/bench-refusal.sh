#!/usr/bin/env bash
# bench-refusal.sh: the server CPU time spent on each request an EasyCV
# service refuses (429 over metadata.rpc.rate_limit), for the code as checked
# out at AFTER (default HEAD) and at BEFORE (default the commit before the
# front door refused before reading the body), each built from git archive. BENCHMARKS.md, "Refusing
# before the body".
#
# usage: scripts/bench-refusal.sh [DURATION]     (default 10s per round)
# env:   BEFORE=<rev> (default f384e3b^), AFTER=<rev> (default HEAD), ROUNDS (default 3), CLIENTS (default 8),
#        IMAGE (default photo_500x375.jpg of the generated test images)
#
# Method: each build serves two services of the generated EasyCV classifier
# (processors/easycv/testdata/gen_models.py, Debian's python3-torch):
# "limited" with rate_limit 1 and "free" without. The cost of one admitted
# request is measured on "free" (100 sequential requests); then CLIENTS
# closed-loop clients (eas-server bench, its own process) send the image to
# "limited" for DURATION. The server's CPU time (utime+stime of
# /proc/<pid>/stat) over that window, less the admitted requests' cost, over
# the 429s counted by eas_requests_total is the CPU per refused request.
# Rounds alternate before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10s}
BEFORE=${BEFORE:-f384e3b^}
AFTER=${AFTER:-HEAD}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-8}
IMAGE=${IMAGE:-photo_500x375.jpg}
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

/usr/bin/python3 processors/easycv/testdata/gen_models.py "$tmp/models" >/dev/null
for b in before after; do
	rev=$BEFORE
	[ $b = after ] && rev=$AFTER
	mkdir "$tmp/src-$b"
	git archive "$rev" | tar -x -C "$tmp/src-$b"
	(cd "$tmp/src-$b" && go build -o "$tmp/$b" ./cmd/eas-server)
done
export EAS_TORCHSHIM_LIB=${EAS_TORCHSHIM_LIB:-$PWD/third_party/torchshim/libeas_torchshim.so}

printf '{"image": "%s"}' "$(base64 -w0 "$tmp/models/$IMAGE")" >"$tmp/body.json"
for svc in limited free; do
	rate=1
	[ $svc = free ] && rate=0
	cat >"$tmp/$svc.json" <<EOF
{"name": "$svc", "processor": "easycv", "model_path": "$tmp/models/cls.pt", "token": "T",
 "model_config": {"type": "TorchClassifier"},
 "metadata": {"instance": 1, "rpc": {"rate_limit": $rate, "worker_threads": 1}}}
EOF
done

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks
tck=$(getconf CLK_TCK)
count() { # eas_requests_total of service $2 with code $3 on port $1
	curl -fsS "http://127.0.0.1:$1/metrics" |
		awk -v s="$2" -v c="$3" '/^eas_requests_total\{/ && index($0, "service=\"" s "\"") && index($0, "code=\"" c "\"") {n += $NF} END {print n + 0}'
}

round() { # build, port
	local bin=$1 port=$2 pid c0 c1 ok0 ok1 r0 r1 free_cpu
	"$tmp/$bin" serve --listen "127.0.0.1:$port" --state-dir "$tmp/state-$bin-$port" --no-control-plane \
		--deploy "$tmp/limited.json" --deploy "$tmp/free.json" --log-level warn >"$tmp/$bin-$port.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	for _ in $(seq 300); do
		curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	# The cost of one admitted request, on the unlimited service.
	for _ in $(seq 10); do curl -fsS -H 'Authorization: T' --data-binary @"$tmp/body.json" "http://127.0.0.1:$port/api/predict/free" >/dev/null; done
	c0=$(cpu "$pid")
	for _ in $(seq 100); do curl -fsS -H 'Authorization: T' --data-binary @"$tmp/body.json" "http://127.0.0.1:$port/api/predict/free" >/dev/null; done
	c1=$(cpu "$pid")
	free_cpu=$(awk -v a="$c0" -v b="$c1" -v t="$tck" 'BEGIN {print (b - a) / t / 100}')
	# The refused requests.
	ok0=$(count "$port" limited 200)
	r0=$(count "$port" limited 429)
	c0=$(cpu "$pid")
	"$tmp/after" bench --endpoint "http://127.0.0.1:$port" --service limited --token T --body "$tmp/body.json" \
		-c "$CLIENTS" -d "$DURATION" --warmup 0s >/dev/null 2>&1 || true
	c1=$(cpu "$pid")
	ok1=$(count "$port" limited 200)
	r1=$(count "$port" limited 429)
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	awk -v b="$bin" -v c0="$c0" -v c1="$c1" -v t="$tck" -v ok=$((ok1 - ok0)) -v r=$((r1 - r0)) -v f="$free_cpu" 'BEGIN {
		cpu = (c1 - c0) / t; refused = cpu - ok * f
		printf "%-6s refused %6d, admitted %3d (%.2f ms CPU each), server CPU %.2f s: %.1f us CPU per refused request\n", b, r, ok, f * 1000, cpu, refused / r * 1e6
	}'
}

echo "easycv $IMAGE, rate_limit 1, $CLIENTS clients, $DURATION per round; before = $(git rev-parse --short "$BEFORE"), after = $(git rev-parse --short "$AFTER")"
port=18600
for i in $(seq "$ROUNDS"); do
	round before $((port + 2 * i))
	round after $((port + 2 * i + 1))
done
