package pmml

import (
	"context"
	"math"
	"strconv"
	"strings"
)

// prediction is what one (sub)model produced for the current record.
type prediction struct {
	ok        bool
	evaluated bool      // the model ran for the current record
	rescaled  bool      // the scorer already applied the Targets rescaling
	val       Value     // predicted value, in the target's data type
	cat       int       // winning category index into model.cats, -1 if none
	probs     []float64 // per category; may alias read-only model data
	conf      []float64 // confidences per category, nil when they equal probs
	buf       []float64 // owned storage for probs
	cbuf      []float64 // owned storage for conf
	entity    Value     // entity id: tree node, rule, cluster, segment
	ent       int       // entity index (cluster number), -1 if none
	affin     []float64 // clustering: per cluster affinity (distance or similarity)
	scratch   []float64 // model scratch space of model.scratch numbers
	reasons   []reason  // scorecard reason codes, ordered
	multi     []Value   // per-target values of multi-target models
	rule      *ruleHit  // ruleset: the firing rule
}

type reason struct {
	code  string
	score float64
}

func (p *prediction) reset() {
	p.ok = false
	p.rescaled = false
	p.val = MissingValue
	p.cat = -1
	p.probs = nil
	p.conf = nil
	p.entity = MissingValue
	p.ent = -1
	p.affin = nil
	p.reasons = p.reasons[:0]
	p.rule = nil
	for i := range p.multi {
		p.multi[i] = MissingValue
	}
}

// ownProbs returns the zeroed owned probability buffer and makes it current.
func (p *prediction) ownProbs(n int) []float64 {
	b := p.buf[:n]
	clear(b)
	p.probs = b
	return b
}

// scorer is the per-model-type evaluation.
type scorer interface {
	score(c *ctx, m *model, p *prediction)
}

// model is one compiled model element, top-level or a segment.
type model struct {
	kind     string // element name, e.g. "TreeModel"
	fn       string // functionName
	pi       int    // prediction slot
	cats     []Value
	target   string   // target field name, "" when none
	tnames   []string // every target field name
	targetDT DataType
	targetOp OpType
	targets  *targetDef
	impl     scorer
	scratch  int // numbers of scratch space the scorer needs per record
	nbuf     int // minimum length of prediction buffers
	nreasons int
	ntargets int
	floatCtx bool // x-mathContext="float"
	display  map[int]string
}

// classification reports whether the model predicts categories.
func (m *model) classification() bool { return m.fn == "classification" }

// catIndex returns the index of a category, adding it while compiling.
func (m *model) catIndex(v Value) int {
	for i, c := range m.cats {
		if equalValues(c, v) {
			return i
		}
	}
	m.cats = append(m.cats, v)
	return len(m.cats) - 1
}

// findCat returns the index of a category or -1.
func (m *model) findCat(v Value) int {
	for i, c := range m.cats {
		if equalValues(c, v) {
			return i
		}
	}
	return -1
}

// catValue converts a label from the document to a category Value.
func (m *model) catValue(s string) Value {
	if m.targetDT != TypeUnknown {
		if v, ok := parseConst(s, m.targetDT); ok {
			return v
		}
	}
	return StringValue(s)
}

// eval runs a model and applies its Targets.
func (c *ctx) eval(m *model) *prediction {
	p := &c.preds[m.pi]
	p.reset()
	p.evaluated = true
	m.impl.score(c, m, p)
	if !p.ok && m.targets != nil {
		// The model could not predict (missing inputs): the Target's
		// defaults stand in, as the specification says.
		switch {
		case m.classification() && m.targets.priors != nil:
			p.probs = m.targets.priors
			p.setCatFromProbs(m)
		case !m.classification() && m.targets.hasDef:
			p.ok, p.val, p.rescaled = true, FloatValue(m.targets.def), true
		}
	}
	if p.ok && m.targets != nil && !m.classification() && p.val.K == Float && !p.rescaled {
		p.val.F = m.targets.apply(p.val.F)
	}
	if p.ok && m.floatCtx && p.val.K == Float {
		p.val.F = float64(float32(p.val.F))
	}
	return p
}

// setCat sets a classification result from probabilities, picking the most
// probable category (the first on ties).
func (p *prediction) setCatFromProbs(m *model) {
	best := -1
	bv := math.Inf(-1)
	for i, v := range p.probs {
		if v > bv {
			best, bv = i, v
		}
	}
	if best < 0 {
		return
	}
	p.cat = best
	p.val = m.cats[best]
	p.ok = true
}

// targetDef is a compiled Target element.
type targetDef struct {
	factor, constant float64
	min, max         float64
	hasMin, hasMax   bool
	cast             string
	priors           []float64 // by category index; nil when none
	def              float64   // TargetValue defaultValue of a regression
	hasDef           bool
}

