package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// defineUsage is the help of -D, shared by create and modify.
const defineUsage = "override a key of the service.json before sending it: -D key=value, repeatable; dotted keys reach into objects " +
	"(-D metadata.instance=2 -D model_config.topk=3); the value is JSON when it parses as JSON (numbers, true, objects), else a string"

// applyDefines sets each "key=value" of defines in the service.json body:
// dotted keys name nested objects, made when missing; a value that parses
// as JSON is that value, anything else a string. A key below a string that
// holds a JSON object (EAS's string form of model_config) edits that
// object and keeps the string form.
func applyDefines(body []byte, defines []string) ([]byte, error) {
	if len(defines) == 0 {
		return body, nil
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, fmt.Errorf("-D: the service.json is not a JSON object, so keys cannot be set in it: %v", err)
	}
	for _, d := range defines {
		key, raw, ok := strings.Cut(d, "=")
		path := strings.Split(key, ".")
		if !ok || slices.Contains(path, "") {
			return nil, fmt.Errorf("-D %q: want key=value with a dotted key, e.g. -D metadata.instance=2 or -D model_config.topk=3", d)
		}
		if err := setPath(doc, path, 0, parseValue(raw)); err != nil {
			return nil, fmt.Errorf("-D %q: %w", d, err)
		}
	}
	return marshalPlain(doc)
}

// parseValue is raw as JSON when it parses, else raw as a string.
func parseValue(raw string) any {
	if !json.Valid([]byte(raw)) {
		return raw
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	return v
}

// setPath sets obj[path[i:]...] = v, making missing objects on the way;
// obj is what path[:i] names.
func setPath(obj map[string]any, path []string, i int, v any) error {
	k := path[i]
	if i == len(path)-1 {
		obj[k] = v
		return nil
	}
	at, rest := strings.Join(path[:i+1], "."), strings.Join(path[i+1:], ".")
	switch cur := obj[k].(type) {
	case nil:
		next := map[string]any{}
		obj[k] = next
		return setPath(next, path, i+1, v)
	case map[string]any:
		return setPath(cur, path, i+1, v)
	case string:
		// EAS's string form: a JSON object in a string.
		var inner map[string]any
		dec := json.NewDecoder(strings.NewReader(cur))
		dec.UseNumber()
		if dec.Decode(&inner) != nil || inner == nil {
			return fmt.Errorf("%s is the string %q, not an object: cannot set %s in it", at, cur, rest)
		}
		if err := setPath(inner, path, i+1, v); err != nil {
			return err
		}
		b, err := marshalPlain(inner)
		if err != nil {
			return err
		}
		obj[k] = string(bytes.TrimSpace(b))
		return nil
	default:
		return fmt.Errorf("%s is %s, not an object: cannot set %s in it", at, kindOf(cur), rest)
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// marshalPlain encodes v as JSON without escaping <, > and &.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
