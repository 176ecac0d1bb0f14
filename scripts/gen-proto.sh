#!/usr/bin/env bash
# gen-proto.sh regenerates every committed protobuf Go file (*.pb.go) from its
# .proto:
#   wire/tfpb/tf_predict.proto          EAS TensorFlow request/response
#   wire/torchpb/torch_predict.proto    EAS PyTorch request/response
#   wire/hiepb/hie_data.proto           EAS ONNX (HIE) DataProto
#   engines/onnxbuild/onnxpb/onnx.proto         the ONNX subset the translators write
#   engines/caffe/netpb/caffe.proto             the Caffe network format caffe reads
#   wire/caffepb/caffe_predict.proto    EAS Caffe request/response
#   wire/kservegrpc/grpc_service.proto  KServe v2 gRPC (messages and service)
# A normal build does not need it: the .pb.go files are committed. Run it
# (or `make proto`) after editing a .proto file.
#
# The generators are pinned to the versions in the committed files' headers:
# protoc-gen-go v1.36.12 (the google.golang.org/protobuf version go.mod pins)
# and protoc-gen-go-grpc v1.6.2, installed with `go install` into
# $(go env GOPATH)/bin when missing or at another version. protoc comes from
# Debian 12's protobuf-compiler (3.21.12, the version in the headers),
# installed with apt-get (sudo unless root) when missing; another protoc
# version works but changes the version line of every header.
#
#   scripts/gen-proto.sh          regenerate in place
#   scripts/gen-proto.sh --check  regenerate into a temporary folder and fail
#                                 when a committed file differs
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
PROTOC_VERSION=3.21.12

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=scripts/genlib.sh
. "$root/scripts/genlib.sh"
check="$(gen_check_flag "${1:-}")"

gen_need protoc protobuf-compiler
if ! protoc --version | grep -q " $PROTOC_VERSION\$"; then
	echo "gen-proto: warning: $(protoc --version), the committed files were made with $PROTOC_VERSION; their headers will change" >&2
fi

gobin="$(go env GOPATH)/bin"
if ! "$gobin/protoc-gen-go" --version 2>/dev/null | grep -q " ${PROTOC_GEN_GO_VERSION}\$"; then
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
if ! "$gobin/protoc-gen-go-grpc" --version 2>/dev/null | grep -q " ${PROTOC_GEN_GO_GRPC_VERSION#v}\$"; then
	go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"
fi
# $gobin first, so that another protoc-gen-go on PATH is not picked.
export PATH="$gobin:$PATH"

out="$root"
if $check; then
	out="$(mktemp -d)"
	trap 'rm -rf "$out"' EXIT
fi

# These are compiled from the repository root, so that each registers under
# its path (wire/<pkg>/<file>.proto), unique in the global protobuf registry.
root_protos=(
	wire/tfpb/tf_predict.proto
	wire/torchpb/torch_predict.proto
	wire/hiepb/hie_data.proto
	engines/onnxbuild/onnxpb/onnx.proto
	engines/caffe/netpb/caffe.proto
	wire/caffepb/caffe_predict.proto
)
protoc -I . --go_out="$out" --go_opt=paths=source_relative "${root_protos[@]}"

# The KServe file registers as plain grpc_service.proto, the name Triton's and
# KServe's copies use (gRPC reflection clients look it up by that name), so it
# is compiled from its own folder.
mkdir -p "$out/wire/kservegrpc"
protoc -I wire/kservegrpc \
	--go_out="$out/wire/kservegrpc" --go_opt=paths=source_relative \
	--go-grpc_out="$out/wire/kservegrpc" --go-grpc_opt=paths=source_relative \
	grpc_service.proto

generated=(
	wire/tfpb/tf_predict.pb.go
	wire/torchpb/torch_predict.pb.go
	wire/hiepb/hie_data.pb.go
	engines/onnxbuild/onnxpb/onnx.pb.go
	engines/caffe/netpb/caffe.pb.go
	wire/caffepb/caffe_predict.pb.go
	wire/kservegrpc/grpc_service.pb.go
	wire/kservegrpc/grpc_service_grpc.pb.go
)

# Every committed .pb.go must come from this script.
missing="$(comm -23 <(git ls-files '*.pb.go' | sort) <(printf '%s\n' "${generated[@]}" | sort))"
if [[ -n "$missing" ]]; then
	echo "gen-proto: these committed files are not generated here; add their .proto to this script:" >&2
	echo "$missing" >&2
	exit 1
fi

if $check; then
	status=0
	for f in "${generated[@]}"; do
		diff -u "$f" "$out/$f" || status=1
	done
	if [[ $status != 0 ]]; then
		echo "gen-proto: the committed files differ from what the .proto files generate; run scripts/gen-proto.sh" >&2
		exit 1
	fi
	echo "gen-proto: all ${#generated[@]} files are up to date"
else
	echo "gen-proto: generated ${generated[*]}"
fi
