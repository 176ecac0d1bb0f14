#!/usr/bin/env bash
# gpu-bundle.sh packs what scripts/bench-gpu.sh needs besides the source
# tree, for a GPU machine with no Go toolchain and no registry access:
# bin/eas-server (stripped), bin/onnx.test (processors/onnx's tests) and
# third_party/onnxruntime/lib with the CUDA provider (make deps GPU=1).
# The provider alone is about 230 MB, so the bundle (xz, about 200 MB) is
# split into parts of PART_MB MiB for transports that limit one transfer.
#
# Usage: scripts/gpu-bundle.sh [DEST]   (default .gpu, ignored by git)
#   writes DEST/eas-gpu.tar.xz.00, .01, ...
# On the GPU machine, in a copy of the same commit's source tree:
#   cat DEST/eas-gpu.tar.xz.* | xz -d | tar -x    # bin/ and third_party/
#   PREBUILT=1 bash scripts/bench-gpu.sh
# Env: PART_MB (default 44).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dest=${1:-.gpu}
part_mb=${PART_MB:-44}

make -s deps GPU=1 >/dev/null
go build -trimpath -ldflags='-s -w' -o bin/eas-server ./cmd/eas-server
go test -c -ldflags='-s -w' -o bin/onnx.test ./processors/onnx
rm -rf "$dest"
mkdir -p "$dest"
tar -c bin/eas-server bin/onnx.test third_party/onnxruntime/lib | xz -T0 -6 |
	split -b "${part_mb}m" -d - "$dest/eas-gpu.tar.xz."
ls -l "$dest"
echo "gpu-bundle: on the GPU machine: cat $dest/eas-gpu.tar.xz.* | xz -d | tar -x && PREBUILT=1 bash scripts/bench-gpu.sh" >&2
