package jinja

import (
	"math"
	"strings"
	"unicode/utf8"
)

// binop is Python's l op r for + - * / // % **.
func binop(op string, l, r any) (any, error) {
	if u, ok := l.(*undefined); ok {
		return nil, u.fail()
	}
	if u, ok := r.(*undefined); ok {
		return nil, u.fail()
	}
	li, lf, lF, lok := asNumber(l)
	ri, rf, rF, rok := asNumber(r)
	if lok && rok {
		if !lF && !rF {
			return intOp(op, li, ri)
		}
		if !lF {
			lf = float64(li)
		}
		if !rF {
			rf = float64(ri)
		}
		return floatOp(op, lf, rf)
	}
	switch op {
	case "+":
		switch x := l.(type) {
		case string:
			switch y := r.(type) {
			case string:
				if len(x)+len(y) > maxStringBytes {
					return nil, errTooLong
				}
				return x + y, nil
			case markup:
				return markup(escapeHTML(x)) + y, nil
			}
			return nil, errf("can only concatenate str (not \"%s\") to str", typeName(r))
		case markup:
			switch y := r.(type) {
			case string:
				return x + markup(escapeHTML(y)), nil
			case markup:
				return x + y, nil
			}
		case []any:
			if y, ok := r.([]any); ok {
				if len(x)+len(y) > maxListLen {
					return nil, errTooLong
				}
				out := make([]any, 0, len(x)+len(y))
				return append(append(out, x...), y...), nil
			}
			return nil, errf("can only concatenate list (not \"%s\") to list", typeName(r))
		case tuple:
			if y, ok := r.(tuple); ok {
				if len(x)+len(y) > maxListLen {
					return nil, errTooLong
				}
				out := make(tuple, 0, len(x)+len(y))
				return append(append(out, x...), y...), nil
			}
			return nil, errf("can only concatenate tuple (not \"%s\") to tuple", typeName(r))
		}
	case "*":
		if rok && !rF {
			if v, err := repeat(l, ri); v != nil || err != nil {
				return v, err
			}
		}
		if lok && !lF {
			if v, err := repeat(r, li); v != nil || err != nil {
				return v, err
			}
		}
		if isString(l) || isString(r) {
			return nil, errf("can't multiply sequence by non-int of type '%s'", typeName(r))
		}
	case "%":
		if s, ok := l.(string); ok {
			return percentFormat(s, r)
		}
	}
	return nil, errf("unsupported operand type(s) for %s: '%s' and '%s'", opName(op), typeName(l), typeName(r))
}

func opName(op string) string {
	if op == "**" {
		return "** or pow()"
	}
	return op
}

// repeat is seq * n; nil, nil when v is not a sequence.
func repeat(v any, n int64) (any, error) {
	if n < 0 {
		n = 0
	}
	switch x := v.(type) {
	case string:
		if len(x) > 0 && (n > maxStringBytes || int64(len(x))*n > maxStringBytes) {
			return nil, errTooLong
		}
		return strings.Repeat(x, int(n)), nil
	case []any:
		if len(x) > 0 && (n > maxListLen || int64(len(x))*n > maxListLen) {
			return nil, errTooLong
		}
		out := make([]any, 0, len(x)*int(n))
		for range n {
			out = append(out, x...)
		}
		return out, nil
	case tuple:
		l, err := repeat([]any(x), n)
		if err != nil {
			return nil, err
		}
		return tuple(l.([]any)), nil
	}
	return nil, nil
}

func intOp(op string, a, b int64) (any, error) {
	switch op {
	case "+":
		s := a + b
		if (s > a) != (b > 0) {
			return nil, errf("integer overflow")
		}
		return s, nil
	case "-":
		s := a - b
		if (s < a) != (b > 0) {
			return nil, errf("integer overflow")
		}
		return s, nil
	case "*":
		if a == 0 || b == 0 {
			return int64(0), nil
		}
		s := a * b
		if s/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return nil, errf("integer overflow")
		}
		return s, nil
	case "/":
		if b == 0 {
			return nil, errf("division by zero")
		}
		return float64(a) / float64(b), nil
	case "//":
		if b == 0 {
			return nil, errf("integer division or modulo by zero")
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return q, nil
	case "%":
		if b == 0 {
			return nil, errf("integer division or modulo by zero")
		}
		m := a % b
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if b < 0 {
			return math.Pow(float64(a), float64(b)), nil
		}
		r := int64(1)
		for range b {
			n := r * a
			if a != 0 && n/a != r {
				return nil, errf("integer overflow")
			}
			r = n
			if r == 0 || r == 1 && a == 1 {
				break
			}
		}
		return r, nil
	}
	return nil, errf("unsupported operator %s", op)
}

