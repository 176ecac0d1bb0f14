package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyFormat is str.format(*args, **kwargs): {} {0} {name} fields with
// .attr and [key] lookups, !s/!r conversions and the common format specs
// (fill, align, sign, width, grouping, precision; types s d b o x X c e f
// g %).
func pyFormat(s string, args []any, kw []kwarg) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return nil, errf("Single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		depth, j := 1, i+1
		for ; j < len(s) && depth > 0; j++ {
			switch s[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
		}
		if depth > 0 {
			return nil, errf("expected '}' before end of string")
		}
		field := s[i+1 : j-1]
		i = j - 1
		spec := ""
		conv := byte(0)
		if k := strings.IndexByte(field, ':'); k >= 0 {
			field, spec = field[:k], field[k+1:]
		}
		if k := strings.IndexByte(field, '!'); k >= 0 {
			if k+2 != len(field) {
				return nil, errf("expected ':' after conversion specifier")
			}
			conv = field[k+1]
			field = field[:k]
		}
		if strings.ContainsRune(spec, '{') {
			return nil, kindErr(KindUnsupported, "nested format fields are not supported")
		}
		// the first part names the argument, the rest are lookups
		end := strings.IndexAny(field, ".[")
		if end < 0 {
			end = len(field)
		}
		head := field[:end]
		var v any
		switch {
		case head == "":
			if auto < 0 {
				return nil, errf("cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				return nil, errf("Replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		case head[0] >= '0' && head[0] <= '9':
			n, err := strconv.Atoi(head)
			if err != nil {
				return nil, errf("bad field %q", head)
			}
			if auto > 0 {
				return nil, errf("cannot switch from automatic field numbering to manual field specification")
			}
			auto = -1
			if n >= len(args) {
				return nil, errf("Replacement index %d out of range for positional args tuple", n)
			}
			v = args[n]
		default:
			found := false
			for _, k := range kw {
				if k.name == head {
					v, found = k.val, true
				}
			}
			if !found {
				return nil, errf("KeyError: %s", pyReprString(head))
			}
		}
		rest := field[end:]
		for rest != "" {
			var err error
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				name := rest[1 : k+1]
				rest = rest[k+1:]
				if strings.HasPrefix(name, "_") {
					return nil, kindErr(KindSecurity, "access to attribute %s of %s object is unsafe.", pyReprString(name), pyReprString(typeName(v)))
				}
				v, err = getattr(v, name)
			} else {
				k := strings.IndexByte(rest, ']')
				if k < 0 {
					return nil, errf("Missing ']' in format string")
				}
				key := rest[1:k]
				rest = rest[k+1:]
				var kv any = key
				if n, err := strconv.Atoi(key); err == nil {
					kv = int64(n)
				}
				v, err = getitem(v, kv)
			}
			if err != nil {
				return nil, err
			}
			if u, ok := v.(*undefined); ok {
				return nil, u.fail()
			}
		}
		switch conv {
		case 0:
		case 's':
			v = toStr(v)
		case 'r', 'a':
			v = repr(v)
		default:
			return nil, errf("Unknown conversion specifier %c", conv)
		}
		out, err := formatSpec(v, spec)
		if err != nil {
			return nil, err
		}
		b.WriteString(out)
	}
	return b.String(), nil
}

type fspec struct {
	fill      rune
	align     byte
	sign      byte
	alt, zero bool
	width     int
	group     byte
	prec      int // -1: none
	typ       byte
}

func parseSpec(spec string) (fspec, error) {
	f := fspec{fill: ' ', prec: -1}
	s := spec
	if r, n := utf8.DecodeRuneInString(s); n > 0 && n < len(s) && strings.IndexByte("<>=^", s[n]) >= 0 {
		f.fill, f.align = r, s[n]
		s = s[n+1:]
	} else if s != "" && strings.IndexByte("<>=^", s[0]) >= 0 {
		f.align = s[0]
		s = s[1:]
	}
	if s != "" && strings.IndexByte("+- ", s[0]) >= 0 {
		f.sign = s[0]
		s = s[1:]
	}
	if s != "" && s[0] == '#' {
		f.alt = true
		s = s[1:]
	}
	if s != "" && s[0] == '0' {
		f.zero = true
		if f.align == 0 {
			f.fill, f.align = '0', '='
		}
		s = s[1:]
	}
	i := 0
	for i < len(s) && isDec(s[i]) {
		i++
	}
	if i > 0 {
		f.width, _ = strconv.Atoi(s[:i])
		s = s[i:]
	}
	if s != "" && (s[0] == ',' || s[0] == '_') {
		f.group = s[0]
		s = s[1:]
	}
	if s != "" && s[0] == '.' {
		i = 1
		for i < len(s) && isDec(s[i]) {
			i++
		}
		if i == 1 {
			return f, errf("Format specifier missing precision")
		}
		f.prec, _ = strconv.Atoi(s[1:i])
		s = s[i:]
	}
	if len(s) > 1 {
		return f, errf("Invalid format specifier '%s'", spec)
	}
	if s != "" {
		f.typ = s[0]
	}
	return f, nil
}

func pad(s string, f fspec, defAlign byte) string {
	n := utf8.RuneCountInString(s)
	if n >= f.width {
		return s
	}
	fill := strings.Repeat(string(f.fill), f.width-n)
	align := f.align
	if align == 0 {
		align = defAlign
	}
	switch align {
	case '<':
		return s + fill
	case '^':
		k := (f.width - n) / 2
		return strings.Repeat(string(f.fill), k) + s + strings.Repeat(string(f.fill), f.width-n-k)
	case '=':
		if s != "" && (s[0] == '-' || s[0] == '+' || s[0] == ' ') {
			return s[:1] + fill + s[1:]
		}
		return fill + s
	}
	return fill + s
}

func group(digits string, sep byte) string {
	if sep == 0 || len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

func signed(neg bool, body string, sign byte) string {
	switch {
	case neg:
		return "-" + body
	case sign == '+':
		return "+" + body
	case sign == ' ':
		return " " + body
	}
	return body
}

// formatSpec is format(v, spec).
func formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return toStr(v), nil
	}
	f, err := parseSpec(spec)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string, markup:
		s := toStr(x)
		if f.typ != 0 && f.typ != 's' {
			return "", errf("Unknown format code '%c' for object of type 'str'", f.typ)
		}
		if f.prec >= 0 && utf8.RuneCountInString(s) > f.prec {
			s = string([]rune(s)[:f.prec])
		}
		return pad(s, f, '<'), nil
	case bool, int64:
		i, _, _, _ := asNumber(x)
		switch f.typ {
		case 'e', 'E', 'f', 'F', 'g', 'G', '%':
			return formatFloat(float64(i), f)
		case 0:
			if b, ok := x.(bool); ok && f.prec < 0 && f.sign == 0 && f.group == 0 && !f.zero {
				s := "False"
				if b {
					s = "True"
				}
				return pad(s, f, '<'), nil
			}
		}
		return formatInt(i, f)
	case float64:
		return formatFloat(x, f)
	}
	return "", errf("unsupported format string passed to %s.__format__", typeName(v))
}

