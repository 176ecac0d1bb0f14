package pmml

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// Options changes how a Model treats its inputs.
type Options struct {
	// MissingValueDefaults fills a missing input with its type's zero value
	// (false, 0, 0.0, "") the way EAS does, but only for fields whose
	// MiningField declares neither missingValueReplacement nor
	// missingValueTreatment, and only when the filler is valid for the field
	// (a categorical field with listed values is never filled with "").
	// Off (the zero value) keeps pure PMML semantics:
	// a missing input stays missing and the model's own strategies apply.
	MissingValueDefaults bool
}

// Field describes one input or output of a Model.
// It marshals to JSON as {"name", "dataType", "opType", "values", "feature"}
// with PMML's spellings, ready for a metadata endpoint.
type Field struct {
	Name     string   `json:"name"`
	DataType DataType `json:"dataType,omitempty"`
	OpType   OpType   `json:"opType,omitempty"`
	// Values lists the valid values of a categorical or ordinal input, in
	// document order; nil when the model does not restrict them.
	Values []string `json:"values,omitempty"`
	// Feature is the OutputField feature of an output ("predictedValue",
	// "probability", ...); "target" for the target field itself; "" for inputs.
	Feature string `json:"feature,omitempty"`
}

// Record is one row of inputs, aligned with Model.Inputs(). Build it with
// Model.NewRecord and reuse it: scoring never keeps a reference to it.
type Record struct {
	Values []Value
}

// Result is the answer for one record, aligned with Model.Outputs(). Err is
// set (and Values are missing) when the record could not be scored, for
// example an invalid value under invalidValueTreatment="returnInvalid".
type Result struct {
	Values []Value
	Err    error
}

// RecordError is the per-record error of Result.Err.
type RecordError struct {
	Field string // the field at fault, "" when none
	Msg   string
}

// Error implements error.
func (e *RecordError) Error() string {
	if e.Field == "" {
		return "pmml: " + e.Msg
	}
	return fmt.Sprintf("pmml: field %q: %s", e.Field, e.Msg)
}

// Model is a compiled PMML model. It is immutable after Parse and safe for
// concurrent use by any number of goroutines.
type Model struct {
	opts     Options
	slots    []slot
	inputs   []Field
	inSlots  []int      // raw slot of each input
	inTypes  []DataType // conversion target of each input
	inDirect []bool     // the input is read without a MiningSchema treatment
	outputs  []Field
	outSlot  []int // slot of each output
	top      *model
	models   []*model // every (sub)model, indexed by prediction slot
	version  string
	pool     sync.Pool
}

// slot is one field value in the evaluation context: an input, a derived
// field, a prepared (treated) mining field or an output field.
type slot struct {
	name string
	dt   DataType
	op   OpType
	expr expr // nil: set from outside (inputs) or left missing
}

// MaxDocumentBytes bounds a PMML document: ParseFile refuses a larger file
// before reading it, and the pmml processor reads no more of one. A PMML
// document holds the model as XML text, several times the size of its
// numbers, and the parsed document takes several times the text again; a
// model needing 1 GiB of PMML is far past what anyone scores this way (the
// largest forests exported by sklearn2pmml or JPMML run to hundreds of MB).
const MaxDocumentBytes = 1 << 30

// Parse reads and compiles a PMML document. Options are optional; at most
// one may be given.
func Parse(r io.Reader, opts ...Options) (*Model, error) {
	return ParseContext(context.Background(), r, opts...)
}

