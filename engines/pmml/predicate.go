package pmml

import (
	"sort"
)

// tri is the three-valued logic of PMML predicates.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

// cond is a compiled predicate.
type cond interface {
	test(c *ctx) tri
}

type constCond tri

func (k constCond) test(*ctx) tri { return tri(k) }

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opMissing
	opNotMissing
)

// simpleCond is SimplePredicate on a slot; the constant is kept both as a
// number (when it parses as one) and as a string so the comparison chooses
// by the runtime kind without conversions.
type simpleCond struct {
	slot  int
	op    cmpOp
	f     float64
	s     string
	isNum bool
	f32   bool // x-mathContext="float": compare in single precision
}

func (p *simpleCond) test(c *ctx) tri {
	var v Value
	if c.done[p.slot] {
		v = c.vals[p.slot]
	} else {
		v = c.get(p.slot)
	}
	switch p.op {
	case opMissing:
		if v.K == Missing {
			return triTrue
		}
		return triFalse
	case opNotMissing:
		if v.K == Missing {
			return triFalse
		}
		return triTrue
	}
	var r int
	switch v.K {
	case Missing:
		return triUnknown
	case Float, Bool:
		if !p.isNum {
			if p.op == opEq {
				return triFalse
			}
			if p.op == opNe {
				return triTrue
			}
			return triUnknown
		}
		x := v.F
		if p.f32 {
			x = float64(float32(x))
		}
		switch {
		case x < p.f:
			r = -1
		case x > p.f:
			r = 1
		case x == p.f:
		default:
			return triUnknown // NaN
		}
	default:
		if v.S == p.s {
			r = 0
		} else if p.isNum {
			f, err := parseFloat(v.S)
			if err != nil {
				if p.op == opEq {
					return triFalse
				}
				if p.op == opNe {
					return triTrue
				}
				return triUnknown
			}
			switch {
			case f < p.f:
				r = -1
			case f > p.f:
				r = 1
			}
		} else if v.S < p.s {
			r = -1
		} else {
			r = 1
		}
	}
	var ok bool
	switch p.op {
	case opEq:
		ok = r == 0
	case opNe:
		ok = r != 0
	case opLt:
		ok = r < 0
	case opLe:
		ok = r <= 0
	case opGt:
		ok = r > 0
	case opGe:
		ok = r >= 0
	}
	if ok {
		return triTrue
	}
	return triFalse
}

// setCond is SimpleSetPredicate.
type setCond struct {
	slot int
	in   bool
	nums []float64 // sorted
	strs []string  // sorted
}

func (p *setCond) test(c *ctx) tri {
	v := c.get(p.slot)
	found := false
	switch v.K {
	case Missing:
		return triUnknown
	case Float, Bool:
		i := sort.SearchFloat64s(p.nums, v.F)
		found = i < len(p.nums) && p.nums[i] == v.F
	default:
		if len(p.strs) <= 8 {
			for _, s := range p.strs {
				if s == v.S {
					found = true
					break
				}
			}
		} else {
			i := sort.SearchStrings(p.strs, v.S)
			found = i < len(p.strs) && p.strs[i] == v.S
		}
		if !found && len(p.nums) > 0 {
			if f, err := parseFloat(v.S); err == nil {
				i := sort.SearchFloat64s(p.nums, f)
				found = i < len(p.nums) && p.nums[i] == f
			}
		}
	}
	if found == p.in {
		return triTrue
	}
	return triFalse
}

type compoundCond struct {
	op    uint8 // 0 and, 1 or, 2 xor, 3 surrogate
	parts []cond
}

func (p *compoundCond) test(c *ctx) tri {
	switch p.op {
	case 0:
		r := triTrue
		for _, q := range p.parts {
			switch q.test(c) {
			case triFalse:
				return triFalse
			case triUnknown:
				r = triUnknown
			}
		}
		return r
	case 1:
		r := triFalse
		for _, q := range p.parts {
			switch q.test(c) {
			case triTrue:
				return triTrue
			case triUnknown:
				r = triUnknown
			}
		}
		return r
	case 2:
		r := false
		for _, q := range p.parts {
			switch q.test(c) {
			case triUnknown:
				return triUnknown
			case triTrue:
				r = !r
			}
		}
		if r {
			return triTrue
		}
		return triFalse
	}
	for _, q := range p.parts {
		if r := q.test(c); r != triUnknown {
			return r
		}
	}
	return triUnknown
}

