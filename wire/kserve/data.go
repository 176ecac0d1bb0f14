package kserve

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/eas-server/eas-server/tensor"
)

// dataParser flattens a KServe "data" value (a JSON array, nested to any
// depth, or a single scalar) into a tensor's elements. The input has already
// been checked as JSON syntax by encoding/json, but the parser does not rely
// on that: any unexpected byte is an error.
type dataParser struct {
	raw   []byte
	pos   int
	dt    tensor.DType
	want  int64 // element count from the shape
	count int64
	data  []byte   // fixed-size elements
	strs  [][]byte // BYTES elements
	depth int
}

// maxDepth bounds array nesting so a body of '[' cannot exhaust the stack.
const maxDepth = 64

// parseData decodes raw into n elements of dt.
func parseData(raw []byte, dt tensor.DType, n int64) (tensor.Tensor, error) {
	p := &dataParser{raw: raw, dt: dt, want: n}
	// Preallocate for the expected count, bounded by what the text can hold
	// (every element takes at least 2 bytes: a digit and a separator).
	capHint := min(n, int64(len(raw)/2+1))
	if dt == tensor.String {
		p.strs = make([][]byte, 0, capHint)
	} else {
		p.data = make([]byte, 0, capHint*int64(dt.Size()))
	}
	p.skipSpace()
	if err := p.value(); err != nil {
		return tensor.Tensor{}, err
	}
	p.skipSpace()
	if p.pos != len(p.raw) {
		return tensor.Tensor{}, fmt.Errorf("unexpected %q after the data array", p.raw[p.pos])
	}
	if p.count != n {
		return tensor.Tensor{}, fmt.Errorf("shape needs %d elements, data holds %d", n, p.count)
	}
	if dt == tensor.String {
		return tensor.Tensor{DType: dt, Strings: p.strs}, nil
	}
	return tensor.Tensor{DType: dt, Data: p.data}, nil
}

func (p *dataParser) skipSpace() {
	for p.pos < len(p.raw) {
		switch p.raw[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *dataParser) value() error {
	if p.pos >= len(p.raw) {
		return fmt.Errorf("data ends early")
	}
	if p.raw[p.pos] == '[' {
		p.depth++
		if p.depth > maxDepth {
			return fmt.Errorf("data is nested deeper than %d arrays", maxDepth)
		}
		p.pos++
		p.skipSpace()
		if p.pos < len(p.raw) && p.raw[p.pos] == ']' {
			p.pos++
			p.depth--
			return nil
		}
		for {
			p.skipSpace()
			if err := p.value(); err != nil {
				return err
			}
			p.skipSpace()
			if p.pos >= len(p.raw) {
				return fmt.Errorf("data ends inside an array")
			}
			switch p.raw[p.pos] {
			case ',':
				p.pos++
			case ']':
				p.pos++
				p.depth--
				return nil
			default:
				return fmt.Errorf("unexpected %q in a data array at byte %d", p.raw[p.pos], p.pos)
			}
		}
	}
	if p.count >= p.want {
		return fmt.Errorf("data holds more than the %d elements the shape needs", p.want)
	}
	p.count++
	return p.leaf()
}

// leaf parses one element at p.pos.
func (p *dataParser) leaf() error {
	c := p.raw[p.pos]
	idx := p.count - 1
	switch p.dt {
	case tensor.String:
		if c != '"' {
			return fmt.Errorf("element %d: BYTES data must be JSON strings, got %s", idx, p.describe())
		}
		s, err := p.str()
		if err != nil {
			return fmt.Errorf("element %d: %w", idx, err)
		}
		p.strs = append(p.strs, s)
		return nil
	case tensor.Bool:
		switch {
		case hasPrefix(p.raw[p.pos:], "true"):
			p.data = append(p.data, 1)
			p.pos += 4
		case hasPrefix(p.raw[p.pos:], "false"):
			p.data = append(p.data, 0)
			p.pos += 5
		default:
			return fmt.Errorf("element %d: BOOL data must be true or false, got %s", idx, p.describe())
		}
		return nil
	}
	if c != '-' && (c < '0' || c > '9') {
		return fmt.Errorf("element %d: %s data must be numbers, got %s", idx, p.dt, p.describe())
	}
	start := p.pos
	for p.pos < len(p.raw) {
		c := p.raw[p.pos]
		if c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9') {
			p.pos++
			continue
		}
		break
	}
	// A zero-copy view: strconv does not keep tok, and error messages are
	// formatted at once, so nothing outlives p.raw's use here.
	tok := unsafe.String(&p.raw[start], p.pos-start)
	if !validNumber(tok) {
		return fmt.Errorf("element %d: %q is not a JSON number", idx, tok)
	}
	return p.appendNumber(idx, tok)
}

func (p *dataParser) appendNumber(idx int64, tok string) error {
	var b [8]byte
	size := p.dt.Size()
	switch p.dt {
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
		f, err := strconv.ParseFloat(tok, 32)
		if err != nil {
			return fmt.Errorf("element %d: %s does not fit %s", idx, tok, p.dt)
		}
		switch p.dt {
		case tensor.Float32:
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(float32(f)))
		case tensor.Float16:
			h := tensor.Float32ToFloat16(float32(f))
			if h&0x7fff == 0x7c00 {
				return fmt.Errorf("element %d: %s does not fit FP16 (max 65504)", idx, tok)
			}
			binary.LittleEndian.PutUint16(b[:], h)
		default:
			h := tensor.Float32ToBFloat16(float32(f))
			if h&0x7fff == 0x7f80 {
				return fmt.Errorf("element %d: %s does not fit BF16", idx, tok)
			}
			binary.LittleEndian.PutUint16(b[:], h)
		}
	case tensor.Float64:
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return fmt.Errorf("element %d: %s does not fit FP64", idx, tok)
		}
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(f))
	case tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64:
		v, err := strconv.ParseInt(tok, 10, size*8)
		if err != nil {
			return fmt.Errorf("element %d: %s is not an integer in the %s range", idx, tok, p.dt)
		}
		binary.LittleEndian.PutUint64(b[:], uint64(v))
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		v, err := strconv.ParseUint(tok, 10, size*8)
		if err != nil {
			return fmt.Errorf("element %d: %s is not an integer in the %s range", idx, tok, p.dt)
		}
		binary.LittleEndian.PutUint64(b[:], v)
	default:
		return fmt.Errorf("datatype %s cannot be sent as JSON data", p.dt)
	}
	p.data = append(p.data, b[:size]...)
	return nil
}

