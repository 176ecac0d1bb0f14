#!/usr/bin/env bash
# bench-text-embedding.sh: batch-inference's BERT-embedding benchmark side by
# side (issue 37, item 5). BERT sentence embeddings from raw text (256 seeded
# texts of 8 to 120 words, scripts/bench-text-embedding/prepare.py), closed
# loop (`eas-server bench --bodies`, the texts in turn) at 32 and 64 clients,
# for two models:
#   bert-base  a BERT-base-shaped model (12 layers, hidden 768) with random
#              seeded weights, written once by prepare.py as a Hugging Face
#              checkpoint directory in $EAS_BENCH_CACHE (bert-base-uncased's
#              real tokenizer beside it)
#   minilm     all-MiniLM-L6-v2 with its real weights (scripts/fetch-tokenizers.sh)
# and four servers on the same texts:
#   eas-server text_encoder, batching on (metadata.rpc.batcher "bucket",
#     $BUCKETS, max_batch_size 32, max_batch_timeout 5 ms) and off; for
#     minilm also "pad" (batching on, every run padded to its longest text)
#   batch-inference's ModelHost around transformers' BertModel (the tokenizer
#     in the model class, BucketSeqBatcher on the same $BUCKETS, max batch 32)
#     on, and the same class's predict_batch called per request (off), behind
#     a threaded http.server taking the same JSON
#     (scripts/bench-text-embedding/modelhost_server.py)
# Threads: ONNX Runtime intra_op_threads 2 with one run at a time
# (worker_threads 1); torch.set_num_threads(2). Before timing, the answers
# of eas-server and batch-inference are compared on the first texts.
# Tokenization's share of server CPU: the tokenizer's time per text on these
# texts (Go benchmark, one thread; tokenizers in Python, one thread) times the
# answers, over the server process's CPU time in the same window (/proc).
# Usage: scripts/bench-text-embedding.sh   (PREBUILT=1 skips make build;
# MINI_DUR/MINI_WARM, BASE_DUR/BASE_WARM set the windows; MODELS="minilm"
# runs one model)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/benchlib.sh

PORT=${PORT:-18195}
MHPORT=${MHPORT:-18196}
MINI_DUR=${MINI_DUR:-8s} MINI_WARM=${MINI_WARM:-3s}
BASE_DUR=${BASE_DUR:-15s} BASE_WARM=${BASE_WARM:-8s}
MODELS=${MODELS:-minilm bert-base}
BUCKETS=${BUCKETS:-16,32,48,64,80,96,112,128,144,160,176,192,256}
export BUCKETS
ROOT=${EAS_PYVENV_DIR:-$HOME/.cache/eas-server/pyvenv}
TOK=${EAS_TOKENIZER_CACHE:-$HOME/.cache/eas-server/tokenizers}
CACHE=${EAS_BENCH_CACHE:-$HOME/.cache/eas-server/bench-text}
PY=python3
VPY=$ROOT/batch-inference-torch/bin/python
D=scripts/bench-text-embedding
bash scripts/python-venv.sh batch-inference-torch >&2
[[ -f $TOK/all-minilm-l6-v2/model.safetensors && -f $TOK/bert/tokenizer.json ]] || bash scripts/fetch-tokenizers.sh >&2
[[ -n "${PREBUILT:-}" ]] || make -s build >/dev/null
mkdir -p "$CACHE"
"$VPY" $D/prepare.py bert-base "$CACHE/bert-base-random" "$TOK/bert"

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
"$VPY" $D/prepare.py texts "$work/texts.jsonl"
TICK=$(getconf CLK_TCK)

# Tokenizer cost per text, one thread each.
go test -c -o "$work/tok.test" ./engines/tokenizer/
tok_go() {
	(cd engines/tokenizer && EAS_BENCH_BODIES="$work/texts.jsonl" EAS_BENCH_TOKENIZER="$1" GOMAXPROCS=1 \
		"$work/tok.test" -test.run '^$' -test.bench '^BenchmarkEncodeBodies$' -test.benchtime 2s -test.cpu 1) |
		awk '$1 ~ /^BenchmarkEncodeBodies/ {print $3 / 1000}'
}
declare -A tokgo tokpy
for m in minilm bert-base; do
	tj=$TOK/all-minilm-l6-v2/tokenizer.json
	[[ $m == bert-base ]] && tj=$CACHE/bert-base-random/tokenizer.json
	tokgo[$m]=$(tok_go "$tj")
	tokpy[$m]=$("$VPY" $D/tokcost.py "$tj" "$work/texts.jsonl")
	echo "tokenizer, $m: Go ${tokgo[$m]} us/text, tokenizers (Python) ${tokpy[$m]} us/text" >&2
