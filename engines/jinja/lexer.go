package jinja

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of one lexer token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

// token is one lexeme; for tOp, s is the operator ("+", "//", "(", ...).
type token struct {
	kind tokKind
	s    string
	i    int64
	f    float64
	line int
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tVarBegin:
		return "begin of print statement"
	case tVarEnd:
		return "end of print statement"
	case tBlockBegin:
		return "begin of statement block"
	case tBlockEnd:
		return "end of statement block"
	case tData:
		return "template data"
	case tString:
		return "string"
	case tInt, tFloat:
		return "number"
	}
	return t.s
}

// lexer turns a template into tokens the way jinja2's Lexer does under
// trim_blocks=True and lstrip_blocks=True: the whole source's newlines
// normalized to "\n" and one trailing newline dropped
// (keep_trailing_newline=False), "-" on a tag eating the whitespace beside
// it, "+" keeping it, the first newline after a block or comment tag
// removed, and the spaces and tabs between a line start and a block or
// comment tag removed.
type lexer struct {
	src  string
	pos  int
	line int
	toks []token
	// lineStarting: the previous match ended with a newline (or nothing
	// was matched yet), which jinja2's lstrip_blocks needs to strip the
	// indentation of a tag at the very start of the text that follows.
	lineStarting bool
}

// normalizeNewlines is jinja2's source preparation: every \r\n, \r and \n
// becomes \n, and one trailing newline goes.
func normalizeNewlines(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func lex(src string) ([]token, error) {
	lx := &lexer{src: normalizeNewlines(src), line: 1, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	// jinja2's end-of-template token takes the line of the token before it.
	line := 1
	if n := len(lx.toks); n > 0 {
		line = lx.toks[n-1].line
	}
	lx.toks = append(lx.toks, token{kind: tEOF, line: line})
	return lx.toks, nil
}

func (lx *lexer) errf(line int, format string, args ...any) error {
	return newError(KindSyntax, line, format, args...)
}

// advance moves to p, counting the newlines passed.
func (lx *lexer) advance(p int) {
	lx.line += strings.Count(lx.src[lx.pos:p], "\n")
	lx.pos = p
}

// emitData adds text as data (nothing when empty).
func (lx *lexer) emitData(text string, line int) {
	if text != "" {
		lx.toks = append(lx.toks, token{kind: tData, s: text, line: line})
	}
}

// findTag finds the next "{{", "{%" or "{#" at or after from.
func findTag(src string, from int) (int, byte) {
	for i := from; ; {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			return -1, 0
		}
		i += j
		switch c := src[i+1]; c {
		case '{', '%', '#':
			return i, c
		}
		i++
	}
}

// stripText applies a tag's left whitespace control to the text before it.
func (lx *lexer) stripText(text string, sign byte, kind byte) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, isPySpace)
	}
	if sign != '+' && kind != '{' {
		lpos := strings.LastIndexByte(text, '\n') + 1
		if lpos > 0 || lx.lineStarting {
			if strings.Trim(text[lpos:], " \t") == "" {
				return text[:lpos]
			}
		}
	}
	return text
}

// rawBegin matches jinja2's raw opening {%[-+]?\s*raw\s*(-%}\s*|%}) at i;
// it returns the end of the match, or -1.
func rawBegin(src string, i int) int {
	p := i + 2
	if p < len(src) && (src[p] == '-' || src[p] == '+') {
		p++
	}
	p = skipSpace(src, p)
	if !strings.HasPrefix(src[p:], "raw") {
		return -1
	}
	p = skipSpace(src, p+3)
	if strings.HasPrefix(src[p:], "-%}") {
		return skipSpace(src, p+3)
	}
	if strings.HasPrefix(src[p:], "%}") {
		return p + 2
	}
	return -1
}

func skipSpace(src string, p int) int {
	for p < len(src) {
		r, n := utf8.DecodeRuneInString(src[p:])
		if !isPySpace(r) {
			break
		}
		p += n
	}
	return p
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		start, kind := findTag(lx.src, lx.pos)
		if start < 0 {
			lx.emitData(lx.src[lx.pos:], lx.line)
			lx.advance(len(lx.src))
			return nil
		}
		var sign byte
		if start+2 < len(lx.src) && (lx.src[start+2] == '-' || lx.src[start+2] == '+') {
			sign = lx.src[start+2]
		}
		dataLine := lx.line
		text := lx.stripText(lx.src[lx.pos:start], sign, kind)
		lx.emitData(text, dataLine)
		lx.advance(start)
		tagLine := lx.line
		if kind == '%' {
			if end := rawBegin(lx.src, start); end >= 0 {
				lx.advance(end)
				lx.lineStarting = lx.src[end-1] == '\n'
				if err := lx.raw(tagLine); err != nil {
					return err
				}
				continue
			}
		}
		p := start + 2
		if sign != 0 {
			p++
		}
		lx.advance(p)
		switch kind {
		case '#':
			if err := lx.comment(tagLine); err != nil {
				return err
			}
		case '%':
			lx.toks = append(lx.toks, token{kind: tBlockBegin, line: tagLine})
			if err := lx.tag('%'); err != nil {
				return err
			}
		case '{':
			lx.toks = append(lx.toks, token{kind: tVarBegin, line: tagLine})
			if err := lx.tag('}'); err != nil {
				return err
			}
		}
	}
	return nil
}

