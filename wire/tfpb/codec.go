// Package tfpb is the EAS TensorFlow processor's wire format
// (PredictRequest / PredictResponse, docs/protocol.md "TensorFlow protobuf"): the generated
// protobuf code (tf_predict.pb.go, made by scripts/gen-proto.sh; proto
// package tensorflow.eas, which does not change the wire bytes) and the codec
// between it and tensor.Tensor.
//
// DT_HALF and DT_BFLOAT16 travel in float_val, as the EAS Java SDK sends them;
// DT_UINT32 and DT_UINT64 (additions to the SDK's enum, TensorFlow's numbers)
// travel in int64_val.
package tfpb

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/internal/arrayproto"
	"github.com/eas-server/eas-server/wire/internal/notproto"
)

var opts = arrayproto.Options{}

// DefaultSignature is what an empty signature_name means.
const DefaultSignature = "serving_default"

// Request is a decoded PredictRequest.
type Request struct {
	// SignatureName is the requested signature; DefaultSignature when empty.
	SignatureName string
	// Inputs are the named inputs, sorted by name.
	Inputs []tensor.Tensor
	// OutputFilter lists wanted output names; nil means all outputs.
	OutputFilter []string
}

// DecodeRequest parses a PredictRequest. Every error is a
// *badinput.Error (HTTP 400) whose message says what to fix.
func DecodeRequest(body []byte) (*Request, error) {
	var pr PredictRequest
	if err := proto.Unmarshal(body, &pr); err != nil {
		return nil, notproto.Error(body, "tensorflow PredictRequest", err)
	}
	if len(pr.Inputs) == 0 {
		return nil, badinput.Errorf("tensorflow request has no inputs; set PredictRequest.inputs (input name -> ArrayProto)")
	}
	req := &Request{SignatureName: pr.SignatureName, OutputFilter: pr.OutputFilter}
	if req.SignatureName == "" {
		req.SignatureName = DefaultSignature
	}
	if len(req.OutputFilter) == 0 {
		req.OutputFilter = nil
	}
	seen := make(map[string]bool, len(req.OutputFilter))
	for _, o := range req.OutputFilter {
		if o == "" {
			return nil, badinput.Errorf("tensorflow request: output_filter holds an empty name; list output names, or leave it empty for all outputs")
		}
		if seen[o] {
			return nil, badinput.Errorf("tensorflow request: output_filter lists %q twice", o)
		}
		seen[o] = true
	}
	names := make([]string, 0, len(pr.Inputs))
	for name := range pr.Inputs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "" {
			return nil, badinput.Errorf("tensorflow request: an input has an empty name; key inputs by the model's input names")
		}
		t, err := arrayproto.ToTensor(name, toArray(pr.Inputs[name]), opts)
		if err != nil {
			return nil, badinput.Errorf("tensorflow request: input %q: %v", name, err)
		}
		req.Inputs = append(req.Inputs, t)
	}
	return req, nil
}

// EncodeResponse serialises outputs as PredictResponse.outputs, keyed by
// tensor name. Map entries are written in name order, so equal outputs give
// equal bytes.
func EncodeResponse(outputs []tensor.Tensor) ([]byte, error) {
	resp := PredictResponse{Outputs: make(map[string]*ArrayProto, len(outputs))}
	for _, t := range outputs {
		if _, dup := resp.Outputs[t.Name]; dup {
			return nil, fmt.Errorf("encode tensorflow response: two outputs are named %q", t.Name)
		}
		a, err := fromTensor(t)
		if err != nil {
			return nil, fmt.Errorf("encode tensorflow response: %w", err)
		}
		resp.Outputs[t.Name] = a
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(&resp)
}

// EncodeRequest builds a PredictRequest (client side: tests, the load
// generator).
func EncodeRequest(signature string, inputs []tensor.Tensor, outputFilter []string) ([]byte, error) {
	req := PredictRequest{SignatureName: signature, OutputFilter: outputFilter, Inputs: make(map[string]*ArrayProto, len(inputs))}
	for _, t := range inputs {
		a, err := fromTensor(t)
		if err != nil {
			return nil, fmt.Errorf("encode tensorflow request: %w", err)
		}
		req.Inputs[t.Name] = a
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(&req)
}

// DecodeResponse parses a PredictResponse (client side); outputs come back
// sorted by name.
func DecodeResponse(body []byte) ([]tensor.Tensor, error) {
	var resp PredictResponse
	if err := proto.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode tensorflow response: %w", err)
	}
	names := make([]string, 0, len(resp.Outputs))
	for name := range resp.Outputs {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]tensor.Tensor, 0, len(names))
	for _, name := range names {
		t, err := arrayproto.ToTensor(name, toArray(resp.Outputs[name]), opts)
		if err != nil {
			return nil, fmt.Errorf("decode tensorflow response: output %q: %w", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func toArray(a *ArrayProto) *arrayproto.Array {
	if a == nil {
		a = &ArrayProto{}
	}
	return &arrayproto.Array{
		DType:  int32(a.Dtype),
		Shape:  a.GetArrayShape().GetDim(),
		Float:  a.FloatVal,
		Double: a.DoubleVal,
		Int:    a.IntVal,
		String: a.StringVal,
		Int64:  a.Int64Val,
		Bool:   a.BoolVal,
	}
}

func fromTensor(t tensor.Tensor) (*ArrayProto, error) {
	a, err := arrayproto.FromTensor(t, opts)
	if err != nil {
		return nil, err
	}
	return &ArrayProto{
		Dtype:      ArrayDataType(a.DType),
		ArrayShape: &ArrayShape{Dim: a.Shape},
		FloatVal:   a.Float,
		DoubleVal:  a.Double,
		IntVal:     a.Int,
		StringVal:  a.String,
		Int64Val:   a.Int64,
		BoolVal:    a.Bool,
	}, nil
}
