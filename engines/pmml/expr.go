package pmml

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// expr is a compiled PMML expression.
type expr interface {
	eval(c *ctx) Value
}

type constExpr struct{ v Value }

func (e constExpr) eval(*ctx) Value { return e.v }

type fieldRef struct {
	slot    int
	missing Value // mapMissingTo
}

func (e *fieldRef) eval(c *ctx) Value {
	v := c.get(e.slot)
	if v.K == Missing {
		return e.missing
	}
	return v
}

// funcScope is the parameter list of a DefineFunction being compiled.
type funcScope struct {
	params map[string]int
}

type paramRef struct {
	i       int
	missing Value
}

func (e *paramRef) eval(c *ctx) Value {
	v := c.frame[c.fp+e.i]
	if v.K == Missing {
		return e.missing
	}
	return v
}

// defFunc is a DefineFunction.
type defFunc struct {
	name   string
	params []string
	types  []DataType
	dt     DataType
	body   expr
	n      *node
}

func (cc *compiler) declareFunction(n *node) error {
	name := n.attr("name")
	if name == "" {
		return n.errf("DefineFunction without a name")
	}
	dt, err := parseDataType(n, n.attr("dataType"))
	if err != nil {
		return err
	}
	f := &defFunc{name: name, dt: dt, n: n}
	for _, p := range n.all("ParameterField") {
		f.params = append(f.params, p.attr("name"))
		pt, err := parseDataType(p, p.attr("dataType"))
		if err != nil {
			return err
		}
		f.types = append(f.types, pt)
	}
	cc.funcs[name] = f
	return nil
}

func (cc *compiler) defineFunction(n *node) error {
	f := cc.funcs[n.attr("name")]
	fs := &funcScope{params: map[string]int{}}
	for i, p := range f.params {
		fs.params[p] = i
	}
	body, err := cc.exprOf(n, cc.glob, fs)
	if err != nil {
		return err
	}
	f.body = body
	return nil
}

// callExpr calls a DefineFunction with a fresh argument frame.
type callExpr struct {
	f    *defFunc
	args []expr
}

// maxCallDepth bounds DefineFunction recursion: a function that calls
// itself must not overflow the stack of the serving process.
const maxCallDepth = 64

func (e *callExpr) eval(c *ctx) Value {
	if c.depth >= maxCallDepth {
		c.fail("", "function %q nests deeper than %d calls", e.f.name, maxCallDepth)
		return MissingValue
	}
	c.depth++
	defer func() { c.depth-- }()
	base := len(c.frame)
	for i, a := range e.args {
		v := a.eval(c)
		if t := e.f.types[i]; t != TypeUnknown && v.K != Missing {
			if cv, ok := convert(v, t); ok {
				v = cv
			}
		}
		c.frame = append(c.frame, v)
	}
	old := c.fp
	c.fp = base
	v := e.f.body.eval(c)
	c.fp = old
	c.frame = c.frame[:base]
	if e.f.dt != TypeUnknown && v.K != Missing {
		if cv, ok := convert(v, e.f.dt); ok {
			v = cv
		}
	}
	return v
}

func (cc *compiler) resolve(n *node, name string, sc *scope, fs *funcScope, missing Value) (expr, error) {
	if fs != nil {
		if i, ok := fs.params[name]; ok {
			return &paramRef{i: i, missing: missing}, nil
		}
	}
	if s, ok := sc.lookup(name); ok {
		return &fieldRef{slot: s, missing: missing}, nil
	}
	return nil, n.errf("field %q is not defined: it must be a DataField, DerivedField or OutputField in scope", name)
}

func (cc *compiler) fieldType(e expr) DataType {
	if f, ok := e.(*fieldRef); ok {
		return cc.m.slots[f.slot].dt
	}
	return TypeUnknown
}

