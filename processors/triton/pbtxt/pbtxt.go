// Package pbtxt parses the protobuf text format (what Triton's config.pbtxt
// is written in) into a schema-free tree. Triton reads config.pbtxt with the
// ModelConfig schema compiled in; we have no descriptor for it, so the tree
// keeps every field with its position and the caller maps names to types,
// reporting unknown names itself.
//
// The accepted syntax is the text format as protoc and Triton write and read
// it: "#" comments, `name: scalar`, `name { ... }` or `name < ... >` with an
// optional colon, lists `name: [a, b]` of scalars or messages (the colon optional before a list of messages), optional ","
// or ";" after a field, double- or single-quoted strings with C escapes and
// adjacent-string concatenation, and numbers in decimal, hex, octal or float
// form (with "-", "inf" and "nan"). Extension and Any fields ("[x.y]") are
// refused: Triton's ModelConfig has none.
//
// The parser is safe on untrusted input: nesting is bounded by MaxDepth and
// errors carry the line and column.
package pbtxt

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds message nesting; deeper input is refused rather than
// risking the stack.
const MaxDepth = 100

// Kind says what a Value holds.
type Kind int

// The kinds of value. Ident covers enum names and true/false.
const (
	Ident Kind = iota + 1
	Number
	String
	Msg
)

func (k Kind) String() string {
	switch k {
	case Ident:
		return "identifier"
	case Number:
		return "number"
	case String:
		return "string"
	case Msg:
		return "message"
	}
	return "invalid"
}

