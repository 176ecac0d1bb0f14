package tf2onnx

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/tensor"
)

// TF1 while loops (tf.compat.v1.while_loop without control flow v2) are
// frames in the graph itself: each loop variable enters through Enter,
// Merge joins it with the NextIteration of the body's value, Switch on the
// LoopCond sends it to Exit (done) or, through its output 1, to the body;
// tensors the loop only reads enter through Enter nodes of the frame too.
// A frame becomes an ONNX Loop when one of its Exits is needed: the
// condition is translated once in the enclosing scope with the Merges
// bound to the initial values (the Loop's first condition), and twice in
// the body subgraph: the body with the Merges bound to the subgraph's
// inputs, then the condition again with the Merges bound to the body's
// values. TF1 conds (Switch and Merge outside a frame) stay refused.

func init() {
	opTable["Exit"] = opEntry{(*converter).translateExit, groupControl, "TF1 while loops, as Loop"}
	// Exit translates its whole frame; the walk does not enter it.
	stopsWalk["Exit"] = true
}

// loopV1 is one TF1 loop frame.
type loopV1 struct {
	frame    string
	cond     ref     // LoopCond's input
	switches []*node // one per loop variable, sorted by name
	merges   []*node
	enters   []*node // the loop variables' Enters
	nexts    []ref   // the NextIterations' inputs
	exits    [][]*node
	consts   []*node // the frame's other Enters: tensors read, not changed
}

// frameOf finds the loop frame of the Exit n; why says what is malformed
// when it is not a frame the translation understands.
func (c *converter) frameOf(n *node) (*loopV1, string) {
	node1 := func(r ref, ops ...string) (*node, ref) {
		rr, err := c.g.resolve(r)
		if err != nil {
			return nil, rr
		}
		d := c.g.nodes[rr.node]
		if d == nil || !slices.Contains(ops, d.op) {
			return nil, rr
		}
		return d, rr
	}
	if len(n.inputs) != 1 {
		return nil, "an Exit with other than one input"
	}
	sw, r := node1(n.inputs[0], "Switch", "RefSwitch")
	if sw == nil || r.idx != 0 || len(sw.inputs) != 2 {
		return nil, "an Exit that does not read a Switch's output 0"
	}
	lc, _ := node1(sw.inputs[1], "LoopCond")
	if lc == nil || len(lc.inputs) != 1 {
		return nil, "a loop whose Switch does not read a LoopCond"
	}
	l := &loopV1{cond: lc.inputs[0]}
	// Every node reading the LoopCond is a loop variable's Switch; every
	// Exit reading one of them is an output.
	// (Candidates first: resolving may inline calls into c.g.nodes.)
	var cands, enters []*node
	for _, d := range c.g.nodes {
		switch d.op {
		case "Switch", "RefSwitch", "Exit", "RefExit":
			cands = append(cands, d)
		case "Enter", "RefEnter":
			enters = append(enters, d)
		}
	}
	exits := map[string][]*node{}
	for _, d := range cands {
		switch d.op {
		case "Switch", "RefSwitch":
			if len(d.inputs) == 2 {
				if x, _ := node1(d.inputs[1], "LoopCond"); x == lc {
					l.switches = append(l.switches, d)
				}
			}
		case "Exit", "RefExit":
			if len(d.inputs) == 1 {
				if s, rr := node1(d.inputs[0], "Switch", "RefSwitch"); s != nil && rr.idx == 0 {
					exits[s.name] = append(exits[s.name], d)
				}
			}
		}
	}
	if len(l.switches) > maxLoopVars {
		return nil, "too many loop variables"
	}
	slices.SortFunc(l.switches, func(a, b *node) int { return strings.Compare(a.name, b.name) })
	for _, s := range l.switches {
		m, _ := node1(s.inputs[0], "Merge", "RefMerge")
		if m == nil || len(m.inputs) != 2 {
			return nil, "a loop variable's Switch does not read a Merge of two inputs"
		}
		var enter *node
		var next ref
		found := false
		for _, in := range m.inputs {
			if e, _ := node1(in, "Enter", "RefEnter"); e != nil {
				enter = e
			} else if ni, _ := node1(in, "NextIteration", "RefNextIteration"); ni != nil && len(ni.inputs) == 1 {
				next, found = ni.inputs[0], true
			}
		}
		if enter == nil || !found || len(enter.inputs) != 1 {
			return nil, "a loop variable's Merge does not join an Enter and a NextIteration"
		}
		frame := enter.s("frame_name", "")
		if l.frame == "" {
			l.frame = frame
		} else if frame != l.frame {
			return nil, "a loop whose variables enter different frames"
		}
		l.merges = append(l.merges, m)
		l.enters = append(l.enters, enter)
		l.nexts = append(l.nexts, next)
		es := exits[s.name]
		slices.SortFunc(es, func(a, b *node) int { return strings.Compare(a.name, b.name) })
		l.exits = append(l.exits, es)
	}
	for _, d := range enters {
		if d.s("frame_name", "") == l.frame && !slices.Contains(l.enters, d) {
			if len(d.inputs) != 1 {
				return nil, "an Enter with other than one input"
			}
			l.consts = append(l.consts, d)
		}
	}
	slices.SortFunc(l.consts, func(a, b *node) int { return strings.Compare(a.name, b.name) })
	return l, ""
}