func (t *targetDef) apply(v float64) float64 {
	if t.hasMin && v < t.min {
		v = t.min
	}
	if t.hasMax && v > t.max {
		v = t.max
	}
	v = v*t.factor + t.constant
	switch t.cast {
	case "round":
		v = math.Floor(v + 0.5)
	case "ceiling":
		v = math.Ceil(v)
	case "floor":
		v = math.Floor(v)
	}
	return v
}

// scope resolves field names while compiling.
type scope struct {
	parent *scope
	names  map[string]int
}

func newScope(parent *scope) *scope { return &scope{parent: parent, names: map[string]int{}} }

func (s *scope) lookup(name string) (int, bool) {
	for ; s != nil; s = s.parent {
		if i, ok := s.names[name]; ok {
			return i, true
		}
	}
	return 0, false
}

// dataField is a compiled DataField.
type dataField struct {
	name      string
	dt        DataType
	op        OpType
	raw       int // input slot
	valid     []Value
	validSet  map[string]bool
	invalid   []Value
	missing   []Value
	intervals []interval
	display   map[string]string
}

type interval struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

func (iv interval) contains(f float64) bool {
	if f < iv.lo || f > iv.hi {
		return false
	}
	if iv.loOpen && f == iv.lo || iv.hiOpen && f == iv.hi {
		return false
	}
	return true
}

// compiler carries state while turning the DOM into a Model.
type compiler struct {
	ctx   context.Context // checked between segments: a large ensemble compiles for seconds
	m     *Model
	opts  Options
	dd    map[string]*dataField
	ddOrd []*dataField
	funcs map[string]*defFunc
	data  *scope               // DataDictionary fields (prepared by the top MiningSchema)
	glob  *scope               // TransformationDictionary
	f32   bool                 // compiling inside x-mathContext="float"
	post  []func(*Model) error // steps that need the finished model
}

func (cc *compiler) addSlot(name string, dt DataType, op OpType, e expr) int {
	cc.m.slots = append(cc.m.slots, slot{name: name, dt: dt, op: op, expr: e})
	return len(cc.m.slots) - 1
}

// modelElements are the model types the evaluator implements.
var modelElements = map[string]bool{
	"RegressionModel": true, "GeneralRegressionModel": true, "TreeModel": true, "MiningModel": true,
	"NeuralNetwork": true, "Scorecard": true, "SupportVectorMachineModel": true, "NaiveBayesModel": true,
	"ClusteringModel": true, "NearestNeighborModel": true, "RuleSetModel": true, "AnomalyDetectionModel": true,
}

// knownModels are model types of the specification this evaluator does not implement.
var knownModels = map[string]bool{
	"AssociationModel": true, "BaselineModel": true, "BayesianNetworkModel": true,
	"GaussianProcessModel": true, "SequenceModel": true, "TextModel": true, "TimeSeriesModel": true,
}

