#!/usr/bin/env bash
# bench-generation.sh: generation speed (issue 39), BENCHMARKS.md's
# "Generation" section. For each model of $MODELS:
#   gpt2   GPT-2 small's architecture (124M, random seeded weights, fp32)
#   llama  a Llama-shaped model of similar body (12 layers, hidden 768, GQA
#          12/4 heads, Llama 3's vocabulary; 174M)
# written once by scripts/gen-bench-llm-models.py (optimum's ONNX export and
# the transformers checkpoint beside it) into $EAS_BENCH_CACHE, one server
# per model with the export deployed twice as llm_cpu:
#   batched    model_config max_num_seqs $MAX_SEQS, max_num_batched_tokens
#              $STEP_TOKENS (the step's token budget)
#   unbatched  max_num_seqs 1 (max_num_batched_tokens 512: a prompt in one run)
# both intra_op_threads $THREADS, driven by `eas-server bench-generation`
# (internal/loadgen: streaming /v1/completions, greedy, ignore_eos) on one
# seeded workload (`eas-server bench-generation workload`: $REQUESTS requests,
# prompts $PROMPT tokens log-uniform, max_tokens $OUTPUT uniform, ids below
# 50000; by default 16-128 and 16-128, so that the whole run with its peers
# fits in 15 minutes on a 2-core machine; PROMPT=16-512 OUTPUT=16-256 is the
# issue's example): closed loop at $CLIENTS clients (batched) and $UNBATCHED_CLIENTS
# (unbatched), open loop at Poisson rates of $RATE_FACTORS times the batched
# server's requests/s at its largest client count. Each level: $WARM of
# warm-up (a closed loop at least clients/4 seconds: its first wave of
# prompts arrives at once), then a $DUR window. The server's CPU is read from /proc over each
# window; the mean batch and step time come from its metrics
# (eas_batch_size, eas_compute_seconds) over the same window.
#
# Peers (issue 39 item 2) plug in through PEERS="name ..." : for each name a
# function peer_<name> (defined in scripts/bench-generation/peers.sh when
# that file exists) is called as `peer_<name> MODEL MODEL_DIR WORKLOAD` after
# eas-server's runs of MODEL; it starts its server, calls
# `measure MODEL PEER MODE LOAD URL PID [FIELDS]` for each level (LOAD
# "c<clients>" or "r<rate>"), and stops it. An in-process peer writes its
# rows with `add_row MODEL PEER MODE LOAD JSON` (JSON: one GenResult).
#
# Usage: scripts/bench-generation.sh   (PREBUILT=1 skips make build;
# MODELS, CLIENTS, UNBATCHED_CLIENTS, RATE_FACTORS, DUR, WARM, REQUESTS,
# PROMPT, OUTPUT, MAX_SEQS, STEP_TOKENS, THREADS, PEERS, STEPS="1 8 32 64"
# (also the batched server's decode step time at those client counts, on
# 16-token prompts generating 256 tokens), PREFIX=N (also a workload whose
# prompts all start with the same N-token system prompt, at $PREFIX_CLIENTS
# clients, on the batched server with prefix reuse and on a third service
# without it, enable_prefix_caching false), PROFILE=1 (a 10 s
# Go CPU profile of the server during gpt2's batched run at 32 clients,
# written to $OUT_DIR), OUT_DIR (default: a temporary directory, removed)).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

PORT=${PORT:-18297}
PPROF_PORT=${PPROF_PORT:-18298}
MODELS=${MODELS:-gpt2 llama}
CLIENTS=${CLIENTS:-1 8 32 64}
UNBATCHED_CLIENTS=${UNBATCHED_CLIENTS-32}
RATE_FACTORS=${RATE_FACTORS-0.7 1.3}
DUR=${DUR:-15s} WARM=${WARM:-8s}
REQUESTS=${REQUESTS:-300} PROMPT=${PROMPT:-16-128} OUTPUT=${OUTPUT:-16-128}
MAX_SEQS=${MAX_SEQS:-64} STEP_TOKENS=${STEP_TOKENS:-256} THREADS=${THREADS:-2}
PEERS=${PEERS:-}
PREFIX=${PREFIX:-} PREFIX_CLIENTS=${PREFIX_CLIENTS:-32}
ROOT=${EAS_PYVENV_DIR:-$HOME/.cache/eas-server/pyvenv}
TOK=${EAS_TOKENIZER_CACHE:-$HOME/.cache/eas-server/tokenizers}
PY=python3
VPY=$ROOT/llm/bin/python
EAS=./bin/eas-server

