package pmml

import (
	"math"
	"strconv"
)

type knnTarget struct {
	name string
	cont bool
	vals []Value // per instance
	cats []Value // distinct values (categorical)
	idx  []int   // per instance: index into cats
	dt   DataType
}

type knnModel struct {
	k          int
	measure    string
	p          float64
	inputs     []clusterField
	rawCols    []string // instance columns, by instance field
	rawSlots   []int    // data slot each instance field sets, -1 when none
	rows       [][]string
	x          [][]float64 // prepared instance vectors
	xok        [][]bool
	ids        []Value
	targets    []knnTarget
	contMethod string
	catMethod  string
	threshold  float64
}

func (cc *compiler) knn(n *node, m *model, sc *scope) error {
	kn := &knnModel{contMethod: n.attrOr("continuousScoringMethod", "average"), catMethod: n.attrOr("categoricalScoringMethod", "majorityVote")}
	var err error
	if kn.k, err = n.int("numberOfNeighbors", 0); err != nil {
		return err
	}
	if kn.k < 1 {
		return n.errf("numberOfNeighbors must be 1 or more, got %d", kn.k)
	}
	if kn.threshold, err = n.float("threshold", 0.001); err != nil {
		return err
	}
	switch kn.contMethod {
	case "average", "median", "weightedAverage":
	default:
		return n.errf("continuousScoringMethod %q is not average, median or weightedAverage", kn.contMethod)
	}
	switch kn.catMethod {
	case "majorityVote", "weightedMajorityVote":
	default:
		return n.errf("categoricalScoringMethod %q is not majorityVote or weightedMajorityVote", kn.catMethod)
	}
	ti := n.child("TrainingInstances")
	if ti == nil {
		return n.errf("NearestNeighborModel without TrainingInstances")
	}
	if ti.attr("isTransformed") == "true" {
		return ti.unsupported("isTransformed=\"true\"")
	}
	colOf := map[string]string{}
	var fieldOrder []string
	if ifs := ti.child("InstanceFields"); ifs != nil {
		for _, f := range ifs.all("InstanceField") {
			col := f.attrOr("column", f.attr("field"))
			colOf[f.attr("field")] = col
			fieldOrder = append(fieldOrder, f.attr("field"))
		}
	}
	tab := ti.child("InlineTable")
	if tab == nil {
		return ti.unsupported("TrainingInstances without an InlineTable")
	}
	for _, f := range fieldOrder {
		kn.rawCols = append(kn.rawCols, colOf[f])
		slot := -1
		if df := cc.dd[f]; df != nil {
			slot = df.raw
		}
		kn.rawSlots = append(kn.rawSlots, slot)
	}
	for _, r := range tab.all("row") {
		cells := map[string]string{}
		for _, c := range r.children {
			cells[c.name] = c.text
		}
		row := make([]string, len(fieldOrder))
		for i, col := range kn.rawCols {
			row[i] = cells[col]
		}
		kn.rows = append(kn.rows, row)
		id := FloatValue(float64(len(kn.ids) + 1))
		if v := n.attr("instanceIdVariable"); v != "" {
			id, _ = parseConst(cells[colOf[v]], TypeUnknown)
		}
		kn.ids = append(kn.ids, id)
	}
	for _, tn := range m.tnames {
		t := knnTarget{name: tn, dt: TypeString}
		if df := cc.dd[tn]; df != nil {
			t.cont = df.op == Continuous
			t.dt = df.dt
		}
		col, ok := colOf[tn]
		if !ok {
			return ti.errf("target %q has no InstanceField", tn)
		}
		for _, r := range tab.all("row") {
			var cell string
			for _, c := range r.children {
				if c.name == col {
					cell = c.text
				}
			}
			v, ok := parseConst(trimSpace(cell), t.dt)
			if !ok {
				return r.errf("target value %q is not a %s", cell, t.dt)
			}
			t.vals = append(t.vals, v)
			if !t.cont {
				j := -1
				for i, cv := range t.cats {
					if equalValues(cv, v) {
						j = i
					}
				}
				if j < 0 {
					j = len(t.cats)
					t.cats = append(t.cats, v)
				}
				t.idx = append(t.idx, j)
			}
		}
		kn.targets = append(kn.targets, t)
	}
	cm := n.child("ComparisonMeasure")
	if cm == nil {
		return n.errf("NearestNeighborModel without a ComparisonMeasure")
	}
	if cm.attrOr("kind", "distance") != "distance" {
		return cm.unsupported("similarity measures")
	}
	compare := cm.attrOr("compareFunction", "absDiff")
	for _, ms := range cm.children {
		switch ms.name {
		case "euclidean", "squaredEuclidean", "chebychev", "cityBlock", "minkowski":
			kn.measure = ms.name
			if kn.p, err = ms.float("p-parameter", 2); err != nil {
				return err
			}
		case "Extension":
		default:
			return ms.unsupported("comparison measure")
		}
	}
	ki := n.child("KNNInputs")
	if ki == nil {
		return n.errf("NearestNeighborModel without KNNInputs")
	}
	for _, in := range ki.all("KNNInput") {
		src, err := cc.resolve(in, in.attr("field"), sc, nil, MissingValue)
		if err != nil {
			return err
		}
		f := clusterField{src: src, compare: in.attrOr("compareFunction", compare)}
		if f.weight, err = in.float("fieldWeight", 1); err != nil {
			return err
		}
		if f.compare != "absDiff" && f.compare != "delta" && f.compare != "equal" {
			return in.unsupported("compareFunction " + strconv.Quote(f.compare))
		}
		kn.inputs = append(kn.inputs, f)
	}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "TrainingInstances", "ComparisonMeasure", "KNNInputs":
		default:
			return c.unsupported("")
		}
	}
	if m.classification() && len(kn.targets) > 0 && !kn.targets[0].cont {
		for _, v := range kn.targets[0].cats {
			m.catIndex(v)
		}
	}
	if kn.k > len(kn.rows) {
		kn.k = len(kn.rows)
	}
	m.impl = kn
	m.scratch = len(kn.rows) + kn.k + len(kn.inputs)
	m.nbuf = len(kn.rows)
	cc.post = append(cc.post, kn.prepare)
	return nil
}

