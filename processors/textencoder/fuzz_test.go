package textencoder

import (
	"testing"

	"github.com/eas-server/eas-server/processors"
)

// FuzzParseRequest: any body gives texts in one of the three forms, or a
// BadInput saying what to send; never a panic.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"text": "a"}`, `{"texts": ["a", ""]}`, `{"input": "x", "model": "m"}`, `{"input": ["a"], "encoding_format": "float"}`,
		`{"input": [[1, 2]]}`, `{"text": ["a"]}`, `{"texts": "a"}`, `{}`, `[]`, `null`, `{"text": "a", "texts": ["b"]}`, `{"text": null}`, `{"encoding_format": "base64", "input": "a"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		texts, fm, err := parseRequest([]byte(body))
		if err != nil {
			if _, ok := err.(*processors.BadInput); !ok {
				t.Fatalf("%q: %T %v, want a BadInput", body, err, err)
			}
			return
		}
		switch {
		case len(texts) == 0 || len(texts) > maxTexts:
			t.Fatalf("%q: %d texts", body, len(texts))
		case fm == formText && len(texts) != 1:
			t.Fatalf("%q: text form with %d texts", body, len(texts))
		case fm != formText && fm != formTexts && fm != formInput:
			t.Fatalf("%q: form %d", body, fm)
		}
	})
}
