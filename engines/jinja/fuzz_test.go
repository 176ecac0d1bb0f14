package jinja

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/require"
)

// fuzzVars is the context every fuzzed template renders with.
func fuzzVars(t *testing.T) map[string]any {
	return varsOf(t, chatVars)
}

// seedTemplates are the language cases and, when scripts/fetch-tokenizers.sh
// has run, the real chat templates.
func seedTemplates() []string {
	var out []string
	for _, c := range langCases {
		out = append(out, c.tmpl)
	}
	dir := require.TokenizerCache()
	for _, m := range []string{"llama3", "qwen3", "gemma3"} {
		if b, err := os.ReadFile(filepath.Join(dir, m, "tokenizer_config.json")); err == nil {
			if ct, err := ParseTokenizerConfigTemplate(b); err == nil {
				out = append(out, ct.Default)
			}
		}
	}
	return out
}

// FuzzTemplate parses and renders arbitrary templates: no panic, every
// failure an *Error with a kind, and the same output on a second render
// (a Template keeps no state between renders).
func FuzzTemplate(f *testing.F) {
	for _, s := range seedTemplates() {
		f.Add(s)
	}
	at := time.Date(2024, 3, 5, 9, 7, 3, 0, time.UTC)
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Parse(src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Kind == "" {
				t.Fatalf("parse error %#v is not a *Error with a kind", err)
			}
			return
		}
		vars := fuzzVars(t)
		out1, err1 := tmpl.render(vars, func() time.Time { return at })
		out2, err2 := tmpl.render(fuzzVars(t), func() time.Time { return at })
		if (err1 == nil) != (err2 == nil) || out1 != out2 {
			t.Fatalf("two renders differ: %q, %v and %q, %v", out1, err1, out2, err2)
		}
		if err1 != nil {
			var e *Error
			if !errors.As(err1, &e) || e.Kind == "" {
				t.Fatalf("render error %#v is not a *Error with a kind", err1)
			}
		}
	})
}

// FuzzDecodeJSON: DecodeJSON never panics, and what it accepts tojson
// writes back as JSON that decodes to the same value.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{chatVars, `[]`, `{"a": {"b": [1, 2.5, -0.0, 1e400, "x\u00e9"]}}`, `{"a": 1, "a": 2}`, `12345678901234567890`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeJSON(b)
		if err != nil {
			return
		}
		js, err := dumps(v, jsonOpts{itemSep: ", ", keySep: ": "})
		if err != nil {
			t.Fatalf("tojson of a decoded value: %v", err)
		}
		if strings.Contains(js, "Infinity") || strings.Contains(js, "NaN") {
			return // Python's json writes them; JSON (and DecodeJSON) has none
		}
		v2, err := DecodeJSON([]byte(js))
		if err != nil {
			t.Fatalf("tojson wrote %q, which does not decode: %v", js, err)
		}
		if !equal(v, v2) {
			t.Fatalf("round trip: %s -> %s", repr(v), repr(v2))
		}
	})
}

// FuzzTokenizerConfig: the tokenizer_config.json readers never panic.
func FuzzTokenizerConfig(f *testing.F) {
	for _, s := range []string{
		`{"chat_template": "{{ x }}", "bos_token": "<s>", "eos_token": {"content": "</s>", "lstrip": false}}`,
		`{"chat_template": [{"name": "default", "template": "a"}, {"name": "tool_use", "template": "b"}], "additional_special_tokens": ["<x>", {"content": "<y>"}]}`,
		`{"chat_template": null, "pad_token": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if ct, err := ParseTokenizerConfigTemplate(b); err == nil {
			if _, err := ct.Select("", true); err == nil {
				_ = ct.Names()
			}
		}
		_, _ = SpecialTokens(b)
	})
}
