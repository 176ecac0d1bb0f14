// Package onnxpb is the generated Go code for the part of ONNX's onnx.proto
// that package onnxbuild writes for the translators (tf2onnx, caffe) (onnx.proto beside this file).
//
// It is generated rather than imported because no pure-Go ONNX module is
// among our dependencies, and the translator needs only a few messages.
// Regenerate after editing onnx.proto with `make proto` (scripts/gen-proto.sh,
// the one recipe for every generated file of the repository).
package onnxpb
