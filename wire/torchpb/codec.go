// Package torchpb is the EAS PyTorch processor's wire format
// (pytorch.eas.PredictRequest / PredictResponse, docs/protocol.md "PyTorch protobuf"): the
// generated protobuf code (torch_predict.pb.go, made by scripts/gen-proto.sh)
// and the codec between it and tensor.Tensor.
//
// The PyTorch ArrayProto has no bool_val, so DT_BOOL travels as 0/1 in
// int_val; DT_HALF and DT_BFLOAT16 travel in float_val; DT_UINT32 and
// DT_UINT64 (additions to the SDK's enum) travel in int64_val.
package torchpb

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/internal/arrayproto"
	"github.com/eas-server/eas-server/wire/internal/notproto"
)

var opts = arrayproto.Options{BoolInInt: true}

// Request is a decoded PredictRequest.
type Request struct {
	// Inputs holds the positional inputs first, named after the model's input
	// order, then the map_inputs sorted by name.
	Inputs []tensor.Tensor
	// OutputFilter lists wanted output indexes; empty means all outputs.
	OutputFilter []int32
	// DebugLevel is passed through; the server does not act on it.
	DebugLevel int32
}

// DecodeRequest parses a pytorch.eas.PredictRequest. inputNames is the
// model's input order: positional input i gets inputNames[i]. Every error is
// a *badinput.Error (HTTP 400) whose message says what to fix.
func DecodeRequest(body []byte, inputNames []string) (*Request, error) {
	var pr PredictRequest
	if err := proto.Unmarshal(body, &pr); err != nil {
		return nil, notproto.Error(body, "pytorch.eas.PredictRequest", err)
	}
	if len(pr.Inputs) == 0 && len(pr.MapInputs) == 0 {
		return nil, badinput.Errorf("pytorch request has no inputs; set PredictRequest.inputs (by position) or map_inputs (by name)")
	}
	if len(pr.Inputs) > len(inputNames) {
		return nil, badinput.Errorf("pytorch request has %d positional inputs but the model takes %d (%s)",
			len(pr.Inputs), len(inputNames), arrayproto.Join(inputNames))
	}
	req := &Request{OutputFilter: pr.OutputFilter, DebugLevel: pr.DebugLevel}
	seen := make(map[string]bool, len(pr.Inputs)+len(pr.MapInputs))
	for i, a := range pr.Inputs {
		name := inputNames[i]
		t, err := arrayproto.ToTensor(name, toArray(a), opts)
		if err != nil {
			return nil, badinput.Errorf("pytorch request: inputs[%d] (%q): %v", i, name, err)
		}
		seen[name] = true
		req.Inputs = append(req.Inputs, t)
	}
	names := make([]string, 0, len(pr.MapInputs))
	for name := range pr.MapInputs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if seen[name] {
			return nil, badinput.Errorf("pytorch request: input %q is given both by position and in map_inputs; send it once", name)
		}
		t, err := arrayproto.ToTensor(name, toArray(pr.MapInputs[name]), opts)
		if err != nil {
			return nil, badinput.Errorf("pytorch request: map_inputs[%q]: %v", name, err)
		}
		req.Inputs = append(req.Inputs, t)
	}
	return req, nil
}

// OutputNames maps an output_filter of indexes onto the model's output names
// (in filter order). An empty filter returns nil, meaning all outputs.
func OutputNames(filter []int32, outputNames []string) ([]string, error) {
	if len(filter) == 0 {
		return nil, nil
	}
	out := make([]string, len(filter))
	for i, idx := range filter {
		if idx < 0 || int(idx) >= len(outputNames) {
			return nil, badinput.Errorf("pytorch request: output_filter[%d] = %d, but the model has %d outputs (indexes 0..%d: %s)",
				i, idx, len(outputNames), len(outputNames)-1, arrayproto.Join(outputNames))
		}
		out[i] = outputNames[idx]
	}
	return out, nil
}

// EncodeResponse serialises outputs, in order, as PredictResponse.outputs.
// map_outputs is left empty: EAS clients read outputs by position.
func EncodeResponse(outputs []tensor.Tensor) ([]byte, error) {
	var resp PredictResponse
	for _, t := range outputs {
		a, err := fromTensor(t)
		if err != nil {
			return nil, fmt.Errorf("encode pytorch response: %w", err)
		}
		resp.Outputs = append(resp.Outputs, a)
	}
	return proto.Marshal(&resp)
}

// EncodeRequest builds a PredictRequest, the client side of the protocol
// (tests, the load generator). With named=false the inputs go positionally in
// the given order; with named=true they go in map_inputs by their names.
func EncodeRequest(inputs []tensor.Tensor, named bool, outputFilter []int32) ([]byte, error) {
	req := PredictRequest{OutputFilter: outputFilter}
	if named {
		req.MapInputs = make(map[string]*ArrayProto, len(inputs))
	}
	for _, t := range inputs {
		a, err := fromTensor(t)
		if err != nil {
			return nil, fmt.Errorf("encode pytorch request: %w", err)
		}
		if named {
			req.MapInputs[t.Name] = a
		} else {
			req.Inputs = append(req.Inputs, a)
		}
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(&req)
}

// DecodeResponse parses a PredictResponse (client side). outputs are named
// from outputNames by position (or "output__<i>" beyond it, as the server
// names forward's results); map_outputs follow, sorted by name.
func DecodeResponse(body []byte, outputNames []string) ([]tensor.Tensor, error) {
	var resp PredictResponse
	if err := proto.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode pytorch response: %w", err)
	}
	var out []tensor.Tensor
	for i, a := range resp.Outputs {
		name := fmt.Sprintf("output__%d", i)
		if i < len(outputNames) {
			name = outputNames[i]
		}
		t, err := arrayproto.ToTensor(name, toArray(a), opts)
		if err != nil {
			return nil, fmt.Errorf("decode pytorch response: outputs[%d]: %w", i, err)
		}
		out = append(out, t)
	}
	names := make([]string, 0, len(resp.MapOutputs))
	for name := range resp.MapOutputs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t, err := arrayproto.ToTensor(name, toArray(resp.MapOutputs[name]), opts)
		if err != nil {
			return nil, fmt.Errorf("decode pytorch response: map_outputs[%q]: %w", name, err)
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
	}, nil
}
