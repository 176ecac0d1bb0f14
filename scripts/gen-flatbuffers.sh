#!/usr/bin/env bash
# gen-flatbuffers.sh regenerates the committed FlatBuffers Go code from its
# schema:
#   wire/graphpipe/graphpipe.fbs  -> wire/graphpipe/graphpipefb/*.go  (GraphPipe)
# A normal build does not need it: the generated files are committed. Run it
# (or `make proto`) after editing a .fbs file.
#
# flatc is pinned to Debian 12's flatbuffers-compiler (2.0.8), installed with
# apt-get (sudo unless root) when missing; go.mod pins the runtime the code
# is generated for, github.com/google/flatbuffers v2.0.8+incompatible. Another
# flatc may generate other code: the script then fails, as gen-proto.sh warns.
#
#   scripts/gen-flatbuffers.sh          regenerate in place
#   scripts/gen-flatbuffers.sh --check  regenerate into a temporary folder and
#                                       fail when a committed file differs
set -euo pipefail

FLATC_VERSION=2.0.8

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=scripts/genlib.sh
. "$root/scripts/genlib.sh"
check="$(gen_check_flag "${1:-}")"

gen_need flatc flatbuffers-compiler
if ! flatc --version | grep -q " $FLATC_VERSION\$"; then
	echo "gen-flatbuffers: $(flatc --version); the committed files were made with flatc $FLATC_VERSION (Debian 12's flatbuffers-compiler)" >&2
	exit 1
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
flatc --go --go-namespace graphpipefb -o "$out" wire/graphpipe/graphpipe.fbs

dir=wire/graphpipe/graphpipefb
if $check; then
	if ! diff -ru "$dir" "$out/graphpipefb"; then
		echo "gen-flatbuffers: $dir differs from what wire/graphpipe/graphpipe.fbs generates; run scripts/gen-flatbuffers.sh" >&2
		exit 1
	fi
	echo "gen-flatbuffers: $dir is up to date"
else
	rm -rf "$dir"
	cp -r "$out/graphpipefb" "$dir"
	echo "gen-flatbuffers: generated $dir"
fi
