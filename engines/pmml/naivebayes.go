package pmml

import (
	"math"
)

type bayesInput struct {
	src    expr
	cont   bool
	vals   []Value     // categorical: the PairCounts values
	counts [][]float64 // [value][category]
	totals []float64   // per category: sum of the counts in this input
	dist   []bayesDist // continuous: by category, nil kind when absent
}

type bayesDist struct {
	kind       string // GaussianDistribution, PoissonDistribution, UniformDistribution
	mean, vari float64
	lo, hi     float64
}

type naiveBayes struct {
	inputs    []bayesInput
	priors    []float64
	threshold float64
}

func (cc *compiler) naiveBayes(n *node, m *model, sc *scope) error {
	nb := &naiveBayes{}
	var err error
	if nb.threshold, err = n.float("threshold", 0); err != nil {
		return err
	}
	if !n.has("threshold") {
		return n.errf("NaiveBayesModel needs a threshold attribute")
	}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "BayesInputs", "BayesOutput":
		default:
			return c.unsupported("")
		}
	}
	out := n.child("BayesOutput")
	if out == nil {
		return n.errf("NaiveBayesModel without a BayesOutput")
	}
	type prior struct {
		cat   int
		count float64
	}
	var priors []prior
	if tv := out.child("TargetValueCounts"); tv != nil {
		for _, c := range tv.all("TargetValueCount") {
			cnt, err := c.float("count", 0)
			if err != nil {
				return err
			}
			priors = append(priors, prior{m.catIndex(m.catValue(c.attr("value"))), cnt})
		}
	}
	type pend struct {
		n   *node
		src expr
		dt  DataType
	}
	var ins []pend
	bis := n.child("BayesInputs")
	if bis == nil {
		return n.errf("NaiveBayesModel without BayesInputs")
	}
	for _, bi := range bis.all("BayesInput") {
		var src expr
		dt := TypeUnknown
		if df := bi.child("DerivedField"); df != nil {
			if src, err = cc.exprOf(df, sc, nil); err != nil {
				return err
			}
			dt, _ = parseDataType(df, df.attr("dataType"))
		} else {
			if src, err = cc.resolve(bi, bi.attr("fieldName"), sc, nil, MissingValue); err != nil {
				return err
			}
			dt = cc.fieldType(src)
		}
		ins = append(ins, pend{bi, src, dt})
		// Register categories first so every table has its final width.
		for _, pc := range bi.all("PairCounts") {
			if tvc := pc.child("TargetValueCounts"); tvc != nil {
				for _, c := range tvc.all("TargetValueCount") {
					m.catIndex(m.catValue(c.attr("value")))
				}
			}
		}
		if tvs := bi.child("TargetValueStats"); tvs != nil {
			for _, c := range tvs.all("TargetValueStat") {
				m.catIndex(m.catValue(c.attr("value")))
			}
		}
	}
	k := len(m.cats)
	nb.priors = make([]float64, k)
	for _, p := range priors {
		nb.priors[p.cat] = p.count
	}
	for _, pi := range ins {
		bi := pi.n
		in := bayesInput{src: pi.src, totals: make([]float64, k)}
		if tvs := bi.child("TargetValueStats"); tvs != nil {
			in.cont = true
			in.dist = make([]bayesDist, k)
			for _, c := range tvs.all("TargetValueStat") {
				cat := m.catIndex(m.catValue(c.attr("value")))
				var d bayesDist
				for _, dn := range c.children {
					switch dn.name {
					case "GaussianDistribution":
						d.kind = dn.name
						if d.mean, err = dn.float("mean", 0); err != nil {
							return err
						}
						if d.vari, err = dn.float("variance", 1); err != nil {
							return err
						}
					case "PoissonDistribution":
						d.kind = dn.name
						if d.mean, err = dn.float("mean", 0); err != nil {
							return err
						}
					case "UniformDistribution":
						d.kind = dn.name
						if d.lo, err = dn.float("lower", 0); err != nil {
							return err
						}
						if d.hi, err = dn.float("upper", 0); err != nil {
							return err
						}
					case "Extension":
					default:
						return dn.unsupported("distribution")
					}
				}
				in.dist[cat] = d
			}
		} else {
			for _, pc := range bi.all("PairCounts") {
				v := StringValue(pc.attr("value"))
				if pi.dt != TypeUnknown {
					if cv, ok := parseConst(pc.attr("value"), pi.dt); ok {
						v = cv
					}
				}
				row := make([]float64, k)
				if tvc := pc.child("TargetValueCounts"); tvc != nil {
					for _, c := range tvc.all("TargetValueCount") {
						cnt, err := c.float("count", 0)
						if err != nil {
							return err
						}
						cat := m.catIndex(m.catValue(c.attr("value")))
						row[cat] = cnt
						in.totals[cat] += cnt
					}
				}
				in.vals = append(in.vals, v)
				in.counts = append(in.counts, row)
			}
		}
		nb.inputs = append(nb.inputs, in)
	}
	m.impl = nb
	return nil
}

func (d *bayesDist) density(x float64) float64 {
	switch d.kind {
	case "GaussianDistribution":
		t := x - d.mean
		return math.Exp(-t*t/(2*d.vari)) / math.Sqrt(2*math.Pi*d.vari)
	case "PoissonDistribution":
		k := math.Floor(x)
		lg, _ := math.Lgamma(k + 1)
		return math.Exp(k*math.Log(d.mean) - d.mean - lg)
	case "UniformDistribution":
		if x >= d.lo && x <= d.hi {
			return 1 / (d.hi - d.lo)
		}
		return 0
	}
	return 1
}

func (nb *naiveBayes) score(c *ctx, m *model, p *prediction) {
	k := len(m.cats)
	probs := p.ownProbs(k)
	copy(probs, nb.priors)
	for i := range nb.inputs {
		in := &nb.inputs[i]
		v := in.src.eval(c)
		if v.K == Missing {
			continue
		}
		if in.cont {
			x, ok := v.num()
			if !ok {
				continue
			}
			for j := range probs {
				d := in.dist[j].density(x)
				if d < nb.threshold || d == 0 {
					d = nb.threshold
				}
				probs[j] *= d
			}
			continue
		}
		row := -1
		for r, cv := range in.vals {
			if equalValues(cv, v) {
				row = r
				break
			}
		}
		if row < 0 {
			continue
		}
		for j := range probs {
			q := 0.0
			if in.totals[j] > 0 {
				q = in.counts[row][j] / in.totals[j]
			}
			if q < nb.threshold || q == 0 {
				q = nb.threshold
			}
			probs[j] *= q
		}
	}
	s := 0.0
	for _, v := range probs {
		s += v
	}
	if s == 0 || math.IsNaN(s) {
		p.probs = nil
		return
	}
	for j := range probs {
		probs[j] /= s
	}
	p.setCatFromProbs(m)
}
