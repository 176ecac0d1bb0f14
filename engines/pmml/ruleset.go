package pmml

type simpleRule struct {
	cond       cond
	cat        int
	score      Value
	id         Value
	weight     float64
	confidence float64
	parents    []cond // predicates of the enclosing CompoundRules
}

// ruleHit is what the winning rule contributes to output features.
type ruleHit struct {
	confidence float64
}

type ruleSetModel struct {
	rules     []simpleRule
	criterion string
	def       Value
	defCat    int
	defConf   float64
	hasDef    bool
	hits      []ruleHit // one per rule, read-only; points the prediction at them
	defHit    ruleHit
}

func (cc *compiler) ruleSet(n *node, m *model, sc *scope) error {
	rs := n.child("RuleSet")
	if rs == nil {
		return n.errf("RuleSetModel without a RuleSet")
	}
	r := &ruleSetModel{defCat: -1}
	for _, c := range n.children {
		switch c.name {
		case "MiningSchema", "Output", "Targets", "LocalTransformations", "ModelStats", "ModelExplanation",
			"ModelVerification", "Extension", "RuleSet":
		default:
			return c.unsupported("")
		}
	}
	if rs.has("defaultScore") {
		r.hasDef = true
		r.def = m.catValue(rs.attr("defaultScore"))
		if m.classification() {
			r.defCat = m.catIndex(r.def)
		}
	}
	var err error
	if r.defConf, err = rs.float("defaultConfidence", 0); err != nil {
		return err
	}
	r.defHit = ruleHit{confidence: r.defConf}
	sel := rs.child("RuleSelectionMethod")
	if sel == nil {
		return rs.errf("RuleSet without a RuleSelectionMethod")
	}
	r.criterion = sel.attr("criterion")
	switch r.criterion {
	case "firstHit", "weightedSum", "weightedMax":
	default:
		return sel.errf("criterion %q is not firstHit, weightedSum or weightedMax", r.criterion)
	}
	var walk func(p *node, parents []cond) error
	walk = func(p *node, parents []cond) error {
		for _, c := range p.children {
			switch c.name {
			case "SimpleRule":
				pr, err := cc.predicateOf(c, sc)
				if err != nil {
					return err
				}
				sr := simpleRule{cond: pr, id: StringValue(c.attr("id")), parents: parents, cat: -1}
				if !c.has("id") {
					sr.id = FloatValue(float64(len(r.rules) + 1))
				}
				sr.score = m.catValue(c.attr("score"))
				if m.classification() {
					sr.cat = m.catIndex(sr.score)
				}
				if sr.weight, err = c.float("weight", 1); err != nil {
					return err
				}
				if sr.confidence, err = c.float("confidence", 1); err != nil {
					return err
				}
				r.rules = append(r.rules, sr)
			case "CompoundRule":
				pr, err := cc.predicateOf(c, sc)
				if err != nil {
					return err
				}
				np := append(append([]cond(nil), parents...), pr)
				if err := walk(c, np); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(rs, nil); err != nil {
		return err
	}
	r.hits = make([]ruleHit, len(r.rules))
	for i, sr := range r.rules {
		r.hits[i] = ruleHit{confidence: sr.confidence}
	}
	m.impl = r
	return nil
}

func (r *ruleSetModel) fires(c *ctx, sr *simpleRule) bool {
	for _, p := range sr.parents {
		if p.test(c) != triTrue {
			return false
		}
	}
	return sr.cond.test(c) == triTrue
}

func (r *ruleSetModel) score(c *ctx, m *model, p *prediction) {
	k := len(m.cats)
	conf := p.cbuf[:k]
	clear(conf)
	switch r.criterion {
	case "firstHit", "weightedMax":
		best := -1
		for i := range r.rules {
			sr := &r.rules[i]
			if !r.fires(c, sr) {
				continue
			}
			if r.criterion == "firstHit" {
				best = i
				break
			}
			if best < 0 || sr.weight > r.rules[best].weight {
				best = i
			}
		}
		if best >= 0 {
			sr := &r.rules[best]
			p.ok, p.val, p.cat, p.entity, p.rule = true, sr.score, sr.cat, sr.id, &r.hits[best]
			if sr.cat >= 0 {
				conf[sr.cat] = sr.confidence
				p.conf = conf
			}
			return
		}
	case "weightedSum":
		n := 0
		for i := range r.rules {
			sr := &r.rules[i]
			if sr.cat < 0 || !r.fires(c, sr) {
				continue
			}
			conf[sr.cat] += sr.weight
			n++
		}
		if n > 0 {
			best := 0
			for i := range conf {
				conf[i] /= float64(n)
				if conf[i] > conf[best] {
					best = i
				}
			}
			p.ok, p.cat, p.val, p.conf = true, best, m.cats[best], conf
			return
		}
	}
	if r.hasDef {
		p.ok, p.val, p.cat, p.rule = true, r.def, r.defCat, &r.defHit
		if r.defCat >= 0 {
			conf[r.defCat] = r.defConf
			p.conf = conf
		}
	}
}
