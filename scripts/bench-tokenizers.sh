#!/usr/bin/env bash
# bench-tokenizers.sh measures engines/tokenizer's encoding throughput on
# each real tokenizer of scripts/fetch-tokenizers.sh beside Hugging Face
# tokenizers' (single thread, the same texts: engines/tokenizer/testdata/corpus.json)
# in one run, and prints a Markdown table (MB/s of UTF-8 text, special
# tokens added). Go runs on one thread too (GOMAXPROCS=1, so the collector
# shares it). The two alternate for ROUNDS rounds and the best of each is
# kept, so that other load on the machine weighs on both alike.
#
# Usage: scripts/bench-tokenizers.sh [BENCHTIME [ROUNDS]]   (go test -benchtime, default 2s; 3 rounds)
# Needs the files (bash scripts/fetch-tokenizers.sh) and the tensorflow venv
# (bash scripts/python-venv.sh tensorflow), which holds tokenizers.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime="${1:-2s}"
rounds="${2:-3}"
cache="${EAS_TOKENIZER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/tokenizers}"
py="${EAS_PYVENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/pyvenv}/tensorflow/bin/python"
[[ -x "$py" ]] || { echo "bench-tokenizers: no $py: run bash scripts/python-venv.sh tensorflow" >&2; exit 1; }
[[ -f "$cache/gemma3/tokenizer.json" ]] || { echo "bench-tokenizers: no files in $cache: run bash scripts/fetch-tokenizers.sh" >&2; exit 1; }

go test -c -o "${TMPDIR:-/tmp}/tokenizer-bench.test" ./engines/tokenizer/
trap 'rm -f "${TMPDIR:-/tmp}/tokenizer-bench.test"' EXIT
go_out="" py_out=""
for ((r = 1; r <= rounds; r++)); do
	echo "bench-tokenizers: round $r of $rounds" >&2
	go_out+="$(cd engines/tokenizer && GOMAXPROCS=1 "${TMPDIR:-/tmp}/tokenizer-bench.test" -test.run '^$' -test.bench '^BenchmarkEncode$' -test.benchtime "$benchtime" -test.cpu 1)"$'\n'
	py_out+="$("$py" engines/tokenizer/testdata/bench_hf.py \
		"bert=$cache/bert/tokenizer.json" "bertvocab=bert-vocab:$cache/bert/vocab.txt" \
		"gpt2=gpt2:$cache/gpt2/encoder.json,$cache/gpt2/vocab.bpe" \
		"llama2=$cache/llama2/tokenizer.json" "llama3=$cache/llama3/tokenizer.json" \
		"qwen3=$cache/qwen3/tokenizer.json" "gemma3=$cache/gemma3/tokenizer.json")"$'\n'
done

echo "| tokenizer | eas-server (Go) MB/s | tokenizers (Python, 1 thread) MB/s | ratio |"
echo "|---|---|---|---|"
for name in bert bertvocab gpt2 llama2 llama3 qwen3 gemma3; do
	goval="$(awk -v n="BenchmarkEncode/$name" '$1 == n {for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s" && $i > m) m = $i} END {print m}' <<<"$go_out")"
	hf="$(awk -v n="$name" '$1 == n && $2 > m {m = $2} END {print m}' <<<"$py_out")"
	ratio="$(awk -v a="$goval" -v b="$hf" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
	echo "| $name | $goval | $hf | ${ratio}x |"
done
