#!/usr/bin/env bash
# fetch-onnxruntime.sh installs the ONNX Runtime shared library that the
# onnx/pytorch processors load at run time, and with --gpu its CUDA
# execution provider.
#
# The library is not packaged by Debian, so it is taken from the npm package
# onnxruntime-node (MIT): `npm pack` downloads the tarball WITHOUT running its
# install script (which would try to download CUDA parts from a blocked host),
# and only package/bin/napi-v6/linux/x64/libonnxruntime.so.1 (CPU build) is
# extracted. Both the tarball and the library are checked against pinned
# sha256 sums, so a changed upstream artefact fails loudly.
#
# --gpu (make deps GPU=1, or ONNXRUNTIME_GPU=1) also installs the CUDA
# execution provider of the same ONNX Runtime release. The core library above
# already holds the provider bridge: on a CUDA session it loads
# libonnxruntime_providers_shared.so and libonnxruntime_providers_cuda.so from
# its own directory. Both come from the npm package
# com.github.asus4.onnxruntime.linux-x64-gpu (MIT, ONNX Runtime 1.29.0 built
# for CUDA 13 and cuDNN 9; its TensorRT provider is not extracted), pinned the
# same way. The CUDA libraries themselves (libcudart.so.13, libcublas.so.13,
# libcublasLt.so.13, libcurand.so.10, libcudnn.so.9, libcufft.so.12) and the
# NVIDIA driver are not fetched: see README.md, "ONNX models on a GPU".
#
# Usage: scripts/fetch-onnxruntime.sh [--gpu] [DEST_DIR]
#   DEST_DIR defaults to <repo>/third_party/onnxruntime/lib. The library lands
#   at DEST_DIR/libonnxruntime.so.1.29.0 with a libonnxruntime.so symlink;
#   --gpu adds DEST_DIR/libonnxruntime_providers_{shared,cuda}.so.
#   Idempotent: a file present with its pinned hash is not fetched again.
# npm comes from Debian (apt-get install npm, with sudo unless root) when it
# is missing.
# The checked tarballs are kept in ${EAS_NPM_CACHE_DIR:-~/.cache/eas-server/npm}, so
# a new clone on the same machine installs without downloading.
# Offline machines: ONNXRUNTIME_NPM_TARBALL=/path/onnxruntime-node-1.29.0.tgz
# and ONNXRUNTIME_GPU_NPM_TARBALL=/path/com.github.asus4.onnxruntime.linux-x64-gpu-0.4.9.tgz
# use tarballs already on disk.
set -euo pipefail

ORT_VERSION=1.29.0
TARBALL_SHA256=cfdfb45ec4044b1fdca43e5d2e180fb6817e649ff8ad1e0dfc90e18e51b67037
LIB_SHA256=89688f5cf51c7e31befbb7b9101bc027799009b18d1baa9a5b1146a72e69538d
MEMBER=package/bin/napi-v6/linux/x64/libonnxruntime.so.1

# The CUDA execution provider for ONNX Runtime $ORT_VERSION.
GPU_PACKAGE=com.github.asus4.onnxruntime.linux-x64-gpu
GPU_PACKAGE_VERSION=0.4.9
GPU_TARBALL_SHA256=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
GPU_MEMBER_DIR=package/Plugins/Linux/x64
# file name, sha256
GPU_LIBS=(
	"libonnxruntime_providers_shared.so c6a12593396095f5670160e284c35d1700b7708cf3037b7042e2a5200ccae772"
	"libonnxruntime_providers_cuda.so 56cf3254b118ad837ccc4ed8f6d1b23504bbf7ef91b34cbc0b289cb7f10b3037"
)

gpu="${ONNXRUNTIME_GPU:-}"
[[ "$gpu" == 0 ]] && gpu=""
args=()
for a in "$@"; do
	case "$a" in
	--gpu) gpu=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	-*) echo "fetch-onnxruntime: unknown option $a (usage: $0 [--gpu] [DEST_DIR])" >&2; exit 2 ;;
	*) args+=("$a") ;;
	esac
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest_dir="${args[0]:-$repo_root/third_party/onnxruntime/lib}"
dest="$dest_dir/libonnxruntime.so.$ORT_VERSION"

die() { echo "fetch-onnxruntime: $*" >&2; exit 1; }

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*) die "only linux/x86_64 is supported (the npm tarball's CPU library); got $(uname -s)/$(uname -m). Install ONNX Runtime $ORT_VERSION yourself and set ONNXRUNTIME_LIB" ;;
esac

sha() { sha256sum "$1" | cut -d' ' -f1; }

