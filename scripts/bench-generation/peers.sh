# peers.sh: the peers of issue 39's generation benchmark, as
# scripts/bench-generation.sh's hooks (sourced by it when PEERS names them;
# it provides measure, add_row, $rows, $CLIENTS and $THREADS). Each peer_<name>
# MODEL MODEL_DIR WORKLOAD (MODEL_DIR holding hf/, the transformers
# checkpoint, and optimum/, the ONNX export) starts its server, measures it
# at each of $PEER_CLIENTS (closed loop; default bench-generation.sh's
# $CLIENTS) and stops it:
#
#   batchinference  batch-inference's GPT-2 completion approach behind an
#                   OpenAI shim (batch-inference.sh), max_batch_size 32;
#                   with BI_UNBATCHED=1 also max_batch_size 1 at
#                   $UNBATCHED_CLIENTS. Its windows are $BI_WARM + $BI_DUR
#                   (default 30 s + 60 s): its tokens arrive a whole static
#                   batch at a time (at 32 clients on GPT-2 small, a batch
#                   every 30-40 s here), so a 15 s window sees none or one
#   llamacpp        llama-cpp-python's server (llama-cpp.sh start python):
#                   one request at a time
#   llamaserver     llama.cpp's llama-server (llama-cpp.sh start native),
#                   $LLAMA_PARALLEL slots (default 64, the most clients)
#                   with continuous batching
#   ortgenai        onnxruntime-genai in-process (ortgenai.sh run), static
#                   batches of each of $ORTGENAI_BATCHES (default 32) over
#                   the workload's first $ORTGENAI_REQUESTS requests
#                   (default 64), one row each
#
# Every peer runs with $THREADS threads (bench-generation.sh's, 2). Setup
# (once per machine: venvs, the llama.cpp build): bash
# scripts/bench-generation/setup-peers.sh. The load generator's body asks
# for "logprobs": 0, which llama.cpp's servers would answer in their own
# shapes or refuse (llama-cpp-python without logits_all): they are sent
# {"logprobs": null}, and each text chunk counts one token (the usage chunk
# corrects the count; llama-cpp-python sends none, so a token whose text is
# held back, part of a UTF-8 character, goes uncounted). llama-cpp-python's
# server also applies its own repeat_penalty default, 1.1, at temperature 0:
# it is sent 1.0, which makes it greedy.

PEER_DIR=scripts/bench-generation
PEER_PORT=${PEER_PORT:-18299}
PEER_CLIENTS=${PEER_CLIENTS:-$CLIENTS}

# peer_server PEER MODEL CONFIG FIELDS CLIENTS START_ARGS...: starts a
# server with START_ARGS (a peer script and its start arguments), measures
# it at each of CLIENTS, stops it.
peer_server() {
	local peer=$1 model=$2 config=$3 fields=$4 clients=$5 script=$6
	shift 6
	local pid
	pid=$(THREADS=$THREADS bash "$PEER_DIR/$script" start "$@")
	pids+=("$pid")
	for c in $clients; do
		measure "$model" "$peer" "$config" "c$c" "http://127.0.0.1:$PEER_PORT/v1/completions" "$pid" "$fields"
	done
	bash "$PEER_DIR/$script" stop "$pid"
}

peer_batchinference() {
	local model=$1 dir=$2
	# measure reads these (bash's dynamic scope): longer windows.
	local DUR=${BI_DUR:-60s} WARM=${BI_WARM:-30s}
	peer_server batch-inference "$model" static-32 "" "$PEER_CLIENTS" batch-inference.sh "$dir/hf" "$PEER_PORT" 32
	if [[ -n ${BI_UNBATCHED:-} ]]; then
		peer_server batch-inference "$model" unbatched "" "$UNBATCHED_CLIENTS" batch-inference.sh "$dir/hf" "$PEER_PORT" 1
	fi
}

# peer_gguf MODEL_DIR MODEL: the model's fp32 GGUF, converted once.
peer_gguf() {
	local g=$1/gguf/$2-f32.gguf
	if [[ ! -f $g ]]; then
		mkdir -p "$1/gguf"
		echo "converting $1/hf to GGUF (fp32)" >&2
		bash "$PEER_DIR/llama-cpp.sh" convert "$1/hf" "$g.tmp" && mv "$g.tmp" "$g"
	fi
	echo "$g"
}

peer_llamacpp() {
	local model=$1 g
	g=$(peer_gguf "$2" "$model")
	peer_server llama-cpp-python "$model" serial '{"logprobs": null, "repeat_penalty": 1.0}' "$PEER_CLIENTS" llama-cpp.sh python "$g" "$PEER_PORT"
}

peer_llamaserver() {
	local model=$1 g par=${LLAMA_PARALLEL:-64}
	g=$(peer_gguf "$2" "$model")
	peer_server llama-server "$model" "np$par-cb" '{"logprobs": null}' "$PEER_CLIENTS" llama-cpp.sh native "$g" "$PEER_PORT" "$par"
}

peer_ortgenai() {
	local model=$1 dir=$2 wl=$3 b out
	for b in ${ORTGENAI_BATCHES:-32}; do
		echo "measuring: $model, onnxruntime-genai in-process, static batches of $b" >&2
		out=$(THREADS=$THREADS bash "$PEER_DIR/ortgenai.sh" run "$dir/optimum" "$wl" "$b" --requests "${ORTGENAI_REQUESTS:-64}")
		add_row "$model" onnxruntime-genai "in-process-static-$b" "c$b" "$out"
		tail -1 "$rows" >&2
	done
}
