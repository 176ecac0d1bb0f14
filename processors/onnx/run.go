package onnx

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// ErrNotLoaded is returned by Run before Load or after Close.
var ErrNotLoaded = errors.New("onnx model is not loaded")

// describe renders an input or output for messages: `"x" FP32 [-1,16]`.
// A TorchScript input, which declares neither, is `"x" (any dtype and shape)`.
func (io ioInfo) describe() string {
	if io.DType == tensor.Invalid && io.Shape == nil {
		return fmt.Sprintf("%q (any dtype and shape)", io.Name)
	}
	return fmt.Sprintf("%q %s %s", io.Name, io.DType, tensor.FormatShape(io.Shape))
}

func describeAll(ios []ioInfo) string {
	parts := make([]string, len(ios))
	for i, io := range ios {
		parts[i] = io.describe()
	}
	return strings.Join(parts, ", ")
}

// Payload is one request checked against the model: its inputs in the
// model's input order, each named as the model names it, and the outputs it
// asks for. Decode and FromTensors make it, once per request; BatchKey and
// Run trust it.
type Payload struct {
	Inputs  []tensor.Tensor
	Outputs []string // wanted output names; nil = all

	// outIndex, for a TorchScript model, is the Torch protobuf
	// output_filter: indexes into what forward returns, checked after the
	// run (TorchScript declares no outputs). It overrides Outputs.
	outIndex []int
}

// check makes a Payload of tp, or says what is wrong with it.
func (m *Model) check(tp *processors.TensorPayload) (*Payload, error) {
	ins, err := m.arrange(tp)
	if err != nil {
		return nil, err
	}
	if err := m.checkOutputs(tp.Outputs); err != nil {
		return nil, err
	}
	return &Payload{Inputs: ins, Outputs: tp.Outputs}, nil
}

// arrange checks a payload against the model and returns its inputs in the
// model's input order, each named as the model names it. Unnamed inputs are
// taken by position. Every mismatch is a *badinput.Error naming the
// input, what the model expects and what was received.
func (m *Model) arrange(p *processors.TensorPayload) ([]tensor.Tensor, error) {
	if len(p.Inputs) == 0 {
		return nil, badinput.Errorf("no input tensors; the model expects %s", describeAll(m.inputs))
	}
	out := make([]tensor.Tensor, len(m.inputs))
	set := make([]bool, len(m.inputs))
	for pos, t := range p.Inputs {
		i, ok := m.inIndex[t.Name]
		if t.Name == "" {
			if pos >= len(m.inputs) {
				return nil, badinput.Errorf("%d input tensors, but the model has %d: %s", len(p.Inputs), len(m.inputs), describeAll(m.inputs))
			}
			i, ok = pos, true
		}
		if !ok {
			return nil, badinput.Errorf("unknown input %q; the model's inputs are %s", t.Name, describeAll(m.inputs))
		}
		want := m.inputs[i]
		if set[i] {
			return nil, badinput.Errorf("input %q given twice", want.Name)
		}
		if m.torch && !tsDTypes[t.DType] {
			return nil, badinput.Errorf("input %q: dtype %s cannot be passed to a TorchScript model; send a numeric or BOOL tensor", want.Name, t.DType)
		}
		if want.DType != tensor.Invalid && t.DType != want.DType {
			return nil, badinput.Errorf("input %q: dtype %s, but the model expects %s (shape %s)", want.Name, t.DType, want.DType, tensor.FormatShape(want.Shape))
		}
		if want.Shape != nil && !shapeFits(t.Shape, want.Shape) {
			return nil, badinput.Errorf("input %q: shape %s does not match the model's %s (-1 = any size)", want.Name, tensor.FormatShape(t.Shape), tensor.FormatShape(want.Shape))
		}
		if err := t.Validate(); err != nil {
			return nil, badinput.Errorf("input %q: %v", want.Name, err)
		}
		if t.NumElements() == 0 {
			return nil, badinput.Errorf("input %q: shape %s has no elements; send at least one row", want.Name, tensor.FormatShape(t.Shape))
		}
		t.Name = want.Name
		out[i], set[i] = t, true
	}
	for i, ok := range set {
		if !ok {
			return nil, badinput.Errorf("missing input %s; the model's inputs are %s", m.inputs[i].describe(), describeAll(m.inputs))
		}
	}
	return out, nil
}

// shapeFits reports whether got matches want, where -1 in want is any size.
// A nil want (TorchScript) is any rank; arrange does not call it then.
func shapeFits(got, want []int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if w >= 0 && got[i] != w {
			return false
		}
	}
	return true
}

// checkOutputs validates a payload's output filter. A TorchScript model's
// outputs are known only once it has run: its filter is checked by result.
func (m *Model) checkOutputs(names []string) error {
	if m.torch {
		return nil
	}
	for _, n := range names {
		if _, ok := m.outIndex[n]; !ok {
			return badinput.Errorf("unknown output %q; the model's outputs are %s", n, describeAll(m.outputs))
		}
	}
	return nil
}

