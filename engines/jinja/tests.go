package jinja

import (
	"fmt"
	"math"
	"strings"
	"time"
)

type testFunc func(ev *evaluator, v any, args []any, kw []kwarg) (bool, error)

var tests map[string]testFunc

func init() {
	cmp := func(op string) testFunc {
		return func(_ *evaluator, v any, args []any, kw []kwarg) (bool, error) {
			a, err := bindArgs(op, []string{"other"}, []any{required}, args, kw)
			if err != nil {
				return false, err
			}
			return compareOp(op, v, a[0])
		}
	}
	simple := func(f func(v any) bool) testFunc {
		return func(_ *evaluator, v any, args []any, kw []kwarg) (bool, error) { return f(v), nil }
	}
	tests = map[string]testFunc{
		"defined":   simple(func(v any) bool { _, u := v.(*undefined); return !u }),
		"undefined": simple(func(v any) bool { _, u := v.(*undefined); return u }),
		"none":      simple(func(v any) bool { return v == nil }),
		"boolean":   simple(func(v any) bool { _, ok := v.(bool); return ok }),
		"true":      simple(func(v any) bool { b, ok := v.(bool); return ok && b }),
		"false":     simple(func(v any) bool { b, ok := v.(bool); return ok && !b }),
		"integer": simple(func(v any) bool {
			_, ok := v.(int64)
			return ok
		}),
		"float": simple(func(v any) bool {
			_, ok := v.(float64)
			return ok
		}),
		"number": simple(func(v any) bool { _, _, _, ok := asNumber(v); return ok }),
		"string": simple(isString),
		"mapping": simple(func(v any) bool {
			_, ok := v.(*Map)
			return ok
		}),
		"sequence": simple(func(v any) bool {
			switch v.(type) {
			case string, markup, []any, tuple, *Map, *undefined:
				return true
			}
			return false
		}),
		"iterable": simple(func(v any) bool {
			switch v.(type) {
			case string, markup, []any, tuple, *Map, *undefined:
				return true
			}
			return false
		}),
		"callable": simple(func(v any) bool {
			switch v.(type) {
			case *callable:
				return true
			}
			return false
		}),
		"escaped": simple(func(v any) bool { _, ok := v.(markup); return ok }),
		"lower": simple(func(v any) bool {
			s := toStr(v)
			m, _ := strMethod(s, "islower")
			r, _ := m.fn(nil, nil, nil)
			return r.(bool)
		}),
		"upper": simple(func(v any) bool {
			s := toStr(v)
			m, _ := strMethod(s, "isupper")
			r, _ := m.fn(nil, nil, nil)
			return r.(bool)
		}),
		"odd":         intTest(func(i int64) bool { return i%2 != 0 }),
		"even":        intTest(func(i int64) bool { return i%2 == 0 }),
		"divisibleby": divisibleBy,
		"sameas": func(_ *evaluator, v any, args []any, kw []kwarg) (bool, error) {
			a, err := bindArgs("sameas", []string{"other"}, []any{required}, args, kw)
			if err != nil {
				return false, err
			}
			return sameAs(v, a[0]), nil
		},
		"in": func(_ *evaluator, v any, args []any, kw []kwarg) (bool, error) {
			a, err := bindArgs("in", []string{"seq"}, []any{required}, args, kw)
			if err != nil {
				return false, err
			}
			return contains(a[0], v)
		},
		"filter": simple(func(v any) bool { s, ok := v.(string); return ok && filters[s] != nil }),
		"test": simple(func(v any) bool {
			s, ok := v.(string)
			_, has := tests[s]
			return ok && has
		}),
	}
	for _, n := range []string{"==", "eq", "equalto"} {
		tests[n] = cmp("==")
	}
	for _, n := range []string{"!=", "ne"} {
		tests[n] = cmp("!=")
	}
	for _, n := range []string{">", "gt", "greaterthan"} {
		tests[n] = cmp(">")
	}
	for _, n := range []string{">=", "ge"} {
		tests[n] = cmp(">=")
	}
	for _, n := range []string{"<", "lt", "lessthan"} {
		tests[n] = cmp("<")
	}
	for _, n := range []string{"<=", "le"} {
		tests[n] = cmp("<=")
	}
}

