package tf2onnx

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/tf2onnx/internal/readme"
	"github.com/eas-server/eas-server/tensor"
)

// readmePath is the README whose ops section is generated from opTable.
var readmePath = filepath.Join("..", "..", "processors", "tensorflow", "README.md")

// TestOpsDoc fails when the README's list of translated ops and opTable
// disagree, naming the ops on either side only, and when the generated
// section is not exactly what go generate would write.
func TestOpsDoc(t *testing.T) {
	doc, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	section, err := readme.Section(doc)
	if err != nil {
		t.Fatalf("%s: %v", readmePath, err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([A-Za-z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		listed[m[1]] = true
	}
	for _, op := range slices.Sorted(maps.Keys(opTable)) {
		if !listed[op] {
			t.Errorf("op %s is translated but not listed in %s", op, readmePath)
		}
	}
	for _, op := range slices.Sorted(maps.Keys(listed)) {
		if _, ok := opTable[op]; !ok {
			t.Errorf("op %s is listed in %s but not translated", op, readmePath)
		}
	}
	if want := OpsMarkdown(); section != want {
		t.Errorf("the ops section of %s is out of date; run go generate ./engines/tf2onnx\n--- README\n%s--- generated\n%s", readmePath, section, want)
	}
}

// TestRefusedOpsNotTranslated: ops refused with a reason are not in the
// table, where the reason would never be given.
func TestRefusedOpsNotTranslated(t *testing.T) {
	for op := range unsupportedWhy {
		if _, ok := opTable[op]; ok {
			t.Errorf("%s has a translator and a refusal reason", op)
		}
	}
	for op := range statefulOps {
		if _, ok := opTable[op]; ok {
			t.Errorf("stateful op %s has a translator", op)
		}
	}
}

func TestSupportedOpsOrder(t *testing.T) {
	ops := SupportedOps()
	if len(ops) != len(opTable) {
		t.Fatalf("%d ops, table has %d", len(ops), len(opTable))
	}
	for i, op := range ops {
		if op.Group == "" {
			t.Errorf("%s has no group title", op.Name)
		}
		if i > 0 && ops[i-1].Group == op.Group && ops[i-1].Name >= op.Name {
			t.Errorf("%s listed after %s", op.Name, ops[i-1].Name)
		}
	}
}

// opTest drives one translator on its own: a converter over a graph of
// fed values, without a SavedModel or signature.
type opTest struct {
	t *testing.T
	c *converter
}

func newOpTest(t *testing.T) *opTest {
	return &opTest{t: t, c: &converter{
		sig:    "test",
		g:      &flatGraph{nodes: map[string]*node{}, alias: map[ref]ref{}},
		vals:   map[ref]*value{},
		unsup:  map[string][]string{},
		reason: map[string]string{},
	}}
}

// feed adds a graph input of the given dtype and rank (-1: unknown).
func (o *opTest) feed(name string, dt tensor.DType, rank int) {
	o.c.g.nodes[name] = &node{name: name, op: "Placeholder"}
	o.c.vals[ref{name, 0}] = &value{name: name, dtype: dt, rank: rank}
}

// konst adds a constant.
func (o *opTest) konst(name string, t tensor.Tensor) {
	o.c.g.nodes[name] = &node{name: name, op: "Const"}
	o.c.vals[ref{name, 0}] = o.c.constValue(t)
}

// apply runs the table's translator for op on a node reading inputs.
func (o *opTest) apply(op string, attr map[string]*attrpb.AttrValue, inputs ...string) *node {
	o.t.Helper()
	e, ok := opTable[op]
	if !ok {
		o.t.Fatalf("no translator for %s", op)
	}
	n := &node{name: "n", op: op, attr: attr}
	for _, in := range inputs {
		n.inputs = append(n.inputs, ref{in, 0})
	}
	o.c.g.nodes[n.name] = n
	e.translate(o.c, n)
	if o.c.fatal != nil {
		o.t.Fatalf("%s: %v", op, o.c.fatal)
	}
	return n
}

// out returns output i of n, failing when the translator did not set it.
func (o *opTest) out(n *node, i int) *value {
	o.t.Helper()
	v := o.c.vals[ref{n.name, i}]
	if v == nil {
		o.t.Fatalf("%s set no output %d (unsupported: %v)", n.op, i, o.c.reason)
	}
	return v
}

// ops lists the op types emitted so far.
func (o *opTest) ops() []string {
	var s []string
	for _, n := range o.c.Nodes {
		s = append(s, n.OpType)
	}
	return s
}

// check wraps what was emitted into a model with the fed values as inputs
// and outs as outputs, and checks its structure.
func (o *opTest) check(outs ...*value) {
	o.t.Helper()
	g := &onnxpb.GraphProto{Name: "test", Node: o.c.Nodes, Initializer: o.c.Inits}
	for _, name := range slices.Sorted(maps.Keys(o.c.g.nodes)) {
		if n := o.c.g.nodes[name]; n.op == "Placeholder" {
			v := o.c.vals[ref{name, 0}]
			g.Input = append(g.Input, onnxbuild.ValueInfo(name, v.dtype, nil))
		}
	}
	for _, v := range outs {
		g.Output = append(g.Output, onnxbuild.ValueInfo(v.name, v.dtype, nil))
	}
	if err := checkGraph(&onnxpb.ModelProto{Graph: g, OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: Opset}}}); err != nil {
		o.t.Error(err)
	}
}

func boolAttr(b bool) *attrpb.AttrValue { return &attrpb.AttrValue{Value: &attrpb.AttrValue_B{B: b}} }

func typeAttr(d typespb.DataType) *attrpb.AttrValue {
	return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: d}}
}

