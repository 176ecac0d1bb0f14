package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// required marks a parameter without a default in bindArgs.
type requiredT struct{}

var required = requiredT{}

// bindArgs binds positional and keyword arguments to params the way a
// Python signature does; defaults has one entry per param (required for
// none).
func bindArgs(fname string, params []string, defaults []any, args []any, kw []kwarg) ([]any, error) {
	if len(args) > len(params) {
		return nil, errf("%s() takes at most %d argument(s) (%d given)", fname, len(params), len(args))
	}
	out := make([]any, len(params))
	set := make([]bool, len(params))
	for i, a := range args {
		out[i] = a
		set[i] = true
	}
	for _, k := range kw {
		found := false
		for i, p := range params {
			if p == k.name {
				if set[i] {
					return nil, errf("%s() got multiple values for argument '%s'", fname, k.name)
				}
				out[i] = k.val
				set[i] = true
				found = true
				break
			}
		}
		if !found {
			return nil, errf("%s() got an unexpected keyword argument '%s'", fname, k.name)
		}
	}
	for i := range params {
		if !set[i] {
			if defaults[i] == required {
				return nil, errf("%s() missing required argument '%s'", fname, params[i])
			}
			out[i] = defaults[i]
		}
	}
	return out, nil
}

func method(name string, fn func(args []any, kw []kwarg) (any, error)) *callable {
	return &callable{name: name, fn: func(_ *evaluator, args []any, kw []kwarg) (any, error) { return fn(args, kw) }}
}

// pyStrMethods are the str methods Python has, so that one this package
// lacks is reported as unsupported rather than as an undefined attribute.
var pyStrMethods = map[string]bool{}

func init() {
	for _, m := range strings.Fields(`capitalize casefold center count encode endswith expandtabs find format
		format_map index isalnum isalpha isascii isdecimal isdigit isidentifier islower isnumeric isprintable
		isspace istitle isupper join ljust lower lstrip maketrans partition removeprefix removesuffix replace
		rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip swapcase title translate
		upper zfill`) {
		pyStrMethods[m] = true
	}
}

func argStr(fname string, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case markup:
		return string(x), nil
	}
	return "", errf("%s arg must be None or str", fname)
}

func argInt(fname string, v any) (int, error) {
	i, _, isF, ok := asNumber(v)
	if !ok || isF {
		return 0, errf("%s(): '%s' object cannot be interpreted as an integer", fname, typeName(v))
	}
	return int(i), nil
}

// optChars returns the chars argument of strip and friends: "" and false
// for None (whitespace).
func optChars(fname string, args []any, kw []kwarg) (string, bool, error) {
	a, err := bindArgs(fname, []string{"chars"}, []any{nil}, args, kw)
	if err != nil {
		return "", false, err
	}
	if a[0] == nil {
		return "", false, nil
	}
	s, err := argStr(fname, a[0])
	return s, true, err
}

