// Package pmml is the `pmml` processor: it serves PMML models with our own
// evaluator (package pmml at the repository root) in EAS's JSON format.
//
// Request: a JSON array of records, or one record object; keys are the
// model's input field names; values are numbers, numeric strings, strings,
// booleans or null (missing). Response: a JSON array with one object per
// record, keys = the model's outputs (the target field, then the
// OutputFields), in model order.
//
// A record with a value the model cannot take (text for a numeric field, an
// invalid value under invalidValueTreatment="returnInvalid") is handled per
// model_config "on_bad_record": "fail" (default) answers 400 for the whole
// request naming the record and field; "error_entry" answers 200 with
// {"error": "..."} in that record's place and scores the others.
//
// Requests batch: the scheduler hands Run many requests at once and they are
// scored in one call over all their records.
package pmml

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/pmml"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/jsonenc"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/sniff"
	"github.com/eas-server/eas-server/processors/unknownfields"
)

func init() {
	processors.Register("pmml", "PMML 3.x-4.4 models (regression, trees, ensembles, neural networks, SVM, ...) scored by our evaluator; EAS JSON records",
		func() *processors.Engine { return processors.Adapt[*payload, *result](&Processor{}) })
}

// Config is the pmml processor's model_config.
type Config struct {
	// MissingValueDefaults fills a missing input with false, 0, 0.0 or ""
	// (EAS's behaviour) where the model defines no missing-value treatment
	// for the field. Default true; false keeps pure PMML semantics.
	MissingValueDefaults *bool `json:"missing_value_defaults"`
	// OnBadRecord is "fail" (400 for the request) or "error_entry".
	OnBadRecord string `json:"on_bad_record"`
	// UnknownFields is what records with keys that are not model inputs
	// get: "ignore", "warn" (default: a response header and a metric) or
	// "reject" (400); see unknownfields.Mode.
	UnknownFields string `json:"unknown_fields"`
}

// Processor serves one PMML model. It is safe for concurrent use.
type Processor struct {
	spec      processors.Spec
	cfg       Config
	file      string
	model     *pmml.Model
	inputIdx  map[string]int // input name -> record position
	errorMode bool           // on_bad_record = error_entry
	unknown   unknownfields.Mode
	inputs    []string // input names, for the suggestions of unknown_fields "reject"
}

// payload is one request's records.
type payload struct {
	records []pmml.Record
	bad     []error             // per record: a decode problem, or nil
	unknown *unknownfields.Keys // keys that are not inputs; nil under "ignore"
}

// Configure reads model_config and checks model_entry, without I/O.
func (p *Processor) Configure(spec processors.Spec) error {
	p.spec = spec
	if err := spec.DecodeConfig(&p.cfg, `{"missing_value_defaults": true|false, "on_bad_record": "fail"|"error_entry", "unknown_fields": "ignore"|"warn"|"reject"}`); err != nil {
		return err
	}
	var err error
	if p.unknown, err = unknownfields.Parse(p.cfg.UnknownFields); err != nil {
		return err
	}
	switch p.cfg.OnBadRecord {
	case "", "fail":
	case "error_entry":
		p.errorMode = true
	default:
		return fmt.Errorf("model_config.on_bad_record: must be \"fail\" or \"error_entry\", got %q", p.cfg.OnBadRecord)
	}
	if spec.ModelSource == "" {
		return fmt.Errorf("model_path: the pmml processor needs a model; set model_path to a .pmml file or a directory holding one")
	}
	return nil
}

// modelFile is how Load finds the PMML file under model_path.
var modelFile = processors.ModelFile{Kind: "PMML", Exts: []string{".pmml", ".xml"}}

