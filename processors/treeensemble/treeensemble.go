// Package treeensemble is the tree-ensemble processor, registered as
// `parameter_server`, `parameter_sever` (the spelling old EAS pages use)
// and `xgboost`. It serves XGBoost models (JSON, UBJSON, legacy binary)
// and LightGBM models (text, JSON dump) with package trees, whose numbers
// match the libraries': bit for bit for XGBoost, within 1e-9 for LightGBM.
//
// Request: EAS's JSON array of records (feature name -> value; a missing
// key or null is a missing value), one record object, or the dense form
// {"columns": [...], "data": [[...], ...]} (columns default to the model's
// order). Feature names come from model_config "features", else the
// model, else XGBoost's defaults f0, f1, ... model_config "missing" names
// a value that also counts as missing, as XGBoost's DMatrix(missing=...).
//
// Response: one object per record, as the PS processor answers:
// {"label": <class or value>, "score": <its probability or value>,
// "details": [{"<class>": p}, ...]}; with model_config
// {"output": "margin"}, {"margin": m} (a list for multiclass).
//
// KServe v2 works too (Tensors): one FP32 (or FP64) input of shape
// [N, F], checked in FromTensors, one output "scores" of shape [N, K].
//
// Requests batch: Run scores all records of all requests of a batch in
// one call (FP32 tensors, scored in float32, in a second one).
package treeensemble

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"

	"github.com/eas-server/eas-server/engines/trees"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/jsonenc"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/sniff"
	"github.com/eas-server/eas-server/processors/unknownfields"
	"github.com/eas-server/eas-server/tensor"
)

func init() {
	for _, code := range []string{"parameter_server", "parameter_sever", "xgboost"} {
		processors.Register(code, "XGBoost (JSON, UBJSON, binary) and LightGBM (text, JSON) tree ensembles, scored natively with the libraries' exact numbers; EAS JSON records",
			func() *processors.Engine { return processors.Adapt[*payload, *result](&Processor{}) })
	}
}

// Config is the processor's model_config.
type Config struct {
	// Output is "" or "prediction" (label, score, details) or "margin"
	// (raw margins before the objective's link).
	Output string `json:"output"`
	// Features names the model's columns in order; it overrides the
	// names the model carries.
	Features []string `json:"features"`
	// Classes names the classes of a classifier, for "label" and the
	// keys of "details"; default "0", "1", ...
	Classes []string `json:"classes"`
	// Missing is a value that means "missing" besides null and an absent
	// key, as XGBoost's DMatrix(missing=...) (e.g. 0 for sparse data
	// trained that way, or -999).
	Missing *float64 `json:"missing"`
	// UnknownFields is what records with keys that are not features get:
	// "ignore", "warn" (default: a response header and a metric) or
	// "reject" (400); see unknownfields.Mode.
	UnknownFields string `json:"unknown_fields"`
}

// Processor serves one tree-ensemble model. It is safe for concurrent use.
type Processor struct {
	spec     processors.Spec
	cfg      Config
	margin   bool
	file     string
	model    *trees.Model
	features []string
	index    map[string]int
	classes  []string
	unknown  unknownfields.Mode
}

// payload is one request: n records as rows of NumFeatures values (NaN =
// missing, model_config "missing" already applied), float64 for EAS JSON
// records and KServe FP64 tensors, float32 for a KServe FP32 tensor, which
// is scored as such.
type payload struct {
	rows   []float64
	rows32 []float32
	n      int
	fp32   bool                // the rows are rows32
	keys   *unknownfields.Keys // record keys that are not features; nil when not collected
}

// accepts is what model_config may hold, for its error messages.
const accepts = `{"output": "prediction"|"margin", "features": [names...], "classes": [names...], "missing": number, "unknown_fields": "ignore"|"warn"|"reject"}`

