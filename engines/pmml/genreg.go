package pmml

import (
	"math"
	"sort"
	"strconv"
)

// grCell is one PPCell: a factor level indicator, a contrast-matrix entry
// or a covariate power.
type grCell struct {
	src    expr
	factor bool
	val    Value
	exp    float64
	con    *contrast
	col    int
}

type contrast struct {
	cats []Value
	rows [][]float64
}

type grParam struct {
	name  string
	ref   float64
	cells []grCell
}

type cumCell struct {
	time, hazard float64
}

type stratum struct {
	val     Value
	maxTime float64
	cells   []cumCell
}

type generalRegression struct {
	modelType  string
	params     []grParam
	betas      [][]float64 // by category index (classification) or [0] (regression)
	shared     []float64   // betas without targetCategory (ordinal models)
	hasBeta    []bool      // by category: whether the category has its own PCells
	link       string
	linkParam  float64
	distParam  float64
	cumLink    string
	offset     float64
	offsetSrc  expr
	trials     float64
	trialsSrc  expr
	refCat     int
	endTime    expr
	strataSrc  expr
	baseline   []cumCell
	baseMax    float64
	strata     []stratum
	binaryProb int // generalizedLinear classification: category the link gives
}

func (cc *compiler) generalRegression(n *node, m *model, sc *scope) error {
	g := &generalRegression{modelType: n.attr("modelType"), link: n.attr("linkFunction"), cumLink: n.attrOr("cumulativeLink", "logit"), refCat: -1, trials: 1, binaryProb: -1}
	switch g.modelType {
	case "regression", "generalLinear", "generalizedLinear", "multinomialLogistic", "ordinalMultinomial", "CoxRegression":
	default:
		return n.unsupported("modelType " + strconv.Quote(g.modelType))
	}
	var err error
	if g.linkParam, err = n.float("linkParameter", 1); err != nil {
		return err
	}
	if g.distParam, err = n.float("distParameter", 1); err != nil {
		return err
	}
	if g.offset, err = n.float("offsetValue", 0); err != nil {
		return err
	}
	if g.trials, err = n.float("trialsValue", 1); err != nil {
		return err
	}
	if v := n.attr("offsetVariable"); v != "" {
		if g.offsetSrc, err = cc.resolve(n, v, sc, nil, MissingValue); err != nil {
			return err
		}
	}
	if v := n.attr("trialsVariable"); v != "" {
		if g.trialsSrc, err = cc.resolve(n, v, sc, nil, MissingValue); err != nil {
			return err
		}
	}
	if g.modelType == "generalizedLinear" {
		switch g.link {
		case "identity", "log", "logit", "probit", "cloglog", "loglog", "cauchit", "power", "oddspower", "negbin", "logc":
		case "":
			return n.errf("generalizedLinear needs a linkFunction")
		default:
			return n.unsupported("linkFunction " + strconv.Quote(g.link))
		}
	}
	switch g.cumLink {
	case "logit", "probit", "cloglog", "loglog", "cauchit":
	default:
		return n.unsupported("cumulativeLink " + strconv.Quote(g.cumLink))
	}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "ParameterList", "FactorList", "CovariateList", "PPMatrix", "ParamMatrix",
			"EventValues", "BaseCumHazardTables":
		case "PCovMatrix":
		default:
			return c.unsupported("")
		}
	}
	pidx := map[string]int{}
	if pl := n.child("ParameterList"); pl != nil {
		for _, p := range pl.all("Parameter") {
			ref, err := p.float("referencePoint", 0)
			if err != nil {
				return err
			}
			pidx[p.attr("name")] = len(g.params)
			g.params = append(g.params, grParam{name: p.attr("name"), ref: ref})
		}
	}
	factors := map[string]*contrast{}
	isFactor := map[string]bool{}
	if fl := n.child("FactorList"); fl != nil {
		for _, p := range fl.all("Predictor") {
			isFactor[p.attr("name")] = true
			if mx := p.child("Matrix"); mx != nil {
				con := &contrast{}
				if cats := p.child("Categories"); cats != nil {
					for _, ct := range cats.all("Category") {
						con.cats = append(con.cats, StringValue(ct.attr("value")))
					}
				}
				for _, a := range mx.all("Array") {
					row, err := parseNumArray(a)
					if err != nil {
						return err
					}
					con.rows = append(con.rows, row)
				}
				if len(con.rows) != len(con.cats) {
					return mx.errf("contrast Matrix has %d rows for %d categories", len(con.rows), len(con.cats))
				}
				factors[p.attr("name")] = con
			}
		}
	}
	if pp := n.child("PPMatrix"); pp != nil {
		for _, c := range pp.all("PPCell") {
			pi, ok := pidx[c.attr("parameterName")]
			if !ok {
				return c.errf("parameterName %q is not in the ParameterList", c.attr("parameterName"))
			}
			name := c.attr("predictorName")
			src, err := cc.resolve(c, name, sc, nil, MissingValue)
			if err != nil {
				return err
			}
			cell := grCell{src: src}
			if isFactor[name] {
				cell.factor = true
				cell.val = StringValue(c.attr("value"))
				if s, ok := sc.lookup(name); ok {
					if v, ok := parseConst(c.attr("value"), cc.m.slots[s].dt); ok && cc.m.slots[s].dt != TypeUnknown {
						cell.val = v
					}
				}
				if con := factors[name]; con != nil {
					cell.con = con
					cell.col = -1
					for i, cv := range con.cats {
						if equalValues(cv, cell.val) {
							cell.col = i
						}
					}
					if cell.col < 0 || len(con.rows) == 0 || cell.col >= len(con.rows[0]) {
						return c.errf("PPCell value %q names no column of the contrast matrix of %q", c.attr("value"), name)
					}
				}
			} else {
				f, err := parseFloat(c.attr("value"))
				if err != nil {
					return c.errf("covariate PPCell value %q is not a number", c.attr("value"))
				}
				cell.exp = f
			}
			g.params[pi].cells = append(g.params[pi].cells, cell)
		}
	}
	if m.classification() {
		if r := n.attr("targetReferenceCategory"); r != "" {
			g.refCat = m.catIndex(m.catValue(r))
		}
	}
	pm := n.child("ParamMatrix")
	if pm == nil {
		return n.errf("GeneralRegressionModel without a ParamMatrix")
	}
	type pc struct {
		cat  int
		pi   int
		beta float64
	}
	var cells []pc
	for _, c := range pm.all("PCell") {
		pi, ok := pidx[c.attr("parameterName")]
		if !ok {
			return c.errf("parameterName %q is not in the ParameterList", c.attr("parameterName"))
		}
		b, err := c.float("beta", 0)
		if err != nil {
			return err
		}
		cat := -1
		if m.classification() && c.has("targetCategory") {
			cat = m.catIndex(m.catValue(c.attr("targetCategory")))
		}
		cells = append(cells, pc{cat, pi, b})
	}
	np := len(g.params)
	g.shared = make([]float64, np)
	if m.classification() {
		k := len(m.cats)
		g.betas = make([][]float64, k)
		g.hasBeta = make([]bool, k)
		for i := range g.betas {
			g.betas[i] = make([]float64, np)
		}
		for _, c := range cells {
			if c.cat < 0 {
				g.shared[c.pi] += c.beta
				continue
			}
			g.betas[c.cat][c.pi] = c.beta
			g.hasBeta[c.cat] = true
		}
		if g.modelType == "generalizedLinear" {
			for i, h := range g.hasBeta {
				if h {
					g.binaryProb = i
					break
				}
			}
			if g.binaryProb < 0 {
				g.binaryProb = 0
				copy(g.betas[0], g.shared)
				g.hasBeta[0] = true
			}
			if k != 2 {
				return n.unsupported("generalizedLinear classification with other than two categories")
			}
		}
	} else {
		g.betas = [][]float64{make([]float64, np)}
		for _, c := range cells {
			g.betas[0][c.pi] += c.beta
		}
	}
	if g.modelType == "CoxRegression" {
		if g.endTime, err = cc.resolve(n, n.attr("endTimeVariable"), sc, nil, MissingValue); err != nil {
			return err
		}
		if v := n.attr("baselineStrataVariable"); v != "" {
			if g.strataSrc, err = cc.resolve(n, v, sc, nil, MissingValue); err != nil {
				return err
			}
		}
		bt := n.child("BaseCumHazardTables")
		if bt == nil {
			return n.errf("CoxRegression without BaseCumHazardTables")
		}
		readCells := func(p *node) []cumCell {
			var out []cumCell
			for _, bc := range p.all("BaselineCell") {
				t, _ := bc.float("time", 0)
				h, _ := bc.float("cumHazard", 0)
				out = append(out, cumCell{t, h})
			}
			sort.Slice(out, func(a, b int) bool { return out[a].time < out[b].time })
			return out
		}
		g.baseline = readCells(bt)
		if g.baseMax, err = bt.float("maxTime", math.Inf(1)); err != nil {
			return err
		}
		for _, s := range bt.all("BaselineStratum") {
			mt, err := s.float("maxTime", math.Inf(1))
			if err != nil {
				return err
			}
			v, _ := parseConst(s.attr("value"), TypeUnknown)
			g.strata = append(g.strata, stratum{val: v, maxTime: mt, cells: readCells(s)})
		}
	}
	m.impl = g
	m.scratch = len(g.params)
	return nil
}

