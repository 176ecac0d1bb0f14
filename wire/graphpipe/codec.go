// Package graphpipe is the codec of Oracle's GraphPipe protocol
// (docs/protocol.md, "GraphPipe"): a flatbuffers Request (an InferRequest
// or a MetadataRequest) POSTed as the body, answered by an InferResponse or
// a MetadataResponse. graphpipefb is the code flatc generates from
// graphpipe.fbs (scripts/gen-flatbuffers.sh); this file turns its tables into
// tensor.Tensor and back.
//
// How the dtypes travel:
//
//	GraphPipe  tensor     notes
//	Uint8      Uint8      also what a Bool output is sent as (0 or 1)
//	Int8       Int8
//	Uint16     Uint16
//	Int16      Int16
//	Uint32     Uint32
//	Int32      Int32
//	Uint64     Uint64
//	Int64      Int64
//	Float16    Float16
//	Float32    Float32    also what a BFloat16 output is sent as (widened)
//	Float64    Float64
//	String     String     string_val; data stays empty
//	Null       -          refused in a request (400)
//
// Decoders take bytes from the network: every offset and length is checked
// against the buffer (a flatbuffers accessor would panic or allocate what a
// length claims), and what is wrong comes back as a *badinput.Error.
package graphpipe

import (
	"errors"
	"fmt"
	"math"
	"strings"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/graphpipe/graphpipefb"
)

// Request is a decoded GraphPipe Request: a MetadataRequest (Metadata set,
// the rest empty) or an InferRequest.
type Request struct {
	Metadata bool
	// Config is the InferRequest's application-specific string.
	Config string
	// InputNames names Inputs by position; it may be shorter than Inputs,
	// and a name may be "" (the model's input at that position).
	InputNames []string
	// Inputs are the input tensors, unnamed (see Named).
	Inputs []tensor.Tensor
	// OutputNames are the outputs asked for, in the order of the answer;
	// none: the model's outputs.
	OutputNames []string
}

// Named returns the inputs named as GraphPipe servers name them: by
// InputNames where a name is given, else by the model's input at the same
// position (defaults, in the model's order).
func (r *Request) Named(defaults []string) ([]tensor.Tensor, error) {
	out := make([]tensor.Tensor, len(r.Inputs))
	for i, t := range r.Inputs {
		name := ""
		if i < len(r.InputNames) {
			name = r.InputNames[i]
		}
		if name == "" {
			if i >= len(defaults) {
				return nil, badinput.Errorf("input tensor %d has no name, and the model has %d inputs to name it by position; send input_names", i, len(defaults))
			}
			name = defaults[i]
		}
		t.Name = name
		out[i] = t
	}
	return out, nil
}

// Error is an entry of an InferResponse's errors.
type Error struct {
	Code    int64
	Message string
}

// IOMetadata describes one input or output. Its JSON (field names as they
// are) is what graphpipe-go's servers answer to a GET.
type IOMetadata struct {
	Name        string
	Description string
	Shape       []int64 // -1 for a dimension of any size
	Type        uint8   // a graphpipefb.Type
}

// Metadata is a MetadataResponse.
type Metadata struct {
	Name        string
	Version     string
	Server      string
	Description string
	Inputs      []IOMetadata
	Outputs     []IOMetadata
}

// ToDType maps a GraphPipe type to a tensor dtype; false for Null and
// unknown values.
func ToDType(t graphpipefb.Type) (tensor.DType, bool) {
	switch t {
	case graphpipefb.TypeUint8:
		return tensor.Uint8, true
	case graphpipefb.TypeInt8:
		return tensor.Int8, true
	case graphpipefb.TypeUint16:
		return tensor.Uint16, true
	case graphpipefb.TypeInt16:
		return tensor.Int16, true
	case graphpipefb.TypeUint32:
		return tensor.Uint32, true
	case graphpipefb.TypeInt32:
		return tensor.Int32, true
	case graphpipefb.TypeUint64:
		return tensor.Uint64, true
	case graphpipefb.TypeInt64:
		return tensor.Int64, true
	case graphpipefb.TypeFloat16:
		return tensor.Float16, true
	case graphpipefb.TypeFloat32:
		return tensor.Float32, true
	case graphpipefb.TypeFloat64:
		return tensor.Float64, true
	case graphpipefb.TypeString:
		return tensor.String, true
	}
	return tensor.Invalid, false
}