// Configure reads model_config, without I/O.
func (p *Processor) Configure(spec processors.Spec) error {
	p.spec = spec
	if err := spec.DecodeConfig(&p.cfg, accepts); err != nil {
		return err
	}
	var err error
	if p.unknown, err = unknownfields.Parse(p.cfg.UnknownFields); err != nil {
		return err
	}
	switch p.cfg.Output {
	case "", "prediction":
	case "margin":
		p.margin = true
	default:
		return fmt.Errorf("model_config.output: must be \"prediction\" or \"margin\", got %q", p.cfg.Output)
	}
	seen := make(map[string]bool, len(p.cfg.Features))
	for _, n := range p.cfg.Features {
		if seen[n] {
			return fmt.Errorf("model_config.features: %q appears twice; the names must be unique", n)
		}
		seen[n] = true
	}
	if spec.ModelSource == "" {
		return p.noModel()
	}
	return nil
}

func (p *Processor) noModel() error {
	return fmt.Errorf("model_path: the %s processor needs a model; set model_path to an XGBoost (.json, .ubj, .bin) or LightGBM (.txt, .model) file", p.spec.Code)
}

// Load reads and compiles the model and resolves the feature names.
func (p *Processor) Load(ctx context.Context, files processors.Files) error {
	if files.ModelPath == "" {
		return p.noModel()
	}
	file, err := modelFile.Find(files.ModelPath, p.spec.ModelEntry)
	if err != nil {
		if werr := sniff.WrongFormat(files.ModelPath, "trees", "an XGBoost or LightGBM model"); werr != nil {
			return werr // a SavedModel directory, say
		}
		return err
	}
	// The service's model size limit, and the trees package's own.
	data, err := processors.ReadModel(ctx, file, min(p.spec.ModelLimit(), trees.MaxModelBytes))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("model_path: %w", err)
	}
	m, err := trees.ParseContext(ctx, data)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Another format's parse error says nothing useful; what the
		// file is and which code serves it does.
		if werr := sniff.WrongFormat(file, "trees", "an XGBoost or LightGBM model"); werr != nil {
			return werr
		}
		return fmt.Errorf("load model %s: %w", file, err)
	}
	names := m.FeatureNames
	if len(p.cfg.Features) > 0 {
		if len(p.cfg.Features) != m.NumFeatures {
			return fmt.Errorf("model_config.features: %d names, but the model has %d features", len(p.cfg.Features), m.NumFeatures)
		}
		names = p.cfg.Features
	}
	if names == nil {
		names = make([]string, m.NumFeatures)
		for i := range names {
			names[i] = "f" + strconv.Itoa(i)
		}
	}
	index := make(map[string]int, len(names))
	for i, n := range names {
		if _, dup := index[n]; dup {
			return fmt.Errorf("feature name %q appears twice; set model_config.features to unique names", n)
		}
		index[n] = i
	}
	classes := p.cfg.Classes
	if nc := m.NumClass; nc > 0 {
		if len(classes) > 0 && len(classes) != nc {
			return fmt.Errorf("model_config.classes: %d names, but the model has %d classes", len(classes), nc)
		}
		if len(classes) == 0 {
			classes = make([]string, nc)
			for i := range classes {
				classes[i] = strconv.Itoa(i)
			}
		}
	} else if len(classes) > 0 {
		return fmt.Errorf("model_config.classes: the model is a %s model, not a classifier", m.Kind)
	}
	p.file, p.model, p.features, p.index, p.classes = file, m, names, index, classes
	if p.spec.Logger != nil {
		p.spec.Logger.Info("tree model loaded", "file", file, "format", m.Format, "booster", m.Booster,
			"objective", m.Objective, "trees", m.NumTrees, "features", m.NumFeatures)
	}
	return nil
}

// modelFile is how Load finds the model file in a model_path directory.
var modelFile = processors.ModelFile{Kind: "model", Exts: []string{".json", ".ubj", ".bin", ".model", ".txt", ".xgb", ".lgb"}}

