// Package kserve is the KServe v2 / Open Inference Protocol REST format
// (docs/protocol.md "KServe v2 HTTP") that every tensor service also answers: infer
// requests and responses as JSON, with the binary tensor data extension, and
// the server/model metadata and error bodies.
//
// With the binary extension a body is a JSON header followed by raw tensor
// bytes; the Inference-Header-Content-Length header gives the JSON length.
// Each binary input declares its byte count in parameters.binary_data_size
// and the chunks follow in input order. Fixed-size elements are row-major
// little-endian; each BYTES element is a 4-byte little-endian length and its
// bytes. In JSON, BYTES elements are strings and data may be flat or nested.
package kserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
)

// HeaderContentLength is the HTTP header that carries the JSON length of a
// body using the binary tensor extension.
const HeaderContentLength = "Inference-Header-Content-Length"

// Extensions is the list GET /v2 reports.
var Extensions = []string{"binary_tensor_data"}

// ServerMetadata is the body of GET /v2.
type ServerMetadata struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// ModelMetadata is the body of GET /v2/models/<name>.
type ModelMetadata struct {
	Name     string           `json:"name"`
	Versions []string         `json:"versions,omitempty"`
	Platform string           `json:"platform"`
	Inputs   []TensorMetadata `json:"inputs"`
	Outputs  []TensorMetadata `json:"outputs"`
}

// TensorMetadata describes one model input or output; -1 marks a dynamic dim.
type TensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// ErrorResponse is the body of every KServe error status.
type ErrorResponse struct {
	Error string `json:"error"`
}

// ErrorBody returns {"error": msg} as JSON.
func ErrorBody(msg string) []byte {
	b, _ := json.Marshal(ErrorResponse{Error: msg}) // a string field always marshals
	return b
}

// InferRequest is a decoded POST /v2/models/<name>/infer body.
type InferRequest struct {
	// ID is echoed in the response.
	ID string
	// Inputs are in request order.
	Inputs []tensor.Tensor
	// Outputs are the requested outputs in request order; empty means all.
	Outputs []RequestedOutput
	// BinaryDataOutput is the request-level parameters.binary_data_output:
	// every output not set otherwise goes back binary.
	BinaryDataOutput bool
	// Parameters holds the request-level parameters as raw JSON.
	Parameters map[string]json.RawMessage
}

// RequestedOutput is one entry of the request's "outputs".
type RequestedOutput struct {
	Name string
	// Binary is the output's parameters.binary_data; nil when unset.
	Binary *bool
}

// OutputNames returns the requested output names, or nil for all outputs.
func (r *InferRequest) OutputNames() []string {
	if len(r.Outputs) == 0 {
		return nil
	}
	names := make([]string, len(r.Outputs))
	for i, o := range r.Outputs {
		names[i] = o.Name
	}
	return names
}

// WantsBinary reports whether output name should be sent as binary data: its
// own binary_data parameter when set, else the request-level
// binary_data_output. A nil request wants JSON.
func (r *InferRequest) WantsBinary(name string) bool {
	if r == nil {
		return false
	}
	for _, o := range r.Outputs {
		if o.Name == name && o.Binary != nil {
			return *o.Binary
		}
	}
	return r.BinaryDataOutput
}

// wire types of the JSON header.
type tensorJSON struct {
	Name       string                     `json:"name"`
	Shape      []int64                    `json:"shape"`
	Datatype   string                     `json:"datatype"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	Data       json.RawMessage            `json:"data,omitempty"`
}

type outputJSON struct {
	Name       string                     `json:"name"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
}

type requestJSON struct {
	ID         string                     `json:"id,omitempty"`
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	Inputs     []tensorJSON               `json:"inputs"`
	Outputs    []outputJSON               `json:"outputs,omitempty"`
}