// expr compiles one expression element.
func (cc *compiler) expr(n *node, sc *scope, fs *funcScope) (expr, error) {
	switch n.name {
	case "Constant":
		dt, err := parseDataType(n, n.attr("dataType"))
		if err != nil {
			return nil, err
		}
		if n.attr("missing") == "true" {
			return constExpr{}, nil
		}
		txt := n.text
		if dt != TypeString {
			txt = trimSpace(txt)
		}
		v, ok := parseConst(txt, dt)
		if !ok {
			return nil, n.errf("constant %q is not a %s", n.text, dt)
		}
		return constExpr{v}, nil
	case "FieldRef":
		var miss Value
		if n.has("mapMissingTo") {
			miss, _ = parseConst(n.attr("mapMissingTo"), TypeUnknown)
		}
		return cc.resolve(n, n.attr("field"), sc, fs, miss)
	case "NormContinuous":
		return cc.normContinuous(n, sc, fs)
	case "NormDiscrete":
		src, err := cc.resolve(n, n.attr("field"), sc, fs, MissingValue)
		if err != nil {
			return nil, err
		}
		e := &normDiscrete{src: src, v: StringValue(n.attr("value"))}
		if dt := cc.fieldType(src); dt != TypeUnknown {
			if v, ok := parseConst(n.attr("value"), dt); ok {
				e.v = v
			}
		}
		if n.has("mapMissingTo") {
			f, err := n.float("mapMissingTo", 0)
			if err != nil {
				return nil, err
			}
			e.missing = FloatValue(f)
		}
		return e, nil
	case "Discretize":
		return cc.discretize(n, sc, fs)
	case "MapValues":
		return cc.mapValues(n, sc, fs)
	case "TextIndex":
		return cc.textIndex(n, sc, fs)
	case "Apply":
		return cc.apply(n, sc, fs)
	}
	return nil, n.unsupported("expression")
}

type normContinuous struct {
	src      expr
	xs, ys   []float64
	outliers string
	missing  Value
}

func (cc *compiler) normContinuous(n *node, sc *scope, fs *funcScope) (expr, error) {
	src, err := cc.resolve(n, n.attr("field"), sc, fs, MissingValue)
	if err != nil {
		return nil, err
	}
	e := &normContinuous{src: src, outliers: n.attrOr("outliers", "asIs")}
	if n.has("mapMissingTo") {
		f, err := n.float("mapMissingTo", 0)
		if err != nil {
			return nil, err
		}
		e.missing = FloatValue(f)
	}
	for _, ln := range n.all("LinearNorm") {
		x, err := ln.float("orig", 0)
		if err != nil {
			return nil, err
		}
		y, err := ln.float("norm", 0)
		if err != nil {
			return nil, err
		}
		e.xs, e.ys = append(e.xs, x), append(e.ys, y)
	}
	if len(e.xs) < 2 {
		return nil, n.errf("NormContinuous needs at least two LinearNorm elements, has %d", len(e.xs))
	}
	for i := 1; i < len(e.xs); i++ {
		if e.xs[i] <= e.xs[i-1] {
			return nil, n.errf("LinearNorm orig values must increase, got %g after %g", e.xs[i], e.xs[i-1])
		}
	}
	return e, nil
}

func (e *normContinuous) eval(c *ctx) Value {
	v := e.src.eval(c)
	x, ok := v.num()
	if v.K == Missing || !ok {
		return e.missing
	}
	n := len(e.xs)
	i := 0
	switch {
	case x < e.xs[0]:
		switch e.outliers {
		case "asMissingValues":
			return e.missing
		case "asExtremeValues":
			return FloatValue(e.ys[0])
		}
	case x > e.xs[n-1]:
		switch e.outliers {
		case "asMissingValues":
			return e.missing
		case "asExtremeValues":
			return FloatValue(e.ys[n-1])
		}
		i = n - 2
	default:
		i = sort.SearchFloat64s(e.xs, x) - 1
		if i < 0 {
			i = 0
		}
		if i > n-2 {
			i = n - 2
		}
	}
	y := e.ys[i] + (x-e.xs[i])/(e.xs[i+1]-e.xs[i])*(e.ys[i+1]-e.ys[i])
	return FloatValue(y)
}

type normDiscrete struct {
	src     expr
	v       Value
	missing Value
}

func (e *normDiscrete) eval(c *ctx) Value {
	v := e.src.eval(c)
	if v.K == Missing {
		return e.missing
	}
	if equalValues(v, e.v) {
		return FloatValue(1)
	}
	return FloatValue(0)
}

type discretize struct {
	src     expr
	bins    []interval
	vals    []Value
	missing Value
	def     Value
}

