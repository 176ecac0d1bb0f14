// Package kservegrpc is the KServe v2 / Open Inference Protocol gRPC API
// (package inference, service GRPCInferenceService) as generated Go code,
// plus conversions between its messages and tensor.Tensor. The generated
// files come from grpc_service.proto by `make proto` and are committed, so a build
// needs no protoc.
//
// Tensors we send travel in raw_input_contents / raw_output_contents
// (little-endian bytes; BYTES elements as a 4-byte little-endian length and
// the bytes), which every Triton and KServe peer accepts; tensors we receive
// may use either the raw form or the typed InferTensorContents fields.
package kservegrpc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/eas-server/eas-server/tensor"
)

// MaxElements bounds the element count a received shape may claim, so a
// hostile shape cannot make us allocate without bound.
const MaxElements = 1 << 31

// TensorsFromRequest decodes the inputs of a ModelInferRequest.
func TensorsFromRequest(req *ModelInferRequest) ([]tensor.Tensor, error) {
	ins := req.GetInputs()
	raw := req.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(ins) {
		return nil, fmt.Errorf("raw_input_contents has %d entries for %d inputs; send one per input or none", len(raw), len(ins))
	}
	out := make([]tensor.Tensor, len(ins))
	for i, in := range ins {
		var r []byte
		hasRaw := len(raw) > 0
		if hasRaw {
			r = raw[i]
		}
		t, err := decode(in.GetName(), in.GetDatatype(), in.GetShape(), in.GetContents(), r, hasRaw)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", in.GetName(), err)
		}
		out[i] = t
	}
	return out, nil
}

// TensorsFromResponse decodes the outputs of a ModelInferResponse.
func TensorsFromResponse(resp *ModelInferResponse) ([]tensor.Tensor, error) {
	outs := resp.GetOutputs()
	raw := resp.GetRawOutputContents()
	if len(raw) > 0 && len(raw) != len(outs) {
		return nil, fmt.Errorf("raw_output_contents has %d entries for %d outputs", len(raw), len(outs))
	}
	res := make([]tensor.Tensor, len(outs))
	for i, o := range outs {
		var r []byte
		hasRaw := len(raw) > 0
		if hasRaw {
			r = raw[i]
		}
		t, err := decode(o.GetName(), o.GetDatatype(), o.GetShape(), o.GetContents(), r, hasRaw)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.GetName(), err)
		}
		res[i] = t
	}
	return res, nil
}

// RequestFromTensors builds a ModelInferRequest carrying ins in raw form and
// asking for outputs (nil = all).
func RequestFromTensors(model, version, id string, ins []tensor.Tensor, outputs []string) *ModelInferRequest {
	req := &ModelInferRequest{ModelName: model, ModelVersion: version, Id: id}
	for i := range ins {
		t := &ins[i]
		req.Inputs = append(req.Inputs, &ModelInferRequest_InferInputTensor{Name: t.Name, Datatype: t.DType.String(), Shape: t.Shape})
		req.RawInputContents = append(req.RawInputContents, rawBytes(t))
	}
	for _, name := range outputs {
		req.Outputs = append(req.Outputs, &ModelInferRequest_InferRequestedOutputTensor{Name: name})
	}
	return req
}

// ResponseFromTensors builds a ModelInferResponse carrying outs in raw form.
func ResponseFromTensors(model, version, id string, outs []tensor.Tensor) *ModelInferResponse {
	resp := &ModelInferResponse{ModelName: model, ModelVersion: version, Id: id}
	for i := range outs {
		t := &outs[i]
		resp.Outputs = append(resp.Outputs, &ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: t.DType.String(), Shape: t.Shape})
		resp.RawOutputContents = append(resp.RawOutputContents, rawBytes(t))
	}
	return resp
}

func rawBytes(t *tensor.Tensor) []byte {
	if t.DType != tensor.String {
		return t.Data
	}
	n := 0
	for _, s := range t.Strings {
		n += 4 + len(s)
	}
	b := make([]byte, 0, n)
	for _, s := range t.Strings {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func elements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		if d > 0 && n > MaxElements/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, int64(MaxElements))
		}
		n *= d
	}
	return n, nil
}