// str parses a JSON string at p.pos and returns its bytes.
func (p *dataParser) str() ([]byte, error) {
	start := p.pos
	p.pos++
	escaped := false
	for p.pos < len(p.raw) {
		switch p.raw[p.pos] {
		case '\\':
			escaped = true
			p.pos += 2
			continue
		case '"':
			p.pos++
			tok := p.raw[start:p.pos]
			if !escaped {
				return append([]byte(nil), tok[1:len(tok)-1]...), nil
			}
			var s string
			if err := json.Unmarshal(tok, &s); err != nil {
				return nil, fmt.Errorf("bad string %s: %w", tok, err)
			}
			return []byte(s), nil
		}
		p.pos++
	}
	return nil, fmt.Errorf("unterminated string")
}

// describe names the JSON value at p.pos for an error message.
func (p *dataParser) describe() string {
	switch c := p.raw[p.pos]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	default:
		return strconv.QuoteRune(rune(c))
	}
}

func hasPrefix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[:len(s)]) == s
}

// validNumber reports whether tok follows the JSON number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(tok string) bool {
	i := 0
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(tok) && tok[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(tok)
}

// appendData writes t's elements as a flat JSON array. NaN and infinities
// have no JSON spelling, so they are an error that points at binary output.
func appendData(b []byte, t *tensor.Tensor) ([]byte, error) {
	b = append(b, '[')
	if t.DType == tensor.String {
		for i, s := range t.Strings {
			if i > 0 {
				b = append(b, ',')
			}
			if !utf8.Valid(s) {
				return nil, fmt.Errorf("tensor %q element %d is not valid UTF-8, which a JSON string cannot carry; ask for binary output (request parameter \"binary_data_output\": true)", t.Name, i)
			}
			b = appendString(b, string(s))
		}
		return append(b, ']'), nil
	}
	size := t.DType.Size()
	n := len(t.Data) / size
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		e := t.Data[i*size:]
		switch t.DType {
		case tensor.Bool:
			b = strconv.AppendBool(b, e[0] != 0)
		case tensor.Uint8:
			b = strconv.AppendUint(b, uint64(e[0]), 10)
		case tensor.Uint16:
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint16(e)), 10)
		case tensor.Uint32:
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(e)), 10)
		case tensor.Uint64:
			b = strconv.AppendUint(b, binary.LittleEndian.Uint64(e), 10)
		case tensor.Int8:
			b = strconv.AppendInt(b, int64(int8(e[0])), 10)
		case tensor.Int16:
			b = strconv.AppendInt(b, int64(int16(binary.LittleEndian.Uint16(e))), 10)
		case tensor.Int32:
			b = strconv.AppendInt(b, int64(int32(binary.LittleEndian.Uint32(e))), 10)
		case tensor.Int64:
			b = strconv.AppendInt(b, int64(binary.LittleEndian.Uint64(e)), 10)
		case tensor.Float16, tensor.BFloat16, tensor.Float32:
			var f float32
			switch t.DType {
			case tensor.Float16:
				f = tensor.Float16ToFloat32(binary.LittleEndian.Uint16(e))
			case tensor.BFloat16:
				f = tensor.BFloat16ToFloat32(binary.LittleEndian.Uint16(e))
			default:
				f = math.Float32frombits(binary.LittleEndian.Uint32(e))
			}
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, nonFinite(t, i, float64(f))
			}
			b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
		case tensor.Float64:
			f := math.Float64frombits(binary.LittleEndian.Uint64(e))
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, nonFinite(t, i, f)
			}
			b = strconv.AppendFloat(b, f, 'g', -1, 64)
		default:
			return nil, fmt.Errorf("tensor %q: datatype %s cannot be written as JSON", t.Name, t.DType)
		}
	}
	return append(b, ']'), nil
}