func intTest(f func(int64) bool) testFunc {
	return func(_ *evaluator, v any, args []any, kw []kwarg) (bool, error) {
		if u, ok := v.(*undefined); ok {
			return false, u.fail()
		}
		i, fl, isF, ok := asNumber(v)
		if !ok {
			return false, errf("unsupported operand type(s) for %%: '%s' and 'int'", typeName(v))
		}
		if isF {
			m, _ := floatOp("%", fl, 2)
			return f(int64(m.(float64))), nil
		}
		return f(i), nil
	}
}

func divisibleBy(_ *evaluator, v any, args []any, kw []kwarg) (bool, error) {
	a, err := bindArgs("divisibleby", []string{"num"}, []any{required}, args, kw)
	if err != nil {
		return false, err
	}
	m, err := binop("%", v, a[0])
	if err != nil {
		return false, err
	}
	return equal(m, int64(0)), nil
}

// sameAs is Python's "is" for the values a template can hold: None, True
// and False are singletons, containers are the same object, small ints
// and equal strings may or may not be (they are here).
func sameAs(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case *Map, *namespace, *callable, *loopInfo, *undefined:
		return a == b
	case int64, float64, string:
		if _, ok := b.(bool); ok {
			return false
		}
		return equal(a, b)
	}
	return false
}

var globals map[string]any

func init() {
	globals = map[string]any{
		"range": &callable{name: "range", fn: func(_ *evaluator, args []any, kw []kwarg) (any, error) {
			if len(kw) > 0 {
				return nil, errf("range() takes no keyword arguments")
			}
			if len(args) == 0 || len(args) > 3 {
				return nil, errf("range expected 1 to 3 arguments, got %d", len(args))
			}
			var ab [3]int64
			ab[2] = 1
			for i, a := range args {
				n, _, isF, ok := asNumber(a)
				if !ok || isF {
					return nil, errf("'%s' object cannot be interpreted as an integer", typeName(a))
				}
				ab[i] = n
			}
			if len(args) == 1 {
				ab[0], ab[1] = 0, ab[0]
			}
			start, stop, step := ab[0], ab[1], ab[2]
			if step == 0 {
				return nil, errf("range() arg 3 must not be zero")
			}
			if (float64(stop)-float64(start))/float64(step) > 100001 {
				return nil, kindErr(KindSecurity, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).")
			}
			out := []any{}
			for v := start; (step > 0 && v < stop) || (step < 0 && v > stop); v += step {
				out = append(out, v)
				if len(out) > 100000 {
					return nil, kindErr(KindSecurity, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).")
				}
				if (step > 0 && v > math.MaxInt64-step) || (step < 0 && v < math.MinInt64-step) {
					break
				}
			}
			return out, nil
		}},
		"dict": &callable{name: "dict", fn: func(_ *evaluator, args []any, kw []kwarg) (any, error) {
			m := &Map{}
			if len(args) > 1 {
				return nil, errf("dict expected at most 1 argument, got %d", len(args))
			}
			if len(args) == 1 {
				if err := updateMap(m, args[0]); err != nil {
					return nil, err
				}
			}
			for _, k := range kw {
				m.Set(k.name, k.val)
			}
			return m, nil
		}},
		"namespace": &callable{name: "namespace", fn: func(_ *evaluator, args []any, kw []kwarg) (any, error) {
			m := &Map{}
			for _, a := range args {
				if err := updateMap(m, a); err != nil {
					return nil, err
				}
			}
			for _, k := range kw {
				m.Set(k.name, k.val)
			}
			return &namespace{attrs: m}, nil
		}},
		"raise_exception": &callable{name: "raise_exception", fn: func(_ *evaluator, args []any, kw []kwarg) (any, error) {
			a, err := bindArgs("raise_exception", []string{"message"}, []any{required}, args, kw)
			if err != nil {
				return nil, err
			}
			return nil, &Error{Kind: KindRaised, Msg: toStr(a[0])}
		}},
		"strftime_now": &callable{name: "strftime_now", fn: func(ev *evaluator, args []any, kw []kwarg) (any, error) {
			a, err := bindArgs("strftime_now", []string{"format"}, []any{required}, args, kw)
			if err != nil {
				return nil, err
			}
			f, ok := a[0].(string)
			if !ok {
				return nil, errf("strftime() argument 1 must be str, not %s", typeName(a[0]))
			}
			return strftime(ev.now(), f), nil
		}},
	}
}

