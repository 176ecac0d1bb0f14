// Package caffepb is the EAS Caffe processor's wire format
// (caffe.eas.PredictRequest / PredictResponse, docs/protocol.md "Caffe
// protobuf"): the generated protobuf code (caffe_predict.pb.go, made by
// scripts/gen-proto.sh) and the codec between it and tensor.Tensor.
//
// Caffe blobs are float32 only, so every tensor is FP32 and every ArrayProto
// carries an N-D shape (at most 32 axes, Caffe's kMaxBlobAxes) and one float
// per element in data. The shared wire/internal/arrayproto does not apply:
// this ArrayProto has no dtype and a single value field.
package caffepb

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/internal/notproto"
)

// MaxAxes is Caffe's kMaxBlobAxes: a blob has at most this many dims. It also
// keeps error messages that quote a shape short.
const MaxAxes = 32

// Request is a decoded PredictRequest.
type Request struct {
	// Inputs are the FP32 input blobs, in request order.
	Inputs []tensor.Tensor
	// OutputFilter lists wanted output blob names; nil means all outputs.
	OutputFilter []string
}

// DecodeRequest parses a caffe.eas.PredictRequest. When input_name is empty
// the inputs are positional and input i gets inputNames[i] (the network's
// input blobs in order); otherwise input_name names input_data one to one.
// Every error is a *badinput.Error (HTTP 400) whose message says what to fix.
func DecodeRequest(body []byte, inputNames []string) (*Request, error) {
	var pr PredictRequest
	if err := proto.Unmarshal(body, &pr); err != nil {
		return nil, notproto.Error(body, "caffe.eas.PredictRequest", err)
	}
	if len(pr.InputData) == 0 {
		return nil, badinput.Errorf("caffe request has no inputs; add one ArrayProto per input blob to PredictRequest.input_data (names in input_name, or leave input_name empty to go by position)")
	}
	names := pr.InputName
	if len(names) == 0 {
		if len(pr.InputData) > len(inputNames) {
			return nil, badinput.Errorf("caffe request has %d positional inputs (input_name is empty) but the model takes %d (%s); send at most %d, or name them in input_name",
				len(pr.InputData), len(inputNames), join(inputNames), len(inputNames))
		}
		names = inputNames[:len(pr.InputData)]
	} else if len(names) != len(pr.InputData) {
		return nil, badinput.Errorf("caffe request has %d input_name entries but %d input_data arrays; give one name per array, or no names to go by position",
			len(names), len(pr.InputData))
	} else if i := slices.Index(names, ""); i >= 0 {
		return nil, badinput.Errorf("caffe request: input_name[%d] is empty; set it to an input blob name", i)
	}
	req := &Request{Inputs: make([]tensor.Tensor, 0, len(pr.InputData))}
	seen := make(map[string]bool, len(names))
	for i, a := range pr.InputData {
		name := names[i]
		if seen[name] {
			return nil, badinput.Errorf("caffe request: input %q is given more than once; send each input blob once", name)
		}
		seen[name] = true
		t, err := toTensor(name, a, true)
		if err != nil {
			return nil, badinput.Errorf("caffe request: input_data[%d] (%q): %v", i, name, err)
		}
		req.Inputs = append(req.Inputs, t)
	}
	if len(pr.OutputFilter) > 0 {
		req.OutputFilter = pr.OutputFilter
	}
	seenOut := make(map[string]bool, len(req.OutputFilter))
	for i, o := range req.OutputFilter {
		if o == "" {
			return nil, badinput.Errorf("caffe request: output_filter[%d] is empty; list output blob names, or leave output_filter empty for all outputs", i)
		}
		if seenOut[o] {
			return nil, badinput.Errorf("caffe request: output_filter lists %q twice; list each output blob once", o)
		}
		seenOut[o] = true
	}
	return req, nil
}

// EncodeResponse serialises outputs, in order, as output_name / output_data.
// Caffe clients read only floats, so other numeric dtypes are converted to
// FP32 (INT64, UINT64 and FP64 may lose precision); BOOL and BYTES are an
// error.
func EncodeResponse(outputs []tensor.Tensor) ([]byte, error) {
	var resp PredictResponse
	for _, t := range outputs {
		a, err := fromTensor(t)
		if err != nil {
			return nil, fmt.Errorf("encode caffe response: %w", err)
		}
		resp.OutputName = append(resp.OutputName, t.Name)
		resp.OutputData = append(resp.OutputData, a)
	}
	return proto.Marshal(&resp)
}