// blockEnd matches jinja2's block (or comment) end at p with closer c
// ('%' or '#'): +c} | -c}\s* | c}\n? ; it returns the end, or -1.
func blockEnd(src string, p int, c byte) int {
	if p < len(src) && (src[p] == '+' || src[p] == '-') && p+2 < len(src) && src[p+1] == c && src[p+2] == '}' {
		if src[p] == '+' {
			return p + 3
		}
		return skipSpace(src, p+3)
	}
	if p+1 < len(src) && src[p] == c && src[p+1] == '}' {
		if p+2 < len(src) && src[p+2] == '\n' {
			return p + 3
		}
		return p + 2
	}
	return -1
}

func (lx *lexer) comment(line int) error {
	for p := lx.pos; p < len(lx.src); p++ {
		if end := blockEnd(lx.src, p, '#'); end >= 0 {
			lx.advance(end)
			lx.lineStarting = lx.src[end-1] == '\n'
			return nil
		}
	}
	return lx.errf(line, "missing end of comment tag")
}

// raw copies text verbatim up to {% endraw %}, whose left side strips like
// any block tag's.
func (lx *lexer) raw(line int) error {
	for p := lx.pos; ; {
		i, kind := findTag(lx.src, p)
		if i < 0 {
			return lx.errf(line, "missing end of raw directive")
		}
		if kind != '%' {
			p = i + 1
			continue
		}
		q := i + 2
		var sign byte
		if q < len(lx.src) && (lx.src[q] == '-' || lx.src[q] == '+') {
			sign = lx.src[q]
			q++
		}
		q = skipSpace(lx.src, q)
		if !strings.HasPrefix(lx.src[q:], "endraw") {
			p = i + 1
			continue
		}
		q = skipSpace(lx.src, q+6)
		end := blockEnd(lx.src, q, '%')
		if end < 0 {
			p = i + 1
			continue
		}
		text := lx.stripText(lx.src[lx.pos:i], sign, '%')
		lx.emitData(text, lx.line)
		lx.advance(end)
		lx.lineStarting = lx.src[end-1] == '\n'
		return nil
	}
}

