// Package wire holds nothing but this overview: each request format lives in
// its own subpackage, and all of them decode into and encode from
// tensor.Tensor.
//
//   - tfpb: the EAS TensorFlow PredictRequest / PredictResponse
//   - torchpb: the EAS PyTorch pytorch.eas.PredictRequest / PredictResponse
//   - hiepb: the EAS ONNX (HIE) hie.processor.DataProto
//   - caffepb: the EAS Caffe caffe.eas.PredictRequest / PredictResponse
//     (float32 only: other numeric dtypes are converted on encode)
//   - kserve: KServe v2 / Open Inference Protocol JSON and binary tensors
//   - kservegrpc: the KServe v2 gRPC API (GRPCInferenceService) as generated
//     code, and its messages to and from tensor.Tensor
//
// How each tensor dtype travels (ArrayProto is shared by tfpb and torchpb):
//
//	tensor     KServe   ArrayProto dtype / field         HIE data_type
//	Bool       BOOL     DT_BOOL     bool_val (tf),       BOOL 9
//	                                int_val 0/1 (torch)
//	Uint8      UINT8    DT_UINT8    int_val              UINT8 2
//	Uint16     UINT16   DT_UINT16   int_val              UINT16 4
//	Uint32     UINT32   DT_UINT32*  int64_val            UINT32 12
//	Uint64     UINT64   DT_UINT64*  int64_val (2's c.)   UINT64 13
//	Int8       INT8     DT_INT8     int_val              INT8 3
//	Int16      INT16    DT_INT16    int_val              INT16 5
//	Int32      INT32    DT_INT32    int_val              INT32 6
//	Int64      INT64    DT_INT64    int64_val            INT64 7
//	Float16    FP16     DT_HALF     float_val            FLOAT16 10
//	BFloat16   BF16     DT_BFLOAT16 float_val            BFLOAT16 16
//	Float32    FP32     DT_FLOAT    float_val            FLOAT 1
//	Float64    FP64     DT_DOUBLE   double_val           DOUBLE 11
//	String     BYTES    DT_STRING   string_val           STRING 8 (string_data)
//
// (*) TensorFlow's numbers 22 and 23, added to the SDK's enum. Integer
// values are range-checked against the dtype on decode; FP16/BF16 values
// that overflow are an error, not infinity.
//
// The protobuf packages commit their generated code; scripts/gen-proto.sh
// regenerates it. Each .proto is registered under its repository path and a
// distinct proto package, so all three load into one binary without a
// registry conflict. Decoders of request bodies return *badinput.Error
// for anything the caller got wrong.
package wire