func attrOf(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.Attribute {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func TestTranslateMatMulTransposeB(t *testing.T) {
	o := newOpTest(t)
	o.feed("a", tensor.Float32, 2)
	o.feed("b", tensor.Float32, 2)
	n := o.apply("MatMul", map[string]*attrpb.AttrValue{"transpose_b": boolAttr(true)}, "a", "b")
	v := o.out(n, 0)
	if got := o.ops(); !slices.Equal(got, []string{"Transpose", "MatMul"}) {
		t.Fatalf("emitted %v", got)
	}
	tr, mm := o.c.Nodes[0], o.c.Nodes[1]
	if tr.Input[0] != "b" || !slices.Equal(attrOf(tr, "perm").GetInts(), []int64{1, 0}) {
		t.Errorf("transpose %v perm %v", tr.Input, attrOf(tr, "perm"))
	}
	if !slices.Equal(mm.Input, []string{"a", tr.Output[0]}) || v.name != mm.Output[0] {
		t.Errorf("matmul %v -> %v, value %q", mm.Input, mm.Output, v.name)
	}
	if v.dtype != tensor.Float32 || v.rank != 2 {
		t.Errorf("value %s rank %d", v.dtype, v.rank)
	}
	o.check(v)
}

func TestTranslateComparisonIsBool(t *testing.T) {
	for _, tc := range []struct{ op, onnx string }{{"Less", "Less"}, {"LessEqual", "LessOrEqual"}, {"LogicalAnd", "And"}} {
		o := newOpTest(t)
		o.feed("x", tensor.Float32, 3)
		o.feed("y", tensor.Float32, 1)
		v := o.out(o.apply(tc.op, nil, "x", "y"), 0)
		if got := o.ops(); !slices.Equal(got, []string{tc.onnx}) {
			t.Errorf("%s emitted %v", tc.op, got)
		}
		if v.dtype != tensor.Bool || v.rank != 3 {
			t.Errorf("%s: %s rank %d, want bool rank 3", tc.op, v.dtype, v.rank)
		}
		o.check(v)
	}
	o := newOpTest(t)
	o.feed("x", tensor.Float32, -1)
	v := o.out(o.apply("IsNan", nil, "x"), 0)
	if got := o.ops(); !slices.Equal(got, []string{"IsNaN"}) || v.dtype != tensor.Bool || v.rank != -1 {
		t.Errorf("IsNan emitted %v, value %s rank %d", got, v.dtype, v.rank)
	}
}

func TestTranslateShapeOutType(t *testing.T) {
	o := newOpTest(t)
	o.feed("x", tensor.Float32, 4)
	v := o.out(o.apply("Shape", nil, "x"), 0) // out_type defaults to int32
	if got := o.ops(); !slices.Equal(got, []string{"Shape", "Cast"}) {
		t.Fatalf("emitted %v", got)
	}
	if to := attrOf(o.c.Nodes[1], "to").GetI(); to != int64(onnxpb.TensorProto_INT32) {
		t.Errorf("cast to %d", to)
	}
	if v.dtype != tensor.Int32 || v.rank != 1 {
		t.Errorf("value %s rank %d", v.dtype, v.rank)
	}
	o.check(v)

	o = newOpTest(t)
	o.feed("x", tensor.Float32, 4)
	v = o.out(o.apply("Shape", map[string]*attrpb.AttrValue{"out_type": typeAttr(typespb.DataType_DT_INT64)}, "x"), 0)
	if got := o.ops(); !slices.Equal(got, []string{"Shape"}) || v.dtype != tensor.Int64 {
		t.Errorf("int64 Shape emitted %v, value %s", got, v.dtype)
	}
}

// TestTranslateReshapeFolds: a small constant reshaped by a constant shape
// stays a constant, with no node emitted.
func TestTranslateReshapeFolds(t *testing.T) {
	o := newOpTest(t)
	o.konst("x", tensor.FromFloat32("", []int64{6}, []float32{1, 2, 3, 4, 5, 6}))
	o.konst("s", onnxbuild.I64Tensor([]int64{-1, 3}, []int64{2}))
	v := o.out(o.apply("Reshape", nil, "x", "s"), 0)
	if len(o.c.Nodes) != 0 {
		t.Errorf("emitted %v", o.ops())
	}
	if v.konst == nil || !slices.Equal(v.konst.Shape, []int64{2, 3}) || v.rank != 2 {
		t.Fatalf("value %+v", v)
	}

	o = newOpTest(t)
	o.feed("x", tensor.Float32, -1)
	o.konst("s", onnxbuild.I64Tensor([]int64{-1, 3}, []int64{2}))
	v = o.out(o.apply("Reshape", nil, "x", "s"), 0)
	if got := o.ops(); !slices.Equal(got, []string{"Reshape"}) || v.konst != nil || v.rank != 2 {
		t.Errorf("emitted %v, value %+v", got, v)
	}
	o.check(v)
}

// TestTranslateRefusals: translators refuse what ONNX cannot express,
// with the reason, and set no output.
func TestTranslateRefusals(t *testing.T) {
	for _, tc := range []struct {
		op     string
		inputs []tensor.DType // fed, unknown rank
		why    string
	}{
		{"Transpose", []tensor.DType{tensor.Float32, tensor.Int32}, "non-constant permutation"},
		{"FloorMod", []tensor.DType{tensor.Float32, tensor.Float32}, "floating FloorMod"},
		{"FloorDiv", []tensor.DType{tensor.Int32, tensor.Int32}, "integer FloorDiv"},
		{"ArgMax", []tensor.DType{tensor.Float32, tensor.Int32}, "non-constant axis"},
		{"Placeholder", nil, `placeholder "n" is not an input of the signature`},
	} {
		o := newOpTest(t)
		var ins []string
		for i, dt := range tc.inputs {
			name := string(rune('a' + i))
			o.feed(name, dt, -1)
			ins = append(ins, name)
		}
		n := o.apply(tc.op, nil, ins...)
		if !slices.Equal(o.c.unsup[tc.op], []string{"n"}) || !strings.Contains(o.c.reason[tc.op], tc.why) {
			t.Errorf("%s: unsupported %v, reason %q; want it refused for %q", tc.op, o.c.unsup, o.c.reason[tc.op], tc.why)
		}
		if v := o.c.vals[ref{n.name, 0}]; v != nil {
			t.Errorf("%s: refused node has output %+v", tc.op, v)
		}
	}
}

// TestTranslateUnknownOp: ops outside the table are refused with their
// reason, internal ones as such.
func TestTranslateUnknownOp(t *testing.T) {
	for op, why := range map[string]string{"TRTEngineOp": unsupportedWhy["TRTEngineOp"], "_Retval": "an internal TensorFlow op", "DecodeJpeg": "not supported"} {
		o := newOpTest(t)
		n := &node{name: "n", op: op}
		o.c.translate(n)
		if !slices.Equal(o.c.unsup[op], []string{"n"}) || o.c.reason[op] != why {
			t.Errorf("%s: unsupported %v, reason %q; want %q", op, o.c.unsup, o.c.reason[op], why)
		}
	}
}

func TestTranslateUnpack(t *testing.T) {
	o := newOpTest(t)
	o.feed("x", tensor.Float32, 3)
	n := o.apply("Unpack", map[string]*attrpb.AttrValue{
		"num":  {Value: &attrpb.AttrValue_I{I: 3}},
		"axis": {Value: &attrpb.AttrValue_I{I: 1}},
	}, "x")
	var outs []*value
	for i := range 3 {
		v := o.out(n, i)
		if v.rank != 2 || v.dtype != tensor.Float32 {
			t.Errorf("output %d: %s rank %d", i, v.dtype, v.rank)
		}
		outs = append(outs, v)
	}
	if got := o.ops(); !slices.Equal(got, []string{"Split", "Squeeze", "Squeeze", "Squeeze"}) {
		t.Errorf("emitted %v", got)
	}
	if s := o.c.Nodes[0]; len(s.Output) != 3 || attrOf(s, "num_outputs").GetI() != 3 || attrOf(s, "axis").GetI() != 1 {
		t.Errorf("split %v %v", s.Output, s.Attribute)
	}
	o.check(outs...)
}