done

# stop PID: ends a server this script started and waits for its port to free.
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# ticks PID: the process's user+system CPU in clock ticks.
ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }

results=()
# measure MODEL SERVER MODE C PID WARM DUR URL [SVC]
measure() {
	local model=$1 server=$2 mode=$3 c=$4 pid=$5 warm=$6 dur=$7 url=$8 svc=${9:-}
	echo "measuring: $model, $server $mode, $c clients" >&2
	local before="0 0" after="0 0" out
	[[ -n $svc ]] && before=$(batch_stats "$PORT" "$svc")
	(sleep "${warm%s}"; ticks "$pid" >"$work/t0"; sleep "${dur%s}"; ticks "$pid" >"$work/t1") &
	local sampler=$!
	out=$(./bin/eas-server bench --token bench -o json -d "$dur" --warmup "$warm" --bodies "$work/texts.jsonl" --url "$url" -c "$c")
	wait $sampler
	[[ -n $svc ]] && after=$(batch_stats "$PORT" "$svc")
	local r
	r=$($PY -c "import json,sys; r=json.loads(sys.argv[1])[0]; print(r['throughput_rps'], r['p50_ms'], r['p99_ms'], r['ok'], r['requests'])" "$out")
	results+=("$model $server $mode $c $r $(($(cat "$work/t1") - $(cat "$work/t0"))) ${dur%s} $before $after")
}

# bench_model MODEL DIR MODEL_CONFIG WARM DUR [pad]
bench_model() {
	local model=$1 dir=$2 mc=$3 warm=$4 dur=$5 pad=${6:-}
	local rpc='"worker_threads":1,"max_queue_size":1024,"keepalive":60000'
	local svcs=(on off) deploys=()
	[[ -n $pad ]] && svcs=(on pad off)
	for s in "${svcs[@]}"; do
		local b='"batching":false'
		case $s in
		on) b="\"batching\":true,\"max_batch_size\":32,\"max_batch_timeout\":5,\"batcher\":\"bucket\",\"buckets\":[$BUCKETS]" ;;
		pad) b='"batching":true,"max_batch_size":32,"max_batch_timeout":5' ;;
		esac
		cat >"$work/$s.json" <<JSON
{"name":"${model//-/_}_$s","processor":"text_encoder","model_path":"$dir","token":"bench","model_config":$mc,
 "metadata":{"instance":1,"cpu":2,"rpc":{$b,$rpc}}}
JSON
		deploys+=(--deploy "$work/$s.json")
	done
	rm -rf "$work/state"
	./bin/eas-server serve --listen 127.0.0.1:$PORT --state-dir "$work/state" --log-level warn "${deploys[@]}" >"$work/serve.log" 2>&1 &
	local srv=$!
	pids+=($srv)
	"$VPY" $D/modelhost_server.py "$MHPORT" on "$dir" 256 2>"$work/mh.log" &
	local mh=$!
	pids+=($mh)
	wait_ready "$PORT" 300 "$work/serve.log" "$srv"
	for _ in $(seq 1 600); do curl -fs "127.0.0.1:$MHPORT/" >/dev/null 2>&1 && break; sleep 0.2; done
	echo "check, $model: eas-server (batching on) vs batch-inference (on)" >&2
	$PY $D/check.py "$work/texts.jsonl" 4 "http://127.0.0.1:$PORT/api/predict/${model//-/_}_on" bench "http://127.0.0.1:$MHPORT/" |
		tee -a "$work/checks" >&2
	stop "$mh"
	local name=${model//-/_}
	for c in 32 64; do
		for s in "${svcs[@]}"; do
			measure "$model" eas-server "$s" "$c" "$srv" "$warm" "$dur" "http://127.0.0.1:$PORT/api/predict/${name}_$s" "${name}_$s"
		done
	done
	stop "$srv"
	for mode in on off; do
		"$VPY" $D/modelhost_server.py "$MHPORT" "$mode" "$dir" 256 2>"$work/mh.log" &
		mh=$!
		pids+=($mh)
		for _ in $(seq 1 600); do curl -fs "127.0.0.1:$MHPORT/" >/dev/null 2>&1 && break; sleep 0.2; done
		for c in 32 64; do
			measure "$model" batch-inference "$mode" "$c" "$mh" "$warm" "$dur" "http://127.0.0.1:$MHPORT/"
		done
		stop "$mh"
	done
}