cache_dir="${EAS_NPM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/npm}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# ensure_npm installs Debian's npm when there is none.
ensure_npm() {
	command -v npm >/dev/null && return
	echo "fetch-onnxruntime: npm not found; installing Debian's npm"
	local sudo=""
	[[ "$(id -u)" == 0 ]] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm ||
		die "apt-get install npm failed; install npm yourself or set $1 to a downloaded tarball"
	hash -r
	command -v npm >/dev/null || die "npm still not found after apt-get install npm"
}

# fetch_tarball PACKAGE VERSION SHA256 OVERRIDE_VAR SIZE: prints the path of the
# package's checked tarball, from $OVERRIDE_VAR when set, else npm pack.
# A checked tarball is kept in $cache_dir, outside the repository, so that
# another clone on this machine (a CI run's fresh one) does not download it
# again; a cached file is used only when its sha256 is the pinned one.
fetch_tarball() {
	local pkg="$1" version="$2" want="$3" override="$4" size="$5" tarball
	local cached="$cache_dir/$pkg-$version.tgz"
	tarball="${!override:-}"
	if [[ -z "$tarball" && -f "$cached" && "$(sha "$cached")" == "$want" ]]; then
		echo "fetch-onnxruntime: $pkg@$version from the cache $cached" >&2
		echo "$cached"
		return
	fi
	if [[ -z "$tarball" ]]; then
		ensure_npm "$override"
		echo "fetch-onnxruntime: npm pack $pkg@$version ($size)" >&2
		(cd "$tmp" && npm pack --ignore-scripts --silent "$pkg@$version" >/dev/null) ||
			die "npm pack $pkg@$version failed; check access to the npm registry, or set $override to a downloaded $pkg-$version.tgz"
		tarball="$tmp/$pkg-$version.tgz"
	fi
	[[ -f "$tarball" ]] || die "tarball $tarball not found"
	local got
	got="$(sha "$tarball")"
	[[ "$got" == "$want" ]] || die "sha256 of $tarball is $got, want $want (corrupt download or a republished package)"
	if [[ "$tarball" != "$cached" ]] && mkdir -p "$cache_dir" 2>/dev/null && cp "$tarball" "$cached.tmp.$$" 2>/dev/null; then
		mv -f "$cached.tmp.$$" "$cached"
	fi
	echo "$tarball"
}

# install_member TARBALL MEMBER SHA256 DEST: extracts MEMBER, checks it and
# installs it at DEST (atomically).
install_member() {
	local tarball="$1" member="$2" want="$3" to="$4" out got
	out="$tmp/x"
	mkdir -p "$out"
	tar -xzf "$tarball" -C "$out" "$member" || die "extract $member from $tarball failed"
	got="$(sha "$out/$member")"
	[[ "$got" == "$want" ]] || die "sha256 of extracted $(basename "$member") is $got, want $want"
	mkdir -p "$(dirname "$to")"
	install -m 0644 "$out/$member" "$to.tmp.$$"
	mv -f "$to.tmp.$$" "$to"
	echo "fetch-onnxruntime: installed $to"
}

# The CPU library (the core every mode needs).
if [[ -f "$dest" ]] && [[ "$(sha "$dest")" == "$LIB_SHA256" ]]; then
	echo "fetch-onnxruntime: $dest already present (sha256 ok)"
else
	tarball="$(fetch_tarball onnxruntime-node "$ORT_VERSION" "$TARBALL_SHA256" ONNXRUNTIME_NPM_TARBALL "about 110 MB")"
	install_member "$tarball" "$MEMBER" "$LIB_SHA256" "$dest"
fi
ln -sfn "libonnxruntime.so.$ORT_VERSION" "$dest_dir/libonnxruntime.so"

[[ -n "$gpu" ]] || exit 0

# The CUDA execution provider, beside the core library.
missing=()
for entry in "${GPU_LIBS[@]}"; do
	read -r name want <<<"$entry"
	if [[ -f "$dest_dir/$name" ]] && [[ "$(sha "$dest_dir/$name")" == "$want" ]]; then
		echo "fetch-onnxruntime: $dest_dir/$name already present (sha256 ok)"
	else
		missing+=("$entry")
	fi
done
if ((${#missing[@]} > 0)); then
	tarball="$(fetch_tarball "$GPU_PACKAGE" "$GPU_PACKAGE_VERSION" "$GPU_TARBALL_SHA256" ONNXRUNTIME_GPU_NPM_TARBALL "about 180 MB")"
	for entry in "${missing[@]}"; do
		read -r name want <<<"$entry"
		install_member "$tarball" "$GPU_MEMBER_DIR/$name" "$want" "$dest_dir/$name"
	done
fi
echo "fetch-onnxruntime: CUDA execution provider ready; it also needs the NVIDIA driver and the CUDA 13 / cuDNN 9 libraries on the library path (README.md, \"ONNX models on a GPU\")"
