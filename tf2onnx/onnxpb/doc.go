// Package onnxpb is the generated Go code for the part of ONNX's onnx.proto
// that package tf2onnx writes (onnx.proto beside this file).
//
// It is generated rather than imported because no pure-Go ONNX module is
// among our dependencies, and the translator needs only a few messages.
// Regenerate after editing onnx.proto, from the repository root:
//
//	protoc -I . --go_out=. --go_opt=paths=source_relative tf2onnx/onnxpb/onnx.proto
//
// with protoc-gen-go v1.36.12 (the google.golang.org/protobuf version go.mod pins).
package onnxpb
