# peerlib.sh: what the generation peers' scripts share (sourced by
# batch-inference.sh, llama-cpp.sh and ortgenai.sh in this folder).

# The peers' venvs, as scripts/python-venv.sh makes them.
VENVS=${EAS_PYVENV_DIR:-$HOME/.cache/eas-server/pyvenv}
# Slow builds and downloads, once per machine, outside the repository.
PEER_CACHE=${EAS_PEER_CACHE:-$HOME/.cache/eas-server/peers}
# Where started servers write their logs.
PEER_LOGS=${EAS_PEER_LOGS:-${TMPDIR:-/tmp}/eas-peers}

# start_server LOG CMD...: runs CMD in the background, detached from this
# script (it outlives it), its output in LOG; prints nothing, sets PID. CMD
# is exec'd, so PID is the server's own process (what the load generator's
# --pid reads the CPU of).
start_server() {
	local log=$1
	shift
	mkdir -p "$(dirname "$log")"
	nohup "$@" >"$log" 2>&1 </dev/null &
	PID=$!
}

# wait_http URL PID SECONDS LOG: waits until URL answers 200, failing (with
# LOG's tail) when PID exits first or SECONDS pass.
wait_http() {
	local url=$1 pid=$2 secs=$3 log=$4 end=$((SECONDS + $3))
	while ((SECONDS < end)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "the server (pid $pid) exited before it was ready; $log:" >&2
			tail -n 30 "$log" >&2
			return 1
		fi
		curl -fs -o /dev/null "$url" && return 0
		sleep 0.5
	done
	echo "the server (pid $pid) was not ready at $url after $secs s; $log:" >&2
	tail -n 30 "$log" >&2
	kill "$pid" 2>/dev/null || true
	return 1
}

# stop_server PID: ends a server started by start_server (TERM, then KILL
# after 20 s) and waits until it is gone.
stop_server() {
	local pid=$1 i
	kill "$pid" 2>/dev/null || return 0
	for i in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

# timed NAME CMD...: runs CMD, then says on stderr how long it took.
timed() {
	local name=$1 t0=$SECONDS
	shift
	"$@"
	echo "$name: $((SECONDS - t0)) s" >&2
}