// Load finds and compiles the PMML file.
func (p *Processor) Load(ctx context.Context, files processors.Files) error {
	if files.ModelPath == "" {
		return fmt.Errorf("model_path: the pmml processor needs a model; set model_path to a .pmml file or a directory holding one")
	}
	file, err := modelFile.Find(files.ModelPath, p.spec.ModelEntry)
	if err != nil {
		if werr := sniff.WrongFormat(files.ModelPath, "pmml", "PMML"); werr != nil {
			return werr // a SavedModel directory, say
		}
		return err
	}
	defaults := p.cfg.MissingValueDefaults == nil || *p.cfg.MissingValueDefaults
	// The service's model size limit, and PMML's own: a larger document is
	// refused before it is read, one growing past it fails the read.
	r, err := processors.OpenModel(ctx, file, min(p.spec.ModelLimit(), pmml.MaxDocumentBytes))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("model_path: %w", err)
	}
	defer r.Close()
	m, err := pmml.ParseContext(ctx, r, pmml.Options{MissingValueDefaults: defaults})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Another format's parse error ("malformed XML") says nothing
		// useful; what the file is and which code serves it does.
		if werr := sniff.WrongFormat(file, "pmml", "PMML"); werr != nil {
			return werr
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	p.file, p.model = file, m
	p.inputIdx = make(map[string]int, len(m.Inputs()))
	p.inputs = make([]string, len(m.Inputs()))
	for i, f := range m.Inputs() {
		p.inputIdx[f.Name] = i
		p.inputs[i] = f.Name
	}
	if p.spec.Logger != nil {
		p.spec.Logger.Info("pmml model loaded", "file", file, "model", m.ModelType(), "function", m.FunctionName(),
			"inputs", len(m.Inputs()), "outputs", len(m.Outputs()))
	}
	return nil
}

// Metadata lists the model's input and output fields with PMML data types.
func (p *Processor) Metadata() processors.Metadata {
	conv := func(fs []pmml.Field) []processors.IOSpec {
		out := make([]processors.IOSpec, len(fs))
		for i, f := range fs {
			out[i] = processors.IOSpec{Name: f.Name, DType: f.DataType.String()}
		}
		return out
	}
	return processors.Metadata{
		Processor: "pmml",
		Inputs:    conv(p.model.Inputs()),
		Outputs:   conv(p.model.Outputs()),
		Extra: map[string]any{
			"model_type":    p.model.ModelType(),
			"function_name": p.model.FunctionName(),
			"pmml_version":  p.model.Version(),
			"model_file":    filepath.Base(p.file),
		},
	}
}

// Decode parses the EAS JSON records.
func (p *Processor) Decode(_ context.Context, req *processors.Request) (*payload, error) {
	body := bytes.TrimSpace(req.Body)
	if len(body) == 0 {
		return nil, badinput.Errorf("empty body; send a JSON array of records, e.g. [{\"%s\": 1}]", p.exampleField())
	}
	var objs []map[string]json.RawMessage
	switch body[0] {
	case '[':
		if err := json.Unmarshal(body, &objs); err != nil {
			return nil, badinput.Errorf("body is not a JSON array of record objects: %v", err)
		}
	case '{':
		var one map[string]json.RawMessage
		if err := json.Unmarshal(body, &one); err != nil {
			return nil, badinput.Errorf("body is not a JSON record object: %v", err)
		}
		objs = []map[string]json.RawMessage{one}
	default:
		return nil, badinput.Errorf("body must be a JSON array of records or one record object, e.g. [{\"%s\": 1}]", p.exampleField())
	}
	pl := &payload{records: make([]pmml.Record, len(objs)), bad: make([]error, len(objs)), unknown: unknownfields.NewKeys(p.unknown)}
	inputs := p.model.Inputs()
	for i, obj := range objs {
		if obj == nil {
			return nil, badinput.Errorf("record %d is null; each record must be a JSON object", i)
		}
		p.noteUnknown(pl.unknown, obj)
		rec := p.model.NewRecord()
		for name, raw := range obj {
			j, ok := p.inputIdx[name]
			if !ok {
				continue // noted above; EAS ignores keys the model does not read
			}
			v, err := toValue(raw, inputs[j].DataType)
			if err != nil {
				pl.bad[i] = fmt.Errorf("record %d, field %q: %v", i, name, err)
				if !p.errorMode {
					return nil, badinput.Errorf("%v", pl.bad[i])
				}
				break
			}
			rec.Values[j] = v
		}
		pl.records[i] = rec
	}
	if p.unknown == unknownfields.Reject {
		if err := pl.unknown.Reject(p.inputs); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// noteUnknown adds the record's keys that are not inputs to u, sorted so
// that the header names them in the same order every time.
func (p *Processor) noteUnknown(u *unknownfields.Keys, obj map[string]json.RawMessage) {
	if u == nil || p.allKnown(obj) {
		return
	}
	var names []string
	for name := range obj {
		if _, ok := p.inputIdx[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		u.Add(n)
	}
}

// allKnown reports whether every key of obj is an input: the common case,
// checked without allocating.
func (p *Processor) allKnown(obj map[string]json.RawMessage) bool {
	for name := range obj {
		if _, ok := p.inputIdx[name]; !ok {
			return false
		}
	}
	return true
}

func (p *Processor) exampleField() string {
	if in := p.model.Inputs(); len(in) > 0 {
		return in[0].Name
	}
	return "x"
}

// toValue converts one JSON value for a field of type dt.
func toValue(raw json.RawMessage, dt pmml.DataType) (pmml.Value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return pmml.MissingValue, nil
	}
	switch raw[0] {
	case 'n':
		return pmml.MissingValue, nil
	case 't', 'f':
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return pmml.Value{}, err
		}
		return pmml.BoolValue(b), nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return pmml.Value{}, err
		}
		if isNumeric(dt) {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				if strings.TrimSpace(s) == "" {
					return pmml.MissingValue, nil
				}
				return pmml.Value{}, fmt.Errorf("%q is not a number; the field is %s", s, dt)
			}
			return pmml.FloatValue(f), nil
		}
		return pmml.StringValue(s), nil
	case '{', '[':
		return pmml.Value{}, fmt.Errorf("objects and arrays are not field values")
	default:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return pmml.Value{}, fmt.Errorf("bad number %s", raw)
		}
		if !isNumeric(dt) && dt != pmml.TypeBoolean {
			// A number for a string field: keep its text ("1" matches a
			// category written as 1).
			return pmml.StringValue(string(raw)), nil
		}
		return pmml.FloatValue(f), nil
	}
}