func (cc *compiler) discretize(n *node, sc *scope, fs *funcScope) (expr, error) {
	src, err := cc.resolve(n, n.attr("field"), sc, fs, MissingValue)
	if err != nil {
		return nil, err
	}
	dt, err := parseDataType(n, n.attr("dataType"))
	if err != nil {
		return nil, err
	}
	e := &discretize{src: src}
	if n.has("mapMissingTo") {
		e.missing, _ = parseConst(n.attr("mapMissingTo"), dt)
	}
	if n.has("defaultValue") {
		e.def, _ = parseConst(n.attr("defaultValue"), dt)
	}
	for _, b := range n.all("DiscretizeBin") {
		iv := b.child("Interval")
		if iv == nil {
			return nil, b.errf("DiscretizeBin without an Interval")
		}
		in := interval{}
		if in.lo, err = iv.float("leftMargin", math.Inf(-1)); err != nil {
			return nil, err
		}
		if in.hi, err = iv.float("rightMargin", math.Inf(1)); err != nil {
			return nil, err
		}
		switch iv.attr("closure") {
		case "openClosed":
			in.loOpen = true
		case "openOpen":
			in.loOpen, in.hiOpen = true, true
		case "closedOpen":
			in.hiOpen = true
		}
		v, _ := parseConst(b.attr("binValue"), dt)
		e.bins, e.vals = append(e.bins, in), append(e.vals, v)
	}
	return e, nil
}

func (e *discretize) eval(c *ctx) Value {
	v := e.src.eval(c)
	x, ok := v.num()
	if v.K == Missing || !ok {
		return e.missing
	}
	for i, b := range e.bins {
		if b.contains(x) {
			return e.vals[i]
		}
	}
	return e.def
}

// mapValues is MapValues over an inline table, compiled to a linear list of
// rows (tables are small in practice) or a map for one-column lookups.
type mapValues struct {
	srcs    []expr
	rows    [][]Value
	out     []Value
	index   map[string]int
	missing Value
	def     Value
}

func (cc *compiler) mapValues(n *node, sc *scope, fs *funcScope) (expr, error) {
	dt, err := parseDataType(n, n.attr("dataType"))
	if err != nil {
		return nil, err
	}
	e := &mapValues{}
	if n.has("mapMissingTo") {
		e.missing, _ = parseConst(n.attr("mapMissingTo"), dt)
	}
	if n.has("defaultValue") {
		e.def, _ = parseConst(n.attr("defaultValue"), dt)
	}
	var cols []string
	for _, p := range n.all("FieldColumnPair") {
		src, err := cc.resolve(p, p.attr("field"), sc, fs, MissingValue)
		if err != nil {
			return nil, err
		}
		e.srcs = append(e.srcs, src)
		cols = append(cols, p.attr("column"))
	}
	outCol := n.attr("outputColumn")
	tab := n.child("InlineTable")
	if tab == nil {
		if n.child("TableLocator") != nil {
			return nil, n.child("TableLocator").unsupported("")
		}
		return nil, n.errf("MapValues without an InlineTable")
	}
	for _, r := range tab.all("row") {
		cells := map[string]string{}
		for _, c := range r.children {
			cells[c.name] = c.text
		}
		row := make([]Value, len(cols))
		for i, col := range cols {
			row[i] = StringValue(cells[col])
		}
		o, ok := parseConst(cells[outCol], dt)
		if !ok {
			o = StringValue(cells[outCol])
		}
		e.rows = append(e.rows, row)
		e.out = append(e.out, o)
	}
	if len(cols) == 1 {
		e.index = map[string]int{}
		for i, r := range e.rows {
			if _, dup := e.index[r[0].S]; !dup {
				e.index[r[0].S] = i
			}
		}
	}
	return e, nil
}

func (e *mapValues) eval(c *ctx) Value {
	if e.index != nil {
		v := e.srcs[0].eval(c)
		if v.K == Missing {
			return e.missing
		}
		if i, ok := e.index[v.String()]; ok {
			return e.out[i]
		}
		return e.def
	}
	var buf [8]Value
	vals := buf[:0]
	for _, s := range e.srcs {
		v := s.eval(c)
		if v.K == Missing {
			return e.missing
		}
		vals = append(vals, v)
	}
rows:
	for i, r := range e.rows {
		for j, cell := range r {
			if !equalValues(vals[j], cell) {
				continue rows
			}
		}
		return e.out[i]
	}
	return e.def
}

// textIndex implements TextIndex term frequencies with regex normalisation.
type textIndex struct {
	text, term expr
	local      string
	caseSens   bool
	maxLevens  int
	wordRE     *regexp.Regexp
	norms      []textNorm
}

