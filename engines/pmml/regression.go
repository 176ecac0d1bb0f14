package pmml

import (
	"math"
	"strconv"
)

type numPred struct {
	src  expr
	slot int // the field's slot when src is a plain FieldRef, else -1
	exp  float64
	coef float64
}

type catGroup struct {
	src   expr
	vals  []Value
	coefs []float64
}

type termPred struct {
	srcs []expr
	coef float64
}

type regTable struct {
	intercept float64
	nums      []numPred
	cats      []catGroup
	terms     []termPred
	cat       int
}

func (t *regTable) value(c *ctx) (float64, bool) {
	y := t.intercept
	for i := range t.nums {
		np := &t.nums[i]
		var v Value
		if np.slot >= 0 {
			if c.done[np.slot] {
				v = c.vals[np.slot]
			} else {
				v = c.get(np.slot)
			}
		} else {
			v = np.src.eval(c)
		}
		var x float64
		if v.K == Float {
			x = v.F
		} else {
			f, ok := v.num()
			if v.K == Missing || !ok {
				return 0, false
			}
			x = f
		}
		if np.exp != 1 {
			x = math.Pow(x, np.exp)
		}
		y += np.coef * x
	}
	for i := range t.cats {
		g := &t.cats[i]
		v := g.src.eval(c)
		if v.K == Missing {
			return 0, false
		}
		for j, cv := range g.vals {
			if equalValues(v, cv) {
				y += g.coefs[j]
				break
			}
		}
	}
	for i := range t.terms {
		tp := &t.terms[i]
		x := tp.coef
		for _, s := range tp.srcs {
			v := s.eval(c)
			f, ok := v.num()
			if v.K == Missing || !ok {
				return 0, false
			}
			x *= f
		}
		y += x
	}
	return y, true
}

type regressionModel struct {
	tables []*regTable
	norm   string
}

func (cc *compiler) regTable(t *node, m *model, sc *scope) (*regTable, error) {
	rt := &regTable{cat: -1}
	var err error
	if rt.intercept, err = t.float("intercept", 0); err != nil {
		return nil, err
	}
	if !t.has("intercept") {
		return nil, t.errf("RegressionTable needs an intercept attribute")
	}
	groups := map[string]int{}
	for _, c := range t.children {
		switch c.name {
		case "NumericPredictor":
			src, err := cc.resolve(c, c.attr("name"), sc, nil, MissingValue)
			if err != nil {
				return nil, err
			}
			np := numPred{src: src, slot: -1}
			if fr, ok := src.(*fieldRef); ok && fr.missing.K == Missing {
				np.slot = fr.slot
			}
			if np.exp, err = c.float("exponent", 1); err != nil {
				return nil, err
			}
			if np.coef, err = c.float("coefficient", 0); err != nil {
				return nil, err
			}
			rt.nums = append(rt.nums, np)
		case "CategoricalPredictor":
			name := c.attr("name")
			gi, ok := groups[name]
			if !ok {
				src, err := cc.resolve(c, name, sc, nil, MissingValue)
				if err != nil {
					return nil, err
				}
				gi = len(rt.cats)
				groups[name] = gi
				rt.cats = append(rt.cats, catGroup{src: src})
			}
			coef, err := c.float("coefficient", 0)
			if err != nil {
				return nil, err
			}
			v := StringValue(c.attr("value"))
			if s, ok := sc.lookup(name); ok {
				if cv, ok := parseConst(c.attr("value"), cc.m.slots[s].dt); ok && cc.m.slots[s].dt != TypeUnknown {
					v = cv
				}
			}
			g := &rt.cats[gi]
			g.vals = append(g.vals, v)
			g.coefs = append(g.coefs, coef)
		case "PredictorTerm":
			tp := termPred{}
			if tp.coef, err = c.float("coefficient", 0); err != nil {
				return nil, err
			}
			for _, f := range c.all("FieldRef") {
				src, err := cc.expr(f, sc, nil)
				if err != nil {
					return nil, err
				}
				tp.srcs = append(tp.srcs, src)
			}
			rt.terms = append(rt.terms, tp)
		case "Extension":
		default:
			return nil, c.unsupported("")
		}
	}
	if m.classification() {
		if !t.has("targetCategory") {
			return nil, t.errf("RegressionTable of a classification model needs targetCategory")
		}
		rt.cat = m.catIndex(m.catValue(t.attr("targetCategory")))
	}
	return rt, nil
}

