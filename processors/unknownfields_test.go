package processors

import (
	"strings"
	"testing"
)

// TestUnknownKeys: distinct keys in order, a header capped at a name
// boundary and safe to send, and nothing collected under ignore.
func TestUnknownKeys(t *testing.T) {
	if m, err := ParseUnknownFields(""); err != nil || m != UnknownWarn {
		t.Errorf(`"" = %q, %v; want warn`, m, err)
	}
	if _, err := ParseUnknownFields("strict"); err == nil || !strings.Contains(err.Error(), "model_config.unknown_fields") {
		t.Errorf("strict: %v", err)
	}
	if u := NewUnknownKeys(UnknownIgnore); u != nil {
		t.Error("ignore collects")
	}
	var none *UnknownKeys
	none.Add("x")
	none.AddBytes([]byte("x"))
	if none.Header() != "" || none.Reject([]string{"x"}) != nil {
		t.Error("a nil collector reports keys")
	}

	u := NewUnknownKeys(UnknownWarn)
	u.Add("b")
	u.AddBytes([]byte("a\r\nX-Evil: 1"))
	u.Add("b")
	if h := u.Header(); h != "b,a??X-Evil: 1" {
		t.Errorf("header %q", h)
	}
	long := NewUnknownKeys(UnknownWarn)
	for i := range 100 {
		long.Add(strings.Repeat("k", 20) + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	h := long.Header()
	if len(h) > maxUnknownHeader || !strings.HasSuffix(h, ",...") {
		t.Errorf("long header: %d bytes %q", len(h), h)
	}
	if n := len(long.Names()); n != maxUnknownKeys {
		t.Errorf("collected %d keys, want the cap %d", n, maxUnknownKeys)
	}
}
