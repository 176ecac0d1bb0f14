package pmml

type scAttr struct {
	cond    cond
	partial float64
	complex expr
	code    int // reason code index, -1 when none
}

type scChar struct {
	attrs    []scAttr
	baseline float64
}

type scorecard struct {
	initial    float64
	chars      []scChar
	useReasons bool
	below      bool
	codes      []string
}

func (cc *compiler) scorecard(n *node, m *model, sc *scope) error {
	s := &scorecard{useReasons: n.attr("useReasonCodes") != "false", below: n.attrOr("reasonCodeAlgorithm", "pointsBelow") == "pointsBelow"}
	switch n.attrOr("reasonCodeAlgorithm", "pointsBelow") {
	case "pointsBelow", "pointsAbove":
	default:
		return n.errf("reasonCodeAlgorithm %q is not pointsBelow or pointsAbove", n.attr("reasonCodeAlgorithm"))
	}
	var err error
	if s.initial, err = n.float("initialScore", 0); err != nil {
		return err
	}
	modelBase, err := n.float("baselineScore", 0)
	if err != nil {
		return err
	}
	codeIdx := map[string]int{}
	code := func(c string) int {
		if c == "" {
			return -1
		}
		if i, ok := codeIdx[c]; ok {
			return i
		}
		codeIdx[c] = len(s.codes)
		s.codes = append(s.codes, c)
		return len(s.codes) - 1
	}
	chs := n.child("Characteristics")
	if chs == nil {
		return n.errf("Scorecard without Characteristics")
	}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "Characteristics":
		default:
			return c.unsupported("")
		}
	}
	for _, ch := range chs.all("Characteristic") {
		sch := scChar{}
		if sch.baseline, err = ch.float("baselineScore", modelBase); err != nil {
			return err
		}
		if s.useReasons && !ch.has("baselineScore") && !n.has("baselineScore") {
			return ch.errf("reason codes need a baselineScore on the Characteristic or the Scorecard")
		}
		chCode := ch.attr("reasonCode")
		for _, a := range ch.all("Attribute") {
			pr, err := cc.predicateOf(a, sc)
			if err != nil {
				return err
			}
			at := scAttr{cond: pr, code: -1}
			if at.partial, err = a.float("partialScore", 0); err != nil {
				return err
			}
			if cps := a.child("ComplexPartialScore"); cps != nil {
				if at.complex, err = cc.exprOf(cps, sc, nil); err != nil {
					return err
				}
			} else if !a.has("partialScore") {
				return a.errf("Attribute needs a partialScore or a ComplexPartialScore")
			}
			rc := a.attr("reasonCode")
			if rc == "" {
				rc = chCode
			}
			if s.useReasons && rc == "" {
				return a.errf("reason codes are on but neither the Attribute nor its Characteristic has a reasonCode")
			}
			at.code = code(rc)
			sch.attrs = append(sch.attrs, at)
		}
		s.chars = append(s.chars, sch)
	}
	m.impl = s
	m.scratch = len(s.codes)
	m.nreasons = len(s.codes)
	return nil
}

func (s *scorecard) score(c *ctx, m *model, p *prediction) {
	pts := p.scratch[:len(s.codes)]
	clear(pts)
	total := s.initial
	for i := range s.chars {
		ch := &s.chars[i]
		matched := false
		for j := range ch.attrs {
			a := &ch.attrs[j]
			if a.cond.test(c) != triTrue {
				continue
			}
			ps := a.partial
			if a.complex != nil {
				v := a.complex.eval(c)
				f, ok := v.num()
				if v.K == Missing || !ok {
					return
				}
				ps = f
			}
			total += ps
			if s.useReasons && a.code >= 0 {
				d := ch.baseline - ps
				if !s.below {
					d = -d
				}
				pts[a.code] += d
			}
			matched = true
			break
		}
		if !matched {
			return
		}
	}
	p.ok = true
	p.val = FloatValue(total)
	if !s.useReasons {
		return
	}
	// Insertion sort by points, descending and stable: only codes that
	// lowered the score count.
	rs := p.reasons[:0]
	for i, v := range pts {
		if v <= 0 {
			continue
		}
		rs = append(rs, reason{code: s.codes[i], score: v})
		for j := len(rs) - 1; j > 0 && rs[j].score > rs[j-1].score; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
	p.reasons = rs
}
