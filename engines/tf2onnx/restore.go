package tf2onnx

import (
	"strings"

	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// functionRestoreKeys finds checkpoint keys the way a TF2 SavedModel's
// restore function assigns them: the saver's restore op is a call whose body
// runs RestoreV2 and AssignVariableOp(arg, RestoreV2:i), each arg being a
// VarHandleOp of the main graph passed in. This is what TensorFlow itself
// runs at load, so it holds even when variable names repeat.
func functionRestoreKeys(m *savedmodel.Model) map[string]string {
	out := map[string]string{}
	g := newFlatGraph(m.MetaGraph.GraphDef)
	var calls []*node
	for _, n := range g.nodes {
		if callOps[n.op] {
			calls = append(calls, n)
		}
	}
	restoreOp := strings.TrimPrefix(m.MetaGraph.GetSaverDef().GetRestoreOpName(), "^")
	restoreOp, _, _ = savedmodel.SplitInput(restoreOp)
	for _, call := range calls {
		fn := g.funcs[call.attr["f"].GetFunc().GetName()]
		if fn == nil || (call.name != restoreOp && !hasOp(fn.NodeDef, "RestoreV2")) {
			continue
		}
		before := len(g.nodes)
		if err := g.inline(call); err != nil || len(g.nodes) == before {
			continue
		}
		prefix := call.name + "/"
		for name, n := range g.nodes {
			if !strings.HasPrefix(name, prefix) || n.op != "AssignVariableOp" || len(n.inputs) < 2 {
				continue
			}
			h, err := g.resolve(n.inputs[0])
			if err != nil || !savedmodel.VariableOps[g.nodes[h.node].op] {
				continue
			}
			v, err := g.resolve(n.inputs[1])
			for hops := 0; err == nil && hops < 8 && g.nodes[v.node].op == "Identity" && len(g.nodes[v.node].inputs) > 0; hops++ {
				v, err = g.resolve(g.nodes[v.node].inputs[0])
			}
			if err != nil {
				continue
			}
			r := g.nodes[v.node]
			if r.op != "RestoreV2" || len(r.inputs) < 2 {
				continue
			}
			nr, err := g.resolve(r.inputs[1])
			if err != nil || g.nodes[nr.node].op != "Const" {
				continue
			}
			names, err := savedmodel.TensorFromProto(g.nodes[nr.node].attr["value"].GetTensor())
			if err != nil || names.DType != tensor.String || v.idx >= len(names.Strings) {
				continue
			}
			out[h.node] = string(names.Strings[v.idx])
		}
	}
	return out
}

func hasOp(nodes []*nodepb.NodeDef, op string) bool {
	for _, n := range nodes {
		if n.Op == op {
			return true
		}
	}
	return false
}