// predicate compiles a predicate element.
func (cc *compiler) predicate(n *node, sc *scope) (cond, error) {
	switch n.name {
	case "True":
		return constCond(triTrue), nil
	case "False":
		return constCond(triFalse), nil
	case "SimplePredicate":
		name := n.attr("field")
		s, ok := sc.lookup(name)
		if !ok {
			return nil, n.errf("field %q is not defined", name)
		}
		p := &simpleCond{slot: s}
		switch n.attr("operator") {
		case "equal":
			p.op = opEq
		case "notEqual":
			p.op = opNe
		case "lessThan":
			p.op = opLt
		case "lessOrEqual":
			p.op = opLe
		case "greaterThan":
			p.op = opGt
		case "greaterOrEqual":
			p.op = opGe
		case "isMissing":
			p.op = opMissing
		case "isNotMissing":
			p.op = opNotMissing
		default:
			return nil, n.errf("operator %q is not a SimplePredicate operator", n.attr("operator"))
		}
		if p.op < opMissing {
			if !n.has("value") {
				return nil, n.errf("operator %s needs a value attribute", n.attr("operator"))
			}
			p.s = n.attr("value")
			dt := cc.m.slots[s].dt
			if dt != TypeString {
				if f, err := parseFloat(p.s); err == nil {
					p.f, p.isNum = f, true
					if cc.f32 {
						p.f, p.f32 = float64(float32(f)), true
					}
				} else if dt == TypeBoolean {
					switch p.s {
					case "true":
						p.f, p.isNum = 1, true
					case "false":
						p.f, p.isNum = 0, true
					}
				}
			}
		}
		return p, nil
	case "SimpleSetPredicate":
		name := n.attr("field")
		s, ok := sc.lookup(name)
		if !ok {
			return nil, n.errf("field %q is not defined", name)
		}
		p := &setCond{slot: s}
		switch n.attr("booleanOperator") {
		case "isIn":
			p.in = true
		case "isNotIn":
		default:
			return nil, n.errf("booleanOperator %q is not isIn or isNotIn", n.attr("booleanOperator"))
		}
		arr := n.child("Array")
		if arr == nil {
			return nil, n.errf("SimpleSetPredicate without an Array")
		}
		items, err := parseArray(arr)
		if err != nil {
			return nil, err
		}
		dt := cc.m.slots[s].dt
		for _, it := range items {
			p.strs = append(p.strs, it)
			if dt != TypeString {
				if f, err := parseFloat(it); err == nil {
					p.nums = append(p.nums, f)
				}
			}
		}
		sort.Strings(p.strs)
		sort.Float64s(p.nums)
		return p, nil
	case "CompoundPredicate":
		p := &compoundCond{}
		switch n.attr("booleanOperator") {
		case "and":
		case "or":
			p.op = 1
		case "xor":
			p.op = 2
		case "surrogate":
			p.op = 3
		default:
			return nil, n.errf("booleanOperator %q is not one of and, or, xor, surrogate", n.attr("booleanOperator"))
		}
		for _, c := range n.children {
			if ignorable(c.name) {
				continue
			}
			q, err := cc.predicate(c, sc)
			if err != nil {
				return nil, err
			}
			p.parts = append(p.parts, q)
		}
		if len(p.parts) < 2 {
			return nil, n.errf("CompoundPredicate needs at least two predicates, has %d", len(p.parts))
		}
		return p, nil
	}
	return nil, n.unsupported("predicate")
}

// predicateOf compiles the first predicate child of n.
func (cc *compiler) predicateOf(n *node, sc *scope) (cond, error) {
	for _, c := range n.children {
		switch c.name {
		case "True", "False", "SimplePredicate", "SimpleSetPredicate", "CompoundPredicate":
			return cc.predicate(c, sc)
		}
	}
	return nil, n.errf("no predicate (True, False, SimplePredicate, ...) inside")
}

// parseArray splits an Array's text: whitespace separated, with double
// quotes around items that contain blanks.
func parseArray(n *node) ([]string, error) {
	s := n.text
	var out []string
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '"' {
			i++
			var b []byte
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b = append(b, s[i])
				i++
			}
			if i >= len(s) {
				return nil, n.errf("unterminated quoted item in Array")
			}
			i++
			out = append(out, string(b))
			continue
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != '\n' && s[j] != '\r' {
			j++
		}
		out = append(out, s[i:j])
		i = j
	}
	if n.has("n") {
		k, err := n.int("n", 0)
		if err != nil {
			return nil, err
		}
		if k != len(out) {
			return nil, n.errf("Array n=%d but holds %d items", k, len(out))
		}
	}
	return out, nil
}

// parseNumArray parses an Array (or REAL-Array) of numbers.
func parseNumArray(n *node) ([]float64, error) {
	items, err := parseArray(n)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(items))
	for i, it := range items {
		f, err := parseFloat(it)
		if err != nil {
			return nil, n.errf("array item %q is not a number", it)
		}
		out[i] = f
	}
	return out, nil
}