type responseJSON struct {
	ModelName    string                     `json:"model_name"`
	ModelVersion string                     `json:"model_version,omitempty"`
	ID           string                     `json:"id,omitempty"`
	Parameters   map[string]json.RawMessage `json:"parameters,omitempty"`
	Outputs      []tensorJSON               `json:"outputs"`
}

// splitBody cuts body into the JSON header and the binary section using the
// Inference-Header-Content-Length value ("" when the header is absent).
func splitBody(body []byte, headerLength string) ([]byte, []byte, error) {
	if headerLength == "" {
		return body, nil, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(headerLength), 10, 64)
	if err != nil || n < 0 {
		return nil, nil, fmt.Errorf("%s: %q is not a non-negative integer", HeaderContentLength, headerLength)
	}
	if n > int64(len(body)) {
		return nil, nil, fmt.Errorf("%s is %d but the body has only %d bytes", HeaderContentLength, n, len(body))
	}
	return body[:n], body[n:], nil
}

func unmarshalStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("the JSON header is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) != 0 {
		return fmt.Errorf("%d unexpected bytes after the JSON object; with binary data, set %s to the JSON length", len(rest), HeaderContentLength)
	}
	return nil
}

// DecodeRequest parses an infer request body. headerLength is the value of
// the Inference-Header-Content-Length header, "" when absent (a JSON-only
// body). Every error is a *badinput.Error (HTTP 400) whose message
// names the input and the fix. Binary inputs alias body.
func DecodeRequest(body []byte, headerLength string) (*InferRequest, error) {
	js, bin, err := splitBody(body, headerLength)
	if err != nil {
		return nil, badinput.Errorf("kserve request: %v", err)
	}
	var rj requestJSON
	if err := unmarshalStrict(js, &rj); err != nil {
		return nil, badinput.Errorf("kserve request: body is not a valid infer request JSON: %v", err)
	}
	if len(rj.Inputs) == 0 {
		return nil, badinput.Errorf(`kserve request: "inputs" is empty; send [{"name","shape","datatype","data"}, ...]`)
	}
	req := &InferRequest{ID: rj.ID, Parameters: rj.Parameters}
	if raw, ok := rj.Parameters["binary_data_output"]; ok {
		if err := json.Unmarshal(raw, &req.BinaryDataOutput); err != nil {
			return nil, badinput.Errorf("kserve request: parameters.binary_data_output must be true or false, got %s", raw)
		}
	}
	req.Inputs, err = decodeTensors("input", rj.Inputs, bin)
	if err != nil {
		return nil, badinput.Errorf("kserve request: %v", err)
	}
	seen := map[string]bool{}
	for i, o := range rj.Outputs {
		if o.Name == "" {
			return nil, badinput.Errorf("kserve request: outputs[%d] has no name", i)
		}
		if seen[o.Name] {
			return nil, badinput.Errorf("kserve request: output %q is requested twice", o.Name)
		}
		seen[o.Name] = true
		ro := RequestedOutput{Name: o.Name}
		if raw, ok := o.Parameters["binary_data"]; ok {
			var b bool
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, badinput.Errorf("kserve request: output %q: parameters.binary_data must be true or false, got %s", o.Name, raw)
			}
			ro.Binary = &b
		}
		if _, ok := o.Parameters["classification"]; ok {
			return nil, badinput.Errorf("kserve request: output %q: the classification parameter is not supported; remove it and read the raw output", o.Name)
		}
		req.Outputs = append(req.Outputs, ro)
	}
	return req, nil
}

