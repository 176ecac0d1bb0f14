package jinja

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Values inside the evaluator are Python's, as Go types:
//
//	nil          None
//	bool         bool
//	int64        int (64-bit; overflow is an error, not a bignum)
//	float64      float
//	string       str
//	markup       markupsafe.Markup (the safe and escape filters)
//	[]any        list
//	tuple        tuple
//	*Map         dict (insertion-ordered, string keys)
//	*undefined   jinja2's default Undefined
//	*namespace   namespace(...)
//	*loopInfo    the loop variable
//	*callable    a function, macro or bound method
//
// Render converts what it is given into these (see toValue).

// Map is an insertion-ordered dictionary with string keys: Python's dict as
// a template sees it, where the order of keys shows in tojson, items() and
// iteration. Render takes a map[string]any too, but Go maps have no order,
// so their keys are taken sorted; give a *Map (DecodeJSON makes them) where
// the order must be the caller's. The zero Map is empty and ready to use;
// a Map is not safe for concurrent writes.
type Map struct {
	keys []string
	vals map[string]any
}

// NewMap returns a Map holding the key/value pairs kv (key, value, key,
// value, ...; keys must be strings) in that order.
func NewMap(kv ...any) *Map {
	m := &Map{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Set(kv[i].(string), kv[i+1])
	}
	return m
}

// Set adds k with v at the end, or replaces k's value where it is.
func (m *Map) Set(k string, v any) {
	if m.vals == nil {
		m.vals = make(map[string]any)
	}
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

// Get returns k's value and whether k is present.
func (m *Map) Get(k string) (any, bool) {
	v, ok := m.vals[k]
	return v, ok
}

// Len is the number of keys.
func (m *Map) Len() int { return len(m.keys) }

// Keys returns the keys in order (the Map's own slice: do not modify it).
func (m *Map) Keys() []string { return m.keys }

type tuple []any

type markup string

// undefined is jinja2's default Undefined: empty when printed, false, of
// length 0, iterable as nothing, and an error for anything else (attribute,
// item, arithmetic, comparison, call).
type undefined struct {
	name   string
	obj    any
	hasObj bool
	index  bool // name came from a subscript with a non-string key
	hint   string
	kind   Kind
}

func (u *undefined) message() string {
	if u.hint != "" {
		return u.hint
	}
	if !u.hasObj {
		return pyReprString(u.name) + " is undefined"
	}
	if u.index {
		return objectTypeRepr(u.obj) + " has no element " + u.name
	}
	return pyReprString(objectTypeRepr(u.obj)) + " has no attribute " + pyReprString(u.name)
}

func (u *undefined) fail() error {
	k := u.kind
	if k == "" {
		k = KindUndefined
	}
	return &Error{Kind: k, Msg: u.message()}
}

func undefinedName(name string) *undefined { return &undefined{name: name} }

func undefinedAttr(obj any, name string) *undefined {
	return &undefined{name: name, obj: obj, hasObj: true}
}

type namespace struct{ attrs *Map }

type kwarg struct {
	name string
	val  any
}

// callable is anything a template can call.
type callable struct {
	name string
	fn   func(ev *evaluator, args []any, kw []kwarg) (any, error)
}

// toValue converts a Go value given to Render into the evaluator's types.
// Already-converted values (the result of DecodeJSON) pass through without
// a copy when nothing inside them needs converting.
func toValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, markup, *undefined, *namespace, *callable:
		return v, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, errf("integer %d out of range", x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, errf("integer %d out of range", x)
		}
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		return numberValue(string(x))
	case []any:
		var out []any
		for i, e := range x {
			c, err := toValue(e)
			if err != nil {
				return nil, err
			}
			if out == nil && !sameValue(c, e) {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = c
			}
		}
		if out == nil {
			return x, nil
		}
		return out, nil
	case tuple:
		l, err := toValue([]any(x))
		if err != nil {
			return nil, err
		}
		return tuple(l.([]any)), nil
	case *Map:
		var out *Map
		for i, k := range x.keys {
			e := x.vals[k]
			c, err := toValue(e)
			if err != nil {
				return nil, err
			}
			if out == nil && !sameValue(c, e) {
				out = &Map{keys: slices.Clone(x.keys), vals: make(map[string]any, len(x.keys))}
				for _, k0 := range x.keys[:i] {
					out.vals[k0] = x.vals[k0]
				}
			}
			if out != nil {
				out.vals[k] = c
			}
		}
		if out == nil {
			return x, nil
		}
		return out, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := &Map{keys: keys, vals: make(map[string]any, len(x))}
		for _, k := range keys {
			c, err := toValue(x[k])
			if err != nil {
				return nil, err
			}
			m.vals[k] = c
		}
		return m, nil
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := toValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	}
	// Other slices and string-keyed maps through reflection.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			c, err := toValue(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			return toValue(m)
		}
	case reflect.String:
		return rv.String(), nil
	}
	return nil, errf("a Go value of type %T cannot be given to a template", v)
}

