#!/bin/sh
# Regenerates the committed Go code from grpc_service.proto. Needs protoc
# (Debian protobuf-compiler) and, on PATH or in $(go env GOPATH)/bin:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
set -eu
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  grpc_service.proto