// BatchKey lets payloads whose inputs agree on everything after the first
// dimension share a run.
func (m *Model) BatchKey(p *Payload) (string, bool) {
	if !m.batchable || m.noBatch.Load() {
		return "", false
	}
	if _, err := tensor.BatchSize(p.Inputs); err != nil {
		return "", false
	}
	return m.batchKey(p.Inputs), true
}

// Run executes a batch of checked payloads and returns one result per
// payload. Several payloads are concatenated along the first dimension into
// one session run and the outputs split back; a model whose outputs turn out
// not to follow the batch is from then on run one payload at a time. A
// payload that fails fails alone (processors.PayloadErrors): when a merged
// run fails, each payload runs again by itself, so one request's bad values
// (an index out of range) never fail the requests batched with it. Run is
// safe for concurrent use: ONNX Runtime allows concurrent runs on one
// session.
func (m *Model) Run(ctx context.Context, batch []*Payload) ([]*processors.TensorResult, error) {
	if m.engine == nil {
		return nil, ErrNotLoaded
	}
	if len(batch) > 1 && m.batchable && !m.noBatch.Load() {
		res, ok, err := m.runMerged(ctx, batch)
		if ok {
			return res, err
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// Which payload made the run fail is known only by running
			// each alone; an engine failure (out of memory) may not recur
			// on a smaller run either.
			if m.spec.Logger != nil {
				m.spec.Logger.Debug("merged run failed; running its payloads one at a time", "batch_size", len(batch), "error", err)
			}
		}
	}
	results := make([]*processors.TensorResult, len(batch))
	errs := make(processors.PayloadErrors, len(batch))
	for i, p := range batch {
		var err error
		if results[i], err = m.runOne(ctx, p); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			errs[i] = err
		}
	}
	return results, errs.Err()
}

// runOne runs one payload by itself.
func (m *Model) runOne(ctx context.Context, p *Payload) (*processors.TensorResult, error) {
	outs, err := m.runSession(ctx, p.Inputs)
	if err != nil {
		return nil, err
	}
	return m.result(p, outs)
}

// runMerged runs the payloads as one batch. ok=true: the results are
// final, with a processors.PayloadErrors for payloads whose outputs do not
// fit their request (a TorchScript output_filter), or an error that fails
// the batch. ok=false with no error: they could not be merged and must run
// one by one; ok=false with an error: the merged run failed.
func (m *Model) runMerged(ctx context.Context, payloads []*Payload) ([]*processors.TensorResult, bool, error) {
	rows := make([]int64, len(payloads))
	var total int64
	for i, p := range payloads {
		n, err := tensor.BatchSize(p.Inputs)
		if err != nil {
			return nil, false, nil
		}
		rows[i] = n
		total += n
	}
	merged := make([]tensor.Tensor, len(m.inputs))
	col := make([]tensor.Tensor, len(payloads))
	for j := range m.inputs {
		for i, p := range payloads {
			col[i] = p.Inputs[j]
		}
		t, err := m.mergeColumn(col)
		if err != nil {
			return nil, false, nil // shapes cannot be merged: run one by one
		}
		merged[j] = t
	}
	padded := seqLen(merged)
	outs, err := m.runSession(ctx, merged)
	if err != nil {
		return nil, false, err
	}
	for _, o := range outs {
		if len(o.Shape) == 0 || o.Shape[0] != total {
			// The output does not carry the batch (a reduction over rows, a
			// constant): merged results cannot be split, so stop merging.
			m.noBatch.Store(true)
			if m.spec.Logger != nil {
				m.spec.Logger.Warn("onnx output does not follow the batch dimension; running requests one at a time",
					"output", o.Name, "shape", tensor.FormatShape(o.Shape), "batch_rows", total)
			}
			return nil, false, nil
		}
	}
	pieces := make([][]tensor.Tensor, len(outs))
	for j, o := range outs {
		if pieces[j], err = tensor.Split(o, rows); err != nil {
			return nil, true, fmt.Errorf("onnx: split output %q: %w", o.Name, err)
		}
	}
	results := make([]*processors.TensorResult, len(payloads))
	errs := make(processors.PayloadErrors, len(payloads))
	per := make([]tensor.Tensor, len(outs))
	for i, p := range payloads {
		for j := range outs {
			per[j] = pieces[j][i]
			if m.padding() {
				if per[j], err = m.unpad(per[j], seqLen(p.Inputs), padded); err != nil {
					return nil, true, fmt.Errorf("onnx: unpad output %q: %w", outs[j].Name, err)
				}
			}
		}
		results[i], errs[i] = m.result(p, per)
	}
	return results, true, errs.Err()
}

