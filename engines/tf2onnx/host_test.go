package tf2onnx

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// hostFuzzProgram translates a graph running every host string op on a
// string vector input "s" (and on each other), every result an output.
func hostFuzzProgram(tb testing.TB) *HostProgram {
	c := &converter{sig: "fuzz", g: &flatGraph{nodes: map[string]*node{}, alias: map[ref]ref{}}, vals: map[ref]*value{},
		unsup: map[string][]string{}, reason: map[string]string{}}
	c.g.nodes["s"] = &node{name: "s", op: "Placeholder"}
	c.vals[ref{"s", 0}] = &value{name: "s", dtype: tensor.String, rank: 1, port: &inPort{p: &Port{Key: "s", DType: tensor.String, Shape: []int64{-1}}}}
	konst := func(name string, t tensor.Tensor) {
		c.g.nodes[name] = &node{name: name, op: "Const"}
		c.vals[ref{name, 0}] = c.constValue(t)
	}
	konst("sep", tensor.FromStrings("", []int64{}, []string{","}))
	konst("pos", tensor.FromInt32("", []int64{}, []int32{-2}))
	konst("len", tensor.FromInt32("", []int64{}, []int32{3}))
	konst("axis", tensor.FromInt32("", []int64{1}, []int32{0}))
	s := func(v string) *attrpb.AttrValue { return &attrpb.AttrValue{Value: &attrpb.AttrValue_S{S: []byte(v)}} }
	i := func(v int64) *attrpb.AttrValue { return &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: v}} }
	ty := func(v typespb.DataType) *attrpb.AttrValue {
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: v}}
	}
	var outs []ref
	add := func(name, op string, attrs map[string]*attrpb.AttrValue, nout int, ins ...string) {
		n := &node{name: name, op: op, attr: attrs}
		for _, in := range ins {
			n.inputs = append(n.inputs, ref{in, 0})
		}
		c.g.nodes[name] = n
		opTable[op].translate(c, n)
		for k := range nout {
			outs = append(outs, ref{name, k})
		}
	}
	add("f32", "StringToNumber", map[string]*attrpb.AttrValue{"out_type": ty(typespb.DataType_DT_FLOAT)}, 1, "s")
	add("i32", "StringToNumber", map[string]*attrpb.AttrValue{"out_type": ty(typespb.DataType_DT_INT32)}, 1, "s")
	add("sub", "Substr", map[string]*attrpb.AttrValue{"unit": s("UTF8_CHAR")}, 1, "s", "pos", "len")
	add("subb", "Substr", nil, 1, "s", "pos", "len")
	add("re", "StaticRegexReplace", map[string]*attrpb.AttrValue{"pattern": s("(a|b)*"), "rewrite": s(`<\1\\>`)}, 1, "s")
	add("split", "StringSplitV2", map[string]*attrpb.AttrValue{"maxsplit": i(2)}, 3, "s", "sep")
	add("splitws", "StringSplitV2", nil, 3, "s", "sep")
	add("split1", "StringSplit", nil, 3, "s", "sep")
	add("join", "StringJoin", map[string]*attrpb.AttrValue{"N": i(3), "separator": s("|")}, 1, "s", "sub", "sep")
	add("rj", "ReduceJoin", map[string]*attrpb.AttrValue{"separator": s(" ")}, 1, "re", "axis")
	add("low", "StringUpper", nil, 1, "join")
	add("legacy", "StringToHashBucket", map[string]*attrpb.AttrValue{"num_buckets": i(10)}, 1, "low")
	add("num", "AsString", nil, 1, "i32")
	konst("empty", tensor.FromStrings("", []int64{}, []string{""}))
	add("ne", "NotEqual", nil, 1, "s", "empty")
	add("where", "Where", nil, 1, "ne")
	add("kept", "GatherNd", nil, 1, "s", "where")
	c.g.nodes["dense"] = &node{name: "dense", op: "SparseToDense", inputs: []ref{{"split", 0}, {"split", 2}, {"split", 1}, {"empty", 0}}}
	opTable["SparseToDense"].translate(c, c.g.nodes["dense"])
	outs = append(outs, ref{"dense", 0})
	for _, r := range outs {
		c.materialize(c.vals[r])
	}
	if c.fatal != nil || len(c.unsup) > 0 {
		tb.Fatalf("the fuzz graph does not translate: %v %v %v", c.fatal, c.unsup, c.reason)
	}
	return c.host
}

// FuzzHostStrings runs the host string stage's kernels (number parsing,
// substrings, regular expressions, splitting, joining, hashing) on
// arbitrary request strings: they answer or fail cleanly, never panic,
// and what they answer is well formed (split tokens rebuild the string).
func FuzzHostStrings(f *testing.F) {
	f.Add([]byte(" 12 "), []byte("a,b,,c"))
	f.Add([]byte("h\xc3\xa9llo"), []byte("0x1A"))
	f.Add([]byte("\xff\xfe"), []byte(""))
	prog := hostFuzzProgram(f)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if _, ok := parseTFFloat(a, 64); !ok {
			parseTFInt(a, 64)
		}
		for _, max := range []int64{-1, 0, 1, 3} {
			if toks := splitV2(a, b, max); len(b) > 0 && !bytes.Equal(bytes.Join(toks, b), a) {
				t.Fatalf("splitV2(%q, %q, %d) = %q does not rebuild it", a, b, max, toks)
			}
		}
		out, err := prog.Run(map[string]tensor.Tensor{"s": {Name: "s", DType: tensor.String, Shape: []int64{2}, Strings: [][]byte{a, b}}})
		if err != nil {
			return
		}
		want := len(prog.Outputs)
		for _, o := range prog.Outputs {
			if o.Rank < 0 || o.Padded {
				want++ // its shape beside it
			}
		}
		if len(out) != want {
			t.Fatalf("%d tensors for %d host outputs", len(out), len(prog.Outputs))
		}
		for _, o := range out {
			if err := o.Validate(); err != nil {
				t.Fatalf("%s: %v", o.Name, err)
			}
		}
	})
}