func floatOp(op string, a, b float64) (any, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, errf("float division by zero")
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, errf("float floor division by zero")
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, errf("float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && ((m < 0) != (b < 0)) {
			m += b
		}
		return m, nil
	case "**":
		if a == 0 && b < 0 {
			return nil, errf("0.0 cannot be raised to a negative power")
		}
		return math.Pow(a, b), nil
	}
	return nil, errf("unsupported operator %s", op)
}

// isUnsafeAttr is the sandbox's rule for Python's special attributes.
func isUnsafeAttr(name string) bool {
	return strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
}

func unsafeUndefined(obj any, name string) *undefined {
	return &undefined{name: name, obj: obj, hasObj: true, kind: KindSecurity,
		hint: "access to attribute " + pyReprString(name) + " of " + pyReprString(typeName(obj)) + " object is unsafe."}
}

// getattr is the sandbox's obj.name: a Python attribute (a method) first,
// then obj[name]; an Undefined when neither exists.
func getattr(obj any, name string) (any, error) {
	if u, ok := obj.(*undefined); ok {
		return nil, u.fail()
	}
	if isUnsafeAttr(name) {
		return unsafeUndefined(obj, name), nil
	}
	switch x := obj.(type) {
	case *Map:
		if m, ok, unsafe := dictMethod(x, name); ok {
			if unsafe {
				return unsafeUndefined(obj, name), nil
			}
			return m, nil
		}
		if v, ok := x.vals[name]; ok {
			return v, nil
		}
	case string:
		if m, ok := strMethod(x, name); ok {
			return m, nil
		}
		if pyStrMethods[name] {
			return nil, kindErr(KindUnsupported, "str.%s is not supported", name)
		}
	case markup:
		if m, ok := strMethod(string(x), name); ok {
			return m, nil
		}
	case []any:
		if m, ok, unsafe := listMethod(x, name); ok {
			if unsafe {
				return unsafeUndefined(obj, name), nil
			}
			return m, nil
		}
	case tuple:
		if m, ok, _ := listMethod([]any(x), name); ok && (name == "index" || name == "count") {
			return m, nil
		}
	case *namespace:
		if v, ok := x.attrs.vals[name]; ok {
			return v, nil
		}
	case *loopInfo:
		return x.attr(name), nil
	case int64, bool:
		i, _, _, _ := asNumber(x)
		switch name {
		case "real", "numerator":
			return i, nil
		case "imag":
			return int64(0), nil
		case "denominator":
			return int64(1), nil
		}
	case float64:
		switch name {
		case "real":
			return x, nil
		case "imag":
			return 0.0, nil
		}
	}
	return undefinedAttr(obj, name), nil
}

// getitem is the sandbox's obj[key]: the item first, then (for a string
// key) the attribute; an Undefined when neither exists, as a missing key
// and an index out of range are in jinja2.
func getitem(obj, key any) (any, error) {
	if u, ok := obj.(*undefined); ok {
		return nil, u.fail()
	}
	switch x := obj.(type) {
	case *Map:
		if k, ok := key.(string); ok {
			if v, ok := x.vals[k]; ok {
				return v, nil
			}
		}
	case []any:
		if v, ok := index(x, key); ok {
			return v, nil
		}
	case tuple:
		if v, ok := index(x, key); ok {
			return v, nil
		}
	case string:
		if i, _, isF, ok := asNumber(key); ok && !isF {
			if r, ok := runeAt(x, i); ok {
				return r, nil
			}
		}
	case markup:
		if i, _, isF, ok := asNumber(key); ok && !isF {
			if r, ok := runeAt(string(x), i); ok {
				return markup(r), nil
			}
		}
	}
	if k, ok := key.(string); ok {
		v, err := getattr(obj, k)
		if err != nil {
			return nil, err
		}
		if u, ok := v.(*undefined); ok && u.hint == "" {
			return undefinedAttr(obj, k), nil
		}
		return v, nil
	}
	return &undefined{name: repr(key), obj: obj, hasObj: true, index: true}, nil
}