// Platform names the runtime for KServe model metadata.
func (p *Processor) Platform() string { return p.model.Library }

// outputDType is the KServe datatype of the scores: XGBoost computes in
// float32, LightGBM in float64.
func (p *Processor) outputDType() tensor.DType {
	if p.model.Float32() {
		return tensor.Float32
	}
	return tensor.Float64
}

// width is the number of values per record: margins, or Scores (class
// probabilities even for multi:softmax, whose label is then the argmax).
func (p *Processor) width() int {
	return p.model.NumGroups()
}

// Metadata describes the one [N, F] input and the scores output; the
// feature names the JSON form takes are in Extra["features"].
func (p *Processor) Metadata() processors.Metadata {
	m := p.model
	return processors.Metadata{
		Processor: p.spec.Code,
		Inputs:    []processors.IOSpec{{Name: "input", DType: "FP32", Shape: []int64{-1, int64(m.NumFeatures)}}},
		Outputs:   []processors.IOSpec{{Name: "scores", DType: p.outputDType().String(), Shape: []int64{-1, int64(p.width())}}},
		Extra: map[string]any{
			"library":    m.Library,
			"format":     m.Format,
			"booster":    m.Booster,
			"objective":  m.Objective,
			"kind":       m.Kind.String(),
			"trees":      m.NumTrees,
			"features":   p.features,
			"classes":    p.classes,
			"output":     map[bool]string{true: "margin", false: "prediction"}[p.margin],
			"model_file": filepath.Base(p.file),
		},
	}
}

// Decode parses the EAS JSON records or the dense form.
func (p *Processor) Decode(_ context.Context, req *processors.Request) (*payload, error) {
	keys := unknownfields.NewKeys(p.unknown)
	rows, n, err := decodeRecordsNoting(req.Body, p.features, p.index, keys)
	if err != nil {
		return nil, badinput.Errorf("%v; send a JSON array of records like [{\"%s\": 1.5}] or {\"columns\": [...], \"data\": [[...]]}", err, p.features[0])
	}
	if p.unknown == unknownfields.Reject {
		if err := keys.Reject(p.features); err != nil {
			return nil, err
		}
	}
	p.markMissing64(rows)
	return &payload{rows: rows, n: n, keys: keys}, nil
}

// FromTensors takes a KServe [N, F] FP32 or FP64 tensor, checked here so a
// bad one is answered 400 before it queues.
func (p *Processor) FromTensors(_ context.Context, tp *processors.TensorPayload) (*payload, error) {
	F := p.model.NumFeatures
	if len(tp.Inputs) != 1 {
		return nil, badinput.Errorf("%d input tensors; the model takes one FP32 tensor \"input\" of shape [-1, %d]", len(tp.Inputs), F)
	}
	in := tp.Inputs[0]
	if len(in.Shape) != 2 || in.Shape[1] != int64(F) || in.Shape[0] < 0 {
		return nil, badinput.Errorf("input %q: shape %s, the model takes [-1, %d]", in.Name, tensor.FormatShape(in.Shape), F)
	}
	if err := in.Validate(); err != nil {
		return nil, badinput.Errorf("input %q: %v", in.Name, err)
	}
	n := int(in.Shape[0])
	switch in.DType {
	case tensor.Float32:
		x := make([]float32, n*F)
		for i := range x {
			x[i] = math.Float32frombits(uint32(in.Data[4*i]) | uint32(in.Data[4*i+1])<<8 | uint32(in.Data[4*i+2])<<16 | uint32(in.Data[4*i+3])<<24)
			if p.cfg.Missing != nil && float64(x[i]) == *p.cfg.Missing {
				x[i] = float32(math.NaN())
			}
		}
		return &payload{rows32: x, n: n, fp32: true}, nil
	case tensor.Float64:
		x := make([]float64, n*F)
		for i := range x {
			var u uint64
			for k := 7; k >= 0; k-- {
				u = u<<8 | uint64(in.Data[8*i+k])
			}
			x[i] = math.Float64frombits(u)
		}
		p.markMissing64(x)
		return &payload{rows: x, n: n}, nil
	}
	return nil, badinput.Errorf("input %q: datatype %s; the model takes FP32 (or FP64)", in.Name, in.DType)
}

