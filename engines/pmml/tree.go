package pmml

import (
	"strconv"
)

type treeNode struct {
	cond     cond
	children []*treeNode
	score    Value
	hasScore bool
	cat      int
	id       Value
	rc       float64
	hasRC    bool
	probs    []float64 // by category; nil when the node has no ScoreDistribution
	conf     []float64 // nil when no confidence attributes
	counts   []float64
	def      *treeNode
	defID    string
}

const (
	mvNone = iota
	mvLast
	mvNull
	mvDefault
	mvWeighted
	mvAggregate
)

// flatNode is a tree node laid out for the fast path: a node's children are
// contiguous in treeModel.flat, and a predicate is either True or a numeric
// comparison on a slot. Records that need anything else (a missing or
// non-numeric value) take the general walk.
type flatNode struct {
	slot  int32
	first int32
	n     int32
	op    cmpOp
	kind  uint8 // flatTrue, flatNum, flatStr, flatSet
	f32   bool
	thr   float64
	str   string
	set   *setCond
	tn    *treeNode
}

const (
	flatTrue uint8 = iota
	flatNum
	flatStr
	flatSet
)

type treeModel struct {
	flat     []flatNode // nil when some predicate needs the general walk
	root     *treeNode
	missing  int
	lastNoTC bool // noTrueChildStrategy="returnLastPrediction"
	penalty  float64
}

func (cc *compiler) tree(n *node, m *model, sc *scope) error {
	t := &treeModel{penalty: 1}
	switch n.attrOr("missingValueStrategy", "none") {
	case "none":
	case "lastPrediction":
		t.missing = mvLast
	case "nullPrediction":
		t.missing = mvNull
	case "defaultChild":
		t.missing = mvDefault
	case "weightedConfidence":
		t.missing = mvWeighted
	case "aggregateNodes":
		t.missing = mvAggregate
	default:
		return n.errf("missingValueStrategy %q is not a PMML strategy", n.attr("missingValueStrategy"))
	}
	switch n.attrOr("noTrueChildStrategy", "returnNullPrediction") {
	case "returnNullPrediction":
	case "returnLastPrediction":
		t.lastNoTC = true
	default:
		return n.errf("noTrueChildStrategy %q is not returnNullPrediction or returnLastPrediction", n.attr("noTrueChildStrategy"))
	}
	var err error
	if t.penalty, err = n.float("missingValuePenalty", 1); err != nil {
		return err
	}
	switch n.attrOr("splitCharacteristic", "multiSplit") {
	case "binarySplit", "multiSplit":
	default:
		return n.errf("splitCharacteristic %q is not binarySplit or multiSplit", n.attr("splitCharacteristic"))
	}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension":
		case "Node":
			if t.root != nil {
				return c.errf("TreeModel has more than one root Node")
			}
			root, err := cc.treeNode(c, m, sc, 0)
			if err != nil {
				return err
			}
			t.root = root
		default:
			return c.unsupported("")
		}
	}
	if t.root == nil {
		return n.errf("TreeModel without a Node")
	}
	// Category lists may have grown while compiling; give every distribution
	// the final length.
	var fix func(*treeNode)
	fix = func(tn *treeNode) {
		if tn.probs != nil {
			for len(tn.probs) < len(m.cats) {
				tn.probs = append(tn.probs, 0)
				tn.counts = append(tn.counts, 0)
			}
			if tn.conf != nil {
				for len(tn.conf) < len(m.cats) {
					tn.conf = append(tn.conf, 0)
				}
			}
		}
		for _, ch := range tn.children {
			fix(ch)
		}
	}
	fix(t.root)
	t.flatten()
	m.impl = t
	return nil
}

// flatten builds the fast-path layout when every predicate allows it.
func (t *treeModel) flatten() {
	ok := true
	var check func(n *treeNode)
	check = func(n *treeNode) {
		switch p := n.cond.(type) {
		case constCond:
			ok = ok && tri(p) == triTrue
		case *simpleCond:
			ok = ok && (p.isNum && p.op <= opGe || !p.isNum && (p.op == opEq || p.op == opNe))
		case *setCond:
		default:
			ok = false
		}
		for _, ch := range n.children {
			check(ch)
		}
	}
	check(t.root)
	if !ok {
		return
	}
	flat := []flatNode{t.node(t.root)}
	queue := []*treeNode{t.root}
	for i := 0; i < len(queue); i++ {
		n := queue[i]
		flat[i].first = int32(len(flat))
		flat[i].n = int32(len(n.children))
		for _, ch := range n.children {
			flat = append(flat, t.node(ch))
			queue = append(queue, ch)
		}
	}
	t.flat = flat
}

func (t *treeModel) node(n *treeNode) flatNode {
	fn := flatNode{tn: n, slot: -1}
	switch p := n.cond.(type) {
	case *simpleCond:
		fn.slot, fn.op, fn.thr, fn.f32, fn.str = int32(p.slot), p.op, p.f, p.f32, p.s
		fn.kind = flatNum
		if !p.isNum {
			fn.kind = flatStr
		}
	case *setCond:
		fn.slot, fn.set, fn.kind = int32(p.slot), p, flatSet
	}
	return fn
}

