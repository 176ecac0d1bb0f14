#!/usr/bin/env bash
# fetch-onnxruntime.sh installs the ONNX Runtime shared library that the
# onnx/pytorch processors load at run time.
#
# The library is not packaged by Debian, so it is taken from the npm package
# onnxruntime-node (MIT): `npm pack` downloads the tarball WITHOUT running its
# install script (which would try to download CUDA parts from a blocked host),
# and only package/bin/napi-v6/linux/x64/libonnxruntime.so.1 (CPU build) is
# extracted. Both the tarball and the library are checked against pinned
# sha256 sums, so a changed upstream artefact fails loudly.
#
# Usage: scripts/fetch-onnxruntime.sh [DEST_DIR]
#   DEST_DIR defaults to <repo>/third_party/onnxruntime/lib. The library lands
#   at DEST_DIR/libonnxruntime.so.1.24.1 with a libonnxruntime.so symlink.
#   Idempotent: when the file is present with the pinned hash, nothing is done.
# npm comes from Debian (apt-get install npm, with sudo unless root) when it
# is missing.
# Override ONNXRUNTIME_NPM_TARBALL=/path/onnxruntime-node-1.24.1.tgz to use a
# tarball already on disk (offline machines).
set -euo pipefail

ORT_VERSION=1.24.1
TARBALL_SHA256=57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
LIB_SHA256=53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4
MEMBER=package/bin/napi-v6/linux/x64/libonnxruntime.so.1

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest_dir="${1:-$repo_root/third_party/onnxruntime/lib}"
dest="$dest_dir/libonnxruntime.so.$ORT_VERSION"

die() { echo "fetch-onnxruntime: $*" >&2; exit 1; }

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*) die "only linux/x86_64 is supported (the npm tarball's CPU library); got $(uname -s)/$(uname -m). Install ONNX Runtime $ORT_VERSION yourself and set ONNXRUNTIME_LIB" ;;
esac

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$dest" ]] && [[ "$(sha "$dest")" == "$LIB_SHA256" ]]; then
	ln -sfn "libonnxruntime.so.$ORT_VERSION" "$dest_dir/libonnxruntime.so"
	echo "fetch-onnxruntime: $dest already present (sha256 ok)"
	exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

tarball="${ONNXRUNTIME_NPM_TARBALL:-}"
if [[ -z "$tarball" ]]; then
	if ! command -v npm >/dev/null; then
		# A fresh Debian with Go has no npm: take Debian's (with sudo unless root).
		echo "fetch-onnxruntime: npm not found; installing Debian's npm"
		sudo=""
		[[ "$(id -u)" == 0 ]] || sudo="sudo"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm ||
			die "apt-get install npm failed; install npm yourself or set ONNXRUNTIME_NPM_TARBALL to a downloaded onnxruntime-node-$ORT_VERSION.tgz"
		hash -r
		command -v npm >/dev/null || die "npm still not found after apt-get install npm"
	fi
	echo "fetch-onnxruntime: npm pack onnxruntime-node@$ORT_VERSION (about 85 MB)"
	(cd "$tmp" && npm pack --ignore-scripts --silent "onnxruntime-node@$ORT_VERSION" >/dev/null) ||
		die "npm pack onnxruntime-node@$ORT_VERSION failed; check access to the npm registry"
	tarball="$tmp/onnxruntime-node-$ORT_VERSION.tgz"
fi
[[ -f "$tarball" ]] || die "tarball $tarball not found"
got="$(sha "$tarball")"
[[ "$got" == "$TARBALL_SHA256" ]] || die "sha256 of $tarball is $got, want $TARBALL_SHA256 (corrupt download or a republished package)"

tar -xzf "$tarball" -C "$tmp" "$MEMBER" || die "extract $MEMBER from $tarball failed"
got="$(sha "$tmp/$MEMBER")"
[[ "$got" == "$LIB_SHA256" ]] || die "sha256 of extracted libonnxruntime.so.1 is $got, want $LIB_SHA256"

mkdir -p "$dest_dir"
install -m 0644 "$tmp/$MEMBER" "$dest.tmp.$$"
mv -f "$dest.tmp.$$" "$dest"
ln -sfn "libonnxruntime.so.$ORT_VERSION" "$dest_dir/libonnxruntime.so"
echo "fetch-onnxruntime: installed $dest"