type textNorm struct {
	re        *regexp.Regexp
	repl      string
	recursive bool
}

func (cc *compiler) textIndex(n *node, sc *scope, fs *funcScope) (expr, error) {
	text, err := cc.resolve(n, n.attr("textField"), sc, fs, MissingValue)
	if err != nil {
		return nil, err
	}
	e := &textIndex{text: text, local: n.attrOr("localTermWeights", "termFrequency"), caseSens: n.attr("isCaseSensitive") == "true"}
	if e.maxLevens, err = n.int("maxLevenshteinDistance", 0); err != nil {
		return nil, err
	}
	if e.maxLevens != 0 {
		return nil, n.unsupported("maxLevenshteinDistance other than 0")
	}
	switch e.local {
	case "termFrequency", "binary", "logarithmic", "augmentedNormalizedTermFrequency":
	default:
		return nil, n.errf("localTermWeights %q is not a PMML term weight", e.local)
	}
	wre := n.attrOr("wordSeparatorCharacterRE", "\\s+")
	if n.has("x-wordRE") {
		re, err := regexp.Compile(javaRegexp(n.attr("x-wordRE")))
		if err != nil {
			return nil, n.errf("x-wordRE %q: %v", n.attr("x-wordRE"), err)
		}
		e.wordRE = re
	} else {
		re, err := regexp.Compile(wre)
		if err != nil {
			return nil, n.errf("wordSeparatorCharacterRE %q: %v", wre, err)
		}
		e.wordRE = re
		e.local = "sep:" + e.local
	}
	for _, tn := range n.all("TextIndexNormalization") {
		tab := tn.child("InlineTable")
		if tab == nil {
			return nil, tn.unsupported("TextIndexNormalization without an InlineTable")
		}
		in, out, rx := tn.attrOr("inField", "string"), tn.attrOr("outField", "stem"), tn.attrOr("regexField", "regex")
		for _, r := range tab.all("row") {
			var from, to string
			isRe := false
			for _, c := range r.children {
				switch c.name {
				case in:
					from = c.text
				case out:
					to = c.text
				case rx:
					isRe = trimSpace(c.text) == "true"
				}
			}
			if !isRe {
				from = regexp.QuoteMeta(from)
				from = `\b` + from + `\b`
			}
			if !e.caseSens {
				from = "(?i)" + from
			}
			re, err := regexp.Compile(javaRegexp(from))
			if err != nil {
				return nil, r.errf("normalisation pattern: %v", err)
			}
			e.norms = append(e.norms, textNorm{re: re, repl: to, recursive: tn.attr("recursive") == "true"})
		}
	}
	t, err := cc.exprOf(n, sc, fs)
	if err != nil {
		return nil, err
	}
	e.term = t
	return e, nil
}

func (e *textIndex) tokens(s string) []string {
	if strings.HasPrefix(e.local, "sep:") {
		var out []string
		for _, t := range e.wordRE.Split(s, -1) {
			t = strings.Trim(t, " \t\n\r.,;:!?\"'()[]{}")
			if t != "" {
				out = append(out, t)
			}
		}
		return out
	}
	return e.wordRE.FindAllString(s, -1)
}

// textCache keeps the normalised tokens of the last text a TextIndex saw in
// this context: models with thousands of terms share one normalisation.
type textCache struct {
	text string
	toks []string
}

func (e *textIndex) eval(c *ctx) Value {
	tv := e.text.eval(c)
	term := e.term.eval(c)
	if tv.K == Missing || term.K == Missing {
		return MissingValue
	}
	raw := tv.String()
	if c.texts == nil {
		c.texts = map[*textIndex]textCache{}
	}
	tc, ok := c.texts[e]
	if !ok || tc.text != raw {
		text := raw
		for _, nm := range e.norms {
			for i := 0; i < 100; i++ {
				r := nm.re.ReplaceAllString(text, nm.repl)
				if r == text || !nm.recursive {
					text = r
					break
				}
				text = r
			}
		}
		tc = textCache{text: raw, toks: e.tokens(text)}
		c.texts[e] = tc
	}
	toks := tc.toks
	ttoks := e.tokens(term.String())
	if len(ttoks) == 0 {
		return FloatValue(0)
	}
	count := 0
	for i := 0; i+len(ttoks) <= len(toks); i++ {
		match := true
		for j, t := range ttoks {
			a := toks[i+j]
			if e.caseSens && a != t || !e.caseSens && !strings.EqualFold(a, t) {
				match = false
				break
			}
		}
		if match {
			count++
		}
	}
	local := strings.TrimPrefix(e.local, "sep:")
	switch local {
	case "binary":
		if count > 0 {
			return FloatValue(1)
		}
		return FloatValue(0)
	case "logarithmic":
		return FloatValue(math.Log10(1 + float64(count)))
	case "augmentedNormalizedTermFrequency":
		return FloatValue(float64(count))
	}
	return FloatValue(float64(count))
}