start=$(date +%s)
[[ " $MODELS " == *" minilm "* ]] &&
	bench_model minilm "$TOK/all-minilm-l6-v2" '{"intra_op_threads":2}' "$MINI_WARM" "$MINI_DUR" pad
[[ " $MODELS " == *" bert-base "* ]] && bench_model bert-base "$CACHE/bert-base-random" \
	'{"task":"embedding","pooling":"mean","normalize":true,"max_length":256,"intra_op_threads":2}' "$BASE_WARM" "$BASE_DUR"

echo
echo "Checks before timing (first 4 texts, eas-server on vs batch-inference on):"
sed 's/^/- /' "$work/checks"
echo
$PY - "$TICK" "$(($(date +%s) - start))" "minilm=${tokgo[minilm]},${tokpy[minilm]}" "bert-base=${tokgo[bert-base]},${tokpy[bert-base]}" \
	"$BUCKETS" "${results[@]}" <<'PYEOF'
import sys
tick, elapsed = float(sys.argv[1]), sys.argv[2]
tok = {}
for a in sys.argv[3:5]:
    m, v = a.split("=")
    g, p = v.split(",")
    tok[m] = {"eas-server": float(g), "batch-inference": float(p)}
buckets = sys.argv[5]
rows = {}
for r in sys.argv[6:]:
    model, server, mode, c, rps, p50, p99, ok, n, dt, dur, s0, n0, s1, n1 = r.split()
    mb = (float(s1) - float(s0)) / (float(n1) - float(n0)) if float(n1) > float(n0) else None
    cpu = float(dt) / tick
    share = tok[model][server] * 1e-6 * int(ok) / cpu if cpu > 0 else 0
    rows[(model, server, mode, int(c))] = dict(rps=float(rps), p50=float(p50), p99=float(p99), ok=int(ok), mb=mb,
                                               cores=cpu / float(dur), share=share)
print(f"Run time {elapsed} s. Buckets (tokens, both sides): {buckets}.")
print(f"Tokenizer per text, one thread: eas-server (Go) minilm {tok['minilm']['eas-server']:.1f} us, bert-base "
      f"{tok['bert-base']['eas-server']:.1f} us; tokenizers (Python) minilm {tok['minilm']['batch-inference']:.1f} us, "
      f"bert-base {tok['bert-base']['batch-inference']:.1f} us.\n")
label = {("eas-server", "on"): "eas-server text_encoder | on: bucket, max 32, 5 ms",
         ("eas-server", "pad"): "eas-server text_encoder | on: pad to longest, max 32, 5 ms",
         ("eas-server", "off"): "eas-server text_encoder | off",
         ("batch-inference", "on"): "batch-inference ModelHost | on: BucketSeqBatcher, max 32",
         ("batch-inference", "off"): "batch-inference model class | off: predict_batch per request"}
print("| model | server | batching | clients | req/s | p50 ms | p99 ms | mean batch | server CPU (cores) | tokenization share of server CPU |")
print("|---|---|---|---|---|---|---|---|---|---|")
for model in ("minilm", "bert-base"):
    for (srv, mode), lab in label.items():
        for c in (32, 64):
            x = rows.get((model, srv, mode, c))
            if not x:
                continue
            mb = f"{x['mb']:.1f}" if x["mb"] is not None else "n/a"
            print(f"| {model} | {lab} | {c} | {x['rps']:.1f} | {x['p50']:.0f} | {x['p99']:.0f} | {mb} | {x['cores']:.2f} | {100 * x['share']:.2f}% |")
print()
print("| model | clients | eas-server on/off | batch-inference on/off | eas-server on / batch-inference on | eas-server off / batch-inference off | best / best |")
print("|---|---|---|---|---|---|---|")
for model in ("minilm", "bert-base"):
    for c in (32, 64):
        g = lambda s, m: rows.get((model, s, m, c), {}).get("rps", 0)
        eon, eoff, bon, boff = g("eas-server", "on"), g("eas-server", "off"), g("batch-inference", "on"), g("batch-inference", "off")
        q = lambda a, b: f"{a / b:.2f}x" if b else "n/a"
        best_e, best_b = max(eon, eoff, g("eas-server", "pad")), max(bon, boff)
        print(f"| {model} | {c} | {q(eon, eoff)} | {q(bon, boff)} | {q(eon, bon)} | {q(eoff, boff)} | {q(best_e, best_b)} |")
PYEOF
