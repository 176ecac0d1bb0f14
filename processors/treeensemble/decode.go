package treeensemble

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/eas-server/eas-server/processors/unknownfields"
)

// maxValues bounds the feature values of one request (records times the
// model's features): a record of "{}" is two bytes of body but a row of
// every feature in memory.
const maxValues = 1 << 25

// recordLimit is the most records of nf features one request may hold.
func recordLimit(nf int) int { return maxValues / max(nf, 1) }

// decodeRecords reads an EAS JSON body into rows of nf values (NaN =
// missing): an array of record objects, one record object, or the dense
// form {"columns": [...], "data": [[...], ...]}. Keys the model does not
// read are ignored, as EAS does. It is a small hand-written scanner:
// records are flat, and scoring a record must not cost a map per record.
//
// names[i] is feature i's name and index its inverse. Records of one
// request almost always list their keys in one order, so the decoder
// remembers which feature each key position held and checks that name
// before it hashes the key.
func decodeRecords(body []byte, names []string, index map[string]int) ([]float64, int, error) {
	return decodeRecordsNoting(body, names, index, nil)
}

// decodeRecordsNoting is decodeRecords that also notes, in unknown (nil:
// not at all), the record keys and dense columns that are not features.
func decodeRecordsNoting(body []byte, names []string, index map[string]int, unknown *unknownfields.Keys) ([]float64, int, error) {
	nf := len(names)
	d := &dec{b: body, names: names, order: make([]int, 0, nf), unknown: unknown}
	d.ws()
	if d.pos >= len(d.b) {
		return nil, 0, errors.New("empty body")
	}
	var rows []float64
	n := 0
	switch d.b[d.pos] {
	case '[':
		d.pos++
		d.ws()
		if d.peek() == ']' {
			d.pos++
			break
		}
		for {
			if n >= recordLimit(nf) {
				return nil, 0, fmt.Errorf("more than %d records of %d features in one request; split it", recordLimit(nf), nf)
			}
			d.ws()
			if d.peek() != '{' {
				return nil, 0, fmt.Errorf("record %d: %s", n, d.want("a JSON object"))
			}
			rows = grow(rows, nf)
			if err := d.record(rows[n*nf:(n+1)*nf], index); err != nil {
				return nil, 0, fmt.Errorf("record %d: %w", n, err)
			}
			n++
			d.ws()
			c := d.peek()
			d.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				d.pos--
				return nil, 0, errors.New(d.want("',' or ']' after a record"))
			}
		}
	case '{':
		if dense, err := d.dense(index, nf); dense != nil || err != nil {
			if err != nil {
				return nil, 0, err
			}
			return dense, len(dense) / nf, nil
		}
		rows = grow(rows, nf)
		if err := d.record(rows[:nf], index); err != nil {
			return nil, 0, fmt.Errorf("record 0: %w", err)
		}
		n = 1
	default:
		return nil, 0, errors.New(d.want("a JSON array of records or one record object"))
	}
	d.ws()
	if d.pos != len(d.b) {
		return nil, 0, errors.New(d.want("the end of the body"))
	}
	return rows[:n*nf], n, nil
}

// grow extends rows by one record of nf NaNs.
func grow(rows []float64, nf int) []float64 {
	for range nf {
		rows = append(rows, math.NaN())
	}
	return rows
}

type dec struct {
	b     []byte
	pos   int
	names []string
	order []int // per key position of the last record: its feature, or -1
	// unknown collects the keys that are not features; nil: ignore them.
	unknown *unknownfields.Keys
}

