package pmml

import (
	"math"
	"sort"
	"strconv"
)

type segment struct {
	cond   cond
	m      *model
	weight float64
	id     Value
	catMap []int // child category index -> parent category index
	wslot  int   // VariableWeight slot, -1 when none
}

type miningModel struct {
	method  string
	segs    []segment
	missing string // missingPredictionTreatment
	thresh  float64
}

func (cc *compiler) mining(n *node, m *model, sc *scope) ([]outField, error) {
	seg := n.child("Segmentation")
	if seg == nil {
		return nil, n.errf("MiningModel without a Segmentation")
	}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "Segmentation":
		case "Regression", "DecisionTree":
			return nil, c.unsupported("PMML 3 embedded model in a MiningModel")
		default:
			return nil, c.unsupported("")
		}
	}
	mm := &miningModel{method: seg.attr("multipleModelMethod"), missing: seg.attrOr("missingPredictionTreatment", "continue")}
	var err error
	if mm.thresh, err = seg.float("missingThreshold", 1); err != nil {
		return nil, err
	}
	switch mm.missing {
	case "returnMissing", "skipSegment", "continue":
	default:
		return nil, seg.errf("missingPredictionTreatment %q is not one of returnMissing, skipSegment, continue", mm.missing)
	}
	switch mm.method {
	case "majorityVote", "weightedMajorityVote":
		if m.fn == "regression" {
			return nil, seg.errf("multipleModelMethod %s needs a classification or clustering model", mm.method)
		}
	case "average", "weightedAverage", "median", "weightedMedian", "max", "sum", "weightedSum", "selectFirst", "selectAll", "modelChain":
	case "":
		return nil, seg.errf("multipleModelMethod is required")
	default:
		return nil, seg.unsupported("multipleModelMethod " + strconv.Quote(mm.method))
	}
	chainScope := sc
	var outs []outField
	for _, s := range seg.children {
		if err := cc.ctx.Err(); err != nil {
			return nil, err
		}
		if s.name != "Segment" {
			if ignorable(s.name) {
				continue
			}
			return nil, s.unsupported("")
		}
		sg := segment{id: StringValue(s.attr("id")), wslot: -1}
		if sg.weight, err = s.float("weight", 1); err != nil {
			return nil, err
		}
		if sg.cond, err = cc.predicateOf(s, chainScope); err != nil {
			return nil, err
		}
		var child *node
		for _, c := range s.children {
			switch {
			case modelElements[c.name]:
				if child != nil {
					return nil, c.errf("Segment holds more than one model")
				}
				child = c
			case knownModels[c.name]:
				return nil, c.unsupported("model type " + c.name + " inside a Segment")
			case c.name == "VariableWeight" || ignorable(c.name):
			case c.name == "True" || c.name == "False" || c.name == "SimplePredicate" ||
				c.name == "SimpleSetPredicate" || c.name == "CompoundPredicate":
			default:
				return nil, c.unsupported("")
			}
		}
		if child == nil {
			return nil, s.errf("Segment without a model")
		}
		cm, couts, err := cc.compileModel(child, chainScope)
		if err != nil {
			return nil, err
		}
		sg.m = cm
		if vw := s.child("VariableWeight"); vw != nil {
			for _, o := range couts {
				if o.name == vw.attr("field") {
					sg.wslot = o.slot
				}
			}
			if sg.wslot < 0 {
				return nil, vw.errf("field %q is not an OutputField of the segment's model", vw.attr("field"))
			}
		}
		switch mm.method {
		case "modelChain":
			chainScope = newScope(chainScope)
			for _, o := range couts {
				chainScope.names[o.name] = o.slot
			}
			outs = append(outs, couts...)
		case "selectFirst", "selectAll":
			outs = mergeOuts(cc, outs, couts, cm)
		}
		mm.segs = append(mm.segs, sg)
	}
	if len(mm.segs) == 0 {
		return nil, seg.errf("Segmentation without Segments")
	}
	if m.classification() || m.fn == "clustering" {
		for i := range mm.segs {
			sg := &mm.segs[i]
			if sg.m.fn == "clustering" {
				ids := sg.m.impl.(interface{ entityIDs() []Value }).entityIDs()
				sg.catMap = make([]int, len(ids))
				for j, id := range ids {
					sg.catMap[j] = m.catIndex(id)
				}
				continue
			}
			sg.catMap = make([]int, len(sg.m.cats))
			for j, cv := range sg.m.cats {
				if m.targetDT != TypeUnknown {
					if v, ok := convert(cv, m.targetDT); ok {
						cv = v
					}
				}
				sg.catMap[j] = m.catIndex(cv)
			}
		}
	}
	if m.fn == "clustering" {
		m.nbuf = len(m.cats)
	}
	m.impl = mm
	return outs, nil
}