func pyStrip(s string, chars string, has bool, left, right bool) string {
	in := isPySpace
	if has {
		in = func(r rune) bool { return strings.ContainsRune(chars, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, in)
	}
	if right {
		s = strings.TrimRightFunc(s, in)
	}
	return s
}

// strMethod returns the bound str method name of s.
func strMethod(s string, name string) (*callable, bool) {
	var fn func(args []any, kw []kwarg) (any, error)
	switch name {
	case "strip", "lstrip", "rstrip":
		fn = func(args []any, kw []kwarg) (any, error) {
			chars, has, err := optChars(name, args, kw)
			if err != nil {
				return nil, err
			}
			return pyStrip(s, chars, has, name != "rstrip", name != "lstrip"), nil
		}
	case "split", "rsplit":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"sep", "maxsplit"}, []any{nil, int64(-1)}, args, kw)
			if err != nil {
				return nil, err
			}
			n, err := argInt(name, a[1])
			if err != nil {
				return nil, err
			}
			if a[0] == nil {
				return strsToList(splitWhitespace(s, n, name == "rsplit")), nil
			}
			sep, err := argStr(name, a[0])
			if err != nil {
				return nil, err
			}
			if sep == "" {
				return nil, errf("empty separator")
			}
			if name == "split" {
				return strsToList(strings.SplitN(s, sep, splitN(n))), nil
			}
			return strsToList(rsplitSep(s, sep, n)), nil
		}
	case "splitlines":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"keepends"}, []any{false}, args, kw)
			if err != nil {
				return nil, err
			}
			return strsToList(splitLines(s, truthy(a[0]))), nil
		}
	case "startswith", "endswith":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"prefix", "start", "end"}, []any{required, nil, nil}, args, kw)
			if err != nil {
				return nil, err
			}
			sub, err := runeSlice(s, a[1], a[2])
			if err != nil {
				return nil, err
			}
			var cands []any
			switch p := a[0].(type) {
			case string, markup:
				cands = []any{p}
			case tuple:
				cands = p
			default:
				return nil, errf("%s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
			}
			for _, c := range cands {
				cs, err := argStr(name, c)
				if err != nil {
					return nil, errf("tuple for %s must only contain str, not %s", name, typeName(c))
				}
				if name == "startswith" && strings.HasPrefix(sub, cs) || name == "endswith" && strings.HasSuffix(sub, cs) {
					return true, nil
				}
			}
			return false, nil
		}
	case "replace":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"old", "new", "count"}, []any{required, required, int64(-1)}, args, kw)
			if err != nil {
				return nil, err
			}
			old, err := argStr(name, a[0])
			if err != nil {
				return nil, errf("replace() argument 1 must be str, not %s", typeName(a[0]))
			}
			nw, err := argStr(name, a[1])
			if err != nil {
				return nil, errf("replace() argument 2 must be str, not %s", typeName(a[1]))
			}
			n, err := argInt(name, a[2])
			if err != nil {
				return nil, err
			}
			return strings.Replace(s, old, nw, n), nil
		}
	case "upper":
		fn = noArgs(name, func() any { return pyUpper(s) })
	case "lower":
		fn = noArgs(name, func() any { return pyLower(s) })
	case "casefold":
		fn = noArgs(name, func() any { return pyLower(s) })
	case "title":
		fn = noArgs(name, func() any { return pyTitle(s) })
	case "capitalize":
		fn = noArgs(name, func() any { return pyCapitalize(s) })
	case "swapcase":
		fn = noArgs(name, func() any {
			return strings.Map(func(r rune) rune {
				if unicode.IsUpper(r) {
					return unicode.ToLower(r)
				}
				return unicode.ToUpper(r)
			}, s)
		})
	case "find", "rfind", "index", "rindex", "count":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"sub", "start", "end"}, []any{required, nil, nil}, args, kw)
			if err != nil {
				return nil, err
			}
			sub, err := argStr(name, a[0])
			if err != nil {
				return nil, errf("must be str, not %s", typeName(a[0]))
			}
			start := 0
			if a[1] != nil {
				st, err := argInt(name, a[1])
				if err != nil {
					return nil, err
				}
				n := utf8.RuneCountInString(s)
				if st < 0 {
					st = max(st+n, 0)
				}
				start = min(st, n)
			}
			hay, err := runeSlice(s, a[1], a[2])
			if err != nil {
				return nil, err
			}
			if name == "count" {
				return int64(strings.Count(hay, sub)), nil
			}
			var i int
			if name == "find" || name == "index" {
				i = strings.Index(hay, sub)
			} else {
				i = strings.LastIndex(hay, sub)
			}
			if i < 0 {
				if name == "index" || name == "rindex" {
					return nil, errf("substring not found")
				}
				return int64(-1), nil
			}
			return int64(start + utf8.RuneCountInString(hay[:i])), nil
		}
	case "join":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"iterable"}, []any{required}, args, kw)
			if err != nil {
				return nil, err
			}
			items, err := iterate(a[0])
			if err != nil {
				return nil, errf("can only join an iterable")
			}
			var b strings.Builder
			for i, it := range items {
				is, err := argStr(name, it)
				if err != nil {
					return nil, errf("sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				if i > 0 {
					b.WriteString(s)
				}
				b.WriteString(is)
			}
			return b.String(), nil
		}
	case "format":
		return &callable{name: name, fn: func(ev *evaluator, args []any, kw []kwarg) (any, error) {
			return pyFormat(s, args, kw)
		}}, true
	case "isdigit", "isdecimal", "isnumeric":
		fn = noArgs(name, func() any { return s != "" && all(s, unicode.IsDigit) })
	case "isalpha":
		fn = noArgs(name, func() any { return s != "" && all(s, unicode.IsLetter) })
	case "isalnum":
		fn = noArgs(name, func() any {
			return s != "" && all(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
		})
	case "isspace":
		fn = noArgs(name, func() any { return s != "" && all(s, isPySpace) })
	case "isupper", "islower":
		fn = noArgs(name, func() any {
			cased := false
			for _, r := range s {
				if unicode.IsUpper(r) || unicode.IsTitle(r) {
					if name == "islower" || unicode.IsTitle(r) {
						return false
					}
					cased = true
				} else if unicode.IsLower(r) {
					if name == "isupper" {
						return false
					}
					cased = true
				}
			}
			return cased
		})
	case "removeprefix", "removesuffix":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"prefix"}, []any{required}, args, kw)
			if err != nil {
				return nil, err
			}
			p, err := argStr(name, a[0])
			if err != nil {
				return nil, err
			}
			if name == "removeprefix" {
				return strings.TrimPrefix(s, p), nil
			}
			return strings.TrimSuffix(s, p), nil
		}
	case "partition", "rpartition":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"sep"}, []any{required}, args, kw)
			if err != nil {
				return nil, err
			}
			sep, err := argStr(name, a[0])
			if err != nil {
				return nil, err
			}
			if sep == "" {
				return nil, errf("empty separator")
			}
			var i int
			if name == "partition" {
				i = strings.Index(s, sep)
				if i < 0 {
					return tuple{s, "", ""}, nil
				}
			} else {
				i = strings.LastIndex(s, sep)
				if i < 0 {
					return tuple{"", "", s}, nil
				}
			}
			return tuple{s[:i], sep, s[i+len(sep):]}, nil
		}
	case "zfill", "center", "ljust", "rjust":
		fn = func(args []any, kw []kwarg) (any, error) {
			a, err := bindArgs(name, []string{"width", "fillchar"}, []any{required, " "}, args, kw)
			if err != nil {
				return nil, err
			}
			w, err := argInt(name, a[0])
			if err != nil {
				return nil, err
			}
			fill, err := argStr(name, a[1])
			if err != nil || utf8.RuneCountInString(fill) != 1 {
				return nil, errf("The fill character must be exactly one character long")
			}
			n := utf8.RuneCountInString(s)
			if w <= n {
				return s, nil
			}
			pad := w - n
			switch name {
			case "zfill":
				sign := ""
				body := s
				if s != "" && (s[0] == '+' || s[0] == '-') {
					sign, body = s[:1], s[1:]
				}
				return sign + strings.Repeat("0", pad) + body, nil
			case "ljust":
				return s + strings.Repeat(fill, pad), nil
			case "rjust":
				return strings.Repeat(fill, pad) + s, nil
			}
			left := pad / 2
			if pad%2 == 1 && w%2 == 1 {
				left++
			}
			return strings.Repeat(fill, left) + s + strings.Repeat(fill, pad-left), nil
		}
	default:
		return nil, false
	}
	return method(name, fn), true
}