func index(seq []any, key any) (any, bool) {
	i, _, isF, ok := asNumber(key)
	if !ok || isF {
		return nil, false
	}
	if i < 0 {
		i += int64(len(seq))
	}
	if i < 0 || i >= int64(len(seq)) {
		return nil, false
	}
	return seq[i], true
}

func runeAt(s string, i int64) (string, bool) {
	n := int64(utf8.RuneCountInString(s))
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return "", false
	}
	if n == int64(len(s)) {
		return s[i : i+1], true
	}
	for _, r := range s {
		if i == 0 {
			return string(r), true
		}
		i--
	}
	return "", false
}

// sliceIndices is Python's slice.indices(n) for start, stop, step given as
// values (nil: absent).
func sliceIndices(lo, hi, st any, n int) (start, stop, step int, err error) {
	get := func(v any) (int64, bool, error) {
		if v == nil {
			return 0, false, nil
		}
		i, _, isF, ok := asNumber(v)
		if !ok || isF {
			return 0, false, errf("slice indices must be integers or None or have an __index__ method")
		}
		return i, true, nil
	}
	s, hasS, err := get(st)
	if err != nil {
		return 0, 0, 0, err
	}
	if !hasS {
		s = 1
	}
	if s == 0 {
		return 0, 0, 0, errf("slice step cannot be zero")
	}
	clamp := func(v int64, has bool, def int64) int64 {
		if !has {
			return def
		}
		if v < 0 {
			v += int64(n)
			if v < 0 {
				if s < 0 {
					return -1
				}
				return 0
			}
		} else if v >= int64(n) {
			if s < 0 {
				return int64(n) - 1
			}
			return int64(n)
		}
		return v
	}
	a, hasA, err := get(lo)
	if err != nil {
		return 0, 0, 0, err
	}
	b, hasB, err := get(hi)
	if err != nil {
		return 0, 0, 0, err
	}
	if s > 0 {
		return int(clamp(a, hasA, 0)), int(clamp(b, hasB, int64(n))), int(s), nil
	}
	return int(clamp(a, hasA, int64(n)-1)), int(clamp(b, hasB, -1)), int(s), nil
}

func sliceSeq(seq []any, start, stop, step int) []any {
	var out []any
	if step > 0 {
		for i := start; i < stop; i += step {
			out = append(out, seq[i])
		}
	} else {
		for i := start; i > stop; i += step {
			out = append(out, seq[i])
		}
	}
	if out == nil {
		out = []any{}
	}
	return out
}

// slice is obj[lo:hi:step]; what Python refuses is an Undefined, as
// jinja2's getitem turns the TypeError into one.
func slice(obj, lo, hi, st any) (any, error) {
	if u, ok := obj.(*undefined); ok {
		return nil, u.fail()
	}
	switch x := obj.(type) {
	case []any:
		a, b, s, err := sliceIndices(lo, hi, st, len(x))
		if err != nil {
			return &undefined{hint: err.Error()}, nil
		}
		return sliceSeq(x, a, b, s), nil
	case tuple:
		a, b, s, err := sliceIndices(lo, hi, st, len(x))
		if err != nil {
			return &undefined{hint: err.Error()}, nil
		}
		return tuple(sliceSeq(x, a, b, s)), nil
	case string, markup:
		str := toStr(x)
		var out string
		if utf8.RuneCountInString(str) == len(str) {
			a, b, s, err := sliceIndices(lo, hi, st, len(str))
			if err != nil {
				return &undefined{hint: err.Error()}, nil
			}
			if s == 1 {
				if b < a {
					b = a
				}
				out = str[a:b]
			} else {
				var sb strings.Builder
				for _, c := range sliceSeq(chars(str), a, b, s) {
					sb.WriteString(c.(string))
				}
				out = sb.String()
			}
		} else {
			cs := chars(str)
			a, b, s, err := sliceIndices(lo, hi, st, len(cs))
			if err != nil {
				return &undefined{hint: err.Error()}, nil
			}
			var sb strings.Builder
			for _, c := range sliceSeq(cs, a, b, s) {
				sb.WriteString(c.(string))
			}
			out = sb.String()
		}
		if _, ok := x.(markup); ok {
			return markup(out), nil
		}
		return out, nil
	}
	return &undefined{hint: typeName(obj) + " object is not subscriptable", name: "slice", obj: obj, hasObj: true}, nil
}

func escapeHTML(s string) string {
	if !strings.ContainsAny(s, "&<>'\"") {
		return s
	}
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", "\"", "&#34;")
	return r.Replace(s)
}
