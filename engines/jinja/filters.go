package jinja

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

type filterFunc func(ev *evaluator, v any, args []any, kw []kwarg) (any, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs":         fAbs,
		"attr":        fAttr,
		"batch":       fBatch,
		"capitalize":  strFilter(pyCapitalize),
		"center":      fCenter,
		"count":       fLength,
		"d":           fDefault,
		"default":     fDefault,
		"dictsort":    fDictsort,
		"e":           fEscape,
		"escape":      fEscape,
		"first":       fFirst,
		"float":       fFloat,
		"forceescape": fForceEscape,
		"format":      fFormat,
		"indent":      fIndent,
		"int":         fInt,
		"items":       fItems,
		"join":        fJoin,
		"last":        fLast,
		"length":      fLength,
		"list":        fList,
		"lower":       strFilter(pyLower),
		"map":         fMap,
		"max":         fMinMax(false),
		"min":         fMinMax(true),
		"reject":      fSelect(false, false),
		"rejectattr":  fSelect(false, true),
		"replace":     fReplace,
		"reverse":     fReverse,
		"round":       fRound,
		"safe":        fSafe,
		"select":      fSelect(true, false),
		"selectattr":  fSelect(true, true),
		"sort":        fSort,
		"string":      fString,
		"sum":         fSum,
		"title":       strFilter(jinjaTitle),
		"tojson":      fTojson,
		"trim":        fTrim,
		"unique":      fUnique,
		"upper":       strFilter(pyUpper),
		"wordcount":   fWordcount,
	}
}

func strFilter(f func(string) string) filterFunc {
	return func(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
		if len(args)+len(kw) > 0 {
			return nil, errf("the filter takes no arguments")
		}
		return f(toStr(v)), nil
	}
}

var wordSplit = regexp.MustCompile(`([-\s({\[<]+)`)

// jinjaTitle is jinja2's title filter: each word (split at dashes, spaces
// and opening brackets) upper-cased at its first character, lowered after.
func jinjaTitle(s string) string {
	var b strings.Builder
	last := 0
	for _, loc := range wordSplit.FindAllStringIndex(s, -1) {
		titleWord(&b, s[last:loc[0]])
		b.WriteString(s[loc[0]:loc[1]])
		last = loc[1]
	}
	titleWord(&b, s[last:])
	return b.String()
}

func titleWord(b *strings.Builder, w string) {
	if w == "" {
		return
	}
	r, n := utf8.DecodeRuneInString(w)
	b.WriteString(pyUpper(string(r)))
	b.WriteString(pyLower(w[n:]))
}

func fAbs(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	if u, ok := v.(*undefined); ok {
		return nil, u.fail()
	}
	i, f, isF, ok := asNumber(v)
	if !ok {
		return nil, errf("bad operand type for abs(): '%s'", typeName(v))
	}
	if isF {
		return math.Abs(f), nil
	}
	if i < 0 {
		return -i, nil
	}
	return i, nil
}

func fAttr(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("attr", []string{"name"}, []any{required}, args, kw)
	if err != nil {
		return nil, err
	}
	name := toStr(a[0])
	// jinja2's attr filter takes Python attributes only: a dict's keys are
	// not among them.
	if m, isMap := v.(*Map); isMap && !isUnsafeAttr(name) {
		if c, ok, unsafe := dictMethod(m, name); ok {
			if unsafe {
				return unsafeUndefined(v, name), nil
			}
			return c, nil
		}
		return undefinedAttr(v, name), nil
	}
	return getattr(v, name)
}