func decode(name, datatype string, shape []int64, c *InferTensorContents, raw []byte, hasRaw bool) (tensor.Tensor, error) {
	dt, err := tensor.ParseDType(datatype)
	if err != nil {
		return tensor.Tensor{}, err
	}
	n, err := elements(shape)
	if err != nil {
		return tensor.Tensor{}, err
	}
	t := tensor.Tensor{Name: name, DType: dt, Shape: append([]int64(nil), shape...)}
	if hasRaw {
		if dt == tensor.String {
			t.Strings, err = splitStrings(raw, n)
			return t, err
		}
		if want := n * int64(dt.Size()); int64(len(raw)) != want {
			return tensor.Tensor{}, fmt.Errorf("raw contents hold %d bytes; shape %v of %s needs %d", len(raw), shape, datatype, want)
		}
		t.Data = append([]byte(nil), raw...)
		return t, nil
	}
	return fromContents(t, c, n)
}

func splitStrings(raw []byte, n int64) ([][]byte, error) {
	out := make([][]byte, 0, min(n, int64(len(raw)/4)+1))
	for len(raw) > 0 {
		if len(raw) < 4 {
			return nil, fmt.Errorf("BYTES contents end inside a 4-byte length prefix")
		}
		l := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		if uint64(l) > uint64(len(raw)) {
			return nil, fmt.Errorf("BYTES element of %d bytes runs past the %d bytes left", l, len(raw))
		}
		out = append(out, raw[:l:l])
		raw = raw[l:]
	}
	if int64(len(out)) != n {
		return nil, fmt.Errorf("BYTES contents hold %d elements; the shape needs %d", len(out), n)
	}
	return out, nil
}

// fromContents fills t from the typed fields, which is how clients that do
// not use raw contents send tensors.
func fromContents(t tensor.Tensor, c *InferTensorContents, n int64) (tensor.Tensor, error) {
	var got int
	size := t.DType.Size()
	put := func(i int, f func(b []byte)) {
		f(t.Data[i*size:])
	}
	alloc := func(count int) error {
		got = count
		if int64(count) != n {
			return fmt.Errorf("contents hold %d %s elements; the shape %v needs %d", count, t.DType, t.Shape, n)
		}
		t.Data = make([]byte, int64(size)*n)
		return nil
	}
	var err error
	switch t.DType {
	case tensor.Bool:
		v := c.GetBoolContents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				if x {
					t.Data[i] = 1
				}
			}
		}
	case tensor.Int8, tensor.Int16, tensor.Int32:
		v := c.GetIntContents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				put(i, func(b []byte) {
					switch size {
					case 1:
						b[0] = byte(int8(x))
					case 2:
						binary.LittleEndian.PutUint16(b, uint16(int16(x)))
					default:
						binary.LittleEndian.PutUint32(b, uint32(x))
					}
				})
			}
		}
	case tensor.Int64:
		v := c.GetInt64Contents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				binary.LittleEndian.PutUint64(t.Data[i*8:], uint64(x))
			}
		}
	case tensor.Uint8, tensor.Uint16, tensor.Uint32:
		v := c.GetUintContents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				put(i, func(b []byte) {
					switch size {
					case 1:
						b[0] = byte(x)
					case 2:
						binary.LittleEndian.PutUint16(b, uint16(x))
					default:
						binary.LittleEndian.PutUint32(b, x)
					}
				})
			}
		}
	case tensor.Uint64:
		v := c.GetUint64Contents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				binary.LittleEndian.PutUint64(t.Data[i*8:], x)
			}
		}
	case tensor.Float32:
		v := c.GetFp32Contents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				binary.LittleEndian.PutUint32(t.Data[i*4:], math.Float32bits(x))
			}
		}
	case tensor.Float64:
		v := c.GetFp64Contents()
		if err = alloc(len(v)); err == nil {
			for i, x := range v {
				binary.LittleEndian.PutUint64(t.Data[i*8:], math.Float64bits(x))
			}
		}
	case tensor.String:
		v := c.GetBytesContents()
		got = len(v)
		if int64(got) != n {
			return tensor.Tensor{}, fmt.Errorf("contents hold %d BYTES elements; the shape %v needs %d", got, t.Shape, n)
		}
		t.Strings = v
		return t, nil
	default:
		return tensor.Tensor{}, fmt.Errorf("datatype %s can only be sent in raw contents (raw_input_contents)", t.DType)
	}
	if err != nil {
		return tensor.Tensor{}, err
	}
	return t, nil
}