// FromDType maps a tensor dtype to the GraphPipe type it is sent as: Bool
// as Uint8, BFloat16 as Float32; Null for Invalid.
func FromDType(d tensor.DType) graphpipefb.Type {
	switch d {
	case tensor.Bool, tensor.Uint8:
		return graphpipefb.TypeUint8
	case tensor.Int8:
		return graphpipefb.TypeInt8
	case tensor.Uint16:
		return graphpipefb.TypeUint16
	case tensor.Int16:
		return graphpipefb.TypeInt16
	case tensor.Uint32:
		return graphpipefb.TypeUint32
	case tensor.Int32:
		return graphpipefb.TypeInt32
	case tensor.Uint64:
		return graphpipefb.TypeUint64
	case tensor.Int64:
		return graphpipefb.TypeInt64
	case tensor.Float16:
		return graphpipefb.TypeFloat16
	case tensor.BFloat16, tensor.Float32:
		return graphpipefb.TypeFloat32
	case tensor.Float64:
		return graphpipefb.TypeFloat64
	case tensor.String:
		return graphpipefb.TypeString
	}
	return graphpipefb.TypeNull
}

// errMalformed is what a panic of a flatbuffers accessor on a buffer that
// lies about its offsets becomes.
var errMalformed = errors.New("malformed flatbuffer")

// guard turns a panic of an accessor (an offset past the buffer) into a
// 400 error in *err.
func guard(what string, err *error) {
	if r := recover(); r != nil {
		*err = badinput.Errorf("body is not a GraphPipe %s: %v (%v)", what, errMalformed, r)
	}
}

// checkRoot checks that buf can hold a root offset and that it points into
// buf.
func checkRoot(buf []byte, what string) error {
	if len(buf) < 8 {
		hint := ""
		if len(buf) == 0 {
			hint = "; the body is empty"
		}
		return badinput.Errorf("body is not a GraphPipe %s: %d bytes is too short%s", what, len(buf), hint)
	}
	if looksJSON(buf) {
		return badinput.Errorf("body is not a GraphPipe %s: it looks like JSON; this door takes GraphPipe's flatbuffers (a GET answers the metadata as JSON; JSON requests go to /v2/models/<service>/infer)", what)
	}
	if off := flatbuffers.GetUOffsetT(buf); int(off) > len(buf)-4 {
		return badinput.Errorf("body is not a GraphPipe %s: root offset %d is past the %d-byte body", what, off, len(buf))
	}
	return nil
}

func looksJSON(b []byte) bool {
	s := strings.TrimLeft(string(b[:min(len(b), 64)]), " \t\r\n")
	return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
}

// vecLen checks that a vector of n elements of size bytes each fits in buf.
func vecLen(buf []byte, n, size int, what string) error {
	if n < 0 || int64(n)*int64(size) > int64(len(buf)) {
		return badinput.Errorf("%s: a vector of %d elements does not fit in the %d-byte body", what, n, len(buf))
	}
	return nil
}

