#!/usr/bin/env bash
# build-torchshim.sh builds the TorchScript shim that the torchscript
# package opens with dlopen at run time: engines/torchscript/shim/shim.cc compiled
# against Debian's libtorch (libtorch-dev 1.13.1) into
# third_party/torchshim/libeas_torchshim.so. The server binary itself never
# links libtorch.
#
# Installs libtorch-dev and g++ from Debian when missing (apt-get, with sudo
# unless root). Rebuilds only when shim.cc, shim.h or the compile line
# changed: their sha256 is kept beside the library in libeas_torchshim.so.sha256.
# Prints the library's path.
#
# Usage: scripts/build-torchshim.sh [DEST_DIR]   (default third_party/torchshim)
#
# TORCH_DIR=/path/to/site-packages/torch builds against that libtorch instead
# of Debian's: a pip-installed PyTorch is a complete libtorch (include/ and
# lib/), and a CUDA build of it gives the shim CUDA, so pytorch_gpu_* serves
# TorchScript on the GPU. The library's rpath points at TORCH_DIR/lib.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src_dir="$repo_root/engines/torchscript/shim"
dest_dir="${1:-$repo_root/third_party/torchshim}"
lib="$dest_dir/libeas_torchshim.so"
CXX="${CXX:-g++}"
cflags=(-std=c++17 -O2 -fPIC -shared -Wall)
# --no-as-needed keeps libtorch.so (which registers operators, and for a
# CUDA build loads libtorch_cuda) in DT_NEEDED.
ldflags=(-Wl,--no-as-needed -ltorch -ltorch_cpu -lc10)
if [[ -n "${TORCH_DIR:-}" ]]; then
	[[ -f "$TORCH_DIR/include/torch/script.h" && -d "$TORCH_DIR/lib" ]] || {
		echo "build-torchshim: TORCH_DIR=$TORCH_DIR has no include/torch/script.h and lib/ (point it at a PyTorch install's torch folder)" >&2
		exit 1
	}
	# A pip wheel's libtorch is built with the pre-C++11 string ABI.
	abi="$(grep -ho '_GLIBCXX_USE_CXX11_ABI=[01]' "$TORCH_DIR"/share/cmake/Torch/TorchConfig.cmake 2>/dev/null | head -1 || true)"
	cflags+=(-I"$TORCH_DIR/include" -I"$TORCH_DIR/include/torch/csrc/api/include")
	[[ -n "$abi" ]] && cflags+=(-D"$abi")
	ldflags=(-L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" "${ldflags[@]}")
	[[ -f "$TORCH_DIR/lib/libtorch_cuda.so" ]] && ldflags+=(-ltorch_cuda -lc10_cuda)
else
	cflags+=(-I/usr/include/torch/csrc/api/include)
fi
ldflags+=(-Wl,--as-needed)

if [[ -z "${TORCH_DIR:-}" && ! -f /usr/include/torch/script.h ]] || ! command -v "$CXX" >/dev/null; then
	sudo=""
	[[ "$(id -u)" == 0 ]] || sudo="sudo"
	echo "build-torchshim: installing libtorch-dev and g++ from Debian" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libtorch-dev g++
fi

want="$(cat "$src_dir/shim.cc" "$src_dir/shim.h" <(echo "$CXX ${cflags[*]} ${ldflags[*]}") | sha256sum | cut -d' ' -f1)"
if [[ -f "$lib" && -f "$lib.sha256" && "$(cat "$lib.sha256")" == "$want" ]]; then
	echo "$lib"
	exit 0
fi

mkdir -p "$dest_dir"
tmp="$(mktemp "$dest_dir/.libeas_torchshim.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
echo "build-torchshim: compiling $src_dir/shim.cc (about 15-60 s)" >&2
"$CXX" "${cflags[@]}" -o "$tmp" "$src_dir/shim.cc" "${ldflags[@]}"
chmod 0755 "$tmp"
mv -f "$tmp" "$lib"
echo "$want" >"$lib.sha256"
echo "$lib"
