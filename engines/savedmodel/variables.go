package savedmodel

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// ObjectGraphKey is the bundle key under which TF2 checkpoints store their
// TrackableObjectGraph.
const ObjectGraphKey = "_CHECKPOINTABLE_OBJECT_GRAPH"

// VariableOps are the ops that hold a variable in a serving graph.
var VariableOps = map[string]bool{"VariableV2": true, "Variable": true, "VarHandleOp": true}

// VariableKeys maps every variable node of the serving graph (VariableV2 or
// VarHandleOp) to its checkpoint key. Keys come, in order of preference, from
// the saver's restore ops (TF1: Assign(var, RestoreV2:i)), from the TF2
// object graph (the SavedVariable named like the handle's shared_name, whose
// trackable node names the key), or from the variable's own name.
// Variables with no key in the bundle are left out.
func (m *Model) VariableKeys() (map[string]string, error) {
	keys := map[string]string{}
	if m.Variables == nil {
		return keys, nil
	}
	nodes := indexNodes(m.MetaGraph.GraphDef)
	for v, k := range restoreKeys(m.MetaGraph.GraphDef, nodes) {
		if m.Variables.Has(k) {
			keys[v] = k
		}
	}
	byName, err := m.objectGraphKeys()
	if err != nil {
		return nil, err
	}
	for _, n := range m.MetaGraph.GraphDef.Node {
		if !VariableOps[n.Op] || keys[n.Name] != "" {
			continue
		}
		shared := string(n.Attr["shared_name"].GetS())
		for _, cand := range []string{byName[shared], byName[n.Name], shared, n.Name} {
			if cand != "" && m.Variables.Has(cand) {
				keys[n.Name] = cand
				break
			}
		}
	}
	return keys, nil
}

// ReadVariable returns the value of the variable node name.
func (m *Model) ReadVariable(name string, keys map[string]string) (tensor.Tensor, error) {
	k, ok := keys[name]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("variable %q has no value in the checkpoint (variables/variables.index); was the model saved after initialising it?", name)
	}
	t, err := m.Variables.Read(k)
	if err != nil {
		return t, err
	}
	t.Name = name
	return t, nil
}

func indexNodes(g *graphpb.GraphDef) map[string]*nodepb.NodeDef {
	idx := make(map[string]*nodepb.NodeDef, len(g.GetNode()))
	for _, n := range g.GetNode() {
		idx[n.Name] = n
	}
	return idx
}

// SplitInput splits a graph input reference "node:3" into node and output
// index; "^node" (a control input) returns ctrl=true.
func SplitInput(in string) (node string, idx int, ctrl bool) {
	if strings.HasPrefix(in, "^") {
		return in[1:], 0, true
	}
	if i := strings.LastIndexByte(in, ':'); i >= 0 {
		if n, err := strconv.Atoi(in[i+1:]); err == nil {
			return in[:i], n, false
		}
	}
	return in, 0, false
}

// restoreKeys follows Assign / AssignVariableOp nodes whose value is an
// output of a RestoreV2 node in the main graph.
func restoreKeys(g *graphpb.GraphDef, nodes map[string]*nodepb.NodeDef) map[string]string {
	out := map[string]string{}
	for _, n := range g.GetNode() {
		if (n.Op != "Assign" && n.Op != "AssignVariableOp") || len(n.Input) < 2 {
			continue
		}
		vname, _, _ := SplitInput(n.Input[0])
		src, idx, _ := SplitInput(n.Input[1])
		for hops := 0; hops < 8; hops++ {
			s := nodes[src]
			if s == nil || s.Op != "Identity" || len(s.Input) == 0 {
				break
			}
			src, idx, _ = SplitInput(s.Input[0])
		}
		r := nodes[src]
		if r == nil || (r.Op != "RestoreV2" && r.Op != "Restore") || len(r.Input) < 2 {
			continue
		}
		namesNode, _, _ := SplitInput(r.Input[1])
		c := nodes[namesNode]
		if c == nil || c.Op != "Const" {
			continue
		}
		names := c.Attr["value"].GetTensor().GetStringVal()
		if r.Op == "Restore" {
			out[vname] = string(c.Attr["value"].GetTensor().GetStringVal()[0])
			continue
		}
		if idx >= 0 && idx < len(names) {
			out[vname] = string(names[idx])
		}
	}
	return out
}

// objectGraphKeys maps TF2 variable names (SavedVariable.name) to checkpoint
// keys through the object graph stored in the bundle: the SavedObjectGraph
// of the MetaGraph and the checkpoint's TrackableObjectGraph number their
// nodes alike.
func (m *Model) objectGraphKeys() (map[string]string, error) {
	out := map[string]string{}
	og := m.MetaGraph.GetObjectGraphDef()
	if og == nil || !m.Variables.Has(ObjectGraphKey) {
		return out, nil
	}
	t, err := m.Variables.Read(ObjectGraphKey)
	if err != nil {
		return nil, err
	}
	if len(t.Strings) != 1 {
		return nil, corrupt("%s holds %d strings, want 1", ObjectGraphKey, len(t.Strings))
	}
	var tg corepb.TrackableObjectGraph
	if err := proto.Unmarshal(t.Strings[0], &tg); err != nil {
		return nil, corrupt("%s: %v", ObjectGraphKey, err)
	}
	seen := map[string]int{}
	for i, n := range og.Nodes {
		v := n.GetVariable()
		if v == nil || i >= len(tg.Nodes) {
			continue
		}
		for _, a := range tg.Nodes[i].Attributes {
			if a.Name == "VARIABLE_VALUE" && a.CheckpointKey != "" {
				seen[v.Name]++
				out[v.Name] = a.CheckpointKey
			}
		}
	}
	for name, n := range seen {
		if n > 1 {
			delete(out, name) // ambiguous: fall back to other evidence
		}
	}
	return out, nil
}
