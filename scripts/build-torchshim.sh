#!/usr/bin/env bash
# build-torchshim.sh builds the TorchScript shim that the torchscript
# package opens with dlopen at run time: torchscript/shim/shim.cc compiled
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
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src_dir="$repo_root/torchscript/shim"
dest_dir="${1:-$repo_root/third_party/torchshim}"
lib="$dest_dir/libeas_torchshim.so"
CXX="${CXX:-g++}"
cflags=(-std=c++17 -O2 -fPIC -shared -Wall -I/usr/include/torch/csrc/api/include)
# --no-as-needed keeps libtorch.so (which registers operators) in DT_NEEDED.
ldflags=(-Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed)

if [[ ! -f /usr/include/torch/script.h ]] || ! command -v "$CXX" >/dev/null; then
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