// ParseContext is Parse under ctx: it checks ctx while reading the
// document and between the segments of ensembles while compiling it, and
// returns ctx.Err() (unwrapped) once ctx is done. A reader that checks ctx
// itself (processors.OpenModel) stops a read blocked on a slow source too.
func ParseContext(ctx context.Context, r io.Reader, opts ...Options) (*Model, error) {
	if len(opts) > 1 {
		return nil, errors.New("pmml: parse: at most one Options value may be given")
	}
	root, err := readDOM(ctx, r)
	if err != nil {
		return nil, err
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	return compile(ctx, root, o)
}

// ParseFile reads and compiles the PMML file at path. It reads regular
// files only (symlinks followed: a device or FIFO could be endless, or
// block) of at most MaxDocumentBytes.
func ParseFile(path string, opts ...Options) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("pmml: open model: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("pmml: open model: %s is not a regular file", path)
	}
	if st.Size() > MaxDocumentBytes {
		return nil, fmt.Errorf("pmml: open model: %s is %d bytes, over the %d-byte limit on PMML documents", path, st.Size(), MaxDocumentBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pmml: open model: %w", err)
	}
	defer f.Close()
	lr := &io.LimitedReader{R: f, N: MaxDocumentBytes + 1}
	m, err := Parse(lr, opts...)
	if lr.N == 0 {
		return nil, fmt.Errorf("pmml: %s grew past the %d-byte limit on PMML documents while being read", path, MaxDocumentBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Inputs returns the fields a record carries, in record order.
func (m *Model) Inputs() []Field { return m.inputs }

// Outputs returns the result fields, in result order: the target fields
// (when the model has them) then the final OutputFields. A model with
// neither (a clustering model without Output) has one output,
// "predictedValue".
func (m *Model) Outputs() []Field { return m.outputs }

// Version returns the PMML version attribute of the document.
func (m *Model) Version() string { return m.version }

// ModelType returns the top-level model element, e.g. "TreeModel".
func (m *Model) ModelType() string { return m.top.kind }

// FunctionName returns the top-level model's functionName.
func (m *Model) FunctionName() string { return m.top.fn }

// InputIndex returns the position of the named input in a Record, or -1.
func (m *Model) InputIndex(name string) int {
	for i, f := range m.inputs {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// OutputIndex returns the position of the named output in a Result, or -1.
func (m *Model) OutputIndex(name string) int {
	for i, f := range m.outputs {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// NewRecord returns a record with every input missing.
func (m *Model) NewRecord() Record { return Record{Values: make([]Value, len(m.inputs))} }

// NewResult returns a result with room for every output.
func (m *Model) NewResult() Result { return Result{Values: make([]Value, len(m.outputs))} }

// Score scores in[i] into out[i]. It allocates nothing per record once out
// holds results from NewResult. It fails only when the shapes are wrong;
// per-record problems are in out[i].Err.
func (m *Model) Score(in []Record, out []Result) (err error) {
	if len(out) < len(in) {
		return fmt.Errorf("pmml: score: %d results for %d records; pass at least as many results as records", len(out), len(in))
	}
	for i := range in {
		if len(in[i].Values) != len(m.inputs) {
			return fmt.Errorf("pmml: score: record %d has %d values, the model has %d inputs; build records with NewRecord", i, len(in[i].Values), len(m.inputs))
		}
		if len(out[i].Values) != len(m.outputs) {
			if cap(out[i].Values) >= len(m.outputs) {
				out[i].Values = out[i].Values[:len(m.outputs)]
			} else {
				out[i].Values = make([]Value, len(m.outputs))
			}
		}
	}
	c := m.getCtx()
	defer func() {
		// A panic here is a bug in the evaluator; report it as an error of
		// this call rather than take the serving process down. The context
		// may be inconsistent, so it is not reused.
		if r := recover(); r != nil {
			err = fmt.Errorf("pmml: score: internal error (please report it with the model): %v", r)
		}
	}()
	for i := range in {
		c.scoreOne(in[i].Values, &out[i])
	}
	m.pool.Put(c)
	return nil
}

// ScoreMap scores one record given as a map from input name to a Go value
// (nil, float64, float32, int kinds, string, bool or json.Number-like
// fmt.Stringer) and returns outputs by name (nil for a missing result).
// Unknown names are ignored. It is a convenience: it allocates.
func (m *Model) ScoreMap(rec map[string]any) (map[string]any, error) {
	r := m.NewRecord()
	for i, f := range m.inputs {
		v, ok := rec[f.Name]
		if !ok {
			continue
		}
		val, err := ToValue(v)
		if err != nil {
			return nil, fmt.Errorf("pmml: input %q: %w", f.Name, err)
		}
		r.Values[i] = val
	}
	res := []Result{m.NewResult()}
	if err := m.Score([]Record{r}, res); err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	out := make(map[string]any, len(m.outputs))
	for i, f := range m.outputs {
		out[f.Name] = res[0].Values[i].Any()
	}
	return out, nil
}

// ToValue converts a plain Go value to a Value.
func ToValue(v any) (Value, error) {
	switch x := v.(type) {
	case nil:
		return MissingValue, nil
	case Value:
		return x, nil
	case float64:
		return FloatValue(x), nil
	case float32:
		return FloatValue(float64(x)), nil
	case int:
		return FloatValue(float64(x)), nil
	case int64:
		return FloatValue(float64(x)), nil
	case int32:
		return FloatValue(float64(x)), nil
	case uint:
		return FloatValue(float64(x)), nil
	case uint64:
		return FloatValue(float64(x)), nil
	case uint32:
		return FloatValue(float64(x)), nil
	case string:
		return StringValue(x), nil
	case bool:
		return BoolValue(x), nil
	case fmt.Stringer:
		s := x.String()
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return FloatValue(f), nil
		}
		return StringValue(s), nil
	}
	return MissingValue, fmt.Errorf("unsupported value type %T: use a number, string, bool or null", v)
}

// ctx is the per-goroutine evaluation state of one record.
type ctx struct {
	m     *Model
	vals  []Value
	done  []bool
	preds []prediction
	frame []Value
	fp    int
	depth int // DefineFunction call depth
	err   error
	fbuf  []float64 // scratch numbers for models, see model.scratch
	texts map[*textIndex]textCache
}

func (m *Model) getCtx() *ctx {
	if c, ok := m.pool.Get().(*ctx); ok {
		return c
	}
	c := &ctx{m: m, vals: make([]Value, len(m.slots)), done: make([]bool, len(m.slots))}
	c.preds = make([]prediction, len(m.models))
	total := 0
	for _, md := range m.models {
		total += md.scratch
	}
	c.fbuf = make([]float64, total)
	off := 0
	for i, md := range m.models {
		p := &c.preds[i]
		n := len(md.cats)
		if md.nbuf > n {
			n = md.nbuf
		}
		p.buf = make([]float64, n)
		p.cbuf = make([]float64, n)
		p.scratch = c.fbuf[off : off+md.scratch]
		off += md.scratch
		if md.nreasons > 0 {
			p.reasons = make([]reason, 0, md.nreasons)
		}
		if md.ntargets > 1 {
			p.multi = make([]Value, md.ntargets)
		}
	}
	c.frame = make([]Value, 0, 16)
	return c
}

func (c *ctx) scoreOne(in []Value, out *Result) {
	m := c.m
	clear(c.done)
	c.err = nil
	c.frame = c.frame[:0]
	c.fp = 0
	c.depth = 0
	for i, s := range m.inSlots {
		v := in[i]
		if v.K != Float || m.inTypes[i] != TypeDouble {
			var ok bool
			if v, ok = convert(in[i], m.inTypes[i]); !ok {
				if m.inDirect[i] {
					c.fail(m.inputs[i].Name, "invalid value %q: want a %s", in[i].String(), m.inTypes[i])
					v = MissingValue
				} else {
					v = Value{K: invalidKind, S: in[i].String()}
				}
			}
		}
		if v.K == Float && v.F != v.F {
			v = MissingValue // NaN is PMML's missing number
		}
		c.vals[s] = v
		c.done[s] = true
	}
	for i := range c.preds {
		c.preds[i].evaluated = false
		c.preds[i].ok = false
	}
	c.eval(m.top)
	for i, s := range m.outSlot {
		out.Values[i] = c.get(s)
	}
	if c.err != nil {
		for i := range out.Values {
			out.Values[i] = MissingValue
		}
		out.Err = c.err
		return
	}
	out.Err = nil
}

// get returns the value of a slot, computing it on first use in this record.
func (c *ctx) get(i int) Value {
	if c.done[i] {
		return c.vals[i]
	}
	// Mark first so that a field defined in terms of itself reads missing
	// instead of recursing forever.
	c.done[i] = true
	s := &c.m.slots[i]
	if s.expr == nil {
		c.vals[i] = MissingValue
		return MissingValue
	}
	v := s.expr.eval(c)
	if v.K == Float && (s.dt == TypeDouble || s.dt == TypeUnknown) {
		// The common case needs no conversion.
		c.vals[i] = v
		return v
	}
	if s.dt != TypeUnknown && v.K != Missing && v.K != invalidKind {
		if cv, ok := convert(v, s.dt); ok {
			v = cv
			if s.dt == TypeFloat && v.K == Float {
				v.F = float64(float32(v.F))
			}
		} else {
			v = MissingValue
		}
	}
	c.vals[i] = v
	return v
}

// fail records the first per-record error.
func (c *ctx) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = &RecordError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
}