// decodeTensors turns the JSON tensor entries (inputs of a request or outputs
// of a response) into tensors, taking binary chunks from bin in order.
func decodeTensors(kind string, entries []tensorJSON, bin []byte) ([]tensor.Tensor, error) {
	out := make([]tensor.Tensor, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	off := 0
	for i, e := range entries {
		if e.Name == "" {
			return nil, fmt.Errorf("%ss[%d] has no name", kind, i)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("%s %q appears twice", kind, e.Name)
		}
		seen[e.Name] = true
		dt, err := tensor.ParseDType(e.Datatype)
		if err != nil || dt == tensor.Invalid {
			return nil, fmt.Errorf("%s %q: datatype %q is not one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64, BYTES", kind, e.Name, e.Datatype)
		}
		if e.Shape == nil {
			return nil, fmt.Errorf("%s %q has no shape; set \"shape\" (e.g. [1, 4]; [] for a scalar)", kind, e.Name)
		}
		n, err := tensor.Elements(e.Shape)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, e.Name, err)
		}
		var t tensor.Tensor
		if raw, ok := e.Parameters["binary_data_size"]; ok {
			var size int64
			if err := json.Unmarshal(raw, &size); err != nil || size < 0 {
				return nil, fmt.Errorf("%s %q: parameters.binary_data_size must be a non-negative integer, got %s", kind, e.Name, raw)
			}
			if e.Data != nil {
				return nil, fmt.Errorf("%s %q has both data and binary_data_size; send one", kind, e.Name)
			}
			if size > int64(len(bin)-off) {
				if bin == nil {
					return nil, fmt.Errorf("%s %q: binary_data_size is %d but the request has no binary section; set the %s header to the JSON length", kind, e.Name, size, HeaderContentLength)
				}
				return nil, fmt.Errorf("%s %q: binary_data_size is %d but only %d bytes of binary data are left", kind, e.Name, size, len(bin)-off)
			}
			t, err = parseBinary(bin[off:off+int(size):off+int(size)], dt, n)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", kind, e.Name, err)
			}
			off += int(size)
		} else {
			if e.Data == nil || string(e.Data) == "null" {
				return nil, fmt.Errorf("%s %q has no data; set \"data\", or parameters.binary_data_size with the binary extension", kind, e.Name)
			}
			t, err = parseData(e.Data, dt, n)
			if err != nil {
				return nil, fmt.Errorf("%s %q (%s, shape %s): %w", kind, e.Name, dt, tensor.FormatShape(e.Shape), err)
			}
		}
		t.Name = e.Name
		t.Shape = append([]int64{}, e.Shape...)
		if t.DType != tensor.String && t.Data == nil {
			t.Data = []byte{}
		}
		out = append(out, t)
	}
	if off != len(bin) {
		return nil, fmt.Errorf("%d bytes of binary data follow the last binary %s; the binary_data_size values must add up to the body length minus %s",
			len(bin)-off, kind, HeaderContentLength)
	}
	return out, nil
}

// InferResponse is an inference result.
type InferResponse struct {
	ModelName    string
	ModelVersion string
	ID           string
	Outputs      []tensor.Tensor
}

// EncodeResponse writes resp as JSON, sending as binary the outputs req asks
// for (req may be nil: all JSON). headerLength is the JSON length when the
// body carries a binary section, else 0; when it is > 0 the caller must set
// the Inference-Header-Content-Length header to it.
func EncodeResponse(resp *InferResponse, req *InferRequest) (body []byte, headerLength int, err error) {
	b := append(make([]byte, 0, 256), `{"model_name":`...)
	b = appendString(b, resp.ModelName)
	if resp.ModelVersion != "" {
		b = append(b, `,"model_version":`...)
		b = appendString(b, resp.ModelVersion)
	}
	if resp.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, resp.ID)
	}
	b = append(b, `,"outputs":`...)
	return encodeTensors(b, resp.Outputs, req.WantsBinary, nil)
}

