#!/usr/bin/env bash
# ortgenai.sh: peer (d) of issue 39's generation benchmark, onnxruntime-genai's
# own generate loop in-process on the same optimum export (ortgenai_run.py
# says how its genai_config.json describes optimum's graph, and how it
# batches).
#
#   ortgenai.sh setup
#       the onnxruntime-genai venv (scripts/python-venv.sh: onnxruntime-genai
#       0.18.0 with its onnxruntime 1.31.1)
#   ortgenai.sh run ONNX_DIR WORKLOAD [BATCH] [ortgenai_run.py options]
#       the workload in static batches of BATCH (default 32), $THREADS
#       intra-op threads (default 2); prints one JSON GenResult line
#   ortgenai.sh check ONNX_DIR REF.json [ortgenai_run.py options]
#       greedy tokens alone and batched against reference.py's
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/peerlib.sh"
THREADS=${THREADS:-2}
PY=$VENVS/onnxruntime-genai/bin/python

case ${1:-} in
setup) timed "ortgenai: the onnxruntime-genai venv" bash "$root/scripts/python-venv.sh" onnxruntime-genai ;;
run)
	[[ $# -ge 3 ]] || { echo "usage: ortgenai.sh run ONNX_DIR WORKLOAD [BATCH] [options]" >&2; exit 2; }
	dir=$2 wl=$3 batch=${4:-32}
	shift $(($# < 4 ? $# : 4))
	OMP_NUM_THREADS=$THREADS "$PY" "$here/ortgenai_run.py" --model "$dir" --workload "$wl" --batch "$batch" --threads "$THREADS" "$@" | tail -n 1
	;;
check)
	[[ $# -ge 3 ]] || { echo "usage: ortgenai.sh check ONNX_DIR REF.json [options]" >&2; exit 2; }
	dir=$2 ref=$3
	shift 3
	OMP_NUM_THREADS=$THREADS "$PY" "$here/ortgenai_run.py" --model "$dir" --reference "$ref" --threads "$THREADS" "$@"
	;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