// result keeps the outputs a payload asked for, in the model's order, or in
// the order asked when it names them (or, for TorchScript, indexes them).
func (m *Model) result(p *Payload, outs []tensor.Tensor) (*processors.TensorResult, error) {
	switch {
	case len(p.outIndex) > 0:
		sel := make([]tensor.Tensor, 0, len(p.outIndex))
		for i, idx := range p.outIndex {
			if idx < 0 || idx >= len(outs) {
				return nil, badinput.Errorf("pytorch request: output_filter[%d] = %d, but the model returned %d outputs (%s)",
					i, idx, len(outs), strings.Join(tensorNames(outs), ", "))
			}
			sel = append(sel, outs[idx])
		}
		return &processors.TensorResult{Outputs: sel}, nil
	case len(p.Outputs) == 0:
		return &processors.TensorResult{Outputs: append([]tensor.Tensor(nil), outs...)}, nil
	}
	sel := make([]tensor.Tensor, 0, len(p.Outputs))
	for _, name := range p.Outputs {
		j := slices.IndexFunc(outs, func(t tensor.Tensor) bool { return t.Name == name })
		if j < 0 {
			// Only TorchScript gets here: its outputs are known after a run.
			return nil, badinput.Errorf("unknown output %q; the model returned %s", name, strings.Join(tensorNames(outs), ", "))
		}
		sel = append(sel, outs[j])
	}
	return &processors.TensorResult{Outputs: sel}, nil
}

func tensorNames(ts []tensor.Tensor) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// runSession runs the model once on inputs already arranged in model order.
func (m *Model) runSession(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.runs.Add(1)
	outs, err := m.engine.run(ctx, inputs)
	if err == nil && m.torch {
		m.noteOutputs(outs)
	}
	return outs, err
}

// destroyAll releases values. The binding can leave a typed nil in an output
// slot when it fails to convert one, so nil pointers are skipped too.
func destroyAll(values []ort.Value) {
	for _, v := range values {
		if v == nil {
			continue
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			continue
		}
		_ = v.Destroy()
	}
}

// toValue wraps t for ONNX Runtime without copying numeric data: the value
// points at t.Data, which stays alive (referenced by the value) for the run.
func toValue(t *tensor.Tensor, et ort.TensorElementDataType) (ort.Value, error) {
	shape := ort.NewShape(t.Shape...)
	if t.DType == tensor.String {
		st, err := ort.NewStringTensor(shape)
		if err != nil {
			return nil, err
		}
		strs := make([]string, len(t.Strings))
		for i, s := range t.Strings {
			strs[i] = string(s)
		}
		if err := st.SetContents(strs); err != nil {
			st.Destroy()
			return nil, err
		}
		return st, nil
	}
	return ort.NewCustomDataTensor(shape, t.Data, et)
}

// fromValue copies nothing more: the binding already copied the output into
// a Go slice, which the returned tensor takes over as its bytes.
func fromValue(name string, v ort.Value) (tensor.Tensor, error) {
	shape := []int64(v.GetShape().Clone())
	out := tensor.Tensor{Name: name, Shape: shape}
	switch x := v.(type) {
	case *ort.Tensor[float32]:
		out.DType, out.Data = tensor.Float32, asBytes(x.GetData())
	case *ort.Tensor[float64]:
		out.DType, out.Data = tensor.Float64, asBytes(x.GetData())
	case *ort.Tensor[int8]:
		out.DType, out.Data = tensor.Int8, asBytes(x.GetData())
	case *ort.Tensor[int16]:
		out.DType, out.Data = tensor.Int16, asBytes(x.GetData())
	case *ort.Tensor[int32]:
		out.DType, out.Data = tensor.Int32, asBytes(x.GetData())
	case *ort.Tensor[int64]:
		out.DType, out.Data = tensor.Int64, asBytes(x.GetData())
	case *ort.Tensor[uint8]:
		out.DType, out.Data = tensor.Uint8, asBytes(x.GetData())
	case *ort.Tensor[uint16]:
		out.DType, out.Data = tensor.Uint16, asBytes(x.GetData())
	case *ort.Tensor[uint32]:
		out.DType, out.Data = tensor.Uint32, asBytes(x.GetData())
	case *ort.Tensor[uint64]:
		out.DType, out.Data = tensor.Uint64, asBytes(x.GetData())
	case *ort.Tensor[bool]:
		out.DType, out.Data = tensor.Bool, asBytes(x.GetData())
	case *ort.StringTensor:
		strs, err := x.GetContents()
		if err != nil {
			return out, err
		}
		out.DType = tensor.String
		out.Strings = make([][]byte, len(strs))
		for i, s := range strs {
			out.Strings[i] = []byte(s)
		}
	default:
		return out, fmt.Errorf("unsupported output value %T", v)
	}
	if out.Data == nil && out.DType != tensor.String {
		out.Data = []byte{}
	}
	return out, nil
}

// asBytes views a numeric slice as its little-endian bytes (every platform
// ONNX Runtime ships for is little-endian).
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}
