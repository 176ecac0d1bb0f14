package jsonenc

import (
	"encoding/json"
	"math"
	"testing"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "tab\tnl\n\x00\x1f", "héllo 世界", "bad \xff utf8", "<&>"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q -> %s: %v", s, got, err)
		}
		var want string
		w, _ := json.Marshal(s)
		json.Unmarshal(w, &want)
		if back != want {
			t.Errorf("%q: decodes to %q, encoding/json's to %q", s, back, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("x\"\\\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(AppendString(nil, s), &back); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	for f, want := range map[float64]string{1.5: "1.5", 0.1: "0.1", math.NaN(): "null", math.Inf(-1): "null", 1e21: "1e+21"} {
		if got := string(AppendFloat(nil, f, 64)); got != want {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}