// walkFlat is the fast path. handled=false sends the record to the
// general walk; handled=true with a nil node is a null prediction.
func (t *treeModel) walkFlat(c *ctx) (n *treeNode, handled bool) {
	flat := t.flat
	cur := &flat[0]
	if cur.kind != flatTrue {
		return nil, false
	}
	for cur.n > 0 {
		next := -1
		end := int(cur.first + cur.n)
	children:
		for i := int(cur.first); i < end; i++ {
			ch := &flat[i]
			if ch.kind == flatTrue {
				next = i
				break
			}
			if !c.done[ch.slot] {
				c.get(int(ch.slot))
			}
			v := &c.vals[ch.slot]
			switch ch.kind {
			case flatStr:
				if v.K != String {
					return nil, false
				}
				if (v.S == ch.str) == (ch.op == opEq) {
					next = i
					break children
				}
				continue
			case flatSet:
				if v.K != String && v.K != Float {
					return nil, false
				}
				if ch.set.test(c) == triTrue {
					next = i
					break children
				}
				continue
			}
			if v.K != Float || v.F != v.F {
				return nil, false
			}
			x := v.F
			if ch.f32 {
				x = float64(float32(x))
			}
			var hit bool
			switch ch.op {
			case opLe:
				hit = x <= ch.thr
			case opGt:
				hit = x > ch.thr
			case opLt:
				hit = x < ch.thr
			case opGe:
				hit = x >= ch.thr
			case opEq:
				hit = x == ch.thr
			case opNe:
				hit = x != ch.thr
			}
			if hit {
				next = i
				break
			}
		}
		if next < 0 {
			if t.lastNoTC {
				return cur.tn, true
			}
			return nil, true
		}
		cur = &flat[next]
	}
	return cur.tn, true
}

func (cc *compiler) treeNode(n *node, m *model, sc *scope, depth int) (*treeNode, error) {
	tn := &treeNode{cat: -1, id: MissingValue}
	if n.has("id") {
		tn.id = StringValue(n.attr("id"))
		if f, err := strconv.ParseFloat(n.attr("id"), 64); err == nil {
			tn.id = FloatValue(f)
		}
	}
	var err error
	tn.hasRC = n.has("recordCount")
	if tn.rc, err = n.float("recordCount", 0); err != nil {
		return nil, err
	}
	tn.defID = n.attr("defaultChild")
	if n.has("score") {
		tn.hasScore = true
		if m.classification() {
			tn.score = m.catValue(n.attr("score"))
			tn.cat = m.catIndex(tn.score)
		} else {
			f, err := parseFloat(n.attr("score"))
			if err != nil {
				if m.fn == "regression" {
					return nil, n.errf("score %q of a regression tree is not a number", n.attr("score"))
				}
				tn.score = StringValue(n.attr("score"))
			} else {
				if m.floatCtx {
					f = float64(float32(f))
				}
				tn.score = FloatValue(f)
			}
		}
	}
	type sd struct {
		cat         int
		rc, pr, cf  float64
		hasP, hasCf bool
	}
	var sds []sd
	for _, c := range n.children {
		switch c.name {
		case "True", "False", "SimplePredicate", "SimpleSetPredicate", "CompoundPredicate":
			if tn.cond != nil {
				return nil, c.errf("Node has more than one predicate")
			}
			if tn.cond, err = cc.predicate(c, sc); err != nil {
				return nil, err
			}
		case "Node":
			if depth > maxDepth {
				return nil, c.errf("tree deeper than %d", maxDepth)
			}
			ch, err := cc.treeNode(c, m, sc, depth+1)
			if err != nil {
				return nil, err
			}
			tn.children = append(tn.children, ch)
		case "ScoreDistribution":
			if !m.classification() {
				continue
			}
			s := sd{cat: m.catIndex(m.catValue(c.attr("value")))}
			if s.rc, err = c.float("recordCount", 0); err != nil {
				return nil, err
			}
			s.hasP = c.has("probability")
			if s.pr, err = c.float("probability", 0); err != nil {
				return nil, err
			}
			s.hasCf = c.has("confidence")
			if s.cf, err = c.float("confidence", 0); err != nil {
				return nil, err
			}
			sds = append(sds, s)
		case "Partition", "Extension":
		case "Regression", "DecisionTree":
			return nil, c.unsupported("embedded model in a Node")
		default:
			return nil, c.unsupported("")
		}
	}
	if tn.cond == nil {
		return nil, n.errf("Node without a predicate")
	}
	if tn.defID != "" {
		for _, ch := range tn.children {
			if ch.id.String() == tn.defID {
				tn.def = ch
			}
		}
		if tn.def == nil {
			return nil, n.errf("defaultChild %q names no child Node", tn.defID)
		}
	}
	if len(sds) > 0 {
		k := len(m.cats)
		tn.probs = make([]float64, k)
		tn.counts = make([]float64, k)
		total := 0.0
		allP := true
		anyCf := false
		for _, s := range sds {
			total += s.rc
			allP = allP && s.hasP
			anyCf = anyCf || s.hasCf
		}
		for _, s := range sds {
			tn.counts[s.cat] = s.rc
			switch {
			case allP:
				tn.probs[s.cat] = s.pr
			case total > 0:
				tn.probs[s.cat] = s.rc / total
			}
		}
		if anyCf {
			tn.conf = make([]float64, k)
			for _, s := range sds {
				tn.conf[s.cat] = s.cf
			}
		}
		if !tn.hasScore {
			best := -1
			for i, v := range tn.probs {
				if best < 0 || v > tn.probs[best] {
					best = i
				}
			}
			tn.cat = best
			tn.score = m.cats[best]
			tn.hasScore = true
		}
		if !tn.hasRC {
			tn.rc = total
		}
	}
	return tn, nil
}