func formatInt(i int64, f fspec) (string, error) {
	if f.prec >= 0 {
		return "", errf("Precision not allowed in integer format specifier")
	}
	neg := i < 0
	u := uint64(i)
	if neg {
		u = uint64(-i)
	}
	var body, prefix string
	switch f.typ {
	case 0, 'd', 'n':
		body = group(strconv.FormatUint(u, 10), f.group)
	case 'b':
		body, prefix = strconv.FormatUint(u, 2), "0b"
	case 'o':
		body, prefix = strconv.FormatUint(u, 8), "0o"
	case 'x':
		body, prefix = strconv.FormatUint(u, 16), "0x"
	case 'X':
		body, prefix = strings.ToUpper(strconv.FormatUint(u, 16)), "0X"
	case 'c':
		return pad(string(rune(i)), f, '<'), nil
	default:
		return "", errf("Unknown format code '%c' for object of type 'int'", f.typ)
	}
	if f.alt {
		body = prefix + body
	}
	return pad(signed(neg, body, f.sign), f, '>'), nil
}

func formatFloat(x float64, f fspec) (string, error) {
	neg := math.Signbit(x) && !math.IsNaN(x)
	a := math.Abs(x)
	prec := f.prec
	var body string
	switch f.typ {
	case 'f', 'F':
		if prec < 0 {
			prec = 6
		}
		body = strconv.FormatFloat(a, 'f', prec, 64)
	case 'e', 'E':
		if prec < 0 {
			prec = 6
		}
		body = strconv.FormatFloat(a, 'e', prec, 64)
	case '%':
		if prec < 0 {
			prec = 6
		}
		body = strconv.FormatFloat(a*100, 'f', prec, 64) + "%"
	case 'g', 'G':
		if prec < 0 {
			prec = 6
		}
		body = pyG(a, prec, f.alt)
	case 0:
		if prec < 0 {
			body = pyFloat(a)
		} else {
			body = pyG(a, max(prec, 1), false)
			if !strings.ContainsAny(body, ".e") {
				body += ".0"
			}
		}
	default:
		return "", errf("Unknown format code '%c' for object of type 'float'", f.typ)
	}
	if math.IsInf(a, 0) {
		body = "inf"
	} else if math.IsNaN(a) {
		body = "nan"
	}
	if f.typ == 'E' || f.typ == 'G' || f.typ == 'F' {
		body = strings.ToUpper(body)
	}
	if f.group != 0 {
		intPart, frac := body, ""
		if k := strings.IndexAny(body, ".e%"); k >= 0 {
			intPart, frac = body[:k], body[k:]
		}
		body = group(intPart, f.group) + frac
	}
	return pad(signed(neg, body, f.sign), f, '>'), nil
}

