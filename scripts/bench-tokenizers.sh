#!/usr/bin/env bash
# bench-tokenizers.sh measures engines/tokenizer's encoding throughput on
# each real tokenizer of scripts/fetch-tokenizers.sh beside Hugging Face
# tokenizers' (single thread, the same texts: engines/tokenizer/testdata/corpus.json)
# in one run, and prints a Markdown table (MB/s of UTF-8 text, special
# tokens added).
#
# Usage: scripts/bench-tokenizers.sh [BENCHTIME]   (go test -benchtime, default 3s)
# Needs the files (bash scripts/fetch-tokenizers.sh) and the tensorflow venv
# (bash scripts/python-venv.sh tensorflow), which holds tokenizers.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime="${1:-3s}"
cache="${EAS_TOKENIZER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/tokenizers}"
py="${EAS_PYVENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/pyvenv}/tensorflow/bin/python"
[[ -x "$py" ]] || { echo "bench-tokenizers: no $py: run bash scripts/python-venv.sh tensorflow" >&2; exit 1; }
[[ -f "$cache/gemma3/tokenizer.json" ]] || { echo "bench-tokenizers: no files in $cache: run bash scripts/fetch-tokenizers.sh" >&2; exit 1; }

go_out="$(go test -run '^$' -bench '^BenchmarkEncode$' -benchtime "$benchtime" -count 1 -cpu 1 ./engines/tokenizer/)"
py_out="$("$py" engines/tokenizer/testdata/bench_hf.py \
	"bert=$cache/bert/tokenizer.json" "bertvocab=bert-vocab:$cache/bert/vocab.txt" \
	"gpt2=gpt2:$cache/gpt2/encoder.json,$cache/gpt2/vocab.bpe" \
	"llama2=$cache/llama2/tokenizer.json" "llama3=$cache/llama3/tokenizer.json" \
	"qwen3=$cache/qwen3/tokenizer.json" "gemma3=$cache/gemma3/tokenizer.json")"

echo "| tokenizer | eas-server (Go) MB/s | tokenizers (Python, 1 thread) MB/s | ratio |"
echo "|---|---|---|---|"
while read -r name hf; do
	goval="$(awk -v n="BenchmarkEncode/$name" '$1 == n {for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i}' <<<"$go_out")"
	ratio="$(awk -v a="$goval" -v b="$hf" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
	echo "| $name | $goval | $hf | ${ratio}x |"
done <<<"$py_out"