func (d *dec) ws() {
	for d.pos < len(d.b) {
		switch d.b[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *dec) peek() byte {
	if d.pos < len(d.b) {
		return d.b[d.pos]
	}
	return 0
}

// want describes what was expected and what was found at the current byte.
func (d *dec) want(what string) string {
	if d.pos >= len(d.b) {
		return "expected " + what + ", got the end of the body"
	}
	end := min(d.pos+16, len(d.b))
	return fmt.Sprintf("expected %s at byte %d, got %q", what, d.pos, d.b[d.pos:end])
}

// record reads one {"name": value, ...} into row.
func (d *dec) record(row []float64, index map[string]int) error {
	d.pos++ // '{'
	d.ws()
	if d.peek() == '}' {
		d.pos++
		return nil
	}
	for at := 0; ; at++ {
		d.ws()
		key, err := d.str()
		if err != nil {
			return err
		}
		d.ws()
		if d.peek() != ':' {
			return errors.New(d.want("':' after a key"))
		}
		d.pos++
		d.ws()
		j, known := -1, false
		if at < len(d.order) && d.order[at] >= 0 && d.names[d.order[at]] == string(key) {
			j, known = d.order[at], true
		} else {
			j, known = index[string(key)]
			o := j
			if !known {
				o = -1
			}
			if at < len(d.order) {
				d.order[at] = o
			} else {
				d.order = append(d.order, o)
			}
		}
		v, err := d.scalar()
		if err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		if known {
			row[j] = v
		} else {
			d.unknown.AddBytes(key)
		}
		d.ws()
		c := d.peek()
		d.pos++
		if c == '}' {
			return nil
		}
		if c != ',' {
			d.pos--
			return errors.New(d.want("',' or '}' in a record"))
		}
	}
}

// str reads a JSON string and returns its value (escapes decoded).
func (d *dec) str() ([]byte, error) {
	if d.peek() != '"' {
		return nil, errors.New(d.want("a string"))
	}
	d.pos++
	start := d.pos
	end := bytes.IndexByte(d.b[start:], '"')
	if end < 0 {
		return nil, errors.New("unterminated string")
	}
	s := d.b[start : start+end]
	for _, c := range s {
		if c == '\\' || c < 0x20 {
			return d.escaped(start)
		}
	}
	d.pos = start + end + 1
	return s, nil
}

// escaped finishes a string that has escapes, from its first byte at start.
func (d *dec) escaped(start int) ([]byte, error) {
	out := append([]byte(nil), d.b[start:d.pos]...)
	for d.pos < len(d.b) {
		c := d.b[d.pos]
		switch {
		case c == '"':
			d.pos++
			return out, nil
		case c < 0x20:
			return nil, fmt.Errorf("control character %#x in a string at byte %d", c, d.pos)
		case c != '\\':
			out = append(out, c)
			d.pos++
			continue
		}
		if d.pos+1 >= len(d.b) {
			break
		}
		e := d.b[d.pos+1]
		d.pos += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if d.pos+4 > len(d.b) {
				return nil, errors.New("short \\u escape")
			}
			r, err := strconv.ParseUint(string(d.b[d.pos:d.pos+4]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("bad \\u escape %q", d.b[d.pos:d.pos+4])
			}
			d.pos += 4
			ru := rune(r)
			if ru >= 0xd800 && ru < 0xdc00 && d.pos+6 <= len(d.b) && d.b[d.pos] == '\\' && d.b[d.pos+1] == 'u' {
				if lo, err := strconv.ParseUint(string(d.b[d.pos+2:d.pos+6]), 16, 32); err == nil && lo >= 0xdc00 && lo < 0xe000 {
					ru = (ru-0xd800)<<10 | (rune(lo) - 0xdc00) + 0x10000
					d.pos += 6
				}
			}
			out = utf8.AppendRune(out, ru)
		default:
			return nil, fmt.Errorf("bad escape \\%c", e)
		}
	}
	return nil, errors.New("unterminated string")
}

// scalar reads a number, a numeric string, true/false (1/0) or null (NaN).
func (d *dec) scalar() (float64, error) {
	switch c := d.peek(); {
	case c == 'n':
		return math.NaN(), d.lit("null")
	case c == 't':
		return 1, d.lit("true")
	case c == 'f':
		return 0, d.lit("false")
	case c == '"':
		s, err := d.str()
		if err != nil {
			return 0, err
		}
		if len(s) == 0 {
			return math.NaN(), nil
		}
		v, err := strconv.ParseFloat(string(s), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		return v, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.pos
		for d.pos < len(d.b) {
			c := d.b[d.pos]
			if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
				d.pos++
				continue
			}
			break
		}
		v, err := strconv.ParseFloat(string(d.b[start:d.pos]), 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q", d.b[start:d.pos])
		}
		return v, nil
	case c == '{' || c == '[':
		return 0, errors.New("objects and arrays are not feature values; send a number or null")
	}
	return 0, errors.New(d.want("a number, a numeric string or null"))
}

func (d *dec) lit(s string) error {
	if len(d.b)-d.pos < len(s) || string(d.b[d.pos:d.pos+len(s)]) != s {
		return errors.New(d.want(s))
	}
	d.pos += len(s)
	return nil
}

// dense reads {"columns": [...], "data": [[...], ...]} when the object is
// that form; it returns nil, nil (and rewinds) when the object is a record.
func (d *dec) dense(index map[string]int, nf int) ([]float64, error) {
	save := d.pos
	d.pos++
	d.ws()
	if _, isRecord := index["data"]; isRecord {
		d.pos = save
		return nil, nil
	}
	var cols []int // column position -> feature index (-1 = ignored)
	haveCols := false
	var data []float64
	haveData := false
	for {
		d.ws()
		key, err := d.str()
		if err != nil {
			d.pos = save
			return nil, nil
		}
		k := string(key)
		if k != "columns" && k != "data" {
			d.pos = save
			return nil, nil
		}
		d.ws()
		if d.peek() != ':' {
			return nil, errors.New(d.want("':'"))
		}
		d.pos++
		d.ws()
		if k == "columns" {
			if haveData {
				return nil, errors.New(`put "columns" before "data"`)
			}
			if cols, err = d.columns(index); err != nil {
				return nil, fmt.Errorf("columns: %w", err)
			}
			haveCols = true
		} else {
			if haveCols {
				data, err = d.matrix(cols, nf)
			} else {
				data, err = d.matrix(nil, nf)
			}
			if err != nil {
				return nil, fmt.Errorf("data: %w", err)
			}
			haveData = true
		}
		d.ws()
		c := d.peek()
		d.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			d.pos--
			return nil, errors.New(d.want("',' or '}'"))
		}
	}
	if !haveData {
		return nil, errors.New(`dense form without "data"`)
	}
	if haveCols && data == nil {
		return []float64{}, nil
	}
	return data, nil
}

// columns reads the column names and maps each to a feature index.
func (d *dec) columns(index map[string]int) ([]int, error) {
	if d.peek() != '[' {
		return nil, errors.New(d.want("an array of names"))
	}
	d.pos++
	var cols []int
	d.ws()
	if d.peek() == ']' {
		d.pos++
		return cols, nil
	}
	for {
		d.ws()
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		j, ok := index[string(s)]
		if !ok {
			j = -1
			d.unknown.AddBytes(s)
		}
		cols = append(cols, j)
		d.ws()
		c := d.peek()
		d.pos++
		if c == ']' {
			return cols, nil
		}
		if c != ',' {
			d.pos--
			return nil, errors.New(d.want("',' or ']'"))
		}
	}
}

// matrix reads [[v, ...], ...]; with cols nil the rows are in model order.
func (d *dec) matrix(cols []int, nf int) ([]float64, error) {
	if d.peek() != '[' {
		return nil, errors.New(d.want("an array of rows"))
	}
	d.pos++
	var rows []float64
	d.ws()
	if d.peek() == ']' {
		d.pos++
		return []float64{}, nil
	}
	width := nf
	if cols != nil {
		width = len(cols)
	}
	for n := 0; ; n++ {
		if n >= recordLimit(nf) {
			return nil, fmt.Errorf("more than %d rows of %d features in one request; split it", recordLimit(nf), nf)
		}
		d.ws()
		if d.peek() != '[' {
			return nil, fmt.Errorf("row %d: %s", n, d.want("an array"))
		}
		d.pos++
		rows = grow(rows, nf)
		row := rows[n*nf:]
		for k := 0; ; k++ {
			d.ws()
			if k == 0 && d.peek() == ']' {
				if width != 0 {
					return nil, fmt.Errorf("row %d is empty, want %d values", n, width)
				}
				d.pos++
				break
			}
			if k >= width {
				return nil, fmt.Errorf("row %d has more than %d values", n, width)
			}
			v, err := d.scalar()
			if err != nil {
				return nil, fmt.Errorf("row %d, value %d: %w", n, k, err)
			}
			j := k
			if cols != nil {
				j = cols[k]
			}
			if j >= 0 {
				row[j] = v
			}
			d.ws()
			c := d.peek()
			d.pos++
			if c == ']' {
				if k+1 != width {
					return nil, fmt.Errorf("row %d has %d values, want %d", n, k+1, width)
				}
				break
			}
			if c != ',' {
				d.pos--
				return nil, errors.New(d.want("',' or ']'"))
			}
		}
		d.ws()
		c := d.peek()
		d.pos++
		if c == ']' {
			return rows, nil
		}
		if c != ',' {
			d.pos--
			return nil, errors.New(d.want("',' or ']'"))
		}
	}
}