func (kn *knnModel) targetIndex(name string) int {
	for i, t := range kn.targets {
		if t.name == name {
			return i
		}
	}
	return -1
}

// prepare evaluates the KNN inputs (which may be derived fields) on every
// training instance once the whole model is compiled.
func (kn *knnModel) prepare(m *Model) error {
	c := m.getCtx()
	kn.x = make([][]float64, len(kn.rows))
	kn.xok = make([][]bool, len(kn.rows))
	for r, row := range kn.rows {
		clear(c.done)
		for i, s := range kn.rawSlots {
			if s < 0 {
				continue
			}
			v, ok := convert(StringValue(trimSpace(row[i])), m.slots[s].dt)
			if !ok || row[i] == "" {
				v = MissingValue
			}
			c.vals[s] = v
			c.done[s] = true
		}
		kn.x[r] = make([]float64, len(kn.inputs))
		kn.xok[r] = make([]bool, len(kn.inputs))
		for i, in := range kn.inputs {
			v := in.src.eval(c)
			if f, ok := v.num(); ok && v.K != Missing {
				kn.x[r][i], kn.xok[r][i] = f, true
			}
		}
	}
	return nil
}

func (kn *knnModel) score(c *ctx, m *model, p *prediction) {
	ni := len(kn.inputs)
	q := p.scratch[len(kn.rows)+kn.k:]
	for i, in := range kn.inputs {
		v := in.src.eval(c)
		f, ok := v.num()
		if v.K == Missing || !ok {
			return
		}
		q[i] = f
	}
	d := p.scratch[:len(kn.rows)]
	for r := range kn.rows {
		acc := 0.0
		for i := 0; i < ni; i++ {
			if !kn.xok[r][i] {
				continue
			}
			f := &kn.inputs[i]
			var cv float64
			switch f.compare {
			case "absDiff":
				cv = math.Abs(q[i] - kn.x[r][i])
			case "delta":
				if q[i] != kn.x[r][i] {
					cv = 1
				}
			case "equal":
				if q[i] == kn.x[r][i] {
					cv = 1
				}
			}
			switch kn.measure {
			case "euclidean", "squaredEuclidean":
				acc += f.weight * cv * cv
			case "cityBlock":
				acc += f.weight * cv
			case "chebychev":
				acc = math.Max(acc, f.weight*cv)
			case "minkowski":
				acc += f.weight * math.Pow(cv, kn.p)
			}
		}
		switch kn.measure {
		case "euclidean":
			acc = math.Sqrt(acc)
		case "minkowski":
			acc = math.Pow(acc, 1/kn.p)
		}
		d[r] = acc
	}
	// Select the k nearest, ties by training order.
	nb := p.scratch[len(kn.rows) : len(kn.rows)+kn.k]
	for j := 0; j < kn.k; j++ {
		best := -1
		for r := range d {
			taken := false
			for _, t := range nb[:j] {
				if int(t) == r {
					taken = true
					break
				}
			}
			if taken {
				continue
			}
			if best < 0 || d[r] < d[best] {
				best = r
			}
		}
		nb[j] = float64(best)
	}
	p.affin = nb
	p.entity = kn.ids[int(nb[0])]
	for ti := range kn.targets {
		t := &kn.targets[ti]
		var v Value
		if t.cont {
			v = FloatValue(kn.continuous(t, nb, d))
		} else {
			votes := p.cbuf[:len(t.cats)]
			clear(votes)
			for _, r := range nb {
				w := 1.0
				if kn.catMethod == "weightedMajorityVote" {
					w = 1 / (d[int(r)] + kn.threshold)
				}
				votes[t.idx[int(r)]] += w
			}
			best := 0
			for i := range votes {
				if votes[i] > votes[best] {
					best = i
				}
			}
			v = t.cats[best]
			if ti == 0 && m.classification() {
				probs := p.ownProbs(len(m.cats))
				tot := 0.0
				for _, x := range votes {
					tot += x
				}
				for i, x := range votes {
					probs[m.findCat(t.cats[i])] = x / tot
				}
				p.cat = m.findCat(v)
			}
		}
		if ti < len(p.multi) {
			p.multi[ti] = v
		}
		if ti == 0 {
			p.val = v
			p.ok = true
		}
	}
}

func (kn *knnModel) continuous(t *knnTarget, nb, d []float64) float64 {
	switch kn.contMethod {
	case "median":
		var buf [64]float64
		vs := buf[:0]
		for _, r := range nb {
			vs = append(vs, t.vals[int(r)].F)
		}
		for i := 1; i < len(vs); i++ {
			for j := i; j > 0 && vs[j] < vs[j-1]; j-- {
				vs[j], vs[j-1] = vs[j-1], vs[j]
			}
		}
		h := len(vs) / 2
		if len(vs)%2 == 1 {
			return vs[h]
		}
		return (vs[h-1] + vs[h]) / 2
	case "weightedAverage":
		s, ws := 0.0, 0.0
		for _, r := range nb {
			w := 1 / (d[int(r)] + kn.threshold)
			s += w * t.vals[int(r)].F
			ws += w
		}
		return s / ws
	}
	s := 0.0
	for _, r := range nb {
		s += t.vals[int(r)].F
	}
	return s / float64(len(nb))
}
