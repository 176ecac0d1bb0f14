# benchlib.sh holds the helpers the bench-*.sh scripts share; they source it
# after setting PY (a python3 with json) and start their own server.

# wait_ready PORT SECONDS [LOG [PID]]: waits for the server's /readyz (every
# service deployed serves). On timeout, or when PID has exited, it prints
# what /readyz says and the end of LOG, and exits 1.
wait_ready() {
	local port=$1 tries=$(($2 * 10)) log=${3:-} pid=${4:-}
	for _ in $(seq 1 "$tries"); do
		curl -fs "127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
		[[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.1
	done
	echo "server not ready:" >&2
	curl -s "127.0.0.1:$port/readyz" >&2 || true
	[[ -n $log ]] && tail -50 "$log" >&2
	exit 1
}

# field KEY prints KEY of the first result that `eas-server bench -o json`
# wrote to stdin.
field() { $PY -c "import json,sys; print(json.load(sys.stdin)[0]['$1'])"; }

# batch_stats PORT SERVICE prints the sum and the count of SERVICE's
# eas_batch_size histogram: two readings give the mean batch between them.
batch_stats() {
	curl -fs "127.0.0.1:$1/metrics" |
		awk -v s="{service=\"$2\"}" '$1=="eas_batch_size_sum"s{a=$2} $1=="eas_batch_size_count"s{c=$2} END{print a+0, c+0}'
}