// x computes a parameter's design value; ok=false when an input is missing.
func (p *grParam) x(c *ctx) (float64, bool) {
	x := 1.0
	for i := range p.cells {
		cell := &p.cells[i]
		v := cell.src.eval(c)
		if v.K == Missing {
			return 0, false
		}
		if cell.factor {
			if cell.con != nil {
				row := -1
				for j, cv := range cell.con.cats {
					if equalValues(cv, v) {
						row = j
						break
					}
				}
				if row < 0 || cell.col >= len(cell.con.rows[row]) {
					return 0, false
				}
				x *= cell.con.rows[row][cell.col]
				continue
			}
			if !equalValues(v, cell.val) {
				return 0, true
			}
			continue
		}
		f, ok := v.num()
		if !ok {
			return 0, false
		}
		if cell.exp != 1 {
			f = math.Pow(f, cell.exp)
		}
		x *= f
	}
	return x, true
}

func (g *generalRegression) eta(c *ctx, betas []float64, xs []float64) float64 {
	s := 0.0
	for i, b := range betas {
		if b != 0 {
			s += b * xs[i]
		}
	}
	return s
}

func (g *generalRegression) score(c *ctx, m *model, p *prediction) {
	xs := p.scratch
	if len(xs) < len(g.params) {
		xs = make([]float64, len(g.params))
	}
	for i := range g.params {
		gp := &g.params[i]
		used := false
		for _, bs := range g.betas {
			if bs[i] != 0 {
				used = true
			}
		}
		if g.shared[i] != 0 {
			used = true
		}
		if !used {
			xs[i] = 0
			continue
		}
		x, ok := gp.x(c)
		if !ok {
			return
		}
		if g.modelType == "CoxRegression" {
			x -= gp.ref
		}
		xs[i] = x
	}
	offset := g.offset
	if g.offsetSrc != nil {
		v := g.offsetSrc.eval(c)
		f, ok := v.num()
		if v.K == Missing || !ok {
			return
		}
		offset = f
	}
	switch g.modelType {
	case "regression", "generalLinear":
		p.ok = true
		p.val = FloatValue(g.eta(c, g.betas[0], xs) + offset)
		return
	case "generalizedLinear":
		trials := g.trials
		if g.trialsSrc != nil {
			v := g.trialsSrc.eval(c)
			f, ok := v.num()
			if v.K == Missing || !ok {
				return
			}
			trials = f
		}
		if m.classification() {
			e := g.eta(c, g.betas[g.binaryProb], xs) + offset
			pr := g.invLink(e)
			probs := p.ownProbs(len(m.cats))
			probs[g.binaryProb] = pr
			probs[1-g.binaryProb] = 1 - pr
			p.setCatFromProbs(m)
			return
		}
		p.ok = true
		p.val = FloatValue(g.invLink(g.eta(c, g.betas[0], xs)+offset) * trials)
		return
	case "multinomialLogistic":
		k := len(m.cats)
		probs := p.ownProbs(k)
		mx := math.Inf(-1)
		for i := 0; i < k; i++ {
			e := 0.0
			if i != g.refCat && g.hasBeta[i] {
				e = g.eta(c, g.betas[i], xs) + offset
			}
			probs[i] = e
			mx = math.Max(mx, e)
		}
		s := 0.0
		for i := range probs {
			probs[i] = math.Exp(probs[i] - mx)
			s += probs[i]
		}
		for i := range probs {
			probs[i] /= s
		}
		p.setCatFromProbs(m)
		return
	case "ordinalMultinomial":
		k := len(m.cats)
		probs := p.ownProbs(k)
		common := g.eta(c, g.shared, xs) + offset
		prev := 0.0
		for i := 0; i < k; i++ {
			cum := 1.0
			if i < k-1 {
				cum = link(g.cumLink, common+g.eta(c, g.betas[i], xs))
			}
			probs[i] = cum - prev
			prev = cum
		}
		p.setCatFromProbs(m)
		return
	case "CoxRegression":
		tv := g.endTime.eval(c)
		t, ok := tv.num()
		if tv.K == Missing || !ok {
			return
		}
		cells, maxT := g.baseline, g.baseMax
		if g.strataSrc != nil {
			sv := g.strataSrc.eval(c)
			if sv.K == Missing {
				return
			}
			found := false
			for i := range g.strata {
				if equalValues(g.strata[i].val, sv) {
					cells, maxT, found = g.strata[i].cells, g.strata[i].maxTime, true
					break
				}
			}
			if !found {
				return
			}
		}
		if t > maxT {
			return
		}
		h := 0.0
		for _, bc := range cells {
			if bc.time <= t {
				h = bc.hazard
			} else {
				break
			}
		}
		r := math.Exp(g.eta(c, g.betas[0], xs))
		p.ok = true
		p.val = FloatValue(h * r)
	}
}

func (g *generalRegression) invLink(e float64) float64 {
	switch g.link {
	case "identity":
		return e
	case "log":
		return math.Exp(e)
	case "logit", "probit", "cloglog", "loglog", "cauchit":
		return link(g.link, e)
	case "logc":
		return 1 - math.Exp(e)
	case "power":
		if g.linkParam == 0 {
			return math.Exp(e)
		}
		return math.Pow(e, 1/g.linkParam)
	case "oddspower":
		if g.linkParam == 0 {
			return 1 / (1 + math.Exp(-e))
		}
		t := math.Pow(1+g.linkParam*e, 1/g.linkParam)
		return t / (1 + t)
	case "negbin":
		return 1 / (g.distParam * (math.Exp(-e) - 1))
	}
	return e
}
