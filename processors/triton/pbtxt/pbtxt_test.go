package pbtxt

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// dump renders a tree in one canonical line so tests compare structure.
func dump(m *Message) string {
	var b strings.Builder
	for i, f := range m.Fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.Name)
		if f.Value.Kind == Msg {
			b.WriteString("{" + dump(f.Value.Msg) + "}")
		} else {
			fmt.Fprintf(&b, "=%s:%q", f.Value.Kind, f.Value.Text)
		}
	}
	return b.String()
}

func TestParse(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"comments", "# only a comment\n  # another\n", ""},
		{"scalars", `name: "m" max_batch_size: 8 platform: 'onnxruntime_onnx'`, `name=string:"m" max_batch_size=number:"8" platform=string:"onnxruntime_onnx"`},
		{"enum and bool", "kind: KIND_CPU, zero_data: true;", `kind=identifier:"KIND_CPU" zero_data=identifier:"true"`},
		{"message colon optional", "a { b: 1 } c: { d: 2 } e < f: 3 >", `a{b=number:"1"} c{d=number:"2"} e{f=number:"3"}`},
		{"scalar list", "dims: [ -1, 16 ]", `dims=number:"-1" dims=number:"16"`},
		{"empty list", "dims: []", ""},
		{"message list", `input [ { name: "a" }, { name: "b" } ]`, `input{name=string:"a"} input{name=string:"b"}`},
		{"scalar list without colon", "dims [ 1 ]", "error"},
		{"message list colon", `input: [ { name: "a" }, { name: "b" } ]`, `input{name=string:"a"} input{name=string:"b"}`},
		{"numbers", "a: 0x1F b: 1.5e-3 c: -inf d: nan e: 2.0f f: 017 g: - 4", `a=number:"0x1F" b=number:"1.5e-3" c=number:"-inf" d=number:"nan" e=number:"2.0f" f=number:"017" g=number:"-4"`},
		{"string escapes", `s: "a\n\t\"\\\x41\101" 'b' "c"`, `s=string:"a\n\t\"\\AAbc"`},
		{"nested", "a { b { c { d: 1 } } }", `a{b{c{d=number:"1"}}}`},
		{"missing close", "a { b: 1", "error"},
		{"missing colon", "a 1", "error"},
		{"extension", "[ext.x]: 1", "error"},
		{"bad number", "a: 1x2", "error"},
		{"bad escape", `a: "\q"`, "error"},
		{"newline in string", "a: \"x\ny\"", "error"},
		{"stray close", "}", "error"},
		{"list trailing comma", "a: [1,]", "error"},
		{"minus word", "a: -foo", "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse([]byte(c.in))
			if c.want == "error" {
				if err == nil {
					t.Fatalf("parsed %q as %s; want an error", c.in, dump(m))
				}
				if !strings.HasPrefix(err.Error(), "line ") && !strings.Contains(err.Error(), "line ") {
					t.Errorf("error %q has no position", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(m); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	deep := strings.Repeat("a {", MaxDepth+1) + strings.Repeat("}", MaxDepth+1)
	if _, err := Parse([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("got %v, want a depth error", err)
	}
	ok := strings.Repeat("a {", MaxDepth) + strings.Repeat("}", MaxDepth)
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
}

func TestPositions(t *testing.T) {
	_, err := Parse([]byte("a: 1\nb {\n  c: ?\n}"))
	se, ok := err.(interface{ Error() string })
	if !ok || !strings.Contains(se.Error(), "line 3:6") {
		t.Fatalf("got %v, want an error at line 3:6", err)
	}
}

func TestConversions(t *testing.T) {
	m, err := Parse([]byte("i: -9223372036854775808 big: 9223372036854775808 u: 0xff f: 2.5f n: -nan t: True o: 1 s: \"x\" h: 0x10 inf: -inf"))
	if err != nil {
		t.Fatal(err)
	}
	v := func(n string) Value { return m.Get(n)[0] }
	if i, err := v("i").Int(64); err != nil || i != math.MinInt64 {
		t.Errorf("i = %d, %v", i, err)
	}
	if _, err := v("big").Int(64); err == nil {
		t.Errorf("big fits int64?")
	}
	if _, err := v("u").Int(8); err == nil {
		t.Errorf("0xff fits int8?")
	}
	if u, err := v("u").Uint(8); err != nil || u != 255 {
		t.Errorf("u = %d, %v", u, err)
	}
	if f, err := v("f").Float(); err != nil || f != 2.5 {
		t.Errorf("f = %v, %v", f, err)
	}
	if f, err := v("n").Float(); err != nil || !math.IsNaN(f) {
		t.Errorf("n = %v, %v", f, err)
	}
	if f, err := v("inf").Float(); err != nil || !math.IsInf(f, -1) {
		t.Errorf("inf = %v, %v", f, err)
	}
	if f, err := v("h").Float(); err != nil || f != 16 {
		t.Errorf("h = %v, %v", f, err)
	}
	if b, err := v("t").Bool(); err != nil || !b {
		t.Errorf("t = %v, %v", b, err)
	}
	if b, err := v("o").Bool(); err != nil || !b {
		t.Errorf("o = %v, %v", b, err)
	}
	if _, err := v("s").Int(32); err == nil {
		t.Errorf("string as int accepted")
	}
	if _, err := v("s").Bool(); err == nil {
		t.Errorf("string as bool accepted")
	}
}

// FuzzParse checks that no input panics or loops, and that a parsed tree's
// scalars convert without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: \"m\"\nmax_batch_size: 8\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n",
		"dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }",
		"instance_group [ { count: 2 kind: KIND_GPU gpus: [0] } ]",
		"a: 'x\\x41\\101' b: -inf c: 0x1f d < e: 1 >",
		"# comment\nversion_policy: { specific: { versions: [1, 3] } }",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		var walk func(*Message)
		walk = func(m *Message) {
			for _, fl := range m.Fields {
				if fl.Value.Kind == Msg {
					walk(fl.Value.Msg)
					continue
				}
				fl.Value.Int(64)
				fl.Value.Uint(64)
				fl.Value.Float()
				fl.Value.Bool()
			}
		}
		walk(m)
	})
}