// operators, longest first.
var operators = []string{"//", "**", "==", "!=", ">=", "<=",
	"+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

// tag lexes the inside of {% %} (closer '%') or {{ }} (closer '}').
func (lx *lexer) tag(closer byte) error {
	var balance []byte
	for {
		if lx.pos >= len(lx.src) {
			if closer == '%' {
				return lx.errf(lx.line, "unexpected end of template, expected end of statement block")
			}
			return lx.errf(lx.line, "unexpected end of template, expected end of print statement")
		}
		src, p := lx.src, lx.pos
		if len(balance) == 0 {
			end := -1
			if closer == '%' {
				end = blockEnd(src, p, '%')
			} else if strings.HasPrefix(src[p:], "-}}") {
				end = skipSpace(src, p+3)
			} else if strings.HasPrefix(src[p:], "}}") {
				end = p + 2
			}
			if end >= 0 {
				k := tBlockEnd
				if closer == '}' {
					k = tVarEnd
				}
				lx.toks = append(lx.toks, token{kind: k, line: lx.line})
				lx.advance(end)
				lx.lineStarting = src[end-1] == '\n'
				return nil
			}
		}
		r, n := utf8.DecodeRuneInString(src[p:])
		switch {
		case isPySpace(r):
			lx.advance(skipSpace(src, p))
		case r >= '0' && r <= '9':
			if err := lx.number(); err != nil {
				return err
			}
		case r == '_' || unicode.IsLetter(r):
			q := p + n
			for q < len(src) {
				r2, n2 := utf8.DecodeRuneInString(src[q:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				q += n2
			}
			lx.toks = append(lx.toks, token{kind: tName, s: src[p:q], line: lx.line})
			lx.advance(q)
		case r == '\'' || r == '"':
			if err := lx.str(byte(r)); err != nil {
				return err
			}
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[p:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return lx.errf(lx.line, "unexpected char %s at %d", pyReprString(string(r)), p)
			}
			switch op {
			case "(", "[", "{":
				balance = append(balance, op[0])
			case ")", "]", "}":
				if len(balance) == 0 {
					return lx.errf(lx.line, "unexpected '%s'", op)
				}
				want := map[byte]byte{'(': ')', '[': ']', '{': '}'}[balance[len(balance)-1]]
				if op[0] != want {
					return lx.errf(lx.line, "unexpected '%s', expected '%c'", op, want)
				}
				balance = balance[:len(balance)-1]
			}
			lx.toks = append(lx.toks, token{kind: tOp, s: op, line: lx.line})
			lx.advance(p + len(op))
		}
	}
}

// digitsUnderscore scans (\d+_)*\d+ from p; it returns the end, or p.
func digitsUnderscore(src string, p int, digit func(byte) bool) int {
	q := p
	for {
		s := q
		for q < len(src) && digit(src[q]) {
			q++
		}
		if q == s {
			return s - boolInt(s > p) // drop a trailing '_'
		}
		if q < len(src) && src[q] == '_' && q+1 < len(src) && digit(src[q+1]) {
			q++
			continue
		}
		return q
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isDec(c byte) bool { return c >= '0' && c <= '9' }

// number lexes jinja2's integer (decimal, 0b, 0o, 0x, underscores) and
// float (fraction and/or exponent; none right after a '.', so foo.0.1 is
// two subscripts) literals.
func (lx *lexer) number() error {
	src, p := lx.src, lx.pos
	afterDot := p > 0 && src[p-1] == '.'
	if src[p] == '0' && p+1 < len(src) {
		base, digit := 0, func(byte) bool { return false }
		switch src[p+1] | 0x20 {
		case 'b':
			base, digit = 2, func(c byte) bool { return c == '0' || c == '1' }
		case 'o':
			base, digit = 8, func(c byte) bool { return c >= '0' && c <= '7' }
		case 'x':
			base, digit = 16, func(c byte) bool { return isDec(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
		}
		if base != 0 {
			q := p + 2
			for q < len(src) && (digit(src[q]) || (src[q] == '_' && q+1 < len(src) && digit(src[q+1]))) {
				q++
			}
			if q > p+2 {
				v, err := strconv.ParseInt(strings.ReplaceAll(src[p+2:q], "_", ""), base, 64)
				if err != nil {
					return lx.errf(lx.line, "integer literal %s out of range", src[p:q])
				}
				lx.toks = append(lx.toks, token{kind: tInt, i: v, line: lx.line})
				lx.advance(q)
				return nil
			}
		}
	}
	q := digitsUnderscore(src, p, isDec)
	isFloat := false
	end := q
	if !afterDot {
		f := q
		if f+1 < len(src) && src[f] == '.' && isDec(src[f+1]) {
			f = digitsUnderscore(src, f+1, isDec)
			isFloat = true
			end = f
		}
		if f < len(src) && src[f]|0x20 == 'e' {
			e := f + 1
			if e < len(src) && (src[e] == '+' || src[e] == '-') {
				e++
			}
			if e < len(src) && isDec(src[e]) {
				end = digitsUnderscore(src, e, isDec)
				isFloat = true
			}
		}
	}
	text := strings.ReplaceAll(src[p:end], "_", "")
	if isFloat {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return lx.errf(lx.line, "bad float literal %s", text)
		}
		lx.toks = append(lx.toks, token{kind: tFloat, f: v, line: lx.line})
	} else {
		if len(text) > 1 && text[0] == '0' && strings.Trim(text, "0") != "" {
			// jinja2's integer rule takes "0" alone; "012" is 0 then 12.
			end = p + 1
			text = "0"
		}
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return lx.errf(lx.line, "integer literal %s out of range", text)
		}
		lx.toks = append(lx.toks, token{kind: tInt, i: v, line: lx.line})
	}
	lx.advance(end)
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str lexes a quoted string and unescapes it as jinja2 does (Python's
// unicode-escape codec: \n \t \r \\ \' \" \a \b \f \v \xNN \uNNNN
// \UNNNNNNNN, octal \NNN, a backslash-newline dropped, any other
// backslash kept).
func (lx *lexer) str(q byte) error {
	src, p := lx.src, lx.pos
	i := p + 1
	for i < len(src) && src[i] != q {
		if src[i] == '\\' {
			i++
		}
		i++
	}
	if i >= len(src) {
		return lx.errf(lx.line, "unexpected char %s at %d", pyReprString(string(q)), p)
	}
	body := src[p+1 : i]
	v, err := unescape(body)
	if err != nil {
		e := err.(*Error)
		if e.Kind == KindType {
			e.Kind = KindSyntax
		}
		e.Line = lx.line
		return e
	}
	lx.toks = append(lx.toks, token{kind: tString, s: v, line: lx.line})
	lx.advance(i + 1)
	return nil
}

func unescape(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+n > len(s) {
				return "", errf("truncated \\%c escape in a string literal", e)
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil {
				return "", errf("truncated \\%c escape in a string literal", e)
			}
			if v > unicode.MaxRune || (v >= 0xD800 && v < 0xE000) {
				return "", errf("illegal Unicode character \\%c%s in a string literal", e, s[i+1:i+1+n])
			}
			b.WriteRune(rune(v))
			i += n
		case 'N':
			if i+1 < len(s) && s[i+1] == '{' {
				return "", &Error{Kind: KindUnsupported, Msg: "\\N{name} escapes are not supported"}
			}
			return "", errf("malformed \\N character escape")
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, j := 0, i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				v = v*8 + int(s[j]-'0')
				j++
			}
			b.WriteRune(rune(v))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}
