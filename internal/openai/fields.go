package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FieldError is a problem with one field of a request: the answer is 400
// with OpenAI's error object, whose param is Param. Msg names the field too,
// so the message alone says what to change.
type FieldError struct {
	Param string // the field's path: "temperature", "messages[2].content"
	Msg   string // the whole message, starting with the path
	Code  string // OpenAI's error code, "" for none
}

func (e *FieldError) Error() string { return e.Msg }

// fieldErr builds a *FieldError for path.
func fieldErr(path, format string, args ...any) *FieldError {
	return &FieldError{Param: path, Msg: path + ": " + fmt.Sprintf(format, args...)}
}

// object is one JSON object of a request, its fields taken one by one: what
// is left at the end is unknown and refused. A field whose value is null is
// absent, as OpenAI's clients and servers treat it.
type object struct {
	path string
	m    map[string]json.RawMessage
}

// parseObject decodes raw as a JSON object; path names it in errors ("" is
// the body).
func parseObject(path string, raw []byte) (*object, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		what := "the body"
		if path != "" {
			what = path
		}
		if err != nil && !isObject(raw) {
			return nil, &FieldError{Param: path, Msg: what + ": must be a JSON object, got " + jsonKind(raw)}
		}
		if err != nil {
			return nil, &FieldError{Param: path, Msg: what + ": is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
		}
		return nil, &FieldError{Param: path, Msg: what + ": must be a JSON object, got null"}
	}
	return &object{path: path, m: m}, nil
}

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// jsonKind names the JSON type of raw for an error message.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// name is the path of field k.
func (o *object) name(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

// take removes field k and returns its value; ok is false when it is
// absent or null.
func (o *object) take(k string) (json.RawMessage, bool) {
	v, ok := o.m[k]
	if !ok {
		return nil, false
	}
	delete(o.m, k)
	if isNull(v) {
		return nil, false
	}
	return v, true
}

func isNull(v []byte) bool { return string(bytes.TrimSpace(v)) == "null" }

// has says whether field k is present and not null, without taking it.
func (o *object) has(k string) bool {
	v, ok := o.m[k]
	return ok && !isNull(v)
}

func (o *object) float(k string, dst **float64) error {
	v, ok := o.take(k)
	if !ok {
		return nil
	}
	f, err := parseFloat(v)
	if err != nil {
		return fieldErr(o.name(k), "must be a number, got %s", jsonKind(v))
	}
	*dst = &f
	return nil
}

func parseFloat(v []byte) (float64, error) {
	if jsonKind(v) != "a number" { // json.Number also takes a quoted number
		return 0, fmt.Errorf("not a number")
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, err
	}
	return strconv.ParseFloat(string(n), 64)
}

// integer takes field k as an integer in [lo, hi]; a number with a zero
// fraction (5.0) is an integer, as OpenAI's servers accept it.
func (o *object) integer(k string, lo, hi int64, dst **int64) error {
	v, ok := o.take(k)
	if !ok {
		return nil
	}
	n, err := parseInt(v)
	if err != nil {
		return fieldErr(o.name(k), "must be an integer, got %s", describe(v))
	}
	if n < lo || n > hi {
		return fieldErr(o.name(k), "must be between %d and %d, got %d", lo, hi, n)
	}
	*dst = &n
	return nil
}

func parseInt(v []byte) (int64, error) {
	if jsonKind(v) != "a number" {
		return 0, fmt.Errorf("not a number")
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, err
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, fmt.Errorf("not an integer")
	}
	return int64(f), nil
}

// describe shows a scalar value as it was sent, or names its JSON type.
func describe(v []byte) string {
	v = bytes.TrimSpace(v)
	k := jsonKind(v)
	if k != "a number" && k != "a boolean" {
		return k
	}
	if len(v) > 40 {
		v = v[:40]
	}
	return string(v)
}

func (o *object) boolean(k string, dst *bool) error {
	v, ok := o.take(k)
	if !ok {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fieldErr(o.name(k), "must be true or false, got %s", describe(v))
	}
	return nil
}

func (o *object) str(k string, dst **string) error {
	v, ok := o.take(k)
	if !ok {
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return fieldErr(o.name(k), "must be a string, got %s", jsonKind(v))
	}
	*dst = &s
	return nil
}

// array takes field k as a JSON array of raw elements.
func (o *object) array(k string) ([]json.RawMessage, bool, error) {
	v, ok := o.take(k)
	if !ok {
		return nil, false, nil
	}
	var a []json.RawMessage
	if err := json.Unmarshal(v, &a); err != nil {
		return nil, false, fieldErr(o.name(k), "must be an array, got %s", jsonKind(v))
	}
	return a, true, nil
}

// any takes field k as a decoded JSON value (map[string]any, []any,
// string, float64, bool).
func (o *object) any(k string) (any, bool, error) {
	v, ok := o.take(k)
	if !ok {
		return nil, false, nil
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, false, fieldErr(o.name(k), "is not valid JSON: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return x, true, nil
}

// refuse fails when field k is present and not null.
func (o *object) refuse(k, why string) error {
	if _, ok := o.take(k); ok {
		return fieldErr(o.name(k), "%s", why)
	}
	return nil
}

// rest fails naming every field not taken.
func (o *object) rest(known []string) error {
	if len(o.m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = strconv.Quote(o.name(k))
	}
	what := "unknown field "
	if len(keys) > 1 {
		what = "unknown fields "
	}
	return &FieldError{Param: o.name(keys[0]), Code: "unknown_field",
		Msg: what + strings.Join(quoted, ", ") + "; accepted here: " + strings.Join(known, ", ")}
}
