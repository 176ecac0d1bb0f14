#!/usr/bin/env bash
# check-peers.sh MODEL_DIR [WORKLOAD]: checks that issue 39's generation
# peers answer greedily as transformers does, on MODEL_DIR (hf/: the
# transformers checkpoint; optimum/: its ONNX export, as
# scripts/gen-bench-llm-models.py and scripts/gen-llm-models.py write them).
# reference.py computes transformers' answers to the first $N requests of
# WORKLOAD (default: a seeded one of prompts 16-128 tokens, ids below 50000)
# cut to $TOKENS tokens (defaults 8 and 24); then, for each of $PEERS
# (default: batchinference llamacpp llamaserver ortgenai):
#   batchinference  each request alone, then all at once (one static batch):
#                   alone must match; batched answers that change are
#                   reported (its batcher reads the logits of right-padded
#                   prompts' last position), not failed
#   llamacpp        llama-cpp-python's server, text compared (it gives no
#                   token ids), and llama.cpp in-process, tokens compared
#                   (llama_tokens.py), on the fp32 GGUF converted here
#   llamaserver     llama.cpp's llama-server, alone and all at once, text
#   ortgenai        onnxruntime-genai on the optimum export, alone and in
#                   one static batch, tokens
# A differing token within float tolerance is a tie, not a mismatch
# (check_peer.py). Exit status 1 when any check fails. Needs setup-peers.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/peerlib.sh"
[[ $# -ge 1 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
dir=$(cd "$1" && pwd)
N=${N:-8} TOKENS=${TOKENS:-24} PORT=${PORT:-18391}
PEERS=${PEERS:-batchinference llamacpp llamaserver ortgenai}
export THREADS=${THREADS:-2}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do stop_server "$p"; done
	rm -rf "$work"
}
trap cleanup EXIT
wl=${2:-}
if [[ -z $wl ]]; then
	wl=$work/workload.jsonl
	python3 - "$wl" <<'PY'
import json, math, random, sys
r = random.Random(39)
with open(sys.argv[1], "w") as f:
    for _ in range(64):
        n = int(round(math.exp(r.uniform(math.log(16), math.log(128)))))
        f.write(json.dumps({"prompt": [r.randrange(50000) for _ in range(n)], "max_tokens": r.randint(16, 64)}) + "\n")
PY
fi
"$VENVS/llm/bin/python" "$here/reference.py" --model "$dir/hf" --workload "$wl" --n "$N" --max-tokens "$TOKENS" \
	--threads "$THREADS" -o "$work/ref.json" >&2
fail=0
run() {
	echo "== $*" >&2
	"$@" || fail=1
}
server_check() {
	local script=$1 fields=$2 flags=$3
	shift 3
	local pid
	pid=$(bash "$here/$script" start "$@") || { fail=1; return; }
	pids+=("$pid")
	run python3 "$here/check_peer.py" --url "http://127.0.0.1:$PORT" --reference "$work/ref.json" --fields "$fields" $flags
	stop_server "$pid"
}
gguf() {
	[[ -f $work/model.gguf ]] || bash "$here/llama-cpp.sh" convert "$dir/hf" "$work/model.gguf"
}
for p in $PEERS; do
	case $p in
	batchinference) server_check batch-inference.sh '{}' "--concurrent --expect-batching-changes" "$dir/hf" "$PORT" 32 ;;
	llamacpp)
		gguf
		server_check llama-cpp.sh '{"logprobs": null, "repeat_penalty": 1.0}' "" python "$work/model.gguf" "$PORT"
		run "$VENVS/llama-cpp/bin/python" "$here/llama_tokens.py" "$work/model.gguf" "$work/ref.json"
		;;
	llamaserver)
		gguf
		server_check llama-cpp.sh '{"logprobs": null}' "--concurrent" native "$work/model.gguf" "$PORT" "$N"
		;;
	ortgenai) run bash "$here/ortgenai.sh" check "$dir/optimum" "$work/ref.json" ;;
	*) echo "check-peers.sh: unknown peer $p" >&2; exit 2 ;;
	esac
done
echo "check-peers.sh: $([[ $fail == 0 ]] && echo ok || echo FAILED)"
exit $fail