func (mm *miningModel) score(c *ctx, m *model, p *prediction) {
	switch mm.method {
	case "selectFirst":
		for i := range mm.segs {
			sg := &mm.segs[i]
			if sg.cond.test(c) == triTrue {
				mm.copyFrom(m, p, sg, c.eval(sg.m))
				return
			}
		}
		return
	case "modelChain", "selectAll":
		var last *segment
		var lp *prediction
		for i := range mm.segs {
			sg := &mm.segs[i]
			if sg.cond.test(c) != triTrue {
				continue
			}
			r := c.eval(sg.m)
			if !r.ok && mm.missing == "returnMissing" && mm.method == "modelChain" {
				return
			}
			last, lp = sg, r
		}
		if last != nil {
			mm.copyFrom(m, p, last, lp)
		}
		return
	}
	if m.classification() || m.fn == "clustering" {
		mm.vote(c, m, p)
		return
	}
	mm.regress(c, m, p)
}

// copyFrom makes a segment's prediction the mining model's.
func (mm *miningModel) copyFrom(m *model, p *prediction, sg *segment, r *prediction) {
	if !r.ok {
		return
	}
	p.ok = true
	p.val = r.val
	p.entity = r.entity
	p.ent = r.ent
	p.affin = r.affin
	p.reasons = append(p.reasons[:0], r.reasons...)
	p.rule = r.rule
	copy(p.multi, r.multi)
	if sg.catMap == nil {
		p.probs, p.conf, p.cat = r.probs, r.conf, r.cat
		return
	}
	if m.fn == "clustering" {
		if r.ent >= 0 {
			p.cat = sg.catMap[r.ent]
			p.val = m.cats[p.cat]
		}
		return
	}
	if r.cat >= 0 {
		p.cat = sg.catMap[r.cat]
		p.val = m.cats[p.cat]
	}
	if r.probs != nil {
		b := p.ownProbs(len(m.cats))
		for j, v := range r.probs {
			b[sg.catMap[j]] = v
		}
	}
	if r.conf != nil {
		cb := p.cbuf[:len(m.cats)]
		clear(cb)
		for j, v := range r.conf {
			cb[sg.catMap[j]] = v
		}
		p.conf = cb
	}
}

func (mm *miningModel) vote(c *ctx, m *model, p *prediction) {
	k := len(m.cats)
	acc := p.ownProbs(k)
	total := 0.0
	n, missing := 0, 0
	for i := range mm.segs {
		sg := &mm.segs[i]
		if sg.cond.test(c) != triTrue {
			continue
		}
		n++
		r := c.eval(sg.m)
		if !r.ok {
			missing++
			if mm.missing == "returnMissing" {
				p.probs = nil
				return
			}
			continue
		}
		w := 1.0
		if mm.method == "weightedMajorityVote" || mm.method == "weightedAverage" {
			w = sg.weight
			if sg.wslot >= 0 {
				wv := c.get(sg.wslot)
				if f, ok := wv.num(); ok && wv.K != Missing {
					w = f
				}
			}
		}
		cat := r.cat
		if sg.m.fn == "clustering" {
			cat = r.ent
		}
		switch mm.method {
		case "majorityVote", "weightedMajorityVote":
			if cat >= 0 {
				acc[sg.catMap[cat]] += w
				total += w
			}
		case "average", "weightedAverage", "sum":
			if r.probs == nil {
				if cat >= 0 {
					acc[sg.catMap[cat]] += w
				}
			} else {
				for j, v := range r.probs {
					acc[sg.catMap[j]] += w * v
				}
			}
			total += w
		case "max":
			// The segment whose winning probability is highest decides.
			if r.probs != nil && cat >= 0 && (total == 0 || r.probs[cat] > maxOf(acc)) {
				clear(acc)
				for j, v := range r.probs {
					acc[sg.catMap[j]] = v
				}
				total = 1
			}
		case "median", "weightedMedian":
			if r.probs != nil {
				for j, v := range r.probs {
					acc[sg.catMap[j]] += w * v
				}
				total += w
			}
		}
	}
	if n > 0 && float64(missing)/float64(n) > mm.thresh {
		p.probs = nil
		return
	}
	if total == 0 {
		p.probs = nil
		return
	}
	if mm.method != "max" && mm.method != "sum" {
		for i := range acc {
			acc[i] /= total
		}
	}
	p.setCatFromProbs(m)
	if m.fn == "clustering" {
		p.ent = -1
		p.entity = p.val
	}
}