// apply is a call of a built-in function over evaluated arguments.
type apply struct {
	name    string
	fn      func(args []Value) (Value, bool)
	args    []expr
	lazy    bool // "if": evaluate only the taken branch
	missing Value
	def     Value
	invalid string
	aware   bool // the function itself handles missing arguments
}

func (e *apply) eval(c *ctx) Value {
	if e.lazy {
		cond := e.args[0].eval(c)
		if cond.K == Missing {
			return e.missingResult()
		}
		if truthy(cond) {
			return e.args[1].eval(c)
		}
		if len(e.args) > 2 {
			return e.args[2].eval(c)
		}
		return MissingValue
	}
	var buf [8]Value
	vals := buf[:0]
	if len(e.args) > len(buf) {
		vals = make([]Value, 0, len(e.args))
	}
	for _, a := range e.args {
		v := a.eval(c)
		if v.K == Missing && !e.aware {
			return e.missingResult()
		}
		vals = append(vals, v)
	}
	v, ok := e.fn(vals)
	if !ok {
		switch e.invalid {
		case "asMissing":
			return MissingValue
		case "returnInvalid":
			c.fail("", "function %s got invalid arguments", e.name)
			return MissingValue
		}
		return MissingValue
	}
	if v.K == Missing {
		return e.def
	}
	if v.K == Float && (math.IsNaN(v.F) || math.IsInf(v.F, 0)) && e.invalid == "asMissing" {
		return MissingValue
	}
	return v
}

func (e *apply) missingResult() Value {
	if e.missing.K != Missing {
		return e.missing
	}
	return e.def
}

func truthy(v Value) bool {
	switch v.K {
	case Bool, Float:
		return v.F != 0
	case String:
		return v.S == "true"
	}
	return false
}

func (cc *compiler) apply(n *node, sc *scope, fs *funcScope) (expr, error) {
	name := n.attr("function")
	e := &apply{name: name, invalid: n.attrOr("invalidValueTreatment", "returnInvalid")}
	if n.has("mapMissingTo") {
		e.missing, _ = parseConst(n.attr("mapMissingTo"), TypeUnknown)
	}
	if n.has("defaultValue") {
		e.def, _ = parseConst(n.attr("defaultValue"), TypeUnknown)
	}
	for _, c := range n.children {
		if !isExpression(c.name) {
			if ignorable(c.name) {
				continue
			}
			return nil, c.unsupported("")
		}
		a, err := cc.expr(c, sc, fs)
		if err != nil {
			return nil, err
		}
		e.args = append(e.args, a)
	}
	if f, ok := cc.funcs[name]; ok {
		if len(e.args) != len(f.params) {
			return nil, n.errf("function %q takes %d arguments, got %d", name, len(f.params), len(e.args))
		}
		return &callExpr{f: f, args: e.args}, nil
	}
	b, ok := builtins[name]
	if !ok {
		return nil, n.unsupported("function " + strconv.Quote(name))
	}
	if len(e.args) < b.min || b.max >= 0 && len(e.args) > b.max {
		return nil, n.errf("function %q takes %s arguments, got %d", name, b.arity(), len(e.args))
	}
	e.fn, e.aware = b.fn, b.aware
	if name == "if" {
		e.lazy = true
	}
	// A constant pattern is compiled once here instead of per record.
	if k, ok := e.args[1%len(e.args)].(constExpr); ok && (name == "replace" || name == "matches") {
		re, err := regexp.Compile(k.v.String())
		if err != nil {
			return nil, n.errf("function %s: pattern %q: %v", name, k.v.String(), err)
		}
		if name == "matches" {
			e.fn = func(a []Value) (Value, bool) { return BoolValue(re.MatchString(a[0].String())), true }
		} else {
			e.fn = func(a []Value) (Value, bool) {
				return StringValue(re.ReplaceAllString(a[0].String(), a[2].String())), true
			}
		}
	}
	return e, nil
}

