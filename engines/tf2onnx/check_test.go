package tf2onnx

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
)

// checkModel parses b as an ONNX ModelProto and checks the structure ONNX
// Runtime relies on: a graph importing the default opset, nodes in
// topological order (every input is a graph input, an initializer or the
// output of an earlier node), each value produced once, and every graph
// output produced; the same within Loop and If subgraphs, which may also
// read what their enclosing scopes define before the node.
func checkModel(b []byte) (*onnxpb.ModelProto, error) {
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, mp); err != nil {
		return nil, fmt.Errorf("not an ONNX model: %w", err)
	}
	return mp, checkGraph(mp)
}

func checkGraph(mp *onnxpb.ModelProto) error {
	g := mp.GetGraph()
	if g == nil {
		return errors.New("model has no graph")
	}
	opset := false
	for _, o := range mp.GetOpsetImport() {
		if o.GetDomain() == "" && o.GetVersion() == Opset {
			opset = true
		}
	}
	if !opset {
		return fmt.Errorf("model does not import the default opset %d", Opset)
	}
	if len(g.GetOutput()) == 0 {
		return errors.New("graph has no outputs")
	}
	return checkScope(g, map[string]string{})
}

// checkScope checks one graph, the main one or a Loop's or If's subgraph,
// whose nodes may also read the values outer defines (the enclosing
// scopes); a subgraph defines no name an enclosing scope does.
func checkScope(g *onnxpb.GraphProto, outer map[string]string) error {
	defined := maps.Clone(outer) // value -> what defines it
	define := func(name, by string) error {
		if name == "" {
			return fmt.Errorf("%s defines an unnamed value", by)
		}
		if prev, ok := defined[name]; ok {
			return fmt.Errorf("value %q is defined by %s and again by %s", name, prev, by)
		}
		defined[name] = by
		return nil
	}
	for _, in := range g.GetInput() {
		if err := define(in.GetName(), "graph input"); err != nil {
			return err
		}
	}
	for _, t := range g.GetInitializer() {
		if err := define(t.GetName(), "an initializer"); err != nil {
			return err
		}
	}
	for i, n := range g.GetNode() {
		if n.GetOpType() == "" {
			return fmt.Errorf("node %d (%q) has no op type", i, n.GetName())
		}
		for _, in := range n.GetInput() {
			if in == "" {
				continue // an omitted optional input
			}
			if _, ok := defined[in]; !ok {
				return fmt.Errorf("node %d (%s %q) reads %q, which no graph input, initializer or earlier node defines", i, n.GetOpType(), n.GetName(), in)
			}
		}
		for _, a := range n.GetAttribute() {
			if a.GetG() == nil {
				continue
			}
			if len(a.GetG().GetOutput()) == 0 {
				return fmt.Errorf("node %d (%s %q): subgraph %s has no outputs", i, n.GetOpType(), n.GetName(), a.GetName())
			}
			if err := checkScope(a.GetG(), defined); err != nil {
				return fmt.Errorf("node %d (%s %q) subgraph %s: %w", i, n.GetOpType(), n.GetName(), a.GetName(), err)
			}
		}
		for _, out := range n.GetOutput() {
			if err := define(out, fmt.Sprintf("node %d (%s %q)", i, n.GetOpType(), n.GetName())); err != nil {
				return err
			}
		}
	}
	for _, out := range g.GetOutput() {
		if _, ok := defined[out.GetName()]; !ok {
			return fmt.Errorf("graph output %q is not produced", out.GetName())
		}
	}
	return nil
}