// markMissing64 turns model_config "missing" values into NaN.
func (p *Processor) markMissing64(rows []float64) {
	if p.cfg.Missing == nil {
		return
	}
	miss := *p.cfg.Missing
	for i, v := range rows {
		if v == miss {
			rows[i] = math.NaN()
		}
	}
}

// BatchKey lets every request join a batch: records are independent rows,
// and Run scores float64 and float32 rows apart.
func (p *Processor) BatchKey(*payload) (string, bool) { return "trees", true }

// result is one request's scores, width values per record.
type result struct {
	vals  []float64
	n     int
	width int
}

// Run scores every record of every request of the batch: the float64 rows
// (JSON records, FP64 tensors) in one call, the FP32 tensors' rows in
// another.
func (p *Processor) Run(ctx context.Context, batch []*payload) ([]*result, error) {
	res := make([]*result, len(batch))
	if err := p.score(batch, res, false); err != nil {
		return nil, err
	}
	if err := p.score(batch, res, true); err != nil {
		return nil, err
	}
	return res, nil
}

// score scores, in one call, the payloads of batch whose rows are float32
// (fp32) or float64, and sets their results.
func (p *Processor) score(batch []*payload, res []*result, fp32 bool) error {
	total, count, last := 0, 0, 0
	for i, pl := range batch {
		if pl.fp32 == fp32 {
			total += pl.n
			count++
			last = i
		}
	}
	if count == 0 {
		return nil
	}
	w := p.width()
	out := make([]float64, total*w)
	if total > 0 {
		var err error
		if fp32 {
			x := gather(batch, last, count, total*p.model.NumFeatures, func(pl *payload) []float32 { return pl.rows32 })
			if p.margin {
				err = p.model.MarginsFloat32(out, x)
			} else {
				err = p.model.ScoresFloat32(out, x)
			}
		} else {
			x := gather(batch, last, count, total*p.model.NumFeatures, func(pl *payload) []float64 { return pl.rows })
			if p.margin {
				err = p.model.Margins(out, x)
			} else {
				err = p.model.Scores(out, x)
			}
		}
		if err != nil {
			return err
		}
	}
	off := 0
	for i, pl := range batch {
		if pl.fp32 == fp32 {
			res[i] = &result{vals: out[off*w : (off+pl.n)*w], n: pl.n, width: w}
			off += pl.n
		}
	}
	return nil
}

// gather concatenates the rows that rows picks out of the payloads (nil
// for a payload of the other precision): count payloads, size values in
// all. One payload's rows (at index last) are used as they are.
func gather[T float32 | float64](batch []*payload, last, count, size int, rows func(*payload) []T) []T {
	if count == 1 {
		return rows(batch[last])
	}
	x := make([]T, 0, size)
	for _, pl := range batch {
		x = append(x, rows(pl)...)
	}
	return x
}

// ToTensors answers a KServe request with the tensor "scores" of shape
// [N, K]: FP32 for XGBoost, FP64 for LightGBM.
func (p *Processor) ToTensors(_ context.Context, _ *payload, r *result) (*processors.TensorResult, error) {
	n, w := r.n, r.width
	dt := p.outputDType()
	t := tensor.Tensor{Name: "scores", DType: dt, Shape: []int64{int64(n), int64(w)}, Data: make([]byte, n*w*dt.Size())}
	for i, v := range r.vals {
		if dt == tensor.Float32 {
			u := math.Float32bits(float32(v))
			t.Data[4*i], t.Data[4*i+1], t.Data[4*i+2], t.Data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		} else {
			u := math.Float64bits(v)
			for k := 0; k < 8; k++ {
				t.Data[8*i+k] = byte(u >> (8 * k))
			}
		}
	}
	return &processors.TensorResult{Outputs: []tensor.Tensor{t}}, nil
}