// DecodeRequest decodes a GraphPipe Request body. Each input tensor is
// checked (tensor.Validate); their data alias body.
func DecodeRequest(body []byte) (req *Request, err error) {
	if err := checkRoot(body, "Request"); err != nil {
		return nil, err
	}
	defer guard("Request", &err)
	r := graphpipefb.GetRootAsRequest(body, 0)
	var tab flatbuffers.Table
	switch r.ReqType() {
	case graphpipefb.ReqMetadataRequest:
		return &Request{Metadata: true}, nil
	case graphpipefb.ReqInferRequest:
	case graphpipefb.ReqNONE:
		return nil, badinput.Errorf("GraphPipe Request holds no request (req_type NONE); send an InferRequest or a MetadataRequest")
	default:
		return nil, badinput.Errorf("GraphPipe Request holds req_type %d; send an InferRequest (1) or a MetadataRequest (2)", r.ReqType())
	}
	if !r.Req(&tab) {
		return nil, badinput.Errorf("GraphPipe Request says InferRequest but holds none")
	}
	var ir graphpipefb.InferRequest
	ir.Init(tab.Bytes, tab.Pos)
	out := &Request{Config: string(ir.Config())}
	if out.InputNames, err = strs(body, ir.InputNamesLength(), ir.InputNames, "input_names"); err != nil {
		return nil, err
	}
	if out.OutputNames, err = strs(body, ir.OutputNamesLength(), ir.OutputNames, "output_names"); err != nil {
		return nil, err
	}
	for i, name := range out.OutputNames {
		if name == "" {
			return nil, badinput.Errorf("output_names[%d] is empty; name every output asked for, or send none for all of the model's", i)
		}
	}
	n := ir.InputTensorsLength()
	if err := vecLen(body, n, 4, "input_tensors"); err != nil {
		return nil, err
	}
	out.Inputs = make([]tensor.Tensor, n)
	for i := range n {
		var t graphpipefb.Tensor
		if !ir.InputTensors(&t, i) {
			return nil, badinput.Errorf("input_tensors[%d] is missing", i)
		}
		if out.Inputs[i], err = fromFB(body, &t, fmt.Sprintf("input_tensors[%d]", i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func strs(buf []byte, n int, at func(int) []byte, what string) ([]string, error) {
	if n == 0 {
		return nil, nil
	}
	if err := vecLen(buf, n, 4, what); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range n {
		out[i] = string(at(i))
	}
	return out, nil
}

// fromFB turns a flatbuffers Tensor into a tensor.Tensor (data aliasing
// buf) and checks it.
func fromFB(buf []byte, t *graphpipefb.Tensor, what string) (tensor.Tensor, error) {
	dt, ok := ToDType(t.Type())
	if !ok {
		return tensor.Tensor{}, badinput.Errorf("%s: GraphPipe type %s (%d) carries no values; send one of Uint8, Int8, Uint16, Int16, Uint32, Int32, Uint64, Int64, Float16, Float32, Float64, String", what, t.Type(), uint8(t.Type()))
	}
	rank := t.ShapeLength()
	if err := vecLen(buf, rank, 8, what+" shape"); err != nil {
		return tensor.Tensor{}, err
	}
	shape := make([]int64, rank)
	for i := range shape {
		shape[i] = t.Shape(i)
	}
	out := tensor.Tensor{Name: what, DType: dt, Shape: shape}
	if dt == tensor.String {
		if t.DataLength() != 0 {
			return tensor.Tensor{}, badinput.Errorf("%s: a String tensor carries its values in string_val, but data holds %d bytes", what, t.DataLength())
		}
		n := t.StringValLength()
		if err := vecLen(buf, n, 4, what+" string_val"); err != nil {
			return tensor.Tensor{}, err
		}
		out.Strings = make([][]byte, n)
		for i := range n {
			out.Strings[i] = t.StringVal(i)
		}
	} else {
		if t.StringValLength() != 0 {
			return tensor.Tensor{}, badinput.Errorf("%s: a %s tensor carries its values in data, but string_val holds %d strings", what, t.Type(), t.StringValLength())
		}
		out.Data = t.DataBytes()
		if out.Data == nil {
			out.Data = []byte{}
		}
	}
	if err := out.Validate(); err != nil {
		return tensor.Tensor{}, badinput.Errorf("%s", err)
	}
	return out, nil
}

// EncodeRequest encodes an InferRequest (or, with r.Metadata, a
// MetadataRequest), as GraphPipe's clients do. The tensors' names are not
// sent: InputNames names them.
func EncodeRequest(r *Request) ([]byte, error) {
	b := flatbuffers.NewBuilder(1024 + bytesOf(r.Inputs))
	if r.Metadata {
		graphpipefb.MetadataRequestStart(b)
		m := graphpipefb.MetadataRequestEnd(b)
		graphpipefb.RequestStart(b)
		graphpipefb.RequestAddReqType(b, graphpipefb.ReqMetadataRequest)
		graphpipefb.RequestAddReq(b, m)
		b.Finish(graphpipefb.RequestEnd(b))
		return b.FinishedBytes(), nil
	}
	ts, err := tensorVector(b, r.Inputs, graphpipefb.InferRequestStartInputTensorsVector)
	if err != nil {
		return nil, err
	}
	in := strVector(b, r.InputNames, graphpipefb.InferRequestStartInputNamesVector)
	out := strVector(b, r.OutputNames, graphpipefb.InferRequestStartOutputNamesVector)
	cfg := b.CreateString(r.Config)
	graphpipefb.InferRequestStart(b)
	graphpipefb.InferRequestAddConfig(b, cfg)
	graphpipefb.InferRequestAddInputNames(b, in)
	graphpipefb.InferRequestAddInputTensors(b, ts)
	graphpipefb.InferRequestAddOutputNames(b, out)
	ir := graphpipefb.InferRequestEnd(b)
	graphpipefb.RequestStart(b)
	graphpipefb.RequestAddReqType(b, graphpipefb.ReqInferRequest)
	graphpipefb.RequestAddReq(b, ir)
	b.Finish(graphpipefb.RequestEnd(b))
	return b.FinishedBytes(), nil
}

func bytesOf(ts []tensor.Tensor) int {
	n := 0
	for _, t := range ts {
		n += len(t.Data) + 16
		for _, s := range t.Strings {
			n += len(s) + 8
		}
	}
	return n
}

// EncodeInferResponse encodes the outputs, in order, and the errors.
func EncodeInferResponse(outputs []tensor.Tensor, errs []Error) ([]byte, error) {
	b := flatbuffers.NewBuilder(1024 + bytesOf(outputs))
	ts, err := tensorVector(b, outputs, graphpipefb.InferResponseStartOutputTensorsVector)
	if err != nil {
		return nil, err
	}
	var ev flatbuffers.UOffsetT
	if len(errs) > 0 {
		offs := make([]flatbuffers.UOffsetT, len(errs))
		for i, e := range errs {
			msg := b.CreateString(e.Message)
			graphpipefb.ErrorStart(b)
			graphpipefb.ErrorAddCode(b, e.Code)
			graphpipefb.ErrorAddMessage(b, msg)
			offs[i] = graphpipefb.ErrorEnd(b)
		}
		ev = offsets(b, offs, graphpipefb.InferResponseStartErrorsVector)
	}
	graphpipefb.InferResponseStart(b)
	graphpipefb.InferResponseAddOutputTensors(b, ts)
	if len(errs) > 0 {
		graphpipefb.InferResponseAddErrors(b, ev)
	}
	b.Finish(graphpipefb.InferResponseEnd(b))
	return b.FinishedBytes(), nil
}

// DecodeInferResponse decodes an InferResponse, as a client does.
func DecodeInferResponse(body []byte) (outputs []tensor.Tensor, errs []Error, err error) {
	if err := checkRoot(body, "InferResponse"); err != nil {
		return nil, nil, err
	}
	defer guard("InferResponse", &err)
	r := graphpipefb.GetRootAsInferResponse(body, 0)
	n := r.OutputTensorsLength()
	if err := vecLen(body, n, 4, "output_tensors"); err != nil {
		return nil, nil, err
	}
	for i := range n {
		var t graphpipefb.Tensor
		if !r.OutputTensors(&t, i) {
			return nil, nil, badinput.Errorf("output_tensors[%d] is missing", i)
		}
		out, err := fromFB(body, &t, fmt.Sprintf("output_tensors[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		outputs = append(outputs, out)
	}
	n = r.ErrorsLength()
	if err := vecLen(body, n, 4, "errors"); err != nil {
		return nil, nil, err
	}
	for i := range n {
		var e graphpipefb.Error
		if r.Errors(&e, i) {
			errs = append(errs, Error{Code: e.Code(), Message: string(e.Message())})
		}
	}
	return outputs, errs, nil
}

// EncodeMetadata encodes a MetadataResponse.
func EncodeMetadata(m *Metadata) []byte {
	b := flatbuffers.NewBuilder(1024)
	ios := func(list []IOMetadata, start func(*flatbuffers.Builder, int) flatbuffers.UOffsetT) flatbuffers.UOffsetT {
		offs := make([]flatbuffers.UOffsetT, len(list))
		for i, io := range list {
			shape := int64Vector(b, io.Shape, graphpipefb.IOMetadataStartShapeVector)
			name := b.CreateString(io.Name)
			desc := b.CreateString(io.Description)
			graphpipefb.IOMetadataStart(b)
			graphpipefb.IOMetadataAddName(b, name)
			graphpipefb.IOMetadataAddDescription(b, desc)
			graphpipefb.IOMetadataAddShape(b, shape)
			graphpipefb.IOMetadataAddType(b, graphpipefb.Type(io.Type))
			offs[i] = graphpipefb.IOMetadataEnd(b)
		}
		return offsets(b, offs, start)
	}
	in := ios(m.Inputs, graphpipefb.MetadataResponseStartInputsVector)
	out := ios(m.Outputs, graphpipefb.MetadataResponseStartOutputsVector)
	name, version, server, desc := b.CreateString(m.Name), b.CreateString(m.Version), b.CreateString(m.Server), b.CreateString(m.Description)
	graphpipefb.MetadataResponseStart(b)
	graphpipefb.MetadataResponseAddName(b, name)
	graphpipefb.MetadataResponseAddVersion(b, version)
	graphpipefb.MetadataResponseAddServer(b, server)
	graphpipefb.MetadataResponseAddDescription(b, desc)
	graphpipefb.MetadataResponseAddInputs(b, in)
	graphpipefb.MetadataResponseAddOutputs(b, out)
	b.Finish(graphpipefb.MetadataResponseEnd(b))
	return b.FinishedBytes()
}

// DecodeMetadata decodes a MetadataResponse, as a client does.
func DecodeMetadata(body []byte) (m *Metadata, err error) {
	if err := checkRoot(body, "MetadataResponse"); err != nil {
		return nil, err
	}
	defer guard("MetadataResponse", &err)
	r := graphpipefb.GetRootAsMetadataResponse(body, 0)
	m = &Metadata{Name: string(r.Name()), Version: string(r.Version()), Server: string(r.Server()), Description: string(r.Description())}
	read := func(n int, at func(*graphpipefb.IOMetadata, int) bool, what string) ([]IOMetadata, error) {
		if err := vecLen(body, n, 4, what); err != nil {
			return nil, err
		}
		out := make([]IOMetadata, 0, n)
		for i := range n {
			var io graphpipefb.IOMetadata
			if !at(&io, i) {
				return nil, badinput.Errorf("%s[%d] is missing", what, i)
			}
			if err := vecLen(body, io.ShapeLength(), 8, what+" shape"); err != nil {
				return nil, err
			}
			shape := make([]int64, io.ShapeLength())
			for j := range shape {
				shape[j] = io.Shape(j)
			}
			out = append(out, IOMetadata{Name: string(io.Name()), Description: string(io.Description()), Shape: shape, Type: uint8(io.Type())})
		}
		return out, nil
	}
	if m.Inputs, err = read(r.InputsLength(), r.Inputs, "inputs"); err != nil {
		return nil, err
	}
	if m.Outputs, err = read(r.OutputsLength(), r.Outputs, "outputs"); err != nil {
		return nil, err
	}
	return m, nil
}

// tensorVector builds the tensors and the vector of them.
func tensorVector(b *flatbuffers.Builder, ts []tensor.Tensor, start func(*flatbuffers.Builder, int) flatbuffers.UOffsetT) (flatbuffers.UOffsetT, error) {
	offs := make([]flatbuffers.UOffsetT, len(ts))
	for i, t := range ts {
		o, err := buildTensor(b, t)
		if err != nil {
			return 0, err
		}
		offs[i] = o
	}
	return offsets(b, offs, start), nil
}

func buildTensor(b *flatbuffers.Builder, t tensor.Tensor) (flatbuffers.UOffsetT, error) {
	gt := FromDType(t.DType)
	if gt == graphpipefb.TypeNull {
		return 0, fmt.Errorf("tensor %q: dtype %s has no GraphPipe type", t.Name, t.DType)
	}
	if err := t.Validate(); err != nil {
		return 0, err
	}
	shape := int64Vector(b, t.Shape, graphpipefb.TensorStartShapeVector)
	var data, strings flatbuffers.UOffsetT
	if t.DType == tensor.String {
		offs := make([]flatbuffers.UOffsetT, len(t.Strings))
		for i, s := range t.Strings {
			offs[i] = b.CreateByteString(s)
		}
		strings = offsets(b, offs, graphpipefb.TensorStartStringValVector)
	} else {
		raw := t.Data
		if t.DType == tensor.BFloat16 {
			raw = make([]byte, 0, 2*len(t.Data))
			for i := 0; i+1 < len(t.Data); i += 2 {
				bits := math.Float32bits(tensor.BFloat16ToFloat32(uint16(t.Data[i]) | uint16(t.Data[i+1])<<8))
				raw = append(raw, byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24))
			}
		}
		data = b.CreateByteVector(raw)
	}
	graphpipefb.TensorStart(b)
	graphpipefb.TensorAddType(b, gt)
	graphpipefb.TensorAddShape(b, shape)
	if t.DType == tensor.String {
		graphpipefb.TensorAddStringVal(b, strings)
	} else {
		graphpipefb.TensorAddData(b, data)
	}
	return graphpipefb.TensorEnd(b), nil
}

func int64Vector(b *flatbuffers.Builder, v []int64, start func(*flatbuffers.Builder, int) flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	start(b, len(v))
	for i := len(v) - 1; i >= 0; i-- {
		b.PrependInt64(v[i])
	}
	return b.EndVector(len(v))
}

func strVector(b *flatbuffers.Builder, v []string, start func(*flatbuffers.Builder, int) flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	offs := make([]flatbuffers.UOffsetT, len(v))
	for i, s := range v {
		offs[i] = b.CreateString(s)
	}
	return offsets(b, offs, start)
}

func offsets(b *flatbuffers.Builder, offs []flatbuffers.UOffsetT, start func(*flatbuffers.Builder, int) flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	start(b, len(offs))
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	return b.EndVector(len(offs))
}