// checkSignature checks ts.Model and that its ports are the model's inputs
// and outputs.
func checkSignature(ts *Signature) error {
	mp, err := checkModel(ts.Model)
	if err != nil {
		return err
	}
	ins := map[string]bool{}
	for _, in := range mp.Graph.Input {
		ins[in.GetName()] = true
	}
	for _, p := range ts.Inputs {
		names := []string{p.Key}
		switch p.Kind {
		case AnyRank:
			names = append(names, p.Key+ShapeSuffix)
		case Examples:
			names = names[:0] // its features come through the host stage
		}
		for _, name := range names {
			if !ins[name] {
				return fmt.Errorf("input port %q: the model has no input %q", p.Key, name)
			}
		}
	}
	if h := ts.Host; h != nil {
		for _, o := range h.Outputs {
			if !ins[o.Input] || (o.Rank < 0 || o.Padded) && !ins[o.Input+ShapeSuffix] {
				return fmt.Errorf("host output %q: the model has no such input", o.Input)
			}
			if o.Ref.Step < 0 || o.Ref.Step >= len(h.Steps) {
				return fmt.Errorf("host output %q: no step %d", o.Input, o.Ref.Step)
			}
		}
		for i, s := range h.Steps {
			for _, a := range s.Args {
				if a.Step >= i || a.Step < 0 || a.Out >= len(h.Steps[a.Step].outs) {
					return fmt.Errorf("host step %d (%s) reads step %d output %d", i, s.Op, a.Step, a.Out)
				}
			}
		}
	}
	outs := map[string]bool{}
	for _, out := range mp.Graph.Output {
		outs[out.GetName()] = true
	}
	for _, p := range ts.Outputs {
		if !outs[p.Value] {
			return fmt.Errorf("output port %q: the model has no output %q", p.Key, p.Value)
		}
		if p.Kind == AnyRank && !outs[p.Value+ShapeSuffix] {
			return fmt.Errorf("output port %q: the model has no output %q", p.Key, p.Value+ShapeSuffix)
		}
	}
	return nil
}

// TestCheckModelCatches: the checker the fuzzer relies on rejects what it
// should.
func TestCheckModelCatches(t *testing.T) {
	opset := []*onnxpb.OperatorSetIdProto{{Version: Opset}}
	in := []*onnxpb.ValueInfoProto{{Name: "x"}}
	out := []*onnxpb.ValueInfoProto{{Name: "y"}}
	node := func(op string, ins []string, outs ...string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: op, Input: ins, Output: outs}
	}
	sub := func(n *onnxpb.NodeProto, g *onnxpb.GraphProto) *onnxpb.NodeProto {
		n.Attribute = append(n.Attribute, &onnxpb.AttributeProto{Name: "then_branch", Type: onnxpb.AttributeProto_GRAPH, G: g})
		return n
	}
	for name, mp := range map[string]*onnxpb.ModelProto{
		"no graph":      {OpsetImport: opset},
		"no opset":      {Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{node("Relu", []string{"x"}, "y")}}},
		"undefined":     {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{node("Add", []string{"x", "z"}, "y")}}},
		"out of order":  {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{node("Relu", []string{"t"}, "y"), node("Relu", []string{"x"}, "t")}}},
		"defined twice": {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{node("Relu", []string{"x"}, "y"), node("Neg", []string{"x"}, "y")}}},
		"no producer":   {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{node("Relu", []string{"x"}, "t")}}},
		"no op type":    {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{node("", []string{"x"}, "y")}}},
		"subgraph reads an undefined value": {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{
			sub(node("If", []string{"x"}, "y"), &onnxpb.GraphProto{Output: []*onnxpb.ValueInfoProto{{Name: "r"}}, Node: []*onnxpb.NodeProto{node("Neg", []string{"z"}, "r")}})}}},
		"subgraph redefines an outer value": {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{
			sub(node("If", []string{"x"}, "y"), &onnxpb.GraphProto{Output: []*onnxpb.ValueInfoProto{{Name: "x"}}, Node: []*onnxpb.NodeProto{node("Neg", []string{"x"}, "x")}})}}},
		"subgraph reads its node's output": {OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out, Node: []*onnxpb.NodeProto{
			sub(node("If", []string{"x"}, "y"), &onnxpb.GraphProto{Output: []*onnxpb.ValueInfoProto{{Name: "r"}}, Node: []*onnxpb.NodeProto{node("Neg", []string{"y"}, "r")}})}}},
	} {
		b, err := proto.Marshal(mp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkModel(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good := &onnxpb.ModelProto{OpsetImport: opset, Graph: &onnxpb.GraphProto{Input: in, Output: out,
		Initializer: []*onnxpb.TensorProto{{Name: "w"}},
		Node: []*onnxpb.NodeProto{node("Relu", []string{"x"}, "t"),
			sub(node("If", []string{"x"}, "y"), &onnxpb.GraphProto{Output: []*onnxpb.ValueInfoProto{{Name: "r"}}, Node: []*onnxpb.NodeProto{node("Add", []string{"t", "w"}, "r")}})}}}
	b, _ := proto.Marshal(good)
	if _, err := checkModel(b); err != nil {
		t.Errorf("good model: %v", err)
	}
	if _, err := checkModel([]byte{0xff}); err == nil {
		t.Error("garbage accepted")
	}
}