func fBatch(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("batch", []string{"linecount", "fill_with"}, []any{required, nil}, args, kw)
	if err != nil {
		return nil, err
	}
	n, err := argInt("batch", a[0])
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, errf("batch size must be positive")
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var out []any
	for i := 0; i < len(items); i += n {
		row := append([]any{}, items[i:min(i+n, len(items))]...)
		if len(row) < n && a[1] != nil {
			for len(row) < n {
				row = append(row, a[1])
			}
		}
		out = append(out, row)
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func fCenter(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("center", []string{"width"}, []any{int64(80)}, args, kw)
	if err != nil {
		return nil, err
	}
	m, _ := strMethod(toStr(v), "center")
	return m.fn(nil, []any{a[0]}, nil)
}

func fDefault(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("default", []string{"default_value", "boolean"}, []any{"", false}, args, kw)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(*undefined); ok || (truthy(a[1]) && !truthy(v)) {
		return a[0], nil
	}
	return v, nil
}

// sortKey lowers strings unless caseSensitive, as jinja2's ignore_case.
func sortKey(v any, caseSensitive bool) any {
	if caseSensitive {
		return v
	}
	switch x := v.(type) {
	case string:
		return pyLower(x)
	case markup:
		return pyLower(string(x))
	}
	return v
}

// stableSort sorts items by key with Python's comparison; the first
// comparison Python would refuse is the error.
func stableSort(items []any, key func(any) (any, error), reverse bool) ([]any, error) {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var cerr error
	slices.SortStableFunc(idx, func(a, b int) int {
		c, err := compare(keys[a], keys[b], "<")
		if err != nil && cerr == nil {
			cerr = err
		}
		if c == 2 {
			c = 0
		}
		if reverse {
			return -c
		}
		return c
	})
	if cerr != nil {
		return nil, cerr
	}
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func fDictsort(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("dictsort", []string{"case_sensitive", "by", "reverse"}, []any{false, "key", false}, args, kw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(*Map)
	if !ok {
		return nil, errf("dictsort filter needs a mapping, got %s", typeName(v))
	}
	pos := 0
	switch a[1] {
	case "key":
	case "value":
		pos = 1
	default:
		return nil, errf("You can only sort by either \"key\" or \"value\"")
	}
	cs := truthy(a[0])
	return stableSort(dictItems(m), func(it any) (any, error) { return sortKey(it.(tuple)[pos], cs), nil }, truthy(a[2]))
}

func fEscape(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	if m, ok := v.(markup); ok {
		return m, nil
	}
	return markup(escapeHTML(toStr(v))), nil
}

func fForceEscape(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	return markup(escapeHTML(toStr(v))), nil
}

func fFirst(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &undefined{hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func fLast(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &undefined{hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

// pyParseFloat is Python's float(str): surrounding whitespace and
// underscores between digits allowed, inf/nan spelled out.
func pyParseFloat(s string) (float64, bool) {
	s = strings.TrimFunc(s, isPySpace)
	s = strings.ReplaceAll(s, "_", "")
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "inf", "infinity", "nan":
	default:
		for _, c := range strings.ToLower(s) {
			if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == '+' || c == '-') {
				return 0, false
			}
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func fFloat(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("float", []string{"default"}, []any{0.0}, args, kw)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *undefined:
		return nil, x.fail()
	case string, markup:
		if f, ok := pyParseFloat(toStr(x)); ok {
			return f, nil
		}
		return a[0], nil
	}
	if i, f, isF, ok := asNumber(v); ok {
		if isF {
			return f, nil
		}
		return float64(i), nil
	}
	return a[0], nil
}

func fInt(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("int", []string{"default", "base"}, []any{int64(0), int64(10)}, args, kw)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *undefined:
		return nil, x.fail()
	case string, markup:
		s := strings.TrimFunc(toStr(x), isPySpace)
		base, err := argInt("int", a[1])
		if err != nil {
			return nil, err
		}
		t := strings.ReplaceAll(s, "_", "")
		if base != 10 {
			t = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(t), "0x"), "0o"), "0b")
		}
		if i, err := strconv.ParseInt(t, base, 64); err == nil && s != "" && !strings.HasPrefix(s, "_") && !strings.HasSuffix(s, "_") && !strings.Contains(s, "__") {
			return i, nil
		}
		if f, ok := pyParseFloat(s); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
		return a[0], nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return a[0], nil
		}
		return int64(x), nil
	}
	if i, _, _, ok := asNumber(v); ok {
		return i, nil
	}
	return a[0], nil
}

func fFormat(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	if len(args) > 0 && len(kw) > 0 {
		return nil, errf("can't handle positional and keyword arguments at the same time")
	}
	if len(kw) > 0 {
		m := &Map{}
		for _, k := range kw {
			m.Set(k.name, k.val)
		}
		return percentFormat(toStr(v), m)
	}
	return percentFormat(toStr(v), tuple(args))
}

func fIndent(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("indent", []string{"width", "first", "blank"}, []any{int64(4), false, false}, args, kw)
	if err != nil {
		return nil, err
	}
	var ind string
	if s, ok := a[0].(string); ok {
		ind = s
	} else {
		w, err := argInt("indent", a[0])
		if err != nil {
			return nil, err
		}
		ind = strings.Repeat(" ", max(w, 0))
	}
	s := toStr(v) + "\n"
	lines := splitLines(s, false)
	var b strings.Builder
	if truthy(a[2]) {
		b.WriteString(strings.Join(lines, "\n"+ind))
	} else {
		b.WriteString(lines[0])
		for _, l := range lines[1:] {
			b.WriteByte('\n')
			if l != "" {
				b.WriteString(ind)
			}
			b.WriteString(l)
		}
	}
	out := b.String()
	if truthy(a[1]) {
		out = ind + out
	}
	if _, ok := v.(markup); ok {
		return markup(out), nil
	}
	return out, nil
}

func fItems(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	switch x := v.(type) {
	case *undefined:
		return []any{}, nil
	case *Map:
		return dictItems(x), nil
	}
	return nil, errf("Can only get item pairs from a mapping.")
}

// attrGetter is jinja2's make_attrgetter: a dotted path, integer parts as
// indexes, each step a subscript; dflt replaces an Undefined result.
func attrGetter(attr any, dflt any, hasDefault bool, lower bool) (func(any) (any, error), error) {
	var parts []any
	switch x := attr.(type) {
	case string:
		for _, p := range strings.Split(x, ".") {
			if i, err := strconv.Atoi(p); err == nil {
				parts = append(parts, int64(i))
			} else {
				parts = append(parts, p)
			}
		}
	case int64:
		parts = []any{x}
	case nil:
	default:
		parts = []any{x}
	}
	return func(item any) (any, error) {
		var err error
		for _, p := range parts {
			if item, err = getitem(item, p); err != nil {
				return nil, err
			}
		}
		if _, ok := item.(*undefined); ok && hasDefault {
			item = dflt
		}
		if lower {
			item = sortKey(item, false)
		}
		return item, nil
	}, nil
}

func fJoin(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("join", []string{"d", "attribute"}, []any{"", nil}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get, _ := attrGetter(a[1], nil, false, false)
	var b strings.Builder
	sep := toStr(a[0])
	isMarkup := false
	for _, it := range items {
		if _, ok := it.(markup); ok {
			isMarkup = true
		}
	}
	for i, it := range items {
		if a[1] != nil {
			if it, err = get(it); err != nil {
				return nil, err
			}
		}
		if i > 0 {
			b.WriteString(sep)
		}
		if isMarkup {
			if _, ok := it.(markup); !ok {
				b.WriteString(escapeHTML(toStr(it)))
				continue
			}
		}
		writeStr(&b, it)
	}
	if isMarkup {
		return markup(b.String()), nil
	}
	return b.String(), nil
}

func fLength(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	n, err := length(v)
	if err != nil {
		return nil, err
	}
	return int64(n), nil
}

func fList(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return append([]any{}, items...), nil
}

func fMap(ev *evaluator, v any, args []any, kw []kwarg) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var fn func(any) (any, error)
	if len(args) == 0 {
		var attr, dflt any
		hasDefault := false
		for _, k := range kw {
			switch k.name {
			case "attribute":
				attr = k.val
			case "default":
				dflt, hasDefault = k.val, true
			default:
				return nil, errf("Unexpected keyword argument %s", pyReprString(k.name))
			}
		}
		if attr == nil {
			return nil, errf("map requires a filter argument")
		}
		if fn, err = attrGetter(attr, dflt, hasDefault, false); err != nil {
			return nil, err
		}
	} else {
		name, ok := args[0].(string)
		if !ok {
			return nil, errf("map requires a filter name")
		}
		f, ok := filters[name]
		if !ok {
			return nil, errf("No filter named %s.", pyReprString(name))
		}
		rest := args[1:]
		fn = func(it any) (any, error) { return f(ev, it, rest, kw) }
	}
	out := make([]any, len(items))
	for i, it := range items {
		if out[i], err = fn(it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func fMinMax(isMin bool) filterFunc {
	return func(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
		a, err := bindArgs("min", []string{"case_sensitive", "attribute"}, []any{false, nil}, args, kw)
		if err != nil {
			return nil, err
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			what := "max"
			if isMin {
				what = "min"
			}
			return &undefined{hint: "No aggregated item, sequence was empty.", name: what}, nil
		}
		get, _ := attrGetter(a[1], nil, false, !truthy(a[0]))
		best := items[0]
		bk, err := get(best)
		if err != nil {
			return nil, err
		}
		for _, it := range items[1:] {
			k, err := get(it)
			if err != nil {
				return nil, err
			}
			c, err := compare(k, bk, "<")
			if err != nil {
				return nil, err
			}
			if (isMin && c == -1) || (!isMin && c == 1) {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

// fSelect is select/reject (attr false) and selectattr/rejectattr.
func fSelect(keep, attr bool) filterFunc {
	return func(ev *evaluator, v any, args []any, kw []kwarg) (any, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		get := func(x any) (any, error) { return x, nil }
		if attr {
			if len(args) == 0 {
				return nil, errf("Missing parameter for attribute name")
			}
			if get, err = attrGetter(args[0], nil, false, false); err != nil {
				return nil, err
			}
			args = args[1:]
		}
		test := func(x any) (bool, error) { return truthy(x), nil }
		if len(args) > 0 {
			name, ok := args[0].(string)
			if !ok {
				return nil, errf("test name must be a string")
			}
			t, ok := tests[name]
			if !ok {
				return nil, errf("No test named %s.", pyReprString(name))
			}
			rest := args[1:]
			test = func(x any) (bool, error) { return t(ev, x, rest, kw) }
		}
		out := []any{}
		for _, it := range items {
			x, err := get(it)
			if err != nil {
				return nil, err
			}
			ok, err := test(x)
			if err != nil {
				return nil, err
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return out, nil
	}
}

func fReplace(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("replace", []string{"old", "new", "count"}, []any{required, required, nil}, args, kw)
	if err != nil {
		return nil, err
	}
	n := -1
	if a[2] != nil {
		if n, err = argInt("replace", a[2]); err != nil {
			return nil, err
		}
	}
	s := toStr(v)
	out := strings.Replace(s, toStr(a[0]), toStr(a[1]), n)
	if _, ok := v.(markup); ok {
		return markup(out), nil
	}
	return out, nil
}

func fReverse(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	switch x := v.(type) {
	case string:
		rs := []rune(x)
		slices.Reverse(rs)
		return string(rs), nil
	case markup:
		rs := []rune(string(x))
		slices.Reverse(rs)
		return markup(rs), nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, errf("argument must be iterable")
	}
	out := slices.Clone(items)
	slices.Reverse(out)
	if out == nil {
		out = []any{}
	}
	return out, nil
}

func fRound(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("round", []string{"precision", "method"}, []any{int64(0), "common"}, args, kw)
	if err != nil {
		return nil, err
	}
	p, err := argInt("round", a[0])
	if err != nil {
		return nil, err
	}
	if u, ok := v.(*undefined); ok {
		return nil, u.fail()
	}
	i, f, isF, ok := asNumber(v)
	if !ok {
		return nil, errf("type %s doesn't define __round__ method", typeName(v))
	}
	method, _ := a[1].(string)
	if !isF && method == "common" {
		if p >= 0 {
			return i, nil
		}
		f = float64(i)
		isF = false
	}
	if !isF {
		f = float64(i)
	}
	scale := math.Pow(10, float64(p))
	switch method {
	case "common":
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return f, nil
		}
		if p >= 0 {
			s := strconv.FormatFloat(f, 'f', p, 64)
			r, _ := strconv.ParseFloat(s, 64)
			if !isF {
				return int64(r), nil
			}
			return r, nil
		}
		r := math.RoundToEven(f*scale) / scale
		if !isF {
			return int64(r), nil
		}
		return r, nil
	case "ceil":
		return math.Ceil(f*scale) / scale, nil
	case "floor":
		return math.Floor(f*scale) / scale, nil
	}
	return nil, errf("method must be common, ceil or floor")
}

func fSafe(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	return markup(toStr(v)), nil
}

func fSort(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("sort", []string{"reverse", "case_sensitive", "attribute"}, []any{false, false, nil}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get, _ := attrGetter(a[2], nil, false, !truthy(a[1]))
	return stableSort(items, get, truthy(a[0]))
}

func fString(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	if m, ok := v.(markup); ok {
		return m, nil
	}
	return toStr(v), nil
}

func fSum(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("sum", []string{"attribute", "start"}, []any{nil, int64(0)}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get, _ := attrGetter(a[0], nil, false, false)
	acc := a[1]
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		if acc, err = binop("+", acc, x); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// fTojson is transformers' tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), not jinja2's
// HTML-escaping one.
func fTojson(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("tojson", []string{"ensure_ascii", "indent", "separators", "sort_keys"}, []any{false, nil, nil, false}, args, kw)
	if err != nil {
		return nil, err
	}
	o := jsonOpts{ensureASCII: truthy(a[0]), sortKeys: truthy(a[3]), itemSep: ", ", keySep: ": "}
	switch ind := a[1].(type) {
	case nil:
	case string:
		o.indent = &ind
	default:
		n, err := argInt("tojson", ind)
		if err != nil {
			return nil, err
		}
		s := strings.Repeat(" ", max(n, 0))
		o.indent = &s
		o.itemSep = ","
	}
	if a[2] != nil {
		seps, err := iterate(a[2])
		if err != nil || len(seps) != 2 {
			return nil, errf("separators must be a pair of strings")
		}
		o.itemSep, o.keySep = toStr(seps[0]), toStr(seps[1])
	}
	return dumps(v, o)
}

func fTrim(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	chars, has, err := optChars("trim", args, kw)
	if err != nil {
		return nil, err
	}
	return pyStrip(toStr(v), chars, has, true, true), nil
}

func fUnique(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	a, err := bindArgs("unique", []string{"case_sensitive", "attribute"}, []any{false, nil}, args, kw)
	if err != nil {
		return nil, err
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	get, _ := attrGetter(a[1], nil, false, !truthy(a[0]))
	out := []any{}
	var seen []any
	for _, it := range items {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		switch k.(type) {
		case []any, *Map:
			return nil, errf("unhashable type: '%s'", typeName(k))
		}
		dup := false
		for _, s := range seen {
			if equal(s, k) {
				dup = true
				break
			}
		}
		if !dup {
			seen = append(seen, k)
			out = append(out, it)
		}
	}
	return out, nil
}

var wordRe = regexp.MustCompile(`[\p{L}\p{N}_]+`)

func fWordcount(_ *evaluator, v any, args []any, kw []kwarg) (any, error) {
	return int64(len(wordRe.FindAllStringIndex(toStr(v), -1))), nil
}