bash scripts/python-venv.sh llm >&2
[[ -f $TOK/gpt2/encoder.json && -f $TOK/llama3/tokenizer.json ]] || bash scripts/fetch-tokenizers.sh >&2
[[ -n "${PREBUILT:-}" ]] || make -s build >/dev/null
# The models, once per version of their script (and the one it reuses).
key=$(cat scripts/gen-bench-llm-models.py scripts/gen-llm-models.py | sha256sum | cut -c1-16)
CACHE=${EAS_BENCH_CACHE:-$HOME/.cache/eas-server/bench-llm}/$key
if [[ ! -f $CACHE/done ]]; then
	echo "exporting the benchmark models into $CACHE (a few minutes, once)" >&2
	rm -rf "$CACHE.tmp" && mkdir -p "$CACHE.tmp"
	EAS_TOKENIZER_CACHE=$TOK "$VPY" scripts/gen-bench-llm-models.py "$CACHE.tmp" >&2
	touch "$CACHE.tmp/done" && rm -rf "$CACHE" && mv "$CACHE.tmp" "$CACHE"
fi

work=$(mktemp -d)
OUT_DIR=${OUT_DIR:-$work}
mkdir -p "$OUT_DIR"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
WORKLOAD=$work/workload.jsonl
$EAS bench-generation workload -n "$REQUESTS" --prompt "$PROMPT" --output "$OUTPUT" --seed 39 -o "$WORKLOAD"

# stop PID: ends a server this script started.
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# metric NAME SERVICE: a series of our server's /metrics (0 when absent).
metric() {
	curl -fs "127.0.0.1:$PORT/metrics" | awk -v s="$1{service=\"$2\"}" '$1==s{v=$2} END{print v+0}'
}

rows=$work/rows.jsonl
: >"$rows"
# add_row MODEL SERVER MODE LOAD JSON [EXTRA]: one result line for the
# report (JSON: a GenResult; EXTRA: a JSON object merged over it).
add_row() {
	$PY -c 'import json,sys; r=json.loads(sys.argv[5]); r.update(json.loads(sys.argv[6] or "{}")); r.update(model=sys.argv[1], server=sys.argv[2], config=sys.argv[3], load=sys.argv[4]); print(json.dumps(r))' \
		"$1" "$2" "$3" "$4" "$5" "${6:-}" >>"$rows"
}