func maxOf(xs []float64) float64 {
	r := math.Inf(-1)
	for _, x := range xs {
		r = math.Max(r, x)
	}
	return r
}

func (mm *miningModel) regress(c *ctx, m *model, p *prediction) {
	sum, wsum := 0.0, 0.0
	var sum32 float32
	// In single precision the order of additions matters; XGBoost starts
	// from the base score, so fold a pure rescaleConstant in first.
	preScaled := m.floatCtx && mm.method == "sum" && m.targets != nil && m.targets.factor == 1 &&
		!m.targets.hasMin && !m.targets.hasMax && m.targets.cast == ""
	if preScaled {
		sum32 = float32(m.targets.constant)
	}
	n, missing := 0, 0
	best := math.Inf(-1)
	var vals [64]float64
	var wts [64]float64
	vs, ws := vals[:0], wts[:0]
	for i := range mm.segs {
		sg := &mm.segs[i]
		if sg.cond.test(c) != triTrue {
			continue
		}
		n++
		r := c.eval(sg.m)
		if !r.ok || r.val.K != Float {
			missing++
			if mm.missing == "returnMissing" {
				return
			}
			continue
		}
		x := r.val.F
		w := sg.weight
		if sg.wslot >= 0 {
			wv := c.get(sg.wslot)
			if f, ok := wv.num(); ok && wv.K != Missing {
				w = f
			}
		}
		switch mm.method {
		case "sum":
			sum += x
			sum32 += float32(x)
		case "weightedSum":
			sum += w * x
		case "average":
			sum += x
			wsum++
		case "weightedAverage":
			sum += w * x
			wsum += w
		case "max":
			best = math.Max(best, x)
		case "median", "weightedMedian":
			vs = append(vs, x)
			ws = append(ws, w)
		}
	}
	if n > 0 && float64(missing)/float64(n) > mm.thresh {
		return
	}
	var y float64
	switch mm.method {
	case "sum", "weightedSum":
		if n-missing == 0 {
			return
		}
		y = sum
		if m.floatCtx && mm.method == "sum" {
			y = float64(sum32)
			p.rescaled = preScaled
		}
	case "average", "weightedAverage":
		if wsum == 0 {
			return
		}
		y = sum / wsum
	case "max":
		if math.IsInf(best, -1) {
			return
		}
		y = best
	case "median":
		if len(vs) == 0 {
			return
		}
		sort.Float64s(vs)
		h := len(vs) / 2
		if len(vs)%2 == 1 {
			y = vs[h]
		} else {
			y = (vs[h-1] + vs[h]) / 2
		}
	case "weightedMedian":
		if len(vs) == 0 {
			return
		}
		y = weightedMedian(vs, ws)
	default:
		return
	}
	p.ok = true
	p.val = FloatValue(y)
}

// weightedMedian sorts values with their weights and returns the first value
// at which the cumulative weight reaches half of the total.
func weightedMedian(vs, ws []float64) float64 {
	idx := make([]int, len(vs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vs[idx[a]] < vs[idx[b]] })
	total := 0.0
	for _, w := range ws {
		total += w
	}
	half := total / 2
	acc := 0.0
	for _, i := range idx {
		acc += ws[i]
		if acc >= half {
			return vs[i]
		}
	}
	return vs[idx[len(idx)-1]]
}

// mergeOuts exposes the output fields of selectFirst segments: a name that
// several segments declare reads from whichever segment was selected.
func mergeOuts(cc *compiler, outs, couts []outField, cm *model) []outField {
	for _, o := range couts {
		found := false
		for i := range outs {
			if outs[i].name != o.name {
				continue
			}
			found = true
			pe, ok := cc.m.slots[outs[i].slot].expr.(*pickExpr)
			if !ok {
				break
			}
			pe.picks = append(pe.picks, pick{m: cm, e: &fieldRef{slot: o.slot}})
		}
		if !found {
			pe := &pickExpr{picks: []pick{{m: cm, e: &fieldRef{slot: o.slot}}}}
			no := o
			no.slot = cc.addSlot(o.name, o.dt, o.op, pe)
			outs = append(outs, no)
		}
	}
	return outs
}