func (cc *compiler) regression(n *node, m *model, sc *scope) error {
	rm := &regressionModel{norm: n.attrOr("normalizationMethod", "none")}
	switch rm.norm {
	case "none", "simplemax", "softmax", "logit", "probit", "cloglog", "exp", "loglog", "cauchit":
	default:
		return n.unsupported("normalizationMethod " + strconv.Quote(rm.norm))
	}
	for _, c := range n.children {
		switch c.name {
		case "RegressionTable":
			rt, err := cc.regTable(c, m, sc)
			if err != nil {
				return err
			}
			rm.tables = append(rm.tables, rt)
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension":
		default:
			return c.unsupported("")
		}
	}
	if len(rm.tables) == 0 {
		return n.errf("RegressionModel without a RegressionTable")
	}
	if !m.classification() && len(rm.tables) != 1 {
		return n.errf("a regression RegressionModel needs exactly one RegressionTable, has %d", len(rm.tables))
	}
	m.impl = rm
	return nil
}

// link applies an inverse link function.
func link(norm string, y float64) float64 {
	switch norm {
	case "logit":
		return 1 / (1 + math.Exp(-y))
	case "probit":
		return 0.5 * math.Erfc(-y/math.Sqrt2)
	case "cloglog":
		return 1 - math.Exp(-math.Exp(y))
	case "loglog":
		return math.Exp(-math.Exp(-y))
	case "cauchit":
		return 0.5 + math.Atan(y)/math.Pi
	case "exp":
		return math.Exp(y)
	}
	return y
}

func (rm *regressionModel) score(c *ctx, m *model, p *prediction) {
	if !m.classification() {
		y, ok := rm.tables[0].value(c)
		if !ok {
			return
		}
		if m.floatCtx {
			y = float64(float32(y))
		}
		switch rm.norm {
		case "softmax", "logit":
			y = 1 / (1 + math.Exp(-y))
		case "none", "simplemax":
		default:
			y = link(rm.norm, y)
		}
		p.ok = true
		p.val = FloatValue(y)
		return
	}
	k := len(m.cats)
	probs := p.ownProbs(k)
	ys := p.cbuf[:len(rm.tables)]
	for i, t := range rm.tables {
		y, ok := t.value(c)
		if !ok {
			p.probs = nil
			return
		}
		if m.floatCtx {
			y = float64(float32(y))
		}
		ys[i] = y
	}
	normalizeClasses(rm.norm, m, ys, func(i int) int { return rm.tables[i].cat }, probs, m.floatCtx)
	p.setCatFromProbs(m)
}

// normalizeClasses turns per-table scores into class probabilities.
func normalizeClasses(norm string, m *model, ys []float64, cat func(int) int, probs []float64, f32 bool) {
	n := len(ys)
	switch norm {
	case "softmax":
		mx := math.Inf(-1)
		for _, y := range ys {
			mx = math.Max(mx, y)
		}
		s := 0.0
		for i, y := range ys {
			e := math.Exp(y - mx)
			probs[cat(i)] = e
			s += e
		}
		for i := range ys {
			probs[cat(i)] /= s
		}
	case "simplemax":
		s := 0.0
		for _, y := range ys {
			s += y
		}
		for i, y := range ys {
			probs[cat(i)] = y / s
		}
	default:
		if n == 2 && m.targetOp != Ordinal {
			p0 := link(norm, ys[0])
			if f32 && norm == "logit" {
				// Single precision as XGBoost computes it: 1f / (1f + expf(-x)).
				e := float32(math.Exp(-float64(float32(ys[0]))))
				p0 = float64(float32(1) / (float32(1) + e))
			} else if f32 {
				p0 = float64(float32(p0))
			}
			probs[cat(0)] = p0
			probs[cat(1)] = 1 - p0
			return
		}
		if m.targetOp == Ordinal {
			prev := 0.0
			for i := 0; i < n; i++ {
				cum := 1.0
				if i < n-1 {
					cum = link(norm, ys[i])
				}
				probs[cat(i)] = cum - prev
				prev = cum
			}
			return
		}
		if norm == "none" {
			s := 0.0
			for i := 0; i < n-1; i++ {
				probs[cat(i)] = ys[i]
				s += ys[i]
			}
			probs[cat(n-1)] = 1 - s
			return
		}
		s := 0.0
		for i, y := range ys {
			v := link(norm, y)
			probs[cat(i)] = v
			s += v
		}
		for i := range ys {
			probs[cat(i)] /= s
		}
	}
}