// translateExit translates the TF1 while loop an Exit leaves, setting
// every Exit of its frame.
func (c *converter) translateExit(n *node) {
	l, why := c.frameOf(n)
	if l == nil {
		c.unsupported(n, "TF1 control flow: "+why)
		return
	}
	k := len(l.switches)
	// The values entering the frame, in this scope.
	inits := make([]*value, k)
	for i, e := range l.enters {
		inits[i] = c.visit(e.inputs[0])
	}
	consts := make([]*value, len(l.consts))
	for i, e := range l.consts {
		consts[i] = c.visit(e.inputs[0])
	}
	for _, v := range append(slices.Clone(inits), consts...) {
		if v.port != nil {
			v.port.used = true
		}
	}
	dts := make([]tensor.DType, k)
	for i, v := range inits {
		if v.dtype == tensor.Invalid || v.table != "" {
			c.unsupported(n, "a TF1 loop variable that is not a tensor is not translated")
			return
		}
		dts[i] = v.dtype
	}
	// scope binds the frame's Enters (the loop variables' Merges to vars)
	// in a converter's values.
	bind := func(sc *converter, vars []*value) {
		for i, e := range l.consts {
			sc.vals[ref{e.name, 0}] = consts[i]
		}
		for i := range k {
			sc.vals[ref{l.merges[i].name, 0}] = vars[i]
			sc.vals[ref{l.switches[i].name, 1}] = vars[i]
		}
	}
	// The first condition, in a scope of its own whose nodes go to c.
	first := c.child("cond0")
	bind(first, inits)
	pred0, ok := first.asCond(n, first.visit(l.cond))
	c.Nodes = append(c.Nodes, first.Nodes...)
	c.adopt(first)
	if !ok || c.fatal != nil {
		return
	}

	// The body subgraph: the body, then the condition on its values.
	body := c.child("whilev1")
	bg := &onnxpb.GraphProto{Name: l.frame}
	bg.Input = append(bg.Input, onnxbuild.ValueInfo(body.Fresh("iteration"), tensor.Int64, []int64{}),
		onnxbuild.ValueInfo(body.Fresh("cond"), tensor.Bool, []int64{}))
	vars := make([]*value, k)
	for i := range k {
		name := body.Fresh("var")
		bg.Input = append(bg.Input, onnxbuild.ValueInfo(name, dts[i], nil))
		vars[i] = &value{name: name, dtype: dts[i], rank: -1}
	}
	bind(body, vars)
	nexts := make([]*value, k)
	var outs []*onnxpb.ValueInfoProto
	for i := range k {
		nexts[i] = body.visit(l.nexts[i])
		outs = append(outs, body.output(nexts[i], dts[i]))
	}
	again := body.child("cond")
	bind(again, nexts)
	next, ok := again.asCond(n, again.visit(l.cond))
	body.Nodes = append(body.Nodes, again.Nodes...)
	body.adopt(again)
	if ok {
		bg.Output = append([]*onnxpb.ValueInfoProto{body.output(&value{name: next, dtype: tensor.Bool}, tensor.Bool)}, outs...)
	}
	bg.Node = body.Nodes
	c.adopt(body)
	if !ok || c.fatal != nil || k == 0 {
		if k == 0 {
			c.fail(fmt.Errorf("TF1 loop of %q has no loop variable", n.name))
		}
		return
	}
	finals := c.OpN("Loop", k, append([]string{"", pred0}, valueNames(inits)...), graphAttr("body", bg))
	for i := range k {
		for _, e := range l.exits[i] {
			c.set(e, 0, &value{name: finals[i], dtype: dts[i], rank: -1})
		}
	}
}

func valueNames(vs []*value) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.name
	}
	return out
}
