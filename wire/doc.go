// Package wire holds nothing but this overview: each request format lives in
// its own subpackage, and all of them decode into and encode from
// tensor.Tensor.
//
//   - tfpb: the EAS TensorFlow PredictRequest / PredictResponse
//   - torchpb: the EAS PyTorch pytorch.eas.PredictRequest / PredictResponse
//   - hiepb: the EAS ONNX (HIE) hie.processor.DataProto
//   - kserve: KServe v2 / Open Inference Protocol JSON and binary tensors
//
// The protobuf packages commit their generated code; scripts/gen-proto.sh
// regenerates it. Each .proto is registered under its repository path and a
// distinct proto package, so all three load into one binary without a
// registry conflict. Decoders of request bodies return *processors.InputError
// for anything the caller got wrong.
package wire