func nonFinite(t *tensor.Tensor, i int, f float64) error {
	return fmt.Errorf("tensor %q element %d is %v, which JSON cannot carry; ask for binary output (request parameter \"binary_data_output\": true)", t.Name, i, f)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// binarySize is the byte length of t in the binary tensor extension.
func binarySize(t *tensor.Tensor) int {
	if t.DType != tensor.String {
		return len(t.Data)
	}
	n := 0
	for _, s := range t.Strings {
		n += 4 + len(s)
	}
	return n
}

// appendBinary appends t in the binary tensor extension's layout: raw
// little-endian elements, or for BYTES a 4-byte little-endian length before
// each element.
func appendBinary(b []byte, t *tensor.Tensor) []byte {
	if t.DType != tensor.String {
		return append(b, t.Data...)
	}
	for _, s := range t.Strings {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

// parseBinary reads n elements of dt from a binary section chunk.
func parseBinary(chunk []byte, dt tensor.DType, n int64) (tensor.Tensor, error) {
	if dt != tensor.String {
		size := int64(dt.Size())
		if int64(len(chunk)) != n*size {
			return tensor.Tensor{}, fmt.Errorf("binary_data_size is %d bytes but the shape needs %d (%d elements of %d bytes)", len(chunk), n*size, n, size)
		}
		t := tensor.Tensor{DType: dt, Data: chunk}
		if dt == tensor.Bool {
			for i, c := range chunk {
				if c > 1 {
					return tensor.Tensor{}, fmt.Errorf("BOOL element %d is byte %d; only 0 and 1 are allowed", i, c)
				}
			}
		}
		return t, nil
	}
	strs := make([][]byte, 0, min(n, int64(len(chunk)/4)))
	off := 0
	for off < len(chunk) {
		if int64(len(strs)) == n {
			return tensor.Tensor{}, fmt.Errorf("binary BYTES data holds more than the %d elements the shape needs (%d bytes left)", n, len(chunk)-off)
		}
		if len(chunk)-off < 4 {
			return tensor.Tensor{}, fmt.Errorf("binary BYTES element %d: %d bytes left, too few for its 4-byte length", len(strs), len(chunk)-off)
		}
		l := int(binary.LittleEndian.Uint32(chunk[off:]))
		off += 4
		if l > len(chunk)-off {
			return tensor.Tensor{}, fmt.Errorf("binary BYTES element %d: length %d exceeds the %d bytes left", len(strs), l, len(chunk)-off)
		}
		strs = append(strs, chunk[off:off+l:off+l])
		off += l
	}
	if int64(len(strs)) != n {
		return tensor.Tensor{}, fmt.Errorf("binary BYTES data holds %d elements, the shape needs %d", len(strs), n)
	}
	return tensor.Tensor{DType: dt, Strings: strs}, nil
}