// Encode writes the JSON array of per-record objects.
func (p *Processor) Encode(_ context.Context, pl *payload, res *result) (*processors.Response, error) {
	bits := 64
	if p.model.Float32() {
		bits = 32
	}
	b := make([]byte, 0, 64*res.n*max(res.width, 1))
	b = append(b, '[')
	for i := 0; i < res.n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		v := res.vals[i*res.width : (i+1)*res.width]
		b = p.appendRecord(b, v, bits)
	}
	b = append(b, ']')
	resp := &processors.Response{Body: b, ContentType: "application/json"}
	if h := pl.keys.Header(); h != "" {
		resp.Header = http.Header{processors.UnknownFieldsHeader: {h}}
	}
	return resp, nil
}

// appendRecord writes one record's answer.
func (p *Processor) appendRecord(b []byte, v []float64, bits int) []byte {
	m := p.model
	if p.margin {
		b = append(b, `{"margin":`...)
		if len(v) == 1 {
			b = appendNum(b, v[0], bits)
		} else {
			b = append(b, '[')
			for j, x := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendNum(b, x, bits)
			}
			b = append(b, ']')
		}
		return append(b, '}')
	}
	switch {
	case m.Kind == trees.Multiclass:
		best := 0
		for j, x := range v {
			if x > v[best] {
				best = j
			}
		}
		b = append(b, `{"label":`...)
		b = p.appendClass(b, best)
		b = append(b, `,"score":`...)
		b = appendNum(b, v[best], bits)
		b = append(b, `,"details":[`...)
		for j, x := range v {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = jsonenc.AppendString(b, p.classes[j])
			b = append(b, ':')
			b = appendNum(b, x, bits)
			b = append(b, '}')
		}
		return append(b, "]}"...)
	case m.Kind == trees.Binary:
		s := v[0]
		label := 0
		if m.Probabilities() {
			if s > 0.5 {
				label = 1
			}
		} else if s > 0 {
			label = 1
		}
		b = append(b, `{"label":`...)
		b = p.appendClass(b, label)
		b = append(b, `,"score":`...)
		if m.Probabilities() {
			q := 1 - s
			if bits == 32 {
				q = float64(1 - float32(s))
			}
			if label == 0 {
				b = appendNum(b, q, bits)
			} else {
				b = appendNum(b, s, bits)
			}
			b = append(b, `,"details":[{`...)
			b = jsonenc.AppendString(b, p.classes[0])
			b = append(b, ':')
			b = appendNum(b, q, bits)
			b = append(b, "},{"...)
			b = jsonenc.AppendString(b, p.classes[1])
			b = append(b, ':')
			b = appendNum(b, s, bits)
			return append(b, "}]}"...)
		}
		b = appendNum(b, s, bits)
		return append(b, '}')
	}
	b = append(b, `{"label":`...)
	b = appendNum(b, v[0], bits)
	b = append(b, `,"score":`...)
	b = appendNum(b, v[0], bits)
	return append(b, '}')
}

// appendClass writes class k as its index, or its configured name.
func (p *Processor) appendClass(b []byte, k int) []byte {
	if len(p.cfg.Classes) > 0 {
		return jsonenc.AppendString(b, p.classes[k])
	}
	return strconv.AppendInt(b, int64(k), 10)
}

// appendNum writes x in its shortest form at the model's precision, so a
// float32 score reads back to the same bits; non-finite values are null.
func appendNum(b []byte, x float64, bits int) []byte { return jsonenc.AppendFloat(b, x, bits) }

var (
	_ processors.Typed[*payload, *result]   = (*Processor)(nil)
	_ processors.Batcher[*payload]          = (*Processor)(nil)
	_ processors.Tensors[*payload, *result] = (*Processor)(nil)
)