# measure MODEL SERVER MODE LOAD URL PID [FIELDS [SVC]]: one level of
# bench-generation; with SVC (a service of our server) the mean batch and
# step time over the window from its metrics.
measure() {
	local model=$1 server=$2 mode=$3 load=$4 url=$5 pid=$6 fields=${7:-} svc=${8:-}
	local flag=(--clients "${load#c}")
	[[ $load == r* ]] && flag=(--rate "${load#r}")
	# The first wave (every client's request sent at once) is prefilled
	# before the first tokens flow: at 64 clients that takes about 8 s on
	# 2 cores, so a closed loop warms up for at least clients/4 seconds.
	local WARM=$WARM
	if [[ $load == c* && ${WARM%s} =~ ^[0-9]+$ ]] && ((${load#c} / 4 > ${WARM%s})); then
		WARM=$((${load#c} / 4))s
	fi
	echo "measuring: $model, $server $mode, $load" >&2
	local m0="" out extra="{}"
	if [[ -n $svc ]]; then
		(sleep "${WARM%s}"
			echo "$(metric eas_batch_size_sum "$svc") $(metric eas_batch_size_count "$svc") $(metric eas_compute_seconds_sum "$svc")" >"$work/m0") &
		m0=$!
	fi
	local prof=()
	if [[ -n ${PROFILE:-} && $model == gpt2 && $server == eas-server && $mode == batched && $load == c32 ]]; then
		(sleep "${WARM%s}"; curl -fs "127.0.0.1:$PPROF_PORT/debug/pprof/profile?seconds=10" -o "$OUT_DIR/gpt2-batched-c32.pprof") &
		prof=($!)
	fi
	out=$($EAS bench-generation --url "$url" --token bench --workload "$WORKLOAD" "${flag[@]}" \
		-d "$DUR" --warmup "$WARM" --pid "$pid" ${fields:+--fields "$fields"} -o json)
	if [[ -n $svc ]]; then
		wait "$m0"
		local s0 n0 c0 s1 n1 c1
		read -r s0 n0 c0 <"$work/m0"
		read -r s1 n1 c1 <<<"$(metric eas_batch_size_sum "$svc") $(metric eas_batch_size_count "$svc") $(metric eas_compute_seconds_sum "$svc")"
		extra=$($PY -c 'import json,sys; s0,n0,c0,s1,n1,c1=map(float,sys.argv[1:]); n=n1-n0
print(json.dumps({"mean_batch": (s1-s0)/n if n else None, "step_ms": 1000*(c1-c0)/n if n else None, "steps": n}))' \
			"$s0" "$n0" "$c0" "$s1" "$n1" "$c1")
	fi
	[[ ${#prof[@]} -gt 0 ]] && wait "${prof[0]}"
	add_row "$model" "$server" "$mode" "$load" "$($PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[0]))' <<<"$out")" "$extra"
	tail -1 "$rows" >&2
}

# last_rps MODEL SERVER MODE LOAD: requests/s of a row measured already.
last_rps() {
	$PY -c 'import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if [r["model"],r["server"],r["config"],r["load"]]==sys.argv[2:6]: v=r["requests_per_s"]
print(v)' "$rows" "$@"
}

[[ -f scripts/bench-generation/peers.sh ]] && . scripts/bench-generation/peers.sh

start=$(date +%s)
for model in $MODELS; do
	dir=$CACHE/$model/optimum
	services=(batched unbatched)
	[[ -n $PREFIX ]] && services+=(noprefix)
	for s in "${services[@]}"; do
		mc="{\"max_num_seqs\":$MAX_SEQS,\"max_num_batched_tokens\":$STEP_TOKENS,\"intra_op_threads\":$THREADS}"
		[[ $s == unbatched ]] && mc="{\"max_num_seqs\":1,\"max_num_batched_tokens\":512,\"intra_op_threads\":$THREADS}"
		[[ $s == noprefix ]] && mc="{\"max_num_seqs\":$MAX_SEQS,\"max_num_batched_tokens\":$STEP_TOKENS,\"intra_op_threads\":$THREADS,\"enable_prefix_caching\":false}"
		cat >"$work/$s.json" <<JSON
{"name":"${model}_$s","processor":"llm_cpu","model_path":"$dir","token":"bench","model_config":$mc,
 "metadata":{"instance":1,"cpu":$THREADS,"rpc":{"max_queue_size":1024}}}
JSON
	done
	rm -rf "$work/state"
	deploys=()
	for s in "${services[@]}"; do deploys+=(--deploy "$work/$s.json"); done
	$EAS serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn --pprof-listen 127.0.0.1:$PPROF_PORT \
		"${deploys[@]}" >"$work/serve.log" 2>&1 &
	srv=$!
	pids+=($srv)
	wait_ready "$PORT" 300 "$work/serve.log" "$srv"
	for c in $CLIENTS; do
		measure "$model" eas-server batched "c$c" "http://127.0.0.1:$PORT/api/predict/${model}_batched/v1/completions" "$srv" "" "${model}_batched"
	done
	maxc=${CLIENTS##* }
	sat=$(last_rps "$model" eas-server batched "c$maxc")
	for f in $RATE_FACTORS; do
		r=$($PY -c "print(round($f * $sat, 3))")
		[[ $r == 0.0 ]] && { echo "no requests/s at $maxc clients: no open-loop rate" >&2; break; }
		measure "$model" eas-server batched "r$r" "http://127.0.0.1:$PORT/api/predict/${model}_batched/v1/completions" "$srv" "" "${model}_batched"
	done
	for c in $UNBATCHED_CLIENTS; do
		measure "$model" eas-server unbatched "c$c" "http://127.0.0.1:$PORT/api/predict/${model}_unbatched/v1/completions" "$srv" "" "${model}_unbatched"
	done
	if [[ -n ${STEPS:-} ]]; then
		# Decode step time against batch size: prompts of 16 tokens and 256
		# generated, so that nearly every step is decode rows only.
		$EAS bench-generation workload -n 256 --prompt 16-16 --output 256-256 --seed 39 -o "$work/decode.jsonl"
		for c in $STEPS; do
			WORKLOAD=$work/decode.jsonl measure "$model" eas-server decode-only "c$c" \
				"http://127.0.0.1:$PORT/api/predict/${model}_batched/v1/completions" "$srv" "" "${model}_batched"
		done
	fi
	if [[ -n $PREFIX ]]; then
		$EAS bench-generation workload -n "$REQUESTS" --prompt "$PROMPT" --output "$OUTPUT" --seed 39 --prefix "$PREFIX" -o "$work/prefix.jsonl"
		for s in batched noprefix; do
			WORKLOAD=$work/prefix.jsonl measure "$model" eas-server "$s prefix $PREFIX" "c$PREFIX_CLIENTS" \
				"http://127.0.0.1:$PORT/api/predict/${model}_$s/v1/completions" "$srv" "" "${model}_$s"
		done
	fi
	stop "$srv"
	for p in $PEERS; do
		# Hook: each peer starts its own server for MODEL (the transformers
		# checkpoint is $CACHE/$model/hf, the ONNX export $dir), measures
		# with `measure` or writes rows with add_row, and stops it.
		"peer_$p" "$model" "$CACHE/$model" "$WORKLOAD"
	done
done

[[ $OUT_DIR != "$work" ]] && cp "$rows" "$OUT_DIR/rows.jsonl"
echo
echo "Run time $(($(date +%s) - start)) s (models ready). Workload: $REQUESTS requests, prompts $PROMPT tokens (log-uniform), max_tokens $OUTPUT (uniform), seed 39; windows $WARM warm-up + $DUR."
echo
$PY scripts/bench-generation/report.py "$rows"