// sameValue says whether toValue left e as it was (no copy needed).
func sameValue(c, e any) bool {
	switch x := c.(type) {
	case []any:
		y, ok := e.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case *Map:
		y, ok := e.(*Map)
		return ok && x == y
	case tuple:
		y, ok := e.(tuple)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case int64:
		y, ok := e.(int64)
		return ok && x == y
	case float64:
		y, ok := e.(float64)
		return ok && (x == y || x != x)
	case nil, bool, string, markup, *undefined, *namespace, *callable:
		return c == e
	}
	return false
}

func numberValue(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return nil, errf("bad number %q", s)
	}
	return f, nil
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case markup:
		return x != ""
	case []any:
		return len(x) > 0
	case tuple:
		return len(x) > 0
	case *Map:
		return x.Len() > 0
	case *undefined:
		return false
	}
	return true
}

// typeName is Python's type(v).__name__.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case markup:
		return "Markup"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *Map:
		return "dict"
	case *undefined:
		return "Undefined"
	case *namespace:
		return "Namespace"
	case *loopInfo:
		return "LoopContext"
	case *callable:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

// objectTypeRepr is jinja2's object_type_repr, used in undefined messages.
func objectTypeRepr(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case markup:
		return "markupsafe.Markup object"
	case *namespace:
		return "jinja2.utils.Namespace object"
	case *loopInfo:
		return "jinja2.runtime.LoopContext object"
	}
	return typeName(v) + " object"
}

// toStr is Python's str(v) as jinja2 prints it (an Undefined prints as "").
func toStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case markup:
		return string(x)
	case *undefined:
		return ""
	}
	var b strings.Builder
	writeStr(&b, v)
	return b.String()
}

func writeStr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		b.WriteString(x)
	case markup:
		b.WriteString(string(x))
	case *undefined:
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	default:
		writeRepr(b, v)
	}
}

// writeRepr writes Python's repr(v).
func writeRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		b.WriteString(pyReprString(x))
	case markup:
		b.WriteString("Markup(" + pyReprString(string(x)) + ")")
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Map:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyReprString(k))
			b.WriteString(": ")
			writeRepr(b, x.vals[k])
		}
		b.WriteByte('}')
	case *undefined:
		b.WriteString("Undefined")
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.attrs)
		b.WriteByte('>')
	case *loopInfo:
		fmt.Fprintf(b, "<LoopContext %d/%d>", x.index0+1, x.length())
	case *callable:
		b.WriteString("<function " + x.name + ">")
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

func repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// pyFloat is Python's repr of a float: the shortest digits that read back,
// positional for exponents in [-4, 16), else d.ddde+XX; integral values
// keep ".0".
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	i := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// pyReprString is Python's repr of a str.
func pyReprString(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case r == utf8.RuneError || !unicode.IsPrint(r):
			switch {
			case r < 0x100:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// asNumber returns v as an int64 or float64 (bool counts as int, as in
// Python); ok is false for anything else.
func asNumber(v any) (i int64, f float64, isFloat, ok bool) {
	switch x := v.(type) {
	case int64:
		return x, 0, false, true
	case bool:
		if x {
			return 1, 0, false, true
		}
		return 0, 0, false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// equal is Python's ==.
func equal(a, b any) bool {
	if ai, af, aF, ok := asNumber(a); ok {
		bi, bf, bF, ok := asNumber(b)
		if !ok {
			return false
		}
		switch {
		case !aF && !bF:
			return ai == bi
		case aF && bF:
			return af == bf
		case aF:
			return af == float64(bi)
		default:
			return float64(ai) == bf
		}
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case markup:
			return x == string(y)
		}
		return false
	case markup:
		return equal(string(x), b)
	case []any:
		y, ok := b.([]any)
		return ok && seqEqual(x, y)
	case tuple:
		y, ok := b.(tuple)
		return ok && seqEqual(x, y)
	case *Map:
		y, ok := b.(*Map)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			v2, ok := y.vals[k]
			if !ok || !equal(x.vals[k], v2) {
				return false
			}
		}
		return true
	case *undefined:
		_, ok := b.(*undefined)
		return ok
	}
	return a == b
}

func seqEqual(x, y []any) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !equal(x[i], y[i]) {
			return false
		}
	}
	return true
}

// compare is Python's ordering of a and b: -1, 0 or 1, or the TypeError
// Python raises for op between their types.
func compare(a, b any, op string) (int, error) {
	if u, ok := a.(*undefined); ok {
		return 0, u.fail()
	}
	if u, ok := b.(*undefined); ok {
		return 0, u.fail()
	}
	if ai, af, aF, ok := asNumber(a); ok {
		if bi, bf, bF, ok := asNumber(b); ok {
			if !aF && !bF {
				return cmp3(ai, bi), nil
			}
			if !aF {
				af = float64(ai)
			}
			if !bF {
				bf = float64(bi)
			}
			return cmpFloat(af, bf), nil
		}
	}
	switch x := a.(type) {
	case string, markup:
		xs := toStr(x)
		switch y := b.(type) {
		case string:
			return strings.Compare(xs, y), nil
		case markup:
			return strings.Compare(xs, string(y)), nil
		}
	case []any:
		if y, ok := b.([]any); ok {
			return compareSeq(x, y, op)
		}
	case tuple:
		if y, ok := b.(tuple); ok {
			return compareSeq(x, y, op)
		}
	}
	return 0, errf("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

func cmp3(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	return 2 // NaN: every ordering is false
}

func compareSeq(x, y []any, op string) (int, error) {
	for i := 0; i < len(x) && i < len(y); i++ {
		if !equal(x[i], y[i]) {
			return compare(x[i], y[i], op)
		}
	}
	return cmp3(int64(len(x)), int64(len(y))), nil
}

// iterate returns the items Python's iter(v) yields: a list's or tuple's
// items, a string's characters, a dict's keys, nothing for an Undefined.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case tuple:
		return x, nil
	case string:
		return chars(x), nil
	case markup:
		return chars(string(x)), nil
	case *Map:
		out := make([]any, len(x.keys))
		for i, k := range x.keys {
			out[i] = k
		}
		return out, nil
	case *undefined:
		return nil, nil
	case *loopInfo:
		return nil, errf("'LoopContext' object is not iterable")
	}
	return nil, errf("'%s' object is not iterable", typeName(v))
}

func chars(s string) []any {
	out := make([]any, 0, len(s))
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// length is Python's len(v).
func length(v any) (int, error) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), nil
	case markup:
		return utf8.RuneCountInString(string(x)), nil
	case []any:
		return len(x), nil
	case tuple:
		return len(x), nil
	case *Map:
		return x.Len(), nil
	case *undefined:
		return 0, nil
	case *namespace:
		return 0, errf("object of type 'Namespace' has no len()")
	}
	return 0, errf("object of type '%s' has no len()", typeName(v))
}

func isString(v any) bool {
	switch v.(type) {
	case string, markup:
		return true
	}
	return false
}