func noArgs(name string, f func() any) func(args []any, kw []kwarg) (any, error) {
	return func(args []any, kw []kwarg) (any, error) {
		if len(args) > 0 || len(kw) > 0 {
			return nil, errf("str.%s() takes no arguments", name)
		}
		return f(), nil
	}
}

func all(s string, f func(rune) bool) bool {
	for _, r := range s {
		if !f(r) {
			return false
		}
	}
	return true
}

// runeSlice is s[start:end] in code points, for the optional start and
// end arguments of str methods.
func runeSlice(s string, start, end any) (string, error) {
	if start == nil && end == nil {
		return s, nil
	}
	v, err := slice(s, start, end, nil)
	if err != nil {
		return "", err
	}
	if u, ok := v.(*undefined); ok {
		return "", errf("%s", u.message())
	}
	return toStr(v), nil
}

func splitN(maxsplit int) int {
	if maxsplit < 0 {
		return -1
	}
	return maxsplit + 1
}

func strsToList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// splitWhitespace is str.split() / str.rsplit() with no separator.
func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if !fromRight {
		var out []string
		for {
			s = strings.TrimLeftFunc(s, isPySpace)
			if s == "" {
				return out
			}
			if maxsplit >= 0 && len(out) == maxsplit {
				return append(out, s)
			}
			i := strings.IndexFunc(s, isPySpace)
			if i < 0 {
				return append(out, s)
			}
			out = append(out, s[:i])
			s = s[i:]
		}
	}
	var rev []string
	for {
		s = strings.TrimRightFunc(s, isPySpace)
		if s == "" {
			break
		}
		if maxsplit >= 0 && len(rev) == maxsplit {
			rev = append(rev, s)
			break
		}
		i := strings.LastIndexFunc(s, isPySpace)
		if i < 0 {
			rev = append(rev, s)
			break
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		rev = append(rev, s[i+n:])
		s = s[:i]
	}
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

func rsplitSep(s, sep string, maxsplit int) []string {
	if maxsplit < 0 {
		return strings.Split(s, sep)
	}
	var rev []string
	for len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	rev = append(rev, s)
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// splitLines is str.splitlines.
func splitLines(s string, keepends bool) []string {
	var out []string
	for s != "" {
		i := strings.IndexFunc(s, isLineBreak)
		if i < 0 {
			out = append(out, s)
			break
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			n = 2
		}
		if keepends {
			out = append(out, s[:i+n])
		} else {
			out = append(out, s[:i])
		}
		s = s[i+n:]
	}
	return out
}

// Full case mappings Python applies that Go's simple ones lack.
var upperSpecial = map[rune]string{
	'ß': "SS", 'ŉ': "ʼN", 'ǰ': "J̌", 'ΐ': "Ϊ́", 'ΰ': "Ϋ́", 'և': "ԵՒ",
	'ẖ': "H̱", 'ẗ': "T̈", 'ẘ': "W̊", 'ẙ': "Y̊", 'ẚ': "Aʾ",
	'ﬀ': "FF", 'ﬁ': "FI", 'ﬂ': "FL", 'ﬃ': "FFI", 'ﬄ': "FFL", 'ﬅ': "ST", 'ﬆ': "ST",
	'ﬓ': "ՄՆ", 'ﬔ': "ՄԵ", 'ﬕ': "ՄԻ", 'ﬖ': "ՎՆ", 'ﬗ': "ՄԽ",
}

var titleSpecial = map[rune]string{
	'ß': "Ss", 'ﬀ': "Ff", 'ﬁ': "Fi", 'ﬂ': "Fl", 'ﬃ': "Ffi", 'ﬄ': "Ffl", 'ﬅ': "St", 'ﬆ': "St",
	'ŉ': "ʼN", 'և': "Եւ",
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	var b strings.Builder
	for _, r := range s {
		if sp, ok := upperSpecial[r]; ok {
			b.WriteString(sp)
		} else {
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

// pyLower is str.lower, with İ's full mapping and Greek final sigma.
func pyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch r {
		case 'İ':
			b.WriteString("i̇")
		case 'Σ':
			if finalSigma(rs, i) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

func caseIgnorable(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) || r == '\'' || r == '.' || r == ':' || r == '·' || r == '’'
}

func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && caseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !isCased(rs[j]) {
		return false
	}
	k := i + 1
	for k < len(rs) && caseIgnorable(rs[k]) {
		k++
	}
	return k >= len(rs) || !isCased(rs[k])
}

func titleRune(b *strings.Builder, r rune) {
	if sp, ok := titleSpecial[r]; ok {
		b.WriteString(sp)
		return
	}
	b.WriteRune(unicode.ToTitle(r))
}

// pyTitle is str.title: a cased character after an uncased one is
// title-cased, the others lowered.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteString(pyLower(string(r)))
		} else {
			titleRune(&b, r)
		}
		prevCased = isCased(r)
	}
	return b.String()
}

// pyCapitalize is str.capitalize: the first character title-cased, the
// rest lowered.
func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	var b strings.Builder
	titleRune(&b, r)
	b.WriteString(pyLower(s[n:]))
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// dictMethod returns dict's method name bound to m; unsafe marks the
// mutating ones the immutable sandbox refuses.
func dictMethod(m *Map, name string) (*callable, bool, bool) {
	switch name {
	case "items":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			if len(args)+len(kw) > 0 {
				return nil, errf("dict.items() takes no arguments")
			}
			return dictItems(m), nil
		}), true, false
	case "keys":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			if len(args)+len(kw) > 0 {
				return nil, errf("dict.keys() takes no arguments")
			}
			return strsToList(m.keys), nil
		}), true, false
	case "values":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			if len(args)+len(kw) > 0 {
				return nil, errf("dict.values() takes no arguments")
			}
			out := make([]any, len(m.keys))
			for i, k := range m.keys {
				out[i] = m.vals[k]
			}
			return out, nil
		}), true, false
	case "get":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			if len(kw) > 0 {
				return nil, errf("dict.get() takes no keyword arguments")
			}
			if len(args) < 1 || len(args) > 2 {
				return nil, errf("get expected at most 2 arguments, got %d", len(args))
			}
			if k, ok := args[0].(string); ok {
				if v, ok := m.vals[k]; ok {
					return v, nil
				}
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return nil, nil
		}), true, false
	case "copy":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			c := &Map{}
			for _, k := range m.keys {
				c.Set(k, m.vals[k])
			}
			return c, nil
		}), true, false
	case "clear", "pop", "popitem", "setdefault", "update":
		return nil, true, true
	case "fromkeys":
		return nil, false, false
	}
	return nil, false, false
}

func dictItems(m *Map) []any {
	out := make([]any, len(m.keys))
	for i, k := range m.keys {
		out[i] = tuple{k, m.vals[k]}
	}
	return out
}

// listMethod is dict's counterpart for lists.
func listMethod(l []any, name string) (*callable, bool, bool) {
	switch name {
	case "index", "count":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			if len(args) != 1 || len(kw) > 0 {
				return nil, errf("%s() takes exactly one argument (%d given)", name, len(args))
			}
			n := 0
			for i, x := range l {
				if equal(x, args[0]) {
					if name == "index" {
						return int64(i), nil
					}
					n++
				}
			}
			if name == "index" {
				return nil, errf("%s is not in list", repr(args[0]))
			}
			return int64(n), nil
		}), true, false
	case "copy":
		return method(name, func(args []any, kw []kwarg) (any, error) {
			return append([]any{}, l...), nil
		}), true, false
	case "append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove":
		return nil, true, true
	}
	return nil, false, false
}
