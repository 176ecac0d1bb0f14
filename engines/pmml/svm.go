package pmml

import (
	"math"
	"strconv"
)

type vecField struct {
	src  expr
	cat  bool
	val  Value
	coef float64
}

type svmMachine struct {
	target, alt int // category indexes; alt -1 when none
	sv          []int
	alpha       []float64
	b           float64
	linear      []float64 // svmRepresentation="Coefficients": weights by field
	threshold   float64
}

type svmModel struct {
	kernel         string
	gamma, coef0   float64
	degree         float64
	fields         []vecField
	vectors        [][]float64
	machines       []svmMachine
	oneVsOne       bool
	maxWins        bool
	representation string
}

func (cc *compiler) svm(n *node, m *model, sc *scope) error {
	s := &svmModel{representation: n.attrOr("svmRepresentation", "SupportVectors"), maxWins: n.attr("maxWins") == "true"}
	switch n.attrOr("classificationMethod", "OneAgainstAll") {
	case "OneAgainstAll":
	case "OneAgainstOne":
		s.oneVsOne = true
	default:
		return n.errf("classificationMethod %q is not OneAgainstAll or OneAgainstOne", n.attr("classificationMethod"))
	}
	switch s.representation {
	case "SupportVectors", "Coefficients":
	default:
		return n.errf("svmRepresentation %q is not SupportVectors or Coefficients", s.representation)
	}
	threshold, err := n.float("threshold", 0)
	if err != nil {
		return err
	}
	ids := map[string]int{}
	for _, c := range n.children {
		switch c.name {
		case "LinearKernelType", "PolynomialKernelType", "RadialBasisKernelType", "SigmoidKernelType":
			s.kernel = c.name
			if s.gamma, err = c.float("gamma", 1); err != nil {
				return err
			}
			if s.coef0, err = c.float("coef0", 1); err != nil {
				return err
			}
			if s.degree, err = c.float("degree", 1); err != nil {
				return err
			}
		case "VectorDictionary":
			vf := c.child("VectorFields")
			if vf == nil {
				return c.errf("VectorDictionary without VectorFields")
			}
			for _, f := range vf.children {
				switch f.name {
				case "FieldRef":
					src, err := cc.expr(f, sc, nil)
					if err != nil {
						return err
					}
					s.fields = append(s.fields, vecField{src: src, coef: 1})
				case "CategoricalPredictor":
					src, err := cc.resolve(f, f.attr("name"), sc, nil, MissingValue)
					if err != nil {
						return err
					}
					coef, err := f.float("coefficient", 1)
					if err != nil {
						return err
					}
					v := StringValue(f.attr("value"))
					if sl, ok := sc.lookup(f.attr("name")); ok && cc.m.slots[sl].dt != TypeUnknown {
						if cv, ok := parseConst(f.attr("value"), cc.m.slots[sl].dt); ok {
							v = cv
						}
					}
					s.fields = append(s.fields, vecField{src: src, cat: true, val: v, coef: coef})
				case "Extension":
				default:
					return f.unsupported("")
				}
			}
			for _, vi := range c.all("VectorInstance") {
				vec, err := readVector(vi, len(s.fields))
				if err != nil {
					return err
				}
				ids[vi.attr("id")] = len(s.vectors)
				s.vectors = append(s.vectors, vec)
			}
		case "SupportVectorMachine":
			mc := svmMachine{target: -1, alt: -1, threshold: threshold}
			if c.has("threshold") {
				if mc.threshold, err = c.float("threshold", 0); err != nil {
					return err
				}
			}
			if m.classification() {
				if c.has("targetCategory") {
					mc.target = m.catIndex(m.catValue(c.attr("targetCategory")))
				}
				if c.has("alternateTargetCategory") {
					mc.alt = m.catIndex(m.catValue(c.attr("alternateTargetCategory")))
				}
			}
			if svs := c.child("SupportVectors"); svs != nil {
				for _, sv := range svs.all("SupportVector") {
					i, ok := ids[sv.attr("vectorId")]
					if !ok {
						return sv.errf("vectorId %q is not in the VectorDictionary", sv.attr("vectorId"))
					}
					mc.sv = append(mc.sv, i)
				}
			}
			co := c.child("Coefficients")
			if co == nil {
				return c.errf("SupportVectorMachine without Coefficients")
			}
			if mc.b, err = co.float("absoluteValue", 0); err != nil {
				return err
			}
			for _, k := range co.all("Coefficient") {
				v, err := k.float("value", 0)
				if err != nil {
					return err
				}
				mc.alpha = append(mc.alpha, v)
			}
			if s.representation == "Coefficients" {
				if len(mc.alpha) != len(s.fields) {
					return co.errf("%d coefficients for %d vector fields", len(mc.alpha), len(s.fields))
				}
				mc.linear = mc.alpha
			} else if len(mc.alpha) != len(mc.sv) {
				return co.errf("%d coefficients for %d support vectors", len(mc.alpha), len(mc.sv))
			}
			s.machines = append(s.machines, mc)
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension":
		default:
			return c.unsupported("")
		}
	}
	if s.kernel == "" && s.representation != "Coefficients" {
		return n.errf("SupportVectorMachineModel without a kernel type")
	}
	if len(s.machines) == 0 {
		return n.errf("SupportVectorMachineModel without a SupportVectorMachine")
	}
	m.impl = s
	m.scratch = len(s.fields) + len(s.vectors)
	return nil
}