func (t *treeModel) score(c *ctx, m *model, p *prediction) {
	if t.flat != nil {
		if n, ok := t.walkFlat(c); ok {
			if n != nil {
				t.finish(m, p, n, 1)
			}
			return
		}
	}
	if t.root.cond.test(c) != triTrue {
		return
	}
	n := t.root
	penalty := 1.0
	for len(n.children) > 0 {
		var next *treeNode
		for _, ch := range n.children {
			r := ch.cond.test(c)
			if r == triTrue {
				next = ch
				break
			}
			if r == triUnknown {
				switch t.missing {
				case mvNone:
					continue
				case mvLast:
					t.finish(m, p, n, penalty)
					return
				case mvNull:
					return
				case mvDefault:
					next = n.def
					penalty *= t.penalty
					if next == nil {
						t.finish(m, p, n, penalty)
						return
					}
				case mvWeighted, mvAggregate:
					t.aggregate(c, m, p, n)
					return
				}
				break
			}
		}
		if next == nil {
			if t.lastNoTC {
				t.finish(m, p, n, penalty)
			}
			return
		}
		n = next
	}
	t.finish(m, p, n, penalty)
}

// finish copies the result of the node the walk stopped at.
func (t *treeModel) finish(m *model, p *prediction, n *treeNode, penalty float64) {
	if !n.hasScore {
		return
	}
	p.ok = true
	p.val = n.score
	p.cat = n.cat
	p.entity = n.id
	if m.classification() {
		p.probs = n.probs
		p.conf = n.conf
		if p.probs == nil && n.cat >= 0 {
			b := p.ownProbs(len(m.cats))
			b[n.cat] = 1
		}
		if penalty != 1 {
			src := p.conf
			if src == nil {
				src = p.probs
			}
			cb := p.cbuf[:len(src)]
			for i, v := range src {
				cb[i] = v * penalty
			}
			p.conf = cb
		}
	}
}

// aggregate implements weightedConfidence and aggregateNodes: every child
// whose predicate is true or unknown contributes.
func (t *treeModel) aggregate(c *ctx, m *model, p *prediction, n *treeNode) {
	k := len(m.cats)
	if !m.classification() || k == 0 {
		return
	}
	acc := p.cbuf[:k]
	clear(acc)
	t.collect(c, n, 1, acc)
	total := 0.0
	for _, v := range acc {
		total += v
	}
	if total == 0 {
		return
	}
	probs := p.ownProbs(k)
	if t.missing == mvAggregate {
		for i, v := range acc {
			probs[i] = v / total
		}
		p.conf = nil
	} else {
		copy(probs, acc)
		p.conf = acc
	}
	p.setCatFromProbs(m)
}

func (t *treeModel) collect(c *ctx, n *treeNode, w float64, acc []float64) {
	if len(n.children) == 0 {
		t.addLeaf(n, w, acc)
		return
	}
	var hits [16]*treeNode
	sel := hits[:0]
	unknown := false
	for _, ch := range n.children {
		r := ch.cond.test(c)
		if r == triTrue && !unknown {
			// A true child before any unknown one decides alone.
			t.collect(c, ch, w, acc)
			return
		}
		if r != triFalse {
			if r == triUnknown {
				unknown = true
			}
			sel = append(sel, ch)
		}
	}
	if len(sel) == 0 {
		if t.lastNoTC {
			t.addLeaf(n, w, acc)
		}
		return
	}
	for _, ch := range sel {
		cw := w
		if t.missing == mvWeighted && n.rc > 0 {
			cw = w * ch.rc / n.rc
		}
		t.collect(c, ch, cw, acc)
	}
}

func (t *treeModel) addLeaf(n *treeNode, w float64, acc []float64) {
	if t.missing == mvAggregate {
		for i, v := range n.counts {
			acc[i] += v
		}
		return
	}
	src := n.conf
	if src == nil {
		src = n.probs
	}
	for i, v := range src {
		acc[i] += w * v
	}
}
