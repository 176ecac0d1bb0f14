package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonOpts are json.dumps's options as transformers' tojson passes them.
type jsonOpts struct {
	ensureASCII bool
	indent      *string // nil: one line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// dumps is Python's json.dumps(v, ...) for the evaluator's values.
func dumps(v any, o jsonOpts) (string, error) {
	var b strings.Builder
	if err := dumpValue(&b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func newline(b *strings.Builder, o jsonOpts, level int) {
	b.WriteByte('\n')
	for range level {
		b.WriteString(*o.indent)
	}
}

func dumpValue(b *strings.Builder, v any, o jsonOpts, level int) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case string:
		jsonString(b, x, o.ensureASCII)
	case markup:
		jsonString(b, string(x), o.ensureASCII)
	case []any:
		return dumpList(b, x, o, level)
	case tuple:
		return dumpList(b, x, o, level)
	case *Map:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := x.keys
		if o.sortKeys {
			keys = slices.Clone(keys)
			slices.Sort(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			if o.indent != nil {
				newline(b, o, level+1)
			}
			jsonString(b, k, o.ensureASCII)
			b.WriteString(o.keySep)
			if err := dumpValue(b, x.vals[k], o, level+1); err != nil {
				return err
			}
		}
		if o.indent != nil {
			newline(b, o, level)
		}
		b.WriteByte('}')
	default:
		return errf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func dumpList(b *strings.Builder, l []any, o jsonOpts, level int) error {
	if len(l) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, e := range l {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		if o.indent != nil {
			newline(b, o, level+1)
		}
		if err := dumpValue(b, e, o, level+1); err != nil {
			return err
		}
	}
	if o.indent != nil {
		newline(b, o, level)
	}
	b.WriteByte(']')
	return nil
}

const hexDigits = "0123456789abcdef"

// jsonString writes s as Python's json module does: " and \ escaped,
// \n \r \t \b \f by name, other control characters as \u00XX, and with
// ensureASCII every non-ASCII character as \uXXXX (surrogate pairs above
// U+FFFF).
func jsonString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c >= 0x80 && !ensureASCII {
			i++
			continue
		}
		b.WriteString(s[start:i])
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				r -= 0x10000
				hexRune(b, 0xD800+(r>>10))
				hexRune(b, 0xDC00+(r&0x3FF))
			} else {
				hexRune(b, r)
			}
			i += n
			start = i
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			hexRune(b, rune(c))
		}
		i++
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

func hexRune(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[r>>12&0xF])
	b.WriteByte(hexDigits[r>>8&0xF])
	b.WriteByte(hexDigits[r>>4&0xF])
	b.WriteByte(hexDigits[r&0xF])
}

// DecodeJSON decodes one JSON value into what Render takes, keeping what
// Python's json.loads keeps: objects as *Map in their key order (a key
// given twice keeps its first place and its last value), integers as
// int64 (floats beyond int64 as float64), other numbers as float64.
// Use it for messages, tools and template arguments whose key order shows
// in the output (tojson, items()).
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("jinja: decode json: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("jinja: decode json: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			m := &Map{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %v", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return m, nil
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		v, err := numberValue(string(x))
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	return t, nil
}