// EncodeRequest builds a PredictRequest, the client side of the protocol
// (tests, tools). Inputs are named in input_name; when every input's name is
// empty, input_name is left out and the server names them by position.
// Numeric inputs are converted to FP32 as in EncodeResponse.
func EncodeRequest(inputs []tensor.Tensor, outputFilter []string) ([]byte, error) {
	req := PredictRequest{OutputFilter: outputFilter}
	named := 0
	for _, t := range inputs {
		if t.Name != "" {
			named++
		}
	}
	if named != 0 && named != len(inputs) {
		return nil, fmt.Errorf("encode caffe request: %d of %d inputs are named; name all of them, or none to send them by position", named, len(inputs))
	}
	for _, t := range inputs {
		a, err := fromTensor(t)
		if err != nil {
			return nil, fmt.Errorf("encode caffe request: %w", err)
		}
		if named > 0 {
			req.InputName = append(req.InputName, t.Name)
		}
		req.InputData = append(req.InputData, a)
	}
	return proto.Marshal(&req)
}

// DecodeResponse parses a PredictResponse (client side) into FP32 tensors
// named from output_name, in order. Unlike DecodeRequest it accepts what
// EncodeResponse can produce from a model's outputs: 0-D and empty blobs.
func DecodeResponse(body []byte) ([]tensor.Tensor, error) {
	var resp PredictResponse
	if err := proto.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode caffe response: %w", err)
	}
	if len(resp.OutputName) != len(resp.OutputData) {
		return nil, fmt.Errorf("decode caffe response: %d output_name entries but %d output_data arrays", len(resp.OutputName), len(resp.OutputData))
	}
	out := make([]tensor.Tensor, 0, len(resp.OutputData))
	for i, a := range resp.OutputData {
		t, err := toTensor(resp.OutputName[i], a, false)
		if err != nil {
			return nil, fmt.Errorf("decode caffe response: output_data[%d] (%q): %w", i, resp.OutputName[i], err)
		}
		out = append(out, t)
	}
	return out, nil
}

// toTensor checks a's shape against its data and makes an FP32 tensor that
// takes the decoded data over. strict (requests) also refuses 0-D shapes and
// zero dims, which no Caffe input blob has.
func toTensor(name string, a *ArrayProto, strict bool) (tensor.Tensor, error) {
	data := a.GetData()
	if a.GetShape() == nil {
		return tensor.Tensor{}, fmt.Errorf("shape is missing (data holds %d values); set ArrayProto.shape.dim to the blob's dims, e.g. [1,3,224,224] for N,C,H,W: Caffe blobs are N-D", len(data))
	}
	dims := a.GetShape().GetDim()
	if len(dims) > MaxAxes {
		return tensor.Tensor{}, fmt.Errorf("shape has %d dims; Caffe blobs have at most %d", len(dims), MaxAxes)
	}
	if strict && len(dims) == 0 {
		return tensor.Tensor{}, fmt.Errorf("shape has no dims (data holds %d values); set shape.dim to the blob's dims, e.g. [%d] for a vector: Caffe blobs are N-D", len(data), len(data))
	}
	for i, d := range dims {
		if d < 0 {
			return tensor.Tensor{}, fmt.Errorf("shape %s: dim %d is %d; dims must be >= %d", tensor.FormatShape(dims), i, d, minDim(strict))
		}
		if d == 0 && strict {
			return tensor.Tensor{}, fmt.Errorf("shape %s has no elements (dim %d is 0); every dim must be >= 1", tensor.FormatShape(dims), i)
		}
	}
	// Elements bounds the product, so a huge dim neither overflows nor
	// allocates: it fails here or on the count check below.
	n, err := tensor.Elements(dims)
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("%w; check the dims", err)
	}
	if int64(len(data)) != n {
		return tensor.Tensor{}, fmt.Errorf("shape %s needs %d values in data, got %d; send one float per element", tensor.FormatShape(dims), n, len(data))
	}
	// data was decoded for this array alone: the tensor takes it over
	// instead of copying the request a second time.
	return tensor.Own(name, dims, data), nil
}

func minDim(strict bool) int {
	if strict {
		return 1
	}
	return 0
}

// fromTensor converts a valid numeric tensor into an ArrayProto, as FP32.
func fromTensor(t tensor.Tensor) (*ArrayProto, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	a := &ArrayProto{Shape: &ArrayShape{Dim: t.Shape}}
	switch t.DType {
	case tensor.Float32:
		// The message is only marshalled, never written: a view spares a copy.
		v, err := tensor.View[float32](t)
		if err != nil {
			return nil, err
		}
		a.Data = v
	case tensor.Bool, tensor.String:
		return nil, fmt.Errorf("tensor %q is %s; the Caffe format carries only numbers (as FP32)", t.Name, t.DType)
	default:
		f, err := t.Float64s()
		if err != nil {
			return nil, err
		}
		a.Data = make([]float32, len(f))
		for i, x := range f {
			a.Data[i] = float32(x)
		}
	}
	return a, nil
}

// join renders names for messages: "a", "b", "c".
func join(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
