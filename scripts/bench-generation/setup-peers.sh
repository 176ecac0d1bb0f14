#!/usr/bin/env bash
# setup-peers.sh [batchinference] [llamacpp] [ortgenai] [reference]: makes
# what issue 39's generation peers need, once per machine (later runs cost
# seconds), and prints each step's time: the venvs (scripts/python-venv.sh)
# and llama.cpp's build (llama-cpp.sh setup: the long one). With no
# argument, all of them. "reference" is the llm venv that reference.py
# runs in.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/peerlib.sh"
want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(reference batchinference ortgenai llamacpp)
t0=$SECONDS
for w in "${want[@]}"; do
	case $w in
	reference) timed "reference: the llm venv" bash "$root/scripts/python-venv.sh" llm ;;
	batchinference) bash "$here/batch-inference.sh" setup ;;
	ortgenai) bash "$here/ortgenai.sh" setup ;;
	llamacpp) bash "$here/llama-cpp.sh" setup ;;
	*) echo "setup-peers.sh: unknown peer $w" >&2; exit 2 ;;
	esac
done
echo "setup-peers.sh: $((SECONDS - t0)) s in all" >&2