type builtin struct {
	min, max int
	aware    bool
	fn       func(args []Value) (Value, bool)
}

func (b builtin) arity() string {
	switch {
	case b.max < 0:
		return strconv.Itoa(b.min) + " or more"
	case b.min == b.max:
		return strconv.Itoa(b.min)
	}
	return strconv.Itoa(b.min) + " to " + strconv.Itoa(b.max)
}

func num1(f func(float64) float64) builtin {
	return builtin{1, 1, false, func(a []Value) (Value, bool) {
		x, ok := a[0].num()
		if !ok {
			return MissingValue, false
		}
		return FloatValue(f(x)), true
	}}
}

func num2(f func(x, y float64) (float64, bool)) builtin {
	return builtin{2, 2, false, func(a []Value) (Value, bool) {
		x, ok1 := a[0].num()
		y, ok2 := a[1].num()
		if !ok1 || !ok2 {
			return MissingValue, false
		}
		r, ok := f(x, y)
		return FloatValue(r), ok
	}}
}

func cmp2(f func(c int) bool) builtin {
	return builtin{2, 2, false, func(a []Value) (Value, bool) {
		return BoolValue(f(compareValues(a[0], a[1]))), true
	}}
}

func agg(f func(xs []Value) (float64, bool)) builtin {
	return builtin{1, -1, true, func(a []Value) (Value, bool) {
		r, ok := f(a)
		if !ok {
			return MissingValue, true
		}
		return FloatValue(r), true
	}}
}

func round(x float64) float64 {
	return math.Floor(x + 0.5)
}

var builtins map[string]builtin

