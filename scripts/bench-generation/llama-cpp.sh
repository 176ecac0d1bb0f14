#!/usr/bin/env bash
# llama-cpp.sh: peer (c) of issue 39's generation benchmark, llama.cpp, from
# PyPI's llama-cpp-python sdist (version $VERSION, sha256-pinned), built here.
#
#   llama-cpp.sh setup
#       once per machine (cached under $EAS_PEER_CACHE, default
#       ~/.cache/eas-server/peers/llama-cpp/<version>-<cpu>): downloads the
#       sdist; builds its wheel with CMake (GGML_NATIVE: the machine's own
#       instruction set, AVX-512 where it has it, so the cache is keyed by
#       the CPU's flags; the build backend pinned by
#       llama-cpp-build-constraints.txt); builds llama.cpp's own server,
#       llama-server, from the same vendored source (static, CPU); makes the
#       llama-cpp venv (scripts/requirements/llama-cpp.txt, the server's
#       dependencies) with the wheel installed, and the gguf-convert venv.
#       Later runs cost seconds. Prints each step's time.
#   llama-cpp.sh convert HF_DIR OUT.gguf
#       the transformers checkpoint to GGUF at fp32 with the sdist's own
#       convert_hf_to_gguf.py (convert_gguf.py says what it adapts)
#   llama-cpp.sh start python|native GGUF PORT [PARALLEL]
#       starts a server on 127.0.0.1:PORT, waits until it answers, prints
#       its PID (the server process itself, for CPU accounting):
#         python  llama-cpp-python's server (python -m llama_cpp.server,
#                 launched by llama_cpp_server.py so that it takes
#                 token-id prompts, which it otherwise answers 422):
#                 one llama_context, one request at a time (its requests
#                 take a lock; it has no parallel slots and no batching
#                 across requests), n_threads 2, n_batch 512, n_ctx the
#                 model's context, interrupt_requests false (by default a
#                 new request interrupts the one streaming)
#         native  llama.cpp's llama-server: PARALLEL slots (default 32)
#                 with continuous batching, --threads 2 (and for prompt
#                 processing), a context of PARALLEL x the model's context
#                 (each slot the whole context; $SLOT_CTX lowers it), batch
#                 512, its prompt cache as it defaults (a slot reuses its
#                 last prompt's prefix: only a workload that wraps around
#                 repeats a prompt)
#       Both keep the key/value cache in float32 ($KV_TYPE, default f32;
#       llama.cpp's own default is f16), as the ONNX export does.
#   llama-cpp.sh stop PID
#
# Both speak OpenAI's POST /v1/completions with token-id prompts and
# streaming. llama-cpp-python's server ignores ignore_eos (a random-weight
# model rarely picks end-of-text; the load generator counts a shorter answer
# as "short"); llama-server honours it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/peerlib.sh"

VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
THREADS=${THREADS:-2}
KV_TYPE=${KV_TYPE:-f32}
cpukey=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12)
CACHE=$PEER_CACHE/llama-cpp/$VERSION-$cpukey
SDIST=$CACHE/llama_cpp_python-$VERSION.tar.gz
SRC=$CACHE/src/llama_cpp_python-$VERSION
SERVER_BIN=$CACHE/bin/llama-server
VENV=$VENVS/llama-cpp

fetch_sdist() {
	[[ -f $SDIST ]] && return 0
	mkdir -p "$CACHE/dl"
	bash "$root/scripts/python-venv.sh" llama-cpp >&2
	"$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
		"llama-cpp-python==$VERSION" -d "$CACHE/dl" >&2
	echo "$SDIST_SHA256  $CACHE/dl/llama_cpp_python-$VERSION.tar.gz" | sha256sum -c --quiet
	mv "$CACHE/dl/llama_cpp_python-$VERSION.tar.gz" "$SDIST"
}

extract_src() {
	[[ -f $SRC/vendor/llama.cpp/convert_hf_to_gguf.py ]] && return 0
	rm -rf "$CACHE/src" && mkdir -p "$CACHE/src"
	tar -xzf "$SDIST" -C "$CACHE/src"
}

build_wheel() {
	ls "$CACHE"/wheel/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1 && return 0
	rm -rf "$CACHE/wheel.tmp" && mkdir -p "$CACHE/wheel.tmp"
	# The package's own CMake build (scikit-build-core), native CPU, no
	# tests or examples; two compile jobs (the machine's cores).
	PIP_CONSTRAINT="$here/llama-cpp-build-constraints.txt" \
		CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
		CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2} \
		"$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$CACHE/wheel.tmp" "$SDIST" >&2
	rm -rf "$CACHE/wheel" && mv "$CACHE/wheel.tmp" "$CACHE/wheel"
}

