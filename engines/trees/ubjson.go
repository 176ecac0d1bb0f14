package trees

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ParseXGBoostUBJSON reads a model saved by XGBoost as Universal Binary
// JSON (booster.save_model("model.ubj"), the default of XGBoost 2).
func ParseXGBoostUBJSON(data []byte) (*Model, error) {
	js, err := ubjsonToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("xgboost ubjson: %w", err)
	}
	m, err := parseXGBoostJSON(context.Background(), js)
	if err != nil {
		return nil, fmt.Errorf("xgboost ubjson: %w", err)
	}
	m.Format = "xgboost-ubjson"
	return m, nil
}

// maxDepth bounds UBJSON nesting; XGBoost's models nest 6 deep.
const maxDepth = 64

// ubjsonToJSON transcodes UBJSON to JSON text, so both serialisations share
// one model reader. float32 values print in their shortest float32 form
// and read back to the same bits.
func ubjsonToJSON(data []byte) ([]byte, error) {
	u := &ubj{data: data, out: make([]byte, 0, len(data)*2)}
	if err := u.value(u.next(), 0); err != nil {
		return nil, fmt.Errorf("at byte %d: %w", u.pos, err)
	}
	if u.err != nil {
		return nil, u.err
	}
	return u.out, nil
}

type ubj struct {
	data []byte
	pos  int
	out  []byte
	err  error
}

var errShort = errors.New("unexpected end of data")

func (u *ubj) next() byte {
	for u.pos < len(u.data) {
		c := u.data[u.pos]
		u.pos++
		if c != 'N' { // no-op
			return c
		}
	}
	u.err = errShort
	return 0
}

func (u *ubj) take(n int) []byte {
	if n < 0 || n > len(u.data)-u.pos {
		u.err = errShort
		u.pos = len(u.data)
		return nil
	}
	b := u.data[u.pos : u.pos+n]
	u.pos += n
	return b
}

// integer reads an integer of type marker t.
func (u *ubj) integer(t byte) (int64, error) {
	switch t {
	case 'i':
		b := u.take(1)
		if b == nil {
			return 0, errShort
		}
		return int64(int8(b[0])), nil
	case 'U':
		b := u.take(1)
		if b == nil {
			return 0, errShort
		}
		return int64(b[0]), nil
	case 'I':
		b := u.take(2)
		if b == nil {
			return 0, errShort
		}
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case 'l':
		b := u.take(4)
		if b == nil {
			return 0, errShort
		}
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case 'L':
		b := u.take(8)
		if b == nil {
			return 0, errShort
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	return 0, fmt.Errorf("type %q is not an integer type", t)
}

// length reads a length or count and checks it is plausible for what is left.
func (u *ubj) length(minSize int) (int, error) {
	n, err := u.integer(u.next())
	if err != nil {
		return 0, err
	}
	if n < 0 || n > int64(len(u.data)-u.pos)/int64(max(minSize, 1)) {
		return 0, fmt.Errorf("length %d does not fit in the %d bytes left", n, len(u.data)-u.pos)
	}
	return int(n), nil
}

// size is the bytes one value of type t takes at least.
func size(t byte) int {
	switch t {
	case 'I':
		return 2
	case 'l', 'd':
		return 4
	case 'L', 'D':
		return 8
	case 'Z', 'T', 'F':
		return 0
	}
	return 1
}

func (u *ubj) value(t byte, depth int) error {
	if u.err != nil {
		return u.err
	}
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch t {
	case 'Z':
		u.out = append(u.out, "null"...)
	case 'T':
		u.out = append(u.out, "true"...)
	case 'F':
		u.out = append(u.out, "false"...)
	case 'i', 'U', 'I', 'l', 'L':
		n, err := u.integer(t)
		if err != nil {
			return err
		}
		u.out = strconv.AppendInt(u.out, n, 10)
	case 'd':
		b := u.take(4)
		if b == nil {
			return errShort
		}
		u.float(float64(math.Float32frombits(binary.BigEndian.Uint32(b))), 32)
	case 'D':
		b := u.take(8)
		if b == nil {
			return errShort
		}
		u.float(math.Float64frombits(binary.BigEndian.Uint64(b)), 64)
	case 'C':
		b := u.take(1)
		if b == nil {
			return errShort
		}
		u.out = appendJSONString(u.out, string(b))
	case 'S', 'H':
		n, err := u.length(1)
		if err != nil {
			return err
		}
		s := u.take(n)
		if t == 'H' {
			if _, err := strconv.ParseFloat(string(s), 64); err != nil {
				return fmt.Errorf("high-precision number %q: %w", s, err)
			}
			u.out = append(u.out, s...)
		} else {
			u.out = appendJSONString(u.out, string(s))
		}
	case '[':
		return u.container(false, depth)
	case '{':
		return u.container(true, depth)
	default:
		return fmt.Errorf("unknown type marker %q", t)
	}
	return u.err
}

// float writes f in JSON, with NaN as null and infinities as +-1e999, the
// forms the model reader takes for them.
func (u *ubj) float(f float64, bits int) {
	switch {
	case math.IsNaN(f):
		u.out = append(u.out, "null"...)
	case math.IsInf(f, 1):
		u.out = append(u.out, "1e999"...)
	case math.IsInf(f, -1):
		u.out = append(u.out, "-1e999"...)
	default:
		u.out = strconv.AppendFloat(u.out, f, 'g', -1, bits)
	}
}

// container reads an array or object, plain or with $type and #count.
func (u *ubj) container(object bool, depth int) error {
	open, close := byte('['), byte(']')
	if object {
		open, close = '{', '}'
	}
	u.out = append(u.out, open)
	var typ byte
	count := -1
	c := u.next()
	if c == '$' {
		typ = u.next()
		if c = u.next(); c != '#' {
			return errors.New("a typed container needs a count (#)")
		}
	}
	if c == '#' {
		n, err := u.length(max(size(typ), 1))
		if err != nil {
			return err
		}
		count = n
	}
	for i := 0; count < 0 || i < count; i++ {
		if count < 0 {
			if i > 0 {
				c = u.next()
			}
			if c == close {
				break
			}
			if u.err != nil {
				return u.err
			}
		}
		if i > 0 {
			u.out = append(u.out, ',')
		}
		if object {
			if count < 0 {
				u.pos-- // c was the key's length type
			}
			n, err := u.length(1)
			if err != nil {
				return err
			}
			u.out = appendJSONString(u.out, string(u.take(n)))
			u.out = append(u.out, ':')
		}
		vt := typ
		if vt == 0 {
			if count < 0 && !object {
				vt = c
			} else {
				vt = u.next()
			}
		}
		if err := u.value(vt, depth+1); err != nil {
			return err
		}
	}
	u.out = append(u.out, close)
	return u.err
}

// appendJSONString appends s quoted as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c >= 0x80:
			if c >= 0x80 {
				// Keep UTF-8 as is; encoding/json replaces invalid bytes.
				b = append(b, c)
				continue
			}
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
