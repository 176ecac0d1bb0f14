package unknownfields

import (
	"strings"
	"testing"
)

// TestUnknownKeys: distinct keys in order, a header capped at a name
// boundary and safe to send, and nothing collected under ignore.
func TestUnknownKeys(t *testing.T) {
	if m, err := Parse(""); err != nil || m != Warn {
		t.Errorf(`"" = %q, %v; want warn`, m, err)
	}
	if _, err := Parse("strict"); err == nil || !strings.Contains(err.Error(), "model_config.unknown_fields") {
		t.Errorf("strict: %v", err)
	}
	if u := NewKeys(Ignore); u != nil {
		t.Error("ignore collects")
	}
	var none *Keys
	none.Add("x")
	none.AddBytes([]byte("x"))
	if none.Header() != "" || none.Reject([]string{"x"}) != nil {
		t.Error("a nil collector reports keys")
	}

	u := NewKeys(Warn)
	u.Add("b")
	u.AddBytes([]byte("a\r\nX-Evil: 1"))
	u.Add("b")
	if h := u.Header(); h != "b,a??X-Evil: 1" {
		t.Errorf("header %q", h)
	}
	long := NewKeys(Warn)
	for i := range 100 {
		long.Add(strings.Repeat("k", 20) + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	h := long.Header()
	if len(h) > maxHeader || !strings.HasSuffix(h, ",...") {
		t.Errorf("long header: %d bytes %q", len(h), h)
	}
	if n := len(long.Names()); n != maxKeys {
		t.Errorf("collected %d keys, want the cap %d", n, maxKeys)
	}
}
