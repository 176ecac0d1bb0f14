#!/usr/bin/env bash
# batch-inference.sh: peer (b) of issue 39's generation benchmark,
# batch-inference's GPT-2 completion approach (its @batching ModelHost,
# static batches of up to 32 run to completion) behind an OpenAI-compatible
# streaming shim (batch_inference_server.py says what it does and what it
# changes).
#
#   batch-inference.sh setup
#       the batch-inference-llm venv (scripts/python-venv.sh: PyPI's
#       batch-inference 1.0 and transformers 4.45.2 on Debian's torch 1.13)
#   batch-inference.sh start HF_DIR PORT [MAX_BATCH_SIZE]
#       serves the transformers checkpoint on 127.0.0.1:PORT (torch with
#       $THREADS intra-op threads, default 2), waits until it answers and
#       prints its PID; MAX_BATCH_SIZE 1 is batch-inference's unbatched
#       baseline (default 32, the example's)
#   batch-inference.sh stop PID
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/peerlib.sh"
THREADS=${THREADS:-2}

case ${1:-} in
setup) timed "batch-inference: the batch-inference-llm venv" bash "$root/scripts/python-venv.sh" batch-inference-llm ;;
start)
	[[ $# -ge 3 ]] || { echo "usage: batch-inference.sh start HF_DIR PORT [MAX_BATCH_SIZE]" >&2; exit 2; }
	hf=$2 port=$3 mbs=${4:-32}
	log=$PEER_LOGS/batch-inference-$port.log
	# One BLAS/OpenMP pool of THREADS: torch's intra-op threads.
	OMP_NUM_THREADS=$THREADS start_server "$log" "$VENVS/batch-inference-llm/bin/python" "$here/batch_inference_server.py" \
		--model "$hf" --port "$port" --max-batch-size "$mbs" --threads "$THREADS" \
		--served-model-name "$(basename "$(dirname "$(cd "$hf" && pwd)")")"
	wait_http "http://127.0.0.1:$port/v1/models" "$PID" 600 "$log"
	echo "$PID"
	;;
stop) stop_server "$2" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