// encodeTensors appends the JSON array of tensor entries to b, then tail
// (which closes the object; nil means "}"), then the binary chunks. The JSON
// is written by hand: going through encoding/json would copy and re-scan
// every data array.
func encodeTensors(b []byte, ts []tensor.Tensor, binary func(string) bool, tail func([]byte) []byte) ([]byte, int, error) {
	var bin []*tensor.Tensor
	b = append(b, '[')
	for i := range ts {
		t := &ts[i]
		if err := t.Validate(); err != nil {
			return nil, 0, fmt.Errorf("encode kserve: %w", err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, t.Name)
		b = append(b, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"datatype":"`...)
		b = append(b, t.DType.String()...)
		b = append(b, '"')
		if binary(t.Name) {
			b = append(b, `,"parameters":{"binary_data_size":`...)
			b = strconv.AppendInt(b, int64(binarySize(t)), 10)
			b = append(b, '}', '}')
			bin = append(bin, t)
			continue
		}
		b = append(b, `,"data":`...)
		var err error
		if b, err = appendData(b, t); err != nil {
			return nil, 0, fmt.Errorf("encode kserve: %w", err)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if tail != nil {
		b = tail(b)
	}
	b = append(b, '}')
	if len(bin) == 0 {
		return b, 0, nil
	}
	jsonLen := len(b)
	total := jsonLen
	for _, t := range bin {
		total += binarySize(t)
	}
	b = append(make([]byte, 0, total), b...)
	for _, t := range bin {
		b = appendBinary(b, t)
	}
	return b, jsonLen, nil
}

// EncodeRequest builds an infer request body (client side: tests, the load
// generator, a KServe peer). With binaryInputs the inputs travel in the
// binary section; headerLength is then the JSON length to send in
// Inference-Header-Content-Length, else 0.
func EncodeRequest(req *InferRequest, binaryInputs bool) (body []byte, headerLength int, err error) {
	params := req.Parameters
	if req.BinaryDataOutput {
		params = make(map[string]json.RawMessage, len(req.Parameters)+1)
		for k, v := range req.Parameters {
			params[k] = v
		}
		params["binary_data_output"] = json.RawMessage("true")
	}
	b := append(make([]byte, 0, 256), '{')
	if req.ID != "" {
		b = append(b, `"id":`...)
		b = appendString(b, req.ID)
		b = append(b, ',')
	}
	if len(params) > 0 {
		pj, err := json.Marshal(params)
		if err != nil {
			return nil, 0, fmt.Errorf("encode kserve request parameters: %w", err)
		}
		b = append(b, `"parameters":`...)
		b = append(b, pj...)
		b = append(b, ',')
	}
	b = append(b, `"inputs":`...)
	var tail func([]byte) []byte
	if len(req.Outputs) > 0 {
		tail = func(b []byte) []byte {
			b = append(b, `,"outputs":[`...)
			for i, o := range req.Outputs {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"name":`...)
				b = appendString(b, o.Name)
				if o.Binary != nil {
					b = append(b, `,"parameters":{"binary_data":`...)
					b = strconv.AppendBool(b, *o.Binary)
					b = append(b, '}')
				}
				b = append(b, '}')
			}
			return append(b, ']')
		}
	}
	return encodeTensors(b, req.Inputs, func(string) bool { return binaryInputs }, tail)
}

// DecodeResponse parses an infer response body (client side). headerLength
// is the Inference-Header-Content-Length value, "" when absent.
func DecodeResponse(body []byte, headerLength string) (*InferResponse, error) {
	js, bin, err := splitBody(body, headerLength)
	if err != nil {
		return nil, fmt.Errorf("decode kserve response: %w", err)
	}
	var rj responseJSON
	if err := unmarshalStrict(js, &rj); err != nil {
		var e ErrorResponse
		if json.Unmarshal(js, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("decode kserve response: server error: %s", e.Error)
		}
		return nil, fmt.Errorf("decode kserve response: %w", err)
	}
	outs, err := decodeTensors("output", rj.Outputs, bin)
	if err != nil {
		return nil, fmt.Errorf("decode kserve response: %w", err)
	}
	return &InferResponse{ModelName: rj.ModelName, ModelVersion: rj.ModelVersion, ID: rj.ID, Outputs: outs}, nil
}
