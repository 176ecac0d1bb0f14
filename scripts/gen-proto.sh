#!/usr/bin/env bash
# gen-proto.sh regenerates the committed protobuf Go code under wire/.
# A normal build does not need it: the .pb.go files are committed. Run it after
# editing a .proto file. It installs protoc from Debian (protobuf-compiler) and
# protoc-gen-go at the version go.mod pins, when they are missing.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if ! command -v protoc >/dev/null 2>&1; then
	apt_get="apt-get"
	if [ "$(id -u)" != 0 ]; then apt_get="sudo apt-get"; fi
	$apt_get update
	DEBIAN_FRONTEND=noninteractive $apt_get install -y protobuf-compiler
fi

gobin="$(go env GOPATH)/bin"
if [ ! -x "$gobin/protoc-gen-go" ] || ! "$gobin/protoc-gen-go" --version 2>/dev/null | grep -q "${PROTOC_GEN_GO_VERSION}"; then
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
export PATH="$gobin:$PATH"

# Each .proto is compiled from the repository root so that its registered file
# name (wire/<pkg>/<file>.proto) is unique in the global protobuf registry.
protos=(wire/tfpb/tf_predict.proto wire/torchpb/torch_predict.proto wire/hiepb/hie_data.proto)
protoc -I . --go_out=. --go_opt=paths=source_relative "${protos[@]}"
echo "generated: ${protos[*]/%.proto/.pb.go}"