func isNumeric(dt pmml.DataType) bool {
	return dt == pmml.TypeDouble || dt == pmml.TypeFloat || dt == pmml.TypeInteger
}

// BatchKey lets every request join a batch: records are independent rows.
func (p *Processor) BatchKey(*payload) (string, bool) { return "pmml", true }

// result is one request's answer.
type result struct {
	results []pmml.Result
	bad     []error
}

// Run scores every record of every request of the batch in one call.
func (p *Processor) Run(ctx context.Context, batch []*payload) ([]*result, error) {
	n := 0
	for _, pl := range batch {
		n += len(pl.records)
	}
	in := make([]pmml.Record, 0, n)
	for _, pl := range batch {
		in = append(in, pl.records...)
	}
	out := make([]pmml.Result, n)
	for i := range out {
		out[i] = p.model.NewResult()
	}
	if err := p.model.Score(in, out); err != nil {
		return nil, err
	}
	res := make([]*result, len(batch))
	off := 0
	for i, pl := range batch {
		k := len(pl.records)
		res[i] = &result{results: out[off : off+k], bad: pl.bad}
		off += k
	}
	return res, nil
}

// Encode writes the JSON array of result objects.
func (p *Processor) Encode(_ context.Context, pl *payload, res *result) (*processors.Response, error) {
	outputs := p.model.Outputs()
	b := make([]byte, 0, 64*len(res.results))
	b = append(b, '[')
	for i, rr := range res.results {
		if i > 0 {
			b = append(b, ',')
		}
		err := res.bad[i]
		if err == nil {
			err = rr.Err
			if err != nil {
				err = fmt.Errorf("record %d: %v", i, err)
			}
		}
		if err != nil {
			if !p.errorMode {
				return nil, badinput.Errorf("%v", err)
			}
			b = append(b, `{"error":`...)
			b = jsonenc.AppendString(b, err.Error())
			b = append(b, '}')
			continue
		}
		b = append(b, '{')
		for j, f := range outputs {
			if j > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, f.Name)
			b = append(b, ':')
			b = appendValue(b, rr.Values[j])
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	resp := &processors.Response{Body: b, ContentType: "application/json"}
	if h := pl.unknown.Header(); h != "" {
		resp.Header = http.Header{processors.UnknownFieldsHeader: {h}}
	}
	return resp, nil
}

func appendValue(b []byte, v pmml.Value) []byte {
	switch x := v.Any().(type) {
	case nil:
		return append(b, "null"...)
	case float64:
		return jsonenc.AppendFloat(b, x, 64)
	case bool:
		return strconv.AppendBool(b, x)
	case string:
		return jsonenc.AppendString(b, x)
	default:
		return jsonenc.AppendString(b, fmt.Sprint(x))
	}
}

var (
	_ processors.Typed[*payload, *result] = (*Processor)(nil)
	_ processors.Batcher[*payload]        = (*Processor)(nil)
)