func init() {
	builtins = map[string]builtin{
		"+": num2(func(x, y float64) (float64, bool) { return x + y, true }),
		"-": num2(func(x, y float64) (float64, bool) { return x - y, true }),
		"*": num2(func(x, y float64) (float64, bool) { return x * y, true }),
		"/": num2(func(x, y float64) (float64, bool) {
			if y == 0 {
				return 0, false
			}
			return x / y, true
		}),
		"modulo": num2(func(x, y float64) (float64, bool) {
			if y == 0 {
				return 0, false
			}
			return x - y*math.Floor(x/y), true
		}),
		"pow": num2(func(x, y float64) (float64, bool) { return math.Pow(x, y), true }),
		"threshold": num2(func(x, y float64) (float64, bool) {
			if x > y {
				return 1, true
			}
			return 0, true
		}),
		"log10": num1(math.Log10),
		"ln":    num1(math.Log),
		"log1p": num1(math.Log1p),
		"exp":   num1(math.Exp),
		"expm1": num1(math.Expm1),
		"sqrt":  num1(math.Sqrt),
		"abs":   num1(math.Abs),
		"floor": num1(math.Floor),
		"ceil":  num1(math.Ceil),
		"round": num1(round),
		"rint":  num1(math.RoundToEven),
		"sin":   num1(math.Sin), "cos": num1(math.Cos), "tan": num1(math.Tan),
		"asin": num1(math.Asin), "acos": num1(math.Acos), "atan": num1(math.Atan),
		"sinh": num1(math.Sinh), "cosh": num1(math.Cosh), "tanh": num1(math.Tanh),
		"atan2": num2(func(y, x float64) (float64, bool) { return math.Atan2(y, x), true }),
		"hypot": num2(func(x, y float64) (float64, bool) { return math.Hypot(x, y), true }),
		"erf":   num1(math.Erf),
		"normalCDF": {3, 3, false, func(a []Value) (Value, bool) {
			x, _ := a[0].num()
			mu, _ := a[1].num()
			s, _ := a[2].num()
			return FloatValue(0.5 * math.Erfc(-(x-mu)/(s*math.Sqrt2))), true
		}},
		"stdNormalCDF": num1(func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }),
		"stdNormalPDF": num1(func(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }),
		"stdNormalIDF": num1(normalQuantile),
		"min": agg(func(xs []Value) (float64, bool) {
			r, any := math.Inf(1), false
			for _, v := range xs {
				if f, ok := v.num(); ok && v.K != Missing {
					r, any = math.Min(r, f), true
				}
			}
			return r, any
		}),
		"max": agg(func(xs []Value) (float64, bool) {
			r, any := math.Inf(-1), false
			for _, v := range xs {
				if f, ok := v.num(); ok && v.K != Missing {
					r, any = math.Max(r, f), true
				}
			}
			return r, any
		}),
		"sum": agg(func(xs []Value) (float64, bool) {
			r, any := 0.0, false
			for _, v := range xs {
				if f, ok := v.num(); ok && v.K != Missing {
					r, any = r+f, true
				}
			}
			return r, any
		}),
		"avg": agg(func(xs []Value) (float64, bool) {
			r, n := 0.0, 0
			for _, v := range xs {
				if f, ok := v.num(); ok && v.K != Missing {
					r, n = r+f, n+1
				}
			}
			return r / float64(n), n > 0
		}),
		"product": agg(func(xs []Value) (float64, bool) {
			r, any := 1.0, false
			for _, v := range xs {
				if f, ok := v.num(); ok && v.K != Missing {
					r, any = r*f, true
				}
			}
			return r, any
		}),
		"median": agg(func(xs []Value) (float64, bool) {
			var fs []float64
			for _, v := range xs {
				if f, ok := v.num(); ok && v.K != Missing {
					fs = append(fs, f)
				}
			}
			if len(fs) == 0 {
				return 0, false
			}
			sort.Float64s(fs)
			if len(fs)%2 == 1 {
				return fs[len(fs)/2], true
			}
			return (fs[len(fs)/2-1] + fs[len(fs)/2]) / 2, true
		}),
		"isMissing":      {1, 1, true, func(a []Value) (Value, bool) { return BoolValue(a[0].K == Missing), true }},
		"isNotMissing":   {1, 1, true, func(a []Value) (Value, bool) { return BoolValue(a[0].K != Missing), true }},
		"isValid":        {1, 1, true, func(a []Value) (Value, bool) { return BoolValue(a[0].K != Missing), true }},
		"isNotValid":     {1, 1, true, func(a []Value) (Value, bool) { return BoolValue(false), true }},
		"equal":          {2, 2, false, func(a []Value) (Value, bool) { return BoolValue(equalValues(a[0], a[1])), true }},
		"notEqual":       {2, 2, false, func(a []Value) (Value, bool) { return BoolValue(!equalValues(a[0], a[1])), true }},
		"lessThan":       cmp2(func(c int) bool { return c < 0 }),
		"lessOrEqual":    cmp2(func(c int) bool { return c <= 0 }),
		"greaterThan":    cmp2(func(c int) bool { return c > 0 }),
		"greaterOrEqual": cmp2(func(c int) bool { return c >= 0 }),
		"and": {2, -1, true, func(a []Value) (Value, bool) {
			unknown := false
			for _, v := range a {
				if v.K == Missing {
					unknown = true
				} else if !truthy(v) {
					return BoolValue(false), true
				}
			}
			if unknown {
				return MissingValue, true
			}
			return BoolValue(true), true
		}},
		"or": {2, -1, true, func(a []Value) (Value, bool) {
			unknown := false
			for _, v := range a {
				if v.K == Missing {
					unknown = true
				} else if truthy(v) {
					return BoolValue(true), true
				}
			}
			if unknown {
				return MissingValue, true
			}
			return BoolValue(false), true
		}},
		"not": {1, 1, false, func(a []Value) (Value, bool) { return BoolValue(!truthy(a[0])), true }},
		"isIn": {2, -1, false, func(a []Value) (Value, bool) {
			for _, v := range a[1:] {
				if equalValues(a[0], v) {
					return BoolValue(true), true
				}
			}
			return BoolValue(false), true
		}},
		"isNotIn": {2, -1, false, func(a []Value) (Value, bool) {
			for _, v := range a[1:] {
				if equalValues(a[0], v) {
					return BoolValue(false), true
				}
			}
			return BoolValue(true), true
		}},
		"if":        {2, 3, true, nil},
		"uppercase": {1, 1, false, func(a []Value) (Value, bool) { return StringValue(strings.ToUpper(a[0].String())), true }},
		"lowercase": {1, 1, false, func(a []Value) (Value, bool) { return StringValue(strings.ToLower(a[0].String())), true }},
		"trimBlanks": {1, 1, false, func(a []Value) (Value, bool) {
			return StringValue(strings.TrimSpace(a[0].String())), true
		}},
		"stringLength": {1, 1, false, func(a []Value) (Value, bool) {
			return FloatValue(float64(len([]rune(a[0].String())))), true
		}},
		"substring": {3, 3, false, func(a []Value) (Value, bool) {
			s := []rune(a[0].String())
			p, ok1 := a[1].num()
			l, ok2 := a[2].num()
			if !ok1 || !ok2 || p < 1 || l < 0 {
				return MissingValue, false
			}
			start := int(p) - 1
			if start > len(s) {
				start = len(s)
			}
			end := start + int(l)
			if end > len(s) {
				end = len(s)
			}
			return StringValue(string(s[start:end])), true
		}},
		"concat": {1, -1, false, func(a []Value) (Value, bool) {
			var b strings.Builder
			for _, v := range a {
				b.WriteString(v.String())
			}
			return StringValue(b.String()), true
		}},
		"replace": {3, 3, false, func(a []Value) (Value, bool) {
			re, err := regexp.Compile(a[1].String())
			if err != nil {
				return MissingValue, false
			}
			return StringValue(re.ReplaceAllString(a[0].String(), a[2].String())), true
		}},
		"matches": {2, 2, false, func(a []Value) (Value, bool) {
			re, err := regexp.Compile(a[1].String())
			if err != nil {
				return MissingValue, false
			}
			return BoolValue(re.MatchString(a[0].String())), true
		}},
		"formatNumber": {2, 2, false, func(a []Value) (Value, bool) {
			x, ok := a[0].num()
			if !ok {
				return MissingValue, false
			}
			return StringValue(sprintfC(a[1].String(), x)), true
		}},
		"x-coalesce": {1, -1, true, coalesce},
		"coalesce":   {1, -1, true, coalesce},
	}
}