func init() {
	// jinja2's other default globals: present, so a template that calls
	// one is told it is unsupported rather than that it is undefined.
	for _, name := range []string{"cycler", "joiner", "lipsum"} {
		globals[name] = &callable{name: name, fn: func(*evaluator, []any, []kwarg) (any, error) {
			return nil, kindErr(KindUnsupported, "the global %s() is not supported", name)
		}}
	}
}

func updateMap(m *Map, v any) error {
	switch x := v.(type) {
	case *Map:
		for _, k := range x.keys {
			m.Set(k, x.vals[k])
		}
		return nil
	case []any, tuple:
		items, _ := iterate(x)
		for _, it := range items {
			pair, err := iterate(it)
			if err != nil || len(pair) != 2 {
				return errf("dictionary update sequence element has length %d; 2 is required", len(pair))
			}
			k, ok := pair[0].(string)
			if !ok {
				return kindErr(KindUnsupported, "dict keys other than strings are not supported (got %s)", typeName(pair[0]))
			}
			m.Set(k, pair[1])
		}
		return nil
	}
	return errf("'%s' object is not iterable", typeName(v))
}

var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// strftime is Python's datetime.strftime under the C locale with glibc's
// directives (including the "-" flag that drops padding, as in %-d).
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 >= len(f) {
			b.WriteByte(c)
			continue
		}
		i++
		nopad := false
		if f[i] == '-' && i+1 < len(f) {
			nopad = true
			i++
		}
		num := func(v, width int) {
			if nopad {
				fmt.Fprintf(&b, "%d", v)
			} else {
				fmt.Fprintf(&b, "%0*d", width, v)
			}
		}
		h12 := t.Hour() % 12
		if h12 == 0 {
			h12 = 12
		}
		switch f[i] {
		case 'a':
			b.WriteString(weekdays[t.Weekday()][:3])
		case 'A':
			b.WriteString(weekdays[t.Weekday()])
		case 'b', 'h':
			b.WriteString(months[t.Month()-1][:3])
		case 'B':
			b.WriteString(months[t.Month()-1])
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if nopad {
				num(t.Day(), 1)
			} else {
				fmt.Fprintf(&b, "%2d", t.Day())
			}
		case 'm':
			num(int(t.Month()), 2)
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 1)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num(h12, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'j':
			num(t.YearDay(), 3)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1)
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2)
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			fmt.Fprintf(&b, "%c%02d%02d", sign, off/3600, off%3600/60)
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'c':
			fmt.Fprintf(&b, "%s %s %2d %02d:%02d:%02d %d", weekdays[t.Weekday()][:3], months[t.Month()-1][:3], t.Day(), t.Hour(), t.Minute(), t.Second(), t.Year())
		case 'x':
			fmt.Fprintf(&b, "%02d/%02d/%02d", int(t.Month()), t.Day(), t.Year()%100)
		case 'X':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'D':
			fmt.Fprintf(&b, "%02d/%02d/%02d", int(t.Month()), t.Day(), t.Year()%100)
		case 'F':
			fmt.Fprintf(&b, "%d-%02d-%02d", t.Year(), int(t.Month()), t.Day())
		case 'T':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'R':
			fmt.Fprintf(&b, "%02d:%02d", t.Hour(), t.Minute())
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if nopad {
				b.WriteByte('-')
			}
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