// Pos is a 1-based line and column in the input.
type Pos struct {
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Value is one scalar or message. Text holds the identifier, the number as
// written, or the decoded string (raw bytes, not necessarily UTF-8).
type Value struct {
	Kind Kind
	Text string
	Msg  *Message
	Pos  Pos
}

// Field is one `name: value` of a message. A list `name: [a, b]` becomes one
// Field per element, in order, as protobuf treats them.
type Field struct {
	Name  string
	Value Value
}

// Message is the fields of one message in input order; repeated fields occur
// several times.
type Message struct {
	Fields []Field
	Pos    Pos // the position of the opening brace; 1:1 for the top level
}

// Get returns the values of the fields called name, in order.
func (m *Message) Get(name string) []Value {
	var out []Value
	for _, f := range m.Fields {
		if f.Name == name {
			out = append(out, f.Value)
		}
	}
	return out
}

// SyntaxError is a problem in the input at a position.
type SyntaxError struct {
	Pos Pos
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %s: %s", e.Pos, e.Msg) }

// Parse reads a whole text-format message.
func Parse(data []byte) (*Message, error) {
	p := &parser{src: string(data), line: 1, col: 1}
	m, err := p.message(0, 0)
	if err != nil {
		return nil, err
	}
	return m, nil
}

type parser struct {
	src       string
	off       int
	line, col int
}

func (p *parser) pos() Pos { return Pos{p.line, p.col} }

func (p *parser) errf(pos Pos, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) advance(n int) {
	for i := 0; i < n && p.off < len(p.src); i++ {
		if p.src[p.off] == '\n' {
			p.line++
			p.col = 1
		} else {
			p.col++
		}
		p.off++
	}
}

// skip passes over whitespace and comments.
func (p *parser) skip() {
	for p.off < len(p.src) {
		c := p.src[p.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			p.advance(1)
		case c == '#':
			for p.off < len(p.src) && p.src[p.off] != '\n' {
				p.advance(1)
			}
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	p.skip()
	if p.off >= len(p.src) {
		return 0
	}
	return p.src[p.off]
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// describe names the byte at the current position for an error.
func (p *parser) describe() string {
	if p.off >= len(p.src) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.off:])
	if r == utf8.RuneError {
		return fmt.Sprintf("byte 0x%02x", p.src[p.off])
	}
	return strconv.QuoteRune(r)
}

// message reads fields until end (0 for the top level, else '}' or '>').
func (p *parser) message(end byte, depth int) (*Message, error) {
	m := &Message{Pos: p.pos()}
	for {
		c := p.peek()
		if c == 0 {
			if end != 0 {
				return nil, p.errf(p.pos(), "unexpected end of input: missing %q", string(end))
			}
			return m, nil
		}
		if c == end {
			p.advance(1)
			return m, nil
		}
		if c == '[' {
			return nil, p.errf(p.pos(), "extension and Any fields ([...]) are not supported")
		}
		if !isIdentStart(c) {
			return nil, p.errf(p.pos(), "expected a field name, found %s", p.describe())
		}
		start := p.pos()
		name := p.ident()
		colon := false
		if p.peek() == ':' {
			p.advance(1)
			colon = true
		}
		switch c := p.peek(); {
		case c == '{' || c == '<':
			v, err := p.msgValue(depth)
			if err != nil {
				return nil, err
			}
			m.Fields = append(m.Fields, Field{Name: name, Value: v})
		case c == '[':
			pos := p.pos()
			p.advance(1)
			vals, err := p.list(depth)
			if err != nil {
				return nil, inField(name, err)
			}
			// As in protoc, only a list of messages may omit the colon.
			if !colon && len(vals) > 0 && vals[0].Kind != Msg {
				return nil, p.errf(pos, "field %q: a list of scalars needs a colon before '['", name)
			}
			for _, v := range vals {
				m.Fields = append(m.Fields, Field{Name: name, Value: v})
			}
		default:
			if !colon {
				return nil, p.errf(start, "field %q: expected ':' or '{' after the name, found %s", name, p.describe())
			}
			v, err := p.scalar()
			if err != nil {
				return nil, inField(name, err)
			}
			m.Fields = append(m.Fields, Field{Name: name, Value: v})
		}
		if c := p.peek(); c == ',' || c == ';' {
			p.advance(1)
		}
	}
}

// inField names the field in a syntax error, keeping the position first.
func inField(name string, err error) error {
	var se *SyntaxError
	if errors.As(err, &se) {
		return &SyntaxError{Pos: se.Pos, Msg: fmt.Sprintf("field %q: %s", name, se.Msg)}
	}
	return err
}

func (p *parser) msgValue(depth int) (Value, error) {
	if depth+1 > MaxDepth {
		return Value{}, p.errf(p.pos(), "messages nested deeper than %d", MaxDepth)
	}
	pos := p.pos()
	closer := byte('}')
	if p.src[p.off] == '<' {
		closer = '>'
	}
	p.advance(1)
	sub, err := p.message(closer, depth+1)
	if err != nil {
		return Value{}, err
	}
	sub.Pos = pos
	return Value{Kind: Msg, Msg: sub, Pos: pos}, nil
}

// list reads the elements after '[' up to ']'.
func (p *parser) list(depth int) ([]Value, error) {
	var out []Value
	if p.peek() == ']' {
		p.advance(1)
		return out, nil
	}
	for {
		var v Value
		var err error
		if c := p.peek(); c == '{' || c == '<' {
			v, err = p.msgValue(depth)
		} else {
			v, err = p.scalar()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		switch p.peek() {
		case ',':
			p.advance(1)
		case ']':
			p.advance(1)
			return out, nil
		default:
			return nil, p.errf(p.pos(), "expected ',' or ']' in a list, found %s", p.describe())
		}
	}
}

func (p *parser) ident() string {
	start := p.off
	for p.off < len(p.src) && isIdentChar(p.src[p.off]) {
		p.advance(1)
	}
	return p.src[start:p.off]
}

func (p *parser) scalar() (Value, error) {
	c := p.peek()
	pos := p.pos()
	switch {
	case c == '"' || c == '\'':
		var b strings.Builder
		for {
			s, err := p.quoted()
			if err != nil {
				return Value{}, err
			}
			b.WriteString(s)
			if c := p.peek(); c != '"' && c != '\'' {
				break
			}
		}
		return Value{Kind: String, Text: b.String(), Pos: pos}, nil
	case c == '-' || c == '.' || (c >= '0' && c <= '9'):
		tok, err := p.number()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: Number, Text: tok, Pos: pos}, nil
	case isIdentStart(c):
		id := p.ident()
		switch strings.ToLower(id) {
		case "inf", "infinity", "nan":
			return Value{Kind: Number, Text: id, Pos: pos}, nil
		}
		return Value{Kind: Ident, Text: id, Pos: pos}, nil
	}
	return Value{}, p.errf(pos, "expected a value, found %s", p.describe())
}

// number reads a numeric token: an optional '-', then digits, '.', exponent,
// hex digits or a float suffix, or the words inf/nan.
func (p *parser) number() (string, error) {
	pos := p.pos()
	start := p.off
	if p.src[p.off] == '-' {
		p.advance(1)
		// protoc allows whitespace and comments between '-' and the number.
		p.skip()
		if p.off < len(p.src) && isIdentStart(p.src[p.off]) {
			id := p.ident()
			switch strings.ToLower(id) {
			case "inf", "infinity", "nan":
				return "-" + id, nil
			}
			return "", p.errf(pos, "expected a number after '-', found %q", id)
		}
	}
	digits := p.off
	for p.off < len(p.src) {
		c := p.src[p.off]
		if isIdentChar(c) || c == '.' {
			p.advance(1)
			continue
		}
		if (c == '+' || c == '-') && p.off > digits {
			if prev := p.src[p.off-1]; (prev == 'e' || prev == 'E') && !strings.HasPrefix(strings.ToLower(p.src[digits:p.off]), "0x") {
				p.advance(1)
				continue
			}
		}
		break
	}
	body := p.src[digits:p.off]
	if body == "" {
		return "", p.errf(pos, "expected a number, found %s", p.describe())
	}
	if !validNumber(body) {
		return "", p.errf(pos, "%q is not a number", p.src[start:p.off])
	}
	neg := ""
	if p.src[start] == '-' {
		neg = "-"
	}
	return neg + body, nil
}

// validNumber accepts decimal, hex and octal integers and floats with an
// optional f/F suffix.
func validNumber(s string) bool {
	ls := strings.ToLower(s)
	if strings.HasPrefix(ls, "0x") {
		_, err := strconv.ParseUint(ls[2:], 16, 64)
		return err == nil
	}
	if _, err := strconv.ParseUint(ls, 0, 64); err == nil {
		return true
	}
	ls = strings.TrimSuffix(ls, "f")
	if ls == "" || strings.ContainsAny(ls, "_xpin") {
		return false
	}
	_, err := strconv.ParseFloat(ls, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}

// quoted reads one quoted string and decodes its escapes.
func (p *parser) quoted() (string, error) {
	pos := p.pos()
	q := p.src[p.off]
	p.advance(1)
	var b strings.Builder
	for {
		if p.off >= len(p.src) {
			return "", p.errf(pos, "unterminated string")
		}
		c := p.src[p.off]
		switch {
		case c == q:
			p.advance(1)
			return b.String(), nil
		case c == '\n':
			return "", p.errf(pos, "unterminated string: newline inside quotes")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			p.advance(1)
		}
	}
}

func (p *parser) escape(b *strings.Builder) error {
	pos := p.pos()
	p.advance(1)
	if p.off >= len(p.src) {
		return p.errf(pos, "unterminated escape")
	}
	c := p.src[p.off]
	simple := map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', 'a': '\a', 'b': '\b', 'f': '\f', 'v': '\v', '\\': '\\', '\'': '\'', '"': '"', '?': '?'}
	if r, ok := simple[c]; ok {
		b.WriteByte(r)
		p.advance(1)
		return nil
	}
	switch {
	case c >= '0' && c <= '7':
		n, v := 0, 0
		for n < 3 && p.off < len(p.src) && p.src[p.off] >= '0' && p.src[p.off] <= '7' {
			v = v*8 + int(p.src[p.off]-'0')
			p.advance(1)
			n++
		}
		if v > 255 {
			return p.errf(pos, "octal escape \\%o is larger than a byte", v)
		}
		b.WriteByte(byte(v))
		return nil
	case c == 'x' || c == 'X':
		p.advance(1)
		n, v := 0, 0
		for n < 2 && p.off < len(p.src) && isHex(p.src[p.off]) {
			v = v*16 + hexVal(p.src[p.off])
			p.advance(1)
			n++
		}
		if n == 0 {
			return p.errf(pos, "\\x escape without hex digits")
		}
		b.WriteByte(byte(v))
		return nil
	}
	return p.errf(pos, "unknown escape \\%c", c)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return int(c-'A') + 10
}

// Int returns v as a signed integer of bits width.
func (v Value) Int(bits int) (int64, error) {
	if v.Kind != Number {
		return 0, fmt.Errorf("line %s: expected an integer, found %s %q", v.Pos, v.Kind, v.Text)
	}
	s := strings.ToLower(v.Text)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	u, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("line %s: %q is not an integer", v.Pos, v.Text)
	}
	limit := uint64(1) << (bits - 1)
	if (!neg && u >= limit) || (neg && u > limit) {
		return 0, fmt.Errorf("line %s: %s does not fit in int%d", v.Pos, v.Text, bits)
	}
	if neg {
		return -int64(u), nil
	}
	return int64(u), nil
}

// Uint returns v as an unsigned integer of bits width.
func (v Value) Uint(bits int) (uint64, error) {
	if v.Kind != Number || strings.HasPrefix(v.Text, "-") {
		return 0, fmt.Errorf("line %s: expected an unsigned integer, found %s %q", v.Pos, v.Kind, v.Text)
	}
	u, err := strconv.ParseUint(strings.ToLower(v.Text), 0, bits)
	if err != nil {
		return 0, fmt.Errorf("line %s: %s is not an unsigned %d-bit integer", v.Pos, v.Text, bits)
	}
	return u, nil
}

// Float returns v as a float64.
func (v Value) Float() (float64, error) {
	if v.Kind != Number {
		return 0, fmt.Errorf("line %s: expected a number, found %s %q", v.Pos, v.Kind, v.Text)
	}
	s := strings.ToLower(v.Text)
	switch strings.TrimPrefix(s, "-") {
	case "nan":
		return math.NaN(), nil
	case "inf", "infinity":
	default:
		s = strings.TrimSuffix(s, "f")
	}
	if i, err := v.Int(64); err == nil {
		return float64(i), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("line %s: %q is not a number", v.Pos, v.Text)
	}
	return f, nil
}

// Bool returns v as a boolean: true/false (any case, as protoc accepts
// True/t too) or 1/0.
func (v Value) Bool() (bool, error) {
	switch v.Text {
	case "true", "True", "t", "1":
		if v.Kind == Ident || v.Kind == Number {
			return true, nil
		}
	case "false", "False", "f", "0":
		if v.Kind == Ident || v.Kind == Number {
			return false, nil
		}
	}
	return false, fmt.Errorf("line %s: expected true or false, found %s %q", v.Pos, v.Kind, v.Text)
}