// readVector reads a VectorInstance as a dense vector.
func readVector(vi *node, n int) ([]float64, error) {
	vec := make([]float64, n)
	if sa := vi.child("REAL-SparseArray"); sa != nil {
		var idx []float64
		var ent []float64
		var err error
		if in := sa.child("Indices"); in != nil {
			if idx, err = parseNumArray(in); err != nil {
				return nil, err
			}
		}
		if en := sa.child("REAL-Entries"); en != nil {
			if ent, err = parseNumArray(en); err != nil {
				return nil, err
			}
		}
		if len(idx) != len(ent) {
			return nil, sa.errf("%d indices for %d entries", len(idx), len(ent))
		}
		for i, ix := range idx {
			j := int(ix) - 1
			if j < 0 || j >= n {
				return nil, sa.errf("index %d outside 1..%d", int(ix), n)
			}
			vec[j] = ent[i]
		}
		return vec, nil
	}
	for _, c := range vi.children {
		if c.name == "Array" || c.name == "REAL-Array" {
			vals, err := parseNumArray(c)
			if err != nil {
				return nil, err
			}
			if len(vals) != n {
				return nil, c.errf("vector has %d values for %d fields", len(vals), n)
			}
			return vals, nil
		}
	}
	return nil, vi.errf("VectorInstance %s without an array", strconv.Quote(vi.attr("id")))
}

func (s *svmModel) kernelOf(x, y []float64) float64 {
	switch s.kernel {
	case "RadialBasisKernelType":
		d := 0.0
		for i := range x {
			t := x[i] - y[i]
			d += t * t
		}
		return math.Exp(-s.gamma * d)
	}
	dot := 0.0
	for i := range x {
		dot += x[i] * y[i]
	}
	switch s.kernel {
	case "PolynomialKernelType":
		return math.Pow(s.gamma*dot+s.coef0, s.degree)
	case "SigmoidKernelType":
		return math.Tanh(s.gamma*dot + s.coef0)
	}
	return dot
}

func (s *svmModel) score(c *ctx, m *model, p *prediction) {
	nf := len(s.fields)
	x := p.scratch[:nf]
	for i, f := range s.fields {
		v := f.src.eval(c)
		if v.K == Missing {
			return
		}
		if f.cat {
			if equalValues(v, f.val) {
				x[i] = f.coef
			} else {
				x[i] = 0
			}
			continue
		}
		fv, ok := v.num()
		if !ok {
			return
		}
		x[i] = fv
	}
	kv := p.scratch[nf:]
	for i := range kv {
		kv[i] = math.NaN()
	}
	value := func(mc *svmMachine) float64 {
		if mc.linear != nil {
			y := mc.b
			for i, w := range mc.linear {
				y += w * x[i]
			}
			return y
		}
		y := mc.b
		for j, sv := range mc.sv {
			k := kv[sv]
			if k != k {
				k = s.kernelOf(x, s.vectors[sv])
				kv[sv] = k
			}
			y += mc.alpha[j] * k
		}
		return y
	}
	if !m.classification() {
		p.ok = true
		p.val = FloatValue(value(&s.machines[0]))
		return
	}
	probs := p.ownProbs(len(m.cats))
	if s.oneVsOne || len(s.machines) == 1 && s.machines[0].alt >= 0 {
		for i := range s.machines {
			mc := &s.machines[i]
			y := value(mc)
			if y < mc.threshold {
				probs[mc.target]++
			} else if mc.alt >= 0 {
				probs[mc.alt]++
			}
		}
		for i := range probs {
			probs[i] /= float64(len(s.machines))
		}
		p.setCatFromProbs(m)
		return
	}
	best, bv := -1, 0.0
	for i := range s.machines {
		mc := &s.machines[i]
		y := value(mc)
		if best < 0 || s.maxWins && y > bv || !s.maxWins && y < bv {
			best, bv = mc.target, y
		}
	}
	if best < 0 {
		p.probs = nil
		return
	}
	probs[best] = 1
	p.setCatFromProbs(m)
}
