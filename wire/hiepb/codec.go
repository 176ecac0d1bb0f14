// Package hiepb is the EAS ONNX (HIE) processor's wire format
// (hie.processor.DataProto, docs/protocol.md "ONNX HIE protobuf"), used for both the request
// and the response: the generated protobuf code (hie_data.pb.go, made by
// scripts/gen-proto.sh) and the codec between it and tensor.Tensor.
//
// data_type uses ONNX's TensorProto.DataType numbers. Fixed-size elements
// travel row-major little-endian in raw_data; STRING (8) elements travel in
// string_data, field 6 as in ONNX's own TensorProto, since raw_data cannot
// delimit them.
package hiepb

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/internal/notproto"
)

// The ONNX TensorProto.DataType numbers this format uses.
const (
	Undefined = 0
	Float     = 1
	Uint8     = 2
	Int8      = 3
	Uint16    = 4
	Int16     = 5
	Int32     = 6
	Int64     = 7
	String    = 8
	Bool      = 9
	Float16   = 10
	Double    = 11
	Uint32    = 12
	Uint64    = 13
	BFloat16  = 16
)

var toDType = map[int32]tensor.DType{
	Float: tensor.Float32, Uint8: tensor.Uint8, Int8: tensor.Int8, Uint16: tensor.Uint16,
	Int16: tensor.Int16, Int32: tensor.Int32, Int64: tensor.Int64, String: tensor.String,
	Bool: tensor.Bool, Float16: tensor.Float16, Double: tensor.Float64, Uint32: tensor.Uint32,
	Uint64: tensor.Uint64, BFloat16: tensor.BFloat16,
}

var fromDType = func() map[tensor.DType]int32 {
	m := make(map[tensor.DType]int32, len(toDType))
	for k, v := range toDType {
		m[v] = k
	}
	return m
}()

const supported = "FLOAT 1, UINT8 2, INT8 3, UINT16 4, INT16 5, INT32 6, INT64 7, STRING 8, BOOL 9, FLOAT16 10, DOUBLE 11, UINT32 12, UINT64 13, BFLOAT16 16"

// DataType returns the ONNX data_type number of d, or false when d has none.
func DataType(d tensor.DType) (int32, bool) {
	v, ok := fromDType[d]
	return v, ok
}

// DecodeDataProto parses a hie.processor.DataProto into tensors, in message
// order. Every tensor must have a unique, non-empty name (the model input it
// feeds), a supported data_type and exactly the bytes its dims need. Errors
// are *badinput.Error (HTTP 400) with the fix in the message. The
// tensors alias the decoded raw_data, not body.
func DecodeDataProto(body []byte) ([]tensor.Tensor, error) {
	var dp DataProto
	if err := proto.Unmarshal(body, &dp); err != nil {
		return nil, notproto.Error(body, "hie.processor.DataProto", err)
	}
	if len(dp.Tensors) == 0 {
		return nil, badinput.Errorf("onnx request has no tensors; add one TensorProto per model input to DataProto.tensors")
	}
	out := make([]tensor.Tensor, 0, len(dp.Tensors))
	seen := make(map[string]bool, len(dp.Tensors))
	for i, tp := range dp.Tensors {
		t, err := toTensor(tp)
		if err != nil {
			return nil, badinput.Errorf("onnx request: tensors[%d] (%q): %v", i, tp.GetName(), err)
		}
		if t.Name == "" {
			return nil, badinput.Errorf("onnx request: tensors[%d] has no name; set TensorProto.name to a model input name", i)
		}
		if seen[t.Name] {
			return nil, badinput.Errorf("onnx request: tensor %q appears more than once; send each input once", t.Name)
		}
		seen[t.Name] = true
		out = append(out, t)
	}
	return out, nil
}

func toTensor(tp *TensorProto) (tensor.Tensor, error) {
	dt, ok := toDType[tp.DataType]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("data_type %d is not supported; use one of %s", tp.DataType, supported)
	}
	n, err := tensor.Elements(tp.Dims)
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("dims: %w", err)
	}
	if dt == tensor.String {
		if len(tp.RawData) > 0 {
			return tensor.Tensor{}, fmt.Errorf("STRING tensors carry their elements in string_data (field 6), but raw_data holds %d bytes", len(tp.RawData))
		}
		if int64(len(tp.StringData)) != n {
			return tensor.Tensor{}, fmt.Errorf("dims %s need %d elements in string_data, got %d", tensor.FormatShape(tp.Dims), n, len(tp.StringData))
		}
		return tensor.Tensor{Name: tp.Name, DType: dt, Shape: shapeOf(tp.Dims), Strings: tp.StringData}, nil
	}
	if len(tp.StringData) > 0 {
		return tensor.Tensor{}, fmt.Errorf("data_type %d carries its elements in raw_data, but string_data holds %d elements", tp.DataType, len(tp.StringData))
	}
	size := int64(dt.Size())
	if int64(len(tp.RawData)) != n*size {
		return tensor.Tensor{}, fmt.Errorf("dims %s of %s need %d bytes of raw_data (%d elements of %d bytes), got %d",
			tensor.FormatShape(tp.Dims), dt, n*size, n, size, len(tp.RawData))
	}
	t := tensor.FromBytes(tp.Name, dt, tp.Dims, tp.RawData)
	if t.Data == nil {
		t.Data = []byte{}
	}
	if err := t.Validate(); err != nil { // BOOL bytes
		return tensor.Tensor{}, err
	}
	return t, nil
}

func shapeOf(d []int64) []int64 { return append([]int64{}, d...) }

// EncodeDataProto serialises tensors, in order, as a DataProto: the response
// of the ONNX processor (and the request, client side).
func EncodeDataProto(ts []tensor.Tensor) ([]byte, error) {
	dp := DataProto{Tensors: make([]*TensorProto, 0, len(ts))}
	for _, t := range ts {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("encode onnx data: %w", err)
		}
		dt, ok := fromDType[t.DType]
		if !ok {
			return nil, fmt.Errorf("encode onnx data: tensor %q: dtype %s has no ONNX data_type", t.Name, t.DType)
		}
		tp := &TensorProto{Name: t.Name, Dims: t.Shape, DataType: dt}
		if t.DType == tensor.String {
			tp.StringData = t.Strings
		} else {
			tp.RawData = t.Data
		}
		dp.Tensors = append(dp.Tensors, tp)
	}
	return proto.Marshal(&dp)
}

// DecodeResponse parses a DataProto response (client side) with the same
// checks as a request, but without the *badinput.Error wrapping.
func DecodeResponse(body []byte) ([]tensor.Tensor, error) {
	var dp DataProto
	if err := proto.Unmarshal(body, &dp); err != nil {
		return nil, fmt.Errorf("decode onnx response: %w", err)
	}
	out := make([]tensor.Tensor, 0, len(dp.Tensors))
	for i, tp := range dp.Tensors {
		t, err := toTensor(tp)
		if err != nil {
			return nil, fmt.Errorf("decode onnx response: tensors[%d] (%q): %w", i, tp.GetName(), err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Supported lists the data_type numbers this codec accepts.
func Supported() string { return supported }