func compile(ctx context.Context, root *node, o Options) (*Model, error) {
	m := &Model{opts: o, version: root.attr("version")}
	cc := &compiler{ctx: ctx, m: m, opts: o, dd: map[string]*dataField{}, funcs: map[string]*defFunc{}}
	var top *node
	var dd, td *node
	for _, c := range root.children {
		switch {
		case c.name == "DataDictionary":
			dd = c
		case c.name == "TransformationDictionary":
			td = c
		case modelElements[c.name]:
			if top == nil && c.attr("isScorable") != "false" {
				top = c
			}
		case knownModels[c.name]:
			if top == nil {
				return nil, c.unsupported("model type " + c.name)
			}
		case ignorable(c.name):
		default:
			return nil, c.unsupported("")
		}
	}
	if dd == nil {
		return nil, root.errf("no DataDictionary: a PMML document must declare its fields")
	}
	if top == nil {
		return nil, root.errf("no scorable model element (supported: RegressionModel, GeneralRegressionModel, TreeModel, MiningModel, NeuralNetwork, Scorecard, SupportVectorMachineModel, NaiveBayesModel, ClusteringModel, NearestNeighborModel, RuleSetModel, AnomalyDetectionModel)")
	}
	if err := cc.dataDictionary(dd); err != nil {
		return nil, err
	}
	if err := cc.dataScope(top); err != nil {
		return nil, err
	}
	cc.glob = newScope(cc.data)
	if td != nil {
		if err := cc.transformations(td, cc.glob, true); err != nil {
			return nil, err
		}
	}
	tm, outs, err := cc.compileModel(top, cc.glob)
	if err != nil {
		return nil, err
	}
	m.top = tm
	// Outputs: the targets, then final output fields.
	for ti, name := range tm.tnames {
		df := cc.dd[name]
		dt, op := tm.targetDT, tm.targetOp
		if df != nil {
			dt, op = df.dt, df.op
		}
		s := cc.addSlot(name, TypeUnknown, op, targetExpr(tm, name, ti))
		m.outputs = append(m.outputs, Field{Name: name, DataType: dt, OpType: op, Feature: "target"})
		m.outSlot = append(m.outSlot, s)
	}
	for _, o := range outs {
		if !o.final {
			continue
		}
		replaced := false
		for i, f := range m.outputs {
			if f.Name == o.name {
				m.outputs[i] = o.field()
				m.outSlot[i] = o.slot
				replaced = true
			}
		}
		if !replaced {
			m.outputs = append(m.outputs, o.field())
			m.outSlot = append(m.outSlot, o.slot)
		}
	}
	if len(m.outputs) == 0 {
		// A model with neither a target nor OutputFields (a clustering model
		// without Output) still answers: its predicted value (the cluster id)
		// under the feature's name.
		s := cc.addSlot("predictedValue", TypeUnknown, OpUnknown, &outExpr{m: tm, feature: "predictedValue", cat: -1, tgt: -1})
		m.outputs = append(m.outputs, Field{Name: "predictedValue", Feature: "predictedValue"})
		m.outSlot = append(m.outSlot, s)
	}
	for _, f := range cc.post {
		if err := f(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (cc *compiler) dataDictionary(n *node) error {
	for _, c := range n.children {
		switch c.name {
		case "DataField":
		case "Taxonomy":
			return c.unsupported("")
		default:
			if ignorable(c.name) {
				continue
			}
			return c.unsupported("")
		}
		name := c.attr("name")
		if name == "" {
			return c.errf("DataField without a name")
		}
		dt, err := parseDataType(c, c.attr("dataType"))
		if err != nil {
			return err
		}
		op, err := parseOpType(c, c.attr("optype"))
		if err != nil {
			return err
		}
		if dt == TypeUnknown {
			dt = TypeString
			if op == Continuous {
				dt = TypeDouble
			}
		}
		if op == OpUnknown {
			op = Categorical
			if dt.numeric() {
				op = Continuous
			}
		}
		df := &dataField{name: name, dt: dt, op: op}
		for _, v := range c.children {
			switch v.name {
			case "Value":
				val, ok := parseConst(v.attr("value"), dt)
				if !ok {
					if v.attr("property") == "missing" || v.attr("value") == "NaN" {
						val = StringValue(v.attr("value"))
					} else {
						return v.errf("value %q is not a %s", v.attr("value"), dt)
					}
				}
				switch v.attrOr("property", "valid") {
				case "valid":
					df.valid = append(df.valid, val)
					if v.has("displayValue") {
						if df.display == nil {
							df.display = map[string]string{}
						}
						df.display[val.String()] = v.attr("displayValue")
					}
				case "invalid":
					df.invalid = append(df.invalid, val)
				case "missing":
					df.missing = append(df.missing, val)
				default:
					return v.errf("property %q is not one of valid, invalid, missing", v.attr("property"))
				}
			case "Interval":
				iv := interval{lo: math.Inf(-1), hi: math.Inf(1)}
				var err error
				if iv.lo, err = v.float("leftMargin", math.Inf(-1)); err != nil {
					return err
				}
				if iv.hi, err = v.float("rightMargin", math.Inf(1)); err != nil {
					return err
				}
				switch v.attr("closure") {
				case "openClosed":
					iv.loOpen = true
				case "openOpen":
					iv.loOpen, iv.hiOpen = true, true
				case "closedOpen":
					iv.hiOpen = true
				case "closedClosed":
				default:
					return v.errf("closure %q is not one of openClosed, openOpen, closedOpen, closedClosed", v.attr("closure"))
				}
				df.intervals = append(df.intervals, iv)
			default:
				if ignorable(v.name) {
					continue
				}
				return v.unsupported("")
			}
		}
		if len(df.valid) > 8 {
			df.validSet = map[string]bool{}
			for _, v := range df.valid {
				df.validSet[v.String()] = true
			}
		}
		df.raw = cc.addSlot(name, dt, op, nil)
		cc.dd[name] = df
		cc.ddOrd = append(cc.ddOrd, df)
	}
	return nil
}

// miningField is a parsed MiningField.
type miningField struct {
	n                  *node
	name               string
	usage              string
	replacement        Value
	hasReplacement     bool
	treatmentSet       bool
	invalid            string
	invalidReplacement Value
	outliers           string
	low, high          float64
}

func parseMiningField(c *node, dt DataType) (*miningField, error) {
	mf := &miningField{n: c, name: c.attr("name"), usage: c.attrOr("usageType", "active"),
		invalid: c.attrOr("invalidValueTreatment", "returnInvalid"), outliers: c.attrOr("outliers", "asIs")}
	if mf.name == "" {
		return nil, c.errf("MiningField without a name")
	}
	switch mf.usage {
	case "active", "target", "predicted", "supplementary", "group", "order", "frequencyWeight", "analysisWeight":
	default:
		return nil, c.errf("usageType %q is not a PMML usage type", mf.usage)
	}
	if mf.usage == "group" || mf.usage == "order" {
		return nil, c.unsupported("usageType " + mf.usage)
	}
	if c.has("missingValueReplacement") {
		v, ok := parseConst(c.attr("missingValueReplacement"), dt)
		if !ok {
			return nil, c.errf("missingValueReplacement %q is not a %s", c.attr("missingValueReplacement"), dt)
		}
		mf.replacement, mf.hasReplacement = v, true
	}
	mf.treatmentSet = c.has("missingValueTreatment")
	switch mf.invalid {
	case "returnInvalid", "asIs", "asMissing":
	case "asValue":
		v, ok := parseConst(c.attr("invalidValueReplacement"), dt)
		if !ok {
			return nil, c.errf("invalidValueReplacement %q is not a %s", c.attr("invalidValueReplacement"), dt)
		}
		mf.invalidReplacement = v
	default:
		return nil, c.errf("invalidValueTreatment %q is not one of returnInvalid, asIs, asMissing, asValue", mf.invalid)
	}
	switch mf.outliers {
	case "asIs":
	case "asMissingValues", "asExtremeValues":
		var err error
		if mf.low, err = c.float("lowValue", math.Inf(-1)); err != nil {
			return nil, err
		}
		if mf.high, err = c.float("highValue", math.Inf(1)); err != nil {
			return nil, err
		}
	default:
		return nil, c.errf("outliers %q is not one of asIs, asMissingValues, asExtremeValues", mf.outliers)
	}
	return mf, nil
}

// miningFields parses a model's MiningSchema.
func (cc *compiler) miningFields(n *node) ([]*miningField, error) {
	ms := n.child("MiningSchema")
	if ms == nil {
		return nil, n.errf("model has no MiningSchema")
	}
	var out []*miningField
	for _, c := range ms.children {
		if c.name != "MiningField" {
			if ignorable(c.name) {
				continue
			}
			return nil, c.unsupported("")
		}
		dt := TypeUnknown
		if df := cc.dd[c.attr("name")]; df != nil {
			dt = df.dt
		}
		mf, err := parseMiningField(c, dt)
		if err != nil {
			return nil, err
		}
		out = append(out, mf)
	}
	return out, nil
}

// dataScope prepares every DataDictionary field with the top-level model's
// MiningField treatments and lists the model's inputs.
func (cc *compiler) dataScope(top *node) error {
	mfs, err := cc.miningFields(top)
	if err != nil {
		return err
	}
	byName := map[string]*miningField{}
	for _, mf := range mfs {
		byName[mf.name] = mf
	}
	cc.data = newScope(nil)
	// Inputs are the DataFields some MiningSchema of the document uses as
	// an input; DataFields nothing uses stay out of Inputs.
	used := map[string]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.name == "MiningField" {
			switch n.attrOr("usageType", "active") {
			case "target", "predicted", "supplementary":
			default:
				used[n.attr("name")] = true
			}
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(top)
	targets := map[string]bool{}
	for _, mf := range mfs {
		if mf.usage == "target" || mf.usage == "predicted" {
			targets[mf.name] = true
		}
		if cc.dd[mf.name] == nil {
			// A MiningField may name a field of the TransformationDictionary in
			// old documents; those are resolved later.
			continue
		}
	}
	for _, df := range cc.ddOrd {
		mf := byName[df.name]
		if mf == nil {
			mf = &miningField{name: df.name, usage: "active", invalid: "returnInvalid", outliers: "asIs"}
		}
		t := &treat{df: df, mf: mf, src: df.raw, defaults: cc.opts.MissingValueDefaults && !mf.hasReplacement && !mf.treatmentSet}
		// A field with nothing to treat is read straight from its input
		// slot; an unconvertible input then fails the record at load time,
		// which is what returnInvalid asks for.
		direct := !t.defaults && !mf.hasReplacement && mf.invalid == "returnInvalid" && mf.outliers == "asIs" &&
			len(df.missing) == 0 && len(df.invalid) == 0 && len(df.valid) == 0 && len(df.intervals) == 0
		if direct {
			cc.data.names[df.name] = df.raw
		} else {
			cc.data.names[df.name] = cc.addSlot(df.name, df.dt, df.op, t)
		}
		if targets[df.name] || !used[df.name] {
			continue
		}
		f := Field{Name: df.name, DataType: df.dt, OpType: df.op}
		if df.op != Continuous {
			for _, v := range df.valid {
				f.Values = append(f.Values, v.String())
			}
		}
		cc.m.inputs = append(cc.m.inputs, f)
		cc.m.inDirect = append(cc.m.inDirect, direct)
		cc.m.inSlots = append(cc.m.inSlots, df.raw)
		cc.m.inTypes = append(cc.m.inTypes, df.dt)
	}
	return nil
}

// treat prepares a mining field: validity, missing and invalid treatments,
// outliers.
type treat struct {
	df       *dataField // nil for nested treatments of non-data fields
	mf       *miningField
	src      int
	defaults bool
	dt       DataType
}

func (t *treat) eval(c *ctx) Value {
	v := c.get(t.src)
	if v.K == invalidKind {
		v = t.invalid(c, v)
	} else if v.K != Missing && t.df != nil {
		v = t.validate(c, v)
	}
	if v.K == Float && t.mf.outliers != "asIs" {
		if v.F < t.mf.low {
			if t.mf.outliers == "asMissingValues" {
				v = MissingValue
			} else {
				v.F = t.mf.low
			}
		} else if v.F > t.mf.high {
			if t.mf.outliers == "asMissingValues" {
				v = MissingValue
			} else {
				v.F = t.mf.high
			}
		}
	}
	if v.K == Missing {
		if t.mf.hasReplacement {
			return t.mf.replacement
		}
		if t.defaults {
			// EAS fills false, 0 or "". A filler the DataField would call
			// invalid (a "" for a field with listed values) stays missing
			// rather than failing the record.
			z := zeroOf(t.dataType())
			if t.df != nil && t.df.op != Continuous && len(t.df.valid) > 0 {
				for _, v := range t.df.valid {
					if equalValues(v, z) {
						return z
					}
				}
				return MissingValue
			}
			return z
		}
	}
	return v
}

func (t *treat) dataType() DataType {
	if t.df != nil {
		return t.df.dt
	}
	return t.dt
}

func zeroOf(dt DataType) Value {
	switch dt {
	case TypeString:
		return StringValue("")
	case TypeBoolean:
		return BoolValue(false)
	}
	return FloatValue(0)
}

// validate checks a converted value against the DataField's declared
// missing, invalid and valid values.
func (t *treat) validate(c *ctx, v Value) Value {
	df := t.df
	for _, mv := range df.missing {
		if equalValues(mv, v) || mv.K == String && mv.S == "NaN" && v.K == Float && math.IsNaN(v.F) {
			return MissingValue
		}
	}
	if v.K == Float && math.IsNaN(v.F) {
		return MissingValue
	}
	for _, iv := range df.invalid {
		if equalValues(iv, v) {
			return t.invalid(c, v)
		}
	}
	if df.op == Continuous || !(len(df.valid) > 0) {
		if len(df.intervals) > 0 && v.K == Float {
			for _, iv := range df.intervals {
				if iv.contains(v.F) {
					return v
				}
			}
			for _, vv := range df.valid {
				if equalValues(vv, v) {
					return v
				}
			}
			return t.invalid(c, v)
		}
		return v
	}
	if df.validSet != nil {
		if df.validSet[v.String()] {
			return v
		}
		return t.invalid(c, v)
	}
	for _, vv := range df.valid {
		if equalValues(vv, v) {
			return v
		}
	}
	return t.invalid(c, v)
}

func (t *treat) invalid(c *ctx, v Value) Value {
	switch t.mf.invalid {
	case "asIs":
		if v.K == invalidKind {
			return StringValue(v.S)
		}
		return v
	case "asMissing":
		return MissingValue
	case "asValue":
		return t.mf.invalidReplacement
	}
	c.fail(t.mf.name, "invalid value %q; send a value the model declares valid, or set invalidValueTreatment", v.String())
	return MissingValue
}

// outField is a compiled OutputField.
type outField struct {
	name  string
	slot  int
	dt    DataType
	op    OpType
	feat  string
	final bool
}

func (o outField) field() Field {
	return Field{Name: o.name, DataType: o.dt, OpType: o.op, Feature: o.feat}
}

// compileModel compiles one model element. It returns the model and its
// output fields (with those of a modelChain's segments appended).
func (cc *compiler) compileModel(n *node, parent *scope) (*model, []outField, error) {
	m := &model{kind: n.name, fn: n.attr("functionName"), pi: len(cc.m.models)}
	cc.m.models = append(cc.m.models, m)
	switch m.fn {
	case "regression", "classification", "clustering", "mixed":
	case "":
		return nil, nil, n.errf("functionName is required")
	default:
		return nil, nil, n.unsupported("functionName " + strconv.Quote(m.fn))
	}
	m.floatCtx = n.attr("x-mathContext") == "float"
	oldF32 := cc.f32
	cc.f32 = m.floatCtx
	defer func() { cc.f32 = oldF32 }()
	sc := newScope(parent)
	mfs, err := cc.miningFields(n)
	if err != nil {
		return nil, nil, err
	}
	for _, mf := range mfs {
		if mf.usage == "target" || mf.usage == "predicted" {
			if m.target == "" {
				m.target = mf.name
			}
			m.tnames = append(m.tnames, mf.name)
			m.ntargets++
			continue
		}
		if parent != cc.glob && (mf.hasReplacement || mf.invalid != "returnInvalid" && mf.n.has("invalidValueTreatment") || mf.outliers != "asIs") {
			src, ok := sc.lookup(mf.name)
			if !ok {
				continue
			}
			t := &treat{mf: mf, src: src, dt: cc.m.slots[src].dt}
			if mf.invalid == "returnInvalid" {
				mf.invalid = "asIs"
			}
			sc.names[mf.name] = cc.addSlot(mf.name, cc.m.slots[src].dt, cc.m.slots[src].op, t)
		}
	}
	if m.target != "" {
		if df := cc.dd[m.target]; df != nil {
			m.targetDT, m.targetOp = df.dt, df.op
			if m.classification() && df.op != Continuous {
				for _, v := range df.valid {
					m.catIndex(v)
				}
			}
			if len(df.display) > 0 {
				m.display = map[int]string{}
				for i, c := range m.cats {
					if d, ok := df.display[c.String()]; ok {
						m.display[i] = d
					}
				}
			}
		}
	}
	if lt := n.child("LocalTransformations"); lt != nil {
		if err := cc.transformations(lt, sc, false); err != nil {
			return nil, nil, err
		}
	}
	if tg := n.child("Targets"); tg != nil {
		if err := cc.targets(tg, m); err != nil {
			return nil, nil, err
		}
	}
	var chainOuts []outField
	switch n.name {
	case "RegressionModel":
		err = cc.regression(n, m, sc)
	case "GeneralRegressionModel":
		err = cc.generalRegression(n, m, sc)
	case "TreeModel":
		err = cc.tree(n, m, sc)
	case "MiningModel":
		chainOuts, err = cc.mining(n, m, sc)
	case "NeuralNetwork":
		err = cc.neural(n, m, sc)
	case "Scorecard":
		err = cc.scorecard(n, m, sc)
	case "SupportVectorMachineModel":
		err = cc.svm(n, m, sc)
	case "NaiveBayesModel":
		err = cc.naiveBayes(n, m, sc)
	case "ClusteringModel":
		err = cc.clustering(n, m, sc)
	case "NearestNeighborModel":
		err = cc.knn(n, m, sc)
	case "RuleSetModel":
		err = cc.ruleSet(n, m, sc)
	case "AnomalyDetectionModel":
		err = cc.anomaly(n, m, sc)
	default:
		err = n.unsupported("")
	}
	if err != nil {
		return nil, nil, err
	}
	if m.targets != nil && m.targets.priors != nil && len(m.targets.priors) < len(m.cats) {
		m.targets.priors = append(m.targets.priors, make([]float64, len(m.cats)-len(m.targets.priors))...)
	}
	outs, err := cc.outputs(n, m, sc)
	if err != nil {
		return nil, nil, err
	}
	return m, append(chainOuts, outs...), nil
}

// targets compiles the Targets element (the first Target applies).
func (cc *compiler) targets(n *node, m *model) error {
	for _, t := range n.children {
		if t.name != "Target" {
			if ignorable(t.name) {
				continue
			}
			return t.unsupported("")
		}
		if m.targets != nil {
			continue
		}
		td := &targetDef{}
		var err error
		if td.factor, err = t.float("rescaleFactor", 1); err != nil {
			return err
		}
		if td.constant, err = t.float("rescaleConstant", 0); err != nil {
			return err
		}
		td.hasMin, td.hasMax = t.has("min"), t.has("max")
		if td.min, err = t.float("min", 0); err != nil {
			return err
		}
		if td.max, err = t.float("max", 0); err != nil {
			return err
		}
		td.cast = t.attrOr("castInteger", "")
		switch td.cast {
		case "", "round", "ceiling", "floor":
		default:
			return t.errf("castInteger %q is not one of round, ceiling, floor", td.cast)
		}
		for _, tv := range t.all("TargetValue") {
			if tv.has("defaultValue") && !m.classification() {
				if td.def, err = tv.float("defaultValue", 0); err != nil {
					return err
				}
				td.hasDef = true
			}
			if !tv.has("value") {
				continue
			}
			v := m.catValue(tv.attr("value"))
			if m.classification() {
				i := m.catIndex(v)
				if tv.has("priorProbability") {
					pp, err := tv.float("priorProbability", 0)
					if err != nil {
						return err
					}
					for len(td.priors) <= i {
						td.priors = append(td.priors, 0)
					}
					td.priors[i] = pp
				}
				if tv.has("displayValue") {
					if m.display == nil {
						m.display = map[int]string{}
					}
					m.display[i] = tv.attr("displayValue")
				}
			}
		}
		m.targets = td
	}
	return nil
}

// transformations compiles DerivedFields (and DefineFunctions when global)
// into the scope. Names are registered first so fields may refer to each
// other in any order.
func (cc *compiler) transformations(n *node, sc *scope, global bool) error {
	type pending struct {
		n    *node
		slot int
	}
	var ds []pending
	for _, c := range n.children {
		switch c.name {
		case "DerivedField":
			name := c.attr("name")
			if name == "" {
				return c.errf("DerivedField without a name")
			}
			dt, err := parseDataType(c, c.attr("dataType"))
			if err != nil {
				return err
			}
			op, err := parseOpType(c, c.attr("optype"))
			if err != nil {
				return err
			}
			s := cc.addSlot(name, dt, op, nil)
			sc.names[name] = s
			ds = append(ds, pending{c, s})
		case "DefineFunction":
			if !global {
				return c.errf("DefineFunction is only allowed in the TransformationDictionary")
			}
			if err := cc.declareFunction(c); err != nil {
				return err
			}
		default:
			if ignorable(c.name) {
				continue
			}
			return c.unsupported("")
		}
	}
	if global {
		for _, c := range n.all("DefineFunction") {
			if err := cc.defineFunction(c); err != nil {
				return err
			}
		}
	}
	for _, d := range ds {
		e, err := cc.exprOf(d.n, sc, nil)
		if err != nil {
			return err
		}
		cc.m.slots[d.slot].expr = e
	}
	return nil
}

// exprOf compiles the single expression child of n.
func (cc *compiler) exprOf(n *node, sc *scope, fs *funcScope) (expr, error) {
	for _, c := range n.children {
		if isExpression(c.name) {
			return cc.expr(c, sc, fs)
		}
	}
	return nil, n.errf("no expression (Constant, FieldRef, Apply, ...) inside")
}

func isExpression(name string) bool {
	switch name {
	case "Constant", "FieldRef", "NormContinuous", "NormDiscrete", "Discretize", "MapValues", "TextIndex",
		"Apply", "Aggregate", "Lag":
		return true
	}
	return false
}

// outputs compiles the model's Output element into slots of its scope.
func (cc *compiler) outputs(n *node, m *model, sc *scope) ([]outField, error) {
	on := n.child("Output")
	if on == nil {
		return nil, nil
	}
	var outs []outField
	var pend []*node
	for _, c := range on.children {
		if c.name != "OutputField" {
			if ignorable(c.name) {
				continue
			}
			return nil, c.unsupported("")
		}
		name := c.attr("name")
		if name == "" {
			return nil, c.errf("OutputField without a name")
		}
		dt, err := parseDataType(c, c.attr("dataType"))
		if err != nil {
			return nil, err
		}
		op, err := parseOpType(c, c.attr("optype"))
		if err != nil {
			return nil, err
		}
		s := cc.addSlot(name, dt, op, nil)
		outs = append(outs, outField{name: name, slot: s, dt: dt, op: op, feat: c.attrOr("feature", "predictedValue"), final: c.attr("isFinalResult") != "false"})
		pend = append(pend, c)
	}
	// An output field sees the fields before it (and not itself), so a
	// name that shadows a derived field still reads the derived field.
	for i, c := range pend {
		e, err := cc.outputExpr(c, m, sc)
		if err != nil {
			return nil, err
		}
		cc.m.slots[outs[i].slot].expr = e
		sc.names[outs[i].name] = outs[i].slot
	}
	return outs, nil
}

func (cc *compiler) outputExpr(c *node, m *model, sc *scope) (expr, error) {
	o := &outExpr{m: m, feature: c.attrOr("feature", "predictedValue"), cat: -1, tgt: -1}
	if c.has("segmentId") {
		return nil, c.unsupported("attribute segmentId")
	}
	if tf := c.attr("targetField"); tf != "" && m.ntargets > 1 {
		idx, ok := m.targetIndex(tf)
		if !ok {
			return nil, c.errf("targetField %q is not a target of the model", tf)
		}
		o.tgt = idx
	}
	switch o.feature {
	case "entityId":
		r, err := c.int("rank", 1)
		if err != nil {
			return nil, err
		}
		if r < 1 {
			return nil, c.errf("rank %d must be 1 or more", r)
		}
		o.rank = r
	case "predictedValue", "predictedDisplayValue", "clusterId", "warning":
	case "probability", "confidence", "affinity", "entityAffinity", "clusterAffinity":
		if c.has("value") {
			if m.classification() {
				o.cat = m.catIndex(m.catValue(c.attr("value")))
			} else {
				o.cat = m.findEntity(c.attr("value"))
				if o.cat < 0 && m.kind != "NearestNeighborModel" {
					return nil, c.errf("value %q names no cluster or category of the model", c.attr("value"))
				}
				o.entity = c.attr("value")
			}
		}
	case "transformedValue", "decision":
		e, err := cc.exprOf(c, sc, nil)
		if err != nil {
			return nil, err
		}
		o.expr = e
	case "reasonCode":
		r, err := c.int("rank", 1)
		if err != nil {
			return nil, err
		}
		if r < 1 {
			return nil, c.errf("rank %d must be 1 or more", r)
		}
		o.rank = r
	case "ruleValue":
		o.ruleFeature = c.attrOr("ruleFeature", "consequent")
		switch o.ruleFeature {
		case "consequent", "confidence", "support", "ruleId":
		default:
			return nil, c.unsupported("ruleFeature " + strconv.Quote(o.ruleFeature))
		}
	case "residual", "standardError", "standardDeviation", "antecedent", "consequent", "rule", "ruleId",
		"reasonCodes":
		return nil, c.unsupported("feature " + strconv.Quote(o.feature))
	default:
		return nil, c.errf("feature %q is not a PMML output feature", o.feature)
	}
	return o, nil
}

// targetIndex finds the position of a target among a multi-target model's targets.
func (m *model) targetIndex(name string) (int, bool) {
	if k, ok := m.impl.(interface{ targetIndex(string) int }); ok {
		i := k.targetIndex(name)
		return i, i >= 0
	}
	return 0, false
}

// findEntity resolves an entity (cluster) id for affinity outputs.
func (m *model) findEntity(id string) int {
	if k, ok := m.impl.(interface{ entityIndex(string) int }); ok {
		return k.entityIndex(id)
	}
	return -1
}

// outExpr evaluates one OutputField feature from a model's prediction.
type outExpr struct {
	m           *model
	feature     string
	cat         int
	tgt         int
	entity      string
	rank        int
	expr        expr
	ruleFeature string
}

func (o *outExpr) eval(c *ctx) Value {
	p := &c.preds[o.m.pi]
	switch o.feature {
	case "predictedValue":
		if o.tgt >= 0 {
			return p.multi[o.tgt]
		}
		if !p.ok {
			return MissingValue
		}
		return p.val
	case "predictedDisplayValue":
		if !p.ok {
			return MissingValue
		}
		if p.cat >= 0 && o.m.display != nil {
			if d, ok := o.m.display[p.cat]; ok {
				return StringValue(d)
			}
		}
		if o.m.fn == "clustering" && p.entity.K != Missing {
			if k, ok := o.m.impl.(interface{ displayName(int) string }); ok && p.ent >= 0 {
				if d := k.displayName(p.ent); d != "" {
					return StringValue(d)
				}
			}
		}
		return p.val
	case "probability", "confidence":
		src := p.probs
		if o.feature == "confidence" && p.conf != nil {
			src = p.conf
		}
		if !p.ok || src == nil {
			return MissingValue
		}
		i := o.cat
		if i < 0 {
			i = p.cat
		}
		if i < 0 || i >= len(src) {
			if i >= 0 {
				return FloatValue(0)
			}
			return MissingValue
		}
		return FloatValue(src[i])
	case "affinity", "entityAffinity", "clusterAffinity":
		if !p.ok {
			return MissingValue
		}
		if o.m.classification() && p.probs != nil {
			i := o.cat
			if i < 0 {
				i = p.cat
			}
			if i >= 0 && i < len(p.probs) {
				return FloatValue(p.probs[i])
			}
			return MissingValue
		}
		i := o.cat
		if i < 0 {
			i = p.ent
		}
		if i < 0 || i >= len(p.affin) {
			return MissingValue
		}
		return FloatValue(p.affin[i])
	case "entityId", "clusterId":
		if !p.ok && p.entity.K == Missing {
			return MissingValue
		}
		if kn, ok := o.m.impl.(*knnModel); ok && o.feature == "entityId" {
			if o.rank-1 < len(p.affin) {
				return kn.ids[int(p.affin[o.rank-1])]
			}
			return MissingValue
		}
		if o.feature == "clusterId" && p.ent >= 0 {
			return FloatValue(float64(p.ent + 1))
		}
		return p.entity
	case "transformedValue":
		return o.expr.eval(c)
	case "decision":
		// The Decisions element only documents the possible values.
		return o.expr.eval(c)
	case "reasonCode":
		if o.rank-1 < len(p.reasons) && p.ok {
			return StringValue(p.reasons[o.rank-1].code)
		}
		return MissingValue
	case "ruleValue":
		if p.rule == nil {
			return MissingValue
		}
		switch o.ruleFeature {
		case "consequent":
			return p.val
		case "confidence":
			return FloatValue(p.rule.confidence)
		case "ruleId":
			return p.entity
		}
		return MissingValue
	}
	return MissingValue
}

// trimSpace is strings.TrimSpace, named for reading.
var trimSpace = strings.TrimSpace

// targetExpr finds the model that predicts the named target: the model
// itself, or for a modelChain the last segment predicting it.
func targetExpr(m *model, name string, ti int) expr {
	if mm, ok := m.impl.(*miningModel); ok && (mm.method == "modelChain" || mm.method == "selectFirst") && len(m.tnames) > 1 {
		var picks []pick
		for i := len(mm.segs) - 1; i >= 0; i-- {
			sm := mm.segs[i].m
			for j, tn := range sm.tnames {
				if tn == name {
					picks = append(picks, pick{m: sm, e: targetExpr(sm, name, j)})
				}
			}
			if mm.method == "modelChain" && len(picks) > 0 {
				break
			}
		}
		if len(picks) > 0 {
			return &pickExpr{picks: picks}
		}
	}
	if m.ntargets > 1 {
		if _, ok := m.impl.(interface{ targetIndex(string) int }); ok {
			return &outExpr{m: m, feature: "predictedValue", cat: -1, tgt: ti}
		}
	}
	return &outExpr{m: m, feature: "predictedValue", cat: -1, tgt: -1}
}

type pick struct {
	m *model
	e expr
}

// pickExpr returns the value from the first candidate whose model ran for
// this record; it serves outputs that several segments declare.
type pickExpr struct {
	picks []pick
}

func (e *pickExpr) eval(c *ctx) Value {
	for _, p := range e.picks {
		if c.preds[p.m.pi].evaluated {
			return p.e.eval(c)
		}
	}
	return MissingValue
}