// TestHostStageFoldsConstants: a string op on constants is computed at
// translation, leaving no host step behind.
func TestHostStageFoldsConstants(t *testing.T) {
	o := newOpTest(t)
	o.konst("a", tensor.FromStrings("", []int64{2}, []string{"x", "y"}))
	o.konst("b", tensor.FromStrings("", []int64{}, []string{"z"}))
	n := o.apply("StringJoin", map[string]*attrpb.AttrValue{"separator": {Value: &attrpb.AttrValue_S{S: []byte("-")}}}, "a", "b")
	v := o.c.vals[ref{n.name, 0}]
	if v == nil || v.konst == nil || v.host != nil {
		t.Fatalf("StringJoin of constants: %+v, want a constant", v)
	}
	if got := v.konst.Strings; len(got) != 2 || string(got[0]) != "x-z" || string(got[1]) != "y-z" {
		t.Errorf("folded to %q", got)
	}
	if _, _, _, batch := o.c.hostInputs(); o.c.host != nil || !batch {
		t.Errorf("host stage left: %+v", o.c.host)
	}
}

// TestHostStageRefusals: what the host stage cannot compute is refused by
// name with its reason, never translated otherwise.
func TestHostStageRefusals(t *testing.T) {
	str := func(v string) *attrpb.AttrValue { return &attrpb.AttrValue{Value: &attrpb.AttrValue_S{S: []byte(v)}} }
	for _, tc := range []struct {
		op    string
		attr  map[string]*attrpb.AttrValue
		setup func(o *opTest) []string
		why   string
	}{
		{"AsString", nil, func(o *opTest) []string {
			o.feed("x", tensor.Float32, 1) // computed inside the model
			return []string{"x"}
		}, "reads a value computed inside the model"},
		{"StringToHashBucketFast", map[string]*attrpb.AttrValue{"num_buckets": {Value: &attrpb.AttrValue_I{I: 5}}}, func(o *opTest) []string {
			o.feed("s", tensor.String, 1)
			return []string{"s"}
		}, "reads a value computed inside the model"},
		{"StringLower", map[string]*attrpb.AttrValue{"encoding": str("utf-8")}, func(o *opTest) []string {
			o.c.g.nodes["p"] = &node{name: "p", op: "Placeholder"}
			o.c.vals[ref{"p", 0}] = &value{name: "p", dtype: tensor.String, rank: 1, port: &inPort{p: &Port{Key: "p", DType: tensor.String, Shape: []int64{-1}}}}
			return []string{"p"}
		}, "ICU"},
		{"Substr", nil, func(o *opTest) []string {
			o.c.g.nodes["p"] = &node{name: "p", op: "Placeholder"}
			o.c.vals[ref{"p", 0}] = &value{name: "p", dtype: tensor.String, rank: 1, port: &inPort{p: &Port{Key: "p", DType: tensor.String, Shape: []int64{-1}}}}
			o.feed("pos", tensor.Int32, 0)
			o.konst("len", tensor.FromInt32("", []int64{}, []int32{1}))
			return []string{"p", "pos", "len"}
		}, "pos and len must be constants"},
		{"StaticRegexReplace", map[string]*attrpb.AttrValue{"pattern": str("(a"), "rewrite": str("b")}, func(o *opTest) []string {
			o.c.g.nodes["p"] = &node{name: "p", op: "Placeholder"}
			o.c.vals[ref{"p", 0}] = &value{name: "p", dtype: tensor.String, rank: 1, port: &inPort{p: &Port{Key: "p", DType: tensor.String, Shape: []int64{-1}}}}
			return []string{"p"}
		}, "missing closing )"},
		{"StringLength", nil, func(o *opTest) []string {
			o.feed("s", tensor.String, 1)
			return []string{"s"}
		}, "the host stage does not run"},
	} {
		o := newOpTest(t)
		ins := tc.setup(o)
		n := &node{name: "n", op: tc.op, attr: tc.attr}
		for _, in := range ins {
			n.inputs = append(n.inputs, ref{in, 0})
		}
		o.c.g.nodes["n"] = n
		o.c.translate(n)
		if !slices.Equal(o.c.unsup[tc.op], []string{"n"}) || !strings.Contains(o.c.reason[tc.op], tc.why) {
			t.Errorf("%s: unsupported %v, reason %q; want it refused for %q", tc.op, o.c.unsup, o.c.reason[tc.op], tc.why)
		}
		if o.c.vals[ref{"n", 0}] != nil {
			t.Errorf("%s: refused node has an output", tc.op)
		}
	}
}