func coalesce(a []Value) (Value, bool) {
	for _, v := range a {
		if v.K != Missing {
			return v, true
		}
	}
	return MissingValue, true
}

// sprintfC formats one number with a C printf pattern such as "%3d" or
// "%.2f", the subset formatNumber documents use.
func sprintfC(pattern string, x float64) string {
	i := strings.IndexByte(pattern, '%')
	if i < 0 {
		return pattern
	}
	j := i + 1
	for j < len(pattern) && strings.IndexByte("0123456789.-+ #", pattern[j]) >= 0 {
		j++
	}
	if j >= len(pattern) {
		return pattern
	}
	spec := pattern[i+1 : j]
	verb := pattern[j]
	var s string
	switch verb {
	case 'd', 'i':
		s = padFormat(spec, strconv.FormatInt(int64(x), 10))
	case 'f', 'e', 'g', 'E', 'G':
		prec := -1
		width := spec
		if k := strings.IndexByte(spec, '.'); k >= 0 {
			prec, _ = strconv.Atoi(spec[k+1:])
			width = spec[:k]
			if prec == 0 && spec[k+1:] == "" {
				prec = 0
			}
		} else if verb == 'f' || verb == 'e' || verb == 'E' {
			prec = 6
		}
		s = padFormat(width, strconv.FormatFloat(x, verb, prec, 64))
	default:
		s = formatFloat(x)
	}
	return pattern[:i] + s + pattern[j+1:]
}

func padFormat(spec, s string) string {
	left := strings.HasPrefix(spec, "-")
	zero := strings.HasPrefix(strings.TrimLeft(spec, "-+ #"), "0")
	w, _ := strconv.Atoi(strings.TrimLeft(spec, "-+ #0"))
	for len(s) < w {
		switch {
		case left:
			s += " "
		case zero:
			if strings.HasPrefix(s, "-") {
				s = "-0" + s[1:]
			} else {
				s = "0" + s
			}
		default:
			s = " " + s
		}
	}
	return s
}

// normalQuantile is the inverse of the standard normal CDF, through the
// inverse error function.
func normalQuantile(p float64) float64 {
	if p <= 0 {
		return math.Inf(-1)
	}
	if p >= 1 {
		return math.Inf(1)
	}
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// javaRegexp adapts the Java/Python pattern features exporters write to
// RE2: the (?u) flag is implied, and \w is widened to Unicode letters.
func javaRegexp(p string) string {
	p = strings.ReplaceAll(p, "(?u)", "")
	if strings.Contains(p, `\w\w+`) {
		p = strings.ReplaceAll(p, `\b\w\w+\b`, `\w\w+`)
	}
	return strings.ReplaceAll(p, `\w`, `[\p{L}\p{N}_]`)
}