build_server() {
	[[ -x $SERVER_BIN ]] && return 0
	local b=$CACHE/server-build
	# llama.cpp's own server from the vendored source: static, CPU, native;
	# no web UI download (the machine has no network), no HTTPS.
	cmake -S "$SRC/vendor/llama.cpp" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
		-DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
		-DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
		-DLLAMA_BUILD_SERVER=ON >"$CACHE/server-cmake.log" 2>&1 || { tail -30 "$CACHE/server-cmake.log" >&2; return 1; }
	cmake --build "$b" --target llama-server -j "${JOBS:-2}" >"$CACHE/server-build.log" 2>&1 ||
		{ tail -30 "$CACHE/server-build.log" >&2; return 1; }
	mkdir -p "$CACHE/bin"
	cp "$b/bin/llama-server" "$SERVER_BIN.tmp" && mv "$SERVER_BIN.tmp" "$SERVER_BIN"
	rm -rf "$b"
}

install_wheel() {
	bash "$root/scripts/python-venv.sh" llama-cpp >&2
	# The pinned version, from the wheel built above only (no index).
	if [[ "$("$VENV/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null)" != "$VERSION" ]]; then
		"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-index \
			--find-links "$CACHE/wheel" "llama-cpp-python==$VERSION" >&2
	fi
}

setup() {
	timed "llama-cpp: the llama-cpp venv" bash "$root/scripts/python-venv.sh" llama-cpp
	timed "llama-cpp: the sdist" fetch_sdist
	timed "llama-cpp: sources" extract_src
	timed "llama-cpp: llama-cpp-python's wheel (CMake)" build_wheel
	timed "llama-cpp: installing the wheel" install_wheel
	timed "llama-cpp: llama-server (CMake)" build_server
	timed "llama-cpp: the gguf-convert venv" bash "$root/scripts/python-venv.sh" gguf-convert
}

# ctx_of GGUF: the model's context length, read from the GGUF by the wheel's
# own gguf reader (llama_cpp has none in Python; the vendored gguf-py does).
ctx_of() {
	PYTHONPATH="$SRC/vendor/llama.cpp/gguf-py" "$VENV/bin/python" - "$1" <<'PY'
import sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
f = r.fields[f"{arch}.context_length"]
print(int(f.parts[-1][0]))
PY
}

# kv_enum: $KV_TYPE as ggml's type number (llama-cpp-python's settings).
kv_enum() {
	case $KV_TYPE in f32) echo 0 ;; f16) echo 1 ;; *) echo "llama-cpp.sh: KV_TYPE f32 or f16" >&2; exit 2 ;; esac
}

start() {
	local kind=$1 gguf=$2 port=$3 parallel=${4:-32} ctx log
	[[ -f $gguf ]] || { echo "llama-cpp.sh: no $gguf" >&2; exit 2; }
	ctx=$(ctx_of "$gguf")
	ctx=${SLOT_CTX:-$ctx}
	log=$PEER_LOGS/llama-cpp-$kind-$port.log
	case $kind in
	python)
		[[ -x $VENV/bin/python ]] || { echo "llama-cpp.sh: run setup first" >&2; exit 2; }
		start_server "$log" "$VENV/bin/python" "$here/llama_cpp_server.py" --model "$gguf" --host 127.0.0.1 --port "$port" \
			--n_ctx "$ctx" --n_threads "$THREADS" --n_threads_batch "$THREADS" --n_batch 512 --n_ubatch 512 \
			--interrupt_requests false --logits_all false --verbose false --model_alias "$(basename "$gguf" .gguf)" \
			--type_k "$(kv_enum)" --type_v "$(kv_enum)"
		;;
	native)
		[[ -x $SERVER_BIN ]] || { echo "llama-cpp.sh: run setup first" >&2; exit 2; }
		start_server "$log" "$SERVER_BIN" --model "$gguf" --host 127.0.0.1 --port "$port" \
			--parallel "$parallel" --cont-batching --ctx-size $((ctx * parallel)) --threads "$THREADS" \
			--threads-batch "$THREADS" --batch-size 512 --ubatch-size 512 --no-webui \
			--cache-type-k "$KV_TYPE" --cache-type-v "$KV_TYPE" \
			--alias "$(basename "$gguf" .gguf)"
		;;
	*) echo "llama-cpp.sh: start python|native GGUF PORT [PARALLEL]" >&2; exit 2 ;;
	esac
	wait_http "http://127.0.0.1:$port/v1/models" "$PID" 600 "$log"
	echo "$PID"
}

case ${1:-} in
setup) setup ;;
convert)
	[[ $# -eq 3 ]] || { echo "usage: llama-cpp.sh convert HF_DIR OUT.gguf" >&2; exit 2; }
	extract_src
	"$VENVS/gguf-convert/bin/python" "$here/convert_gguf.py" "$SRC/vendor/llama.cpp/convert_hf_to_gguf.py" "$2" "$3" >&2
	;;
start) shift; start "$@" ;;
stop) stop_server "$2" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