// pyG is the 'g' presentation: precision significant digits, exponent
// notation outside [-4, precision), trailing zeros dropped (unless alt).
func pyG(a float64, prec int, alt bool) string {
	if prec == 0 {
		prec = 1
	}
	if a == 0 {
		if alt {
			return "0." + strings.Repeat("0", prec-1)
		}
		return "0"
	}
	e := strconv.FormatFloat(a, 'e', prec-1, 64)
	k := strings.LastIndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[k+1:])
	var s string
	if exp < -4 || exp >= prec {
		mant := e[:k]
		if !alt && strings.Contains(mant, ".") {
			mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
		}
		es := strconv.Itoa(abs(exp))
		if len(es) < 2 {
			es = "0" + es
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
		}
		return mant + "e" + sign + es
	}
	s = strconv.FormatFloat(a, 'f', max(prec-1-exp, 0), 64)
	if !alt && strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// percentFormat is Python's printf-style s % args: %s %r %d %i %u %f %F
// %e %E %g %G %x %X %o %c %% with flags, width, precision and %(name)s.
func percentFormat(s string, arg any) (any, error) {
	var args []any
	var m *Map
	switch x := arg.(type) {
	case tuple:
		args = x
	case *Map:
		m = x
		args = []any{x}
	default:
		args = []any{arg}
	}
	next := 0
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return nil, errf("incomplete format")
		}
		var v any
		named := false
		if s[i] == '(' {
			k := strings.IndexByte(s[i:], ')')
			if k < 0 || m == nil {
				return nil, errf("format requires a mapping")
			}
			key := s[i+1 : i+k]
			var ok bool
			if v, ok = m.Get(key); !ok {
				return nil, errf("KeyError: %s", pyReprString(key))
			}
			named = true
			i += k + 1
		}
		f := fspec{fill: ' ', prec: -1, align: '>'}
		for ; i < len(s) && strings.IndexByte("-+ #0", s[i]) >= 0; i++ {
			switch s[i] {
			case '-':
				f.align = '<'
			case '+', ' ':
				if f.sign != '+' {
					f.sign = s[i]
				}
			case '#':
				f.alt = true
			case '0':
				f.zero = true
			}
		}
		j := i
		for j < len(s) && isDec(s[j]) {
			j++
		}
		f.width, _ = strconv.Atoi(s[i:j])
		i = j
		if i < len(s) && s[i] == '.' {
			j = i + 1
			for j < len(s) && isDec(s[j]) {
				j++
			}
			f.prec, _ = strconv.Atoi(s[i+1 : j])
			i = j
		}
		if i >= len(s) {
			return nil, errf("incomplete format")
		}
		t := s[i]
		if t == '%' {
			b.WriteByte('%')
			continue
		}
		if !named {
			if next >= len(args) {
				return nil, errf("not enough arguments for format string")
			}
			v = args[next]
			next++
		}
		if f.zero && f.align == '>' && t != 's' && t != 'r' {
			f.fill, f.align = '0', '='
		}
		var out string
		var err error
		switch t {
		case 's':
			out = toStr(v)
			if f.prec >= 0 && utf8.RuneCountInString(out) > f.prec {
				out = string([]rune(out)[:f.prec])
			}
			out = pad(out, f, '>')
		case 'r', 'a':
			out = pad(repr(v), f, '>')
		case 'd', 'i', 'u':
			iv, fv, isF, ok := asNumber(v)
			if !ok {
				return nil, errf("%%%c format: a real number is required, not %s", t, typeName(v))
			}
			if isF {
				iv = int64(math.Trunc(fv))
			}
			f.typ = 'd'
			prec := f.prec
			f.prec = -1
			out, err = formatInt(iv, f)
			_ = prec
		case 'x', 'X', 'o':
			iv, _, isF, ok := asNumber(v)
			if !ok || isF {
				return nil, errf("%%%c format: an integer is required, not %s", t, typeName(v))
			}
			f.typ = t
			f.prec = -1
			out, err = formatInt(iv, f)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			iv, fv, isF, ok := asNumber(v)
			if !ok {
				return nil, errf("must be real number, not %s", typeName(v))
			}
			if !isF {
				fv = float64(iv)
			}
			f.typ = t
			out, err = formatFloat(fv, f)
		case 'c':
			out = pad(toStr(v), f, '>')
		default:
			return nil, errf("unsupported format character '%c' (0x%x)", t, t)
		}
		if err != nil {
			return nil, err
		}
		b.WriteString(out)
	}
	if m == nil && next < len(args) {
		return nil, errf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}
