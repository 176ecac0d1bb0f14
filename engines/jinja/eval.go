package jinja

import (
	"errors"
	"math"
	"strings"
	"time"
)

// Template is a parsed template. Parse once and Render as often as needed;
// a Template is immutable and safe for concurrent use.
type Template struct {
	body []node
}

// Parse parses src with the syntax of transformers' chat template
// environment (jinja2's ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and the loopcontrols extension). An unknown filter or test
// is an error here, as it is when jinja2 compiles the template.
func Parse(src string) (*Template, error) {
	body, err := parse(src)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Render renders the template with vars as its context. Values may be nil,
// bool, any Go integer or float, json.Number, string, []any, []string,
// []map[string]any, map[string]any (keys taken sorted), *Map (keys in its
// order) and slices or string-keyed maps of those; the output is what
// jinja2 renders for the same values from Python.
func (t *Template) Render(vars map[string]any) (string, error) {
	return t.render(vars, time.Now)
}

func (t *Template) render(vars map[string]any, now func() time.Time) (string, error) {
	ev := &evaluator{now: now}
	root := &frame{top: make(map[string]any, len(vars))}
	for k, v := range vars {
		c, err := toValue(v)
		if err != nil {
			return "", err
		}
		root.top[k] = c
	}
	var b strings.Builder
	b.Grow(1024)
	if err := ev.exec(&b, t.body, root); err != nil {
		if err == errBreak || err == errContinue {
			return "", newError(KindSyntax, 0, "break or continue outside of a loop")
		}
		return "", err
	}
	return b.String(), nil
}

type evaluator struct {
	now   func() time.Time
	depth int // macro call depth, bounded against runaway recursion
	steps int // loop iterations and macro calls so far, bounded by maxSteps
}

// Bounds on one render, so that a hostile template ends with an error
// instead of exhausting the machine (jinja2 has none but Python's
// recursion limit and memory).
const (
	// maxCallDepth bounds macro recursion (Python's own limit is about
	// 1000 frames, which a recursive macro reaches at about this depth).
	maxCallDepth = 200
	// maxSteps bounds the loop iterations and macro calls of one render.
	maxSteps = 1 << 22
	// maxStringBytes bounds the output and every string a template builds.
	maxStringBytes = 16 << 20
	// maxListLen bounds every list a template builds.
	maxListLen = 1 << 20
)

var errTooLong = &Error{Kind: KindUnsupported, Msg: "the template built a string or list over this package's limit (16 MiB, 1Mi items)"}

func (ev *evaluator) step() error {
	ev.steps++
	if ev.steps > maxSteps {
		return &Error{Kind: KindUnsupported, Msg: "the template ran over this package's limit of loop iterations and macro calls (4Mi)"}
	}
	return nil
}

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// frame is one scope: the render's variables at the root, then one per
// loop iteration, macro call, with block and call block.
type frame struct {
	parent *frame
	names  []string
	vals   []any
	top    map[string]any
}

func (f *frame) lookup(name string) (any, bool) {
	for ; f != nil; f = f.parent {
		for i := len(f.names) - 1; i >= 0; i-- {
			if f.names[i] == name {
				return f.vals[i], true
			}
		}
		if f.top != nil {
			if v, ok := f.top[name]; ok {
				return v, true
			}
		}
	}
	if g, ok := globals[name]; ok {
		return g, true
	}
	return nil, false
}

func (f *frame) set(name string, v any) {
	if f.top != nil {
		f.top[name] = v
		return
	}
	for i, n := range f.names {
		if n == name {
			f.vals[i] = v
			return
		}
	}
	f.names = append(f.names, name)
	f.vals = append(f.vals, v)
}

func (ev *evaluator) exec(b *strings.Builder, body []node, f *frame) error {
	for _, n := range body {
		if err := ev.execNode(b, n, f); err != nil {
			return err
		}
	}
	if b.Len() > maxStringBytes {
		return errTooLong
	}
	return nil
}

func (ev *evaluator) execNode(b *strings.Builder, n node, f *frame) error {
	switch x := n.(type) {
	case *textNode:
		b.WriteString(x.s)
	case *outputNode:
		v, err := x.e.eval(ev, f)
		if err != nil {
			return atLine(err, x.line)
		}
		writeStr(b, v)
	case *ifNode:
		for i, c := range x.conds {
			v, err := c.eval(ev, f)
			if err != nil {
				return atLine(err, c.exprLine())
			}
			if truthy(v) {
				return ev.exec(b, x.bodies[i], f)
			}
		}
		return ev.exec(b, x.els, f)
	case *forNode:
		return ev.execFor(b, x, f)
	case *setNode:
		v, err := x.e.eval(ev, f)
		if err != nil {
			return atLine(err, x.line)
		}
		return atLine(ev.assign(x.target, v, f), x.line)
	case *setBlockNode:
		var sb strings.Builder
		if err := ev.exec(&sb, x.body, &frame{parent: f}); err != nil {
			return err
		}
		var v any = sb.String()
		v, err := ev.applyFilters(x.filters, v, f)
		if err != nil {
			return atLine(err, x.line)
		}
		return atLine(ev.assign(x.target, v, f), x.line)
	case *filterBlockNode:
		var sb strings.Builder
		if err := ev.exec(&sb, x.body, &frame{parent: f}); err != nil {
			return err
		}
		v, err := ev.applyFilters(x.filters, sb.String(), f)
		if err != nil {
			return atLine(err, x.line)
		}
		writeStr(b, v)
	case *macroNode:
		f.set(x.m.name, ev.macro(x.m, f))
	case *callBlockNode:
		caller := ev.macro(x.caller, f)
		v, err := ev.evalCall(x.call, f, caller)
		if err != nil {
			return atLine(err, x.line)
		}
		writeStr(b, v)
	case *withNode:
		inner := &frame{parent: f}
		vals := make([]any, len(x.values))
		for i, e := range x.values {
			v, err := e.eval(ev, f)
			if err != nil {
				return atLine(err, e.exprLine())
			}
			vals[i] = v
		}
		for i, t := range x.targets {
			if err := ev.assign(t, vals[i], inner); err != nil {
				return atLine(err, x.line)
			}
		}
		return ev.exec(b, x.body, inner)
	case *scopeNode:
		return ev.exec(b, x.body, &frame{parent: f})
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return nil
}

func (ev *evaluator) applyFilters(fs []*filterExpr, v any, f *frame) (any, error) {
	for _, fe := range fs {
		var err error
		if v, err = fe.apply(ev, f, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// assign binds t to v in f (a tuple target unpacks v; a namespace target
// sets an attribute of the namespace it names).
func (ev *evaluator) assign(t target, v any, f *frame) error {
	switch x := t.(type) {
	case *nameTarget:
		f.set(x.name, v)
	case *nsTarget:
		o, ok := f.lookup(x.name)
		if !ok {
			return kindErr(KindUndefined, "%s is undefined", pyReprString(x.name))
		}
		ns, ok := o.(*namespace)
		if !ok {
			return errf("cannot assign attribute on non-namespace object")
		}
		ns.attrs.Set(x.attr, v)
	case *tupleTarget:
		items, err := iterate(v)
		if err != nil {
			if _, ok := v.(*undefined); !ok {
				return errf("cannot unpack non-iterable %s object", typeName(v))
			}
		}
		if len(items) != len(x.items) {
			if len(items) > len(x.items) {
				return errf("too many values to unpack (expected %d)", len(x.items))
			}
			return errf("not enough values to unpack (expected %d, got %d)", len(x.items), len(items))
		}
		for i, it := range x.items {
			if err := ev.assign(it, items[i], f); err != nil {
				return err
			}
		}
	}
	return nil
}

// loopInfo is the loop variable of a for loop.
type loopInfo struct {
	items   []any
	index0  int
	changed []any
	seen    bool
}

func (l *loopInfo) length() int { return len(l.items) }

func (l *loopInfo) attr(name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index0 + 1)
	case "index0":
		return int64(l.index0)
	case "revindex":
		return int64(n - l.index0)
	case "revindex0":
		return int64(n - l.index0 - 1)
	case "first":
		return l.index0 == 0
	case "last":
		return l.index0 == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if l.index0 == 0 {
			return &undefined{hint: "there is no previous item"}
		}
		return l.items[l.index0-1]
	case "nextitem":
		if l.index0 >= n-1 {
			return &undefined{hint: "there is no next item"}
		}
		return l.items[l.index0+1]
	case "cycle":
		return &callable{name: "cycle", fn: func(_ *evaluator, args []any, _ []kwarg) (any, error) {
			if len(args) == 0 {
				return nil, errf("no items for cycling given")
			}
			return args[l.index0%len(args)], nil
		}}
	case "changed":
		return &callable{name: "changed", fn: func(_ *evaluator, args []any, _ []kwarg) (any, error) {
			if l.seen && seqEqual(l.changed, args) {
				return false, nil
			}
			l.seen = true
			l.changed = args
			return true, nil
		}}
	}
	return undefinedAttr(l, name)
}

func (ev *evaluator) execFor(b *strings.Builder, x *forNode, f *frame) error {
	it, err := x.iter.eval(ev, f)
	if err != nil {
		return atLine(err, x.line)
	}
	items, err := iterate(it)
	if err != nil {
		return atLine(err, x.line)
	}
	if x.cond != nil {
		var kept []any
		for _, item := range items {
			fr := &frame{parent: f}
			if err := ev.assign(x.target, item, fr); err != nil {
				return atLine(err, x.line)
			}
			v, err := x.cond.eval(ev, fr)
			if err != nil {
				return atLine(err, x.line)
			}
			if truthy(v) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return ev.exec(b, x.els, &frame{parent: f})
	}
	loop := &loopInfo{items: items}
	names := [4]string{"loop"}
	vals := [4]any{loop}
	for i, item := range items {
		if err := ev.step(); err != nil {
			return atLine(err, x.line)
		}
		loop.index0 = i
		fr := &frame{parent: f, names: names[:1:4], vals: vals[:1:4]}
		if nt, ok := x.target.(*nameTarget); ok {
			fr.names = append(fr.names, nt.name)
			fr.vals = append(fr.vals, item)
		} else if err := ev.assign(x.target, item, fr); err != nil {
			return atLine(err, x.line)
		}
		err := ev.exec(b, x.body, fr)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

// macro makes the callable of a macro defined in f.
func (ev *evaluator) macro(m *macroDef, f *frame) *callable {
	return &callable{name: m.name, fn: func(ev *evaluator, args []any, kw []kwarg) (any, error) {
		return ev.callMacro(m, f, args, kw, nil)
	}}
}

func (ev *evaluator) callMacro(m *macroDef, def *frame, args []any, kw []kwarg, caller *callable) (any, error) {
	if ev.depth >= maxCallDepth {
		return nil, errf("maximum macro recursion depth (%d) exceeded", maxCallDepth)
	}
	if err := ev.step(); err != nil {
		return nil, err
	}
	ev.depth++
	defer func() { ev.depth-- }()
	fr := &frame{parent: def}
	nd := len(m.params) - len(m.defaults)
	set := make([]bool, len(m.params))
	for i, a := range args {
		if i >= len(m.params) {
			break
		}
		fr.set(m.params[i], a)
		set[i] = true
	}
	var extraKw *Map
	for _, k := range kw {
		found := false
		for i, p := range m.params {
			if p == k.name {
				if set[i] {
					return nil, errf("macro '%s' got multiple values for argument '%s'", m.name, k.name)
				}
				fr.set(p, k.val)
				set[i] = true
				found = true
				break
			}
		}
		if found {
			continue
		}
		if k.name == "caller" && m.usesCaller {
			caller, _ = k.val.(*callable)
			continue
		}
		if !m.usesKwargs {
			return nil, errf("macro '%s' takes no keyword argument '%s'", m.name, k.name)
		}
		if extraKw == nil {
			extraKw = &Map{}
		}
		extraKw.Set(k.name, k.val)
	}
	for i, p := range m.params {
		if set[i] {
			continue
		}
		if i >= nd {
			v, err := m.defaults[i-nd].eval(ev, fr)
			if err != nil {
				return nil, err
			}
			fr.set(p, v)
		} else {
			fr.set(p, &undefined{hint: "parameter " + pyReprString(p) + " was not provided", name: p})
		}
	}
	if len(args) > len(m.params) {
		if !m.usesVarargs {
			return nil, errf("macro '%s' takes not more than %d argument(s)", m.name, len(m.params))
		}
		fr.set("varargs", tuple(append([]any(nil), args[len(m.params):]...)))
	} else if m.usesVarargs {
		fr.set("varargs", tuple{})
	}
	if m.usesKwargs {
		if extraKw == nil {
			extraKw = &Map{}
		}
		fr.set("kwargs", extraKw)
	}
	if m.usesCaller {
		if caller != nil {
			fr.set("caller", caller)
		} else {
			fr.set("caller", &undefined{hint: "No caller defined", name: "caller"})
		}
	}
	var b strings.Builder
	if err := ev.exec(&b, m.body, fr); err != nil {
		return nil, err
	}
	return b.String(), nil
}

// ---- expressions

func (e *constExpr) eval(*evaluator, *frame) (any, error) { return e.v, nil }

func (e *nameExpr) eval(_ *evaluator, f *frame) (any, error) {
	if v, ok := f.lookup(e.name); ok {
		return v, nil
	}
	return undefinedName(e.name), nil
}

func (e *listExpr) eval(ev *evaluator, f *frame) (any, error) {
	out := make([]any, len(e.items))
	for i, it := range e.items {
		v, err := it.eval(ev, f)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (e *tupleExpr) eval(ev *evaluator, f *frame) (any, error) {
	out := make(tuple, len(e.items))
	for i, it := range e.items {
		v, err := it.eval(ev, f)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (e *dictExpr) eval(ev *evaluator, f *frame) (any, error) {
	m := &Map{}
	for i, ke := range e.keys {
		k, err := ke.eval(ev, f)
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			if mk, isM := k.(markup); isM {
				ks = string(mk)
			} else {
				return nil, kindErr(KindUnsupported, "dict keys other than strings are not supported (got %s)", typeName(k))
			}
		}
		v, err := e.vals[i].eval(ev, f)
		if err != nil {
			return nil, err
		}
		m.Set(ks, v)
	}
	return m, nil
}

func (e *getattrExpr) eval(ev *evaluator, f *frame) (any, error) {
	o, err := e.obj.eval(ev, f)
	if err != nil {
		return nil, err
	}
	return getattr(o, e.name)
}

func (e *getitemExpr) eval(ev *evaluator, f *frame) (any, error) {
	o, err := e.obj.eval(ev, f)
	if err != nil {
		return nil, err
	}
	k, err := e.key.eval(ev, f)
	if err != nil {
		return nil, err
	}
	return getitem(o, k)
}

func (e *sliceExpr) eval(ev *evaluator, f *frame) (any, error) {
	o, err := e.obj.eval(ev, f)
	if err != nil {
		return nil, err
	}
	var bounds [3]any
	for i, be := range [3]expr{e.lo, e.hi, e.step} {
		if be == nil {
			continue
		}
		if bounds[i], err = be.eval(ev, f); err != nil {
			return nil, err
		}
	}
	return slice(o, bounds[0], bounds[1], bounds[2])
}

func (e *callExpr) eval(ev *evaluator, f *frame) (any, error) {
	return ev.evalCall(e, f, nil)
}

// evalCall calls e; caller is the caller of a {% call %} block, passed to
// a macro as its caller.
func (ev *evaluator) evalCall(e *callExpr, f *frame, caller *callable) (any, error) {
	fn, err := e.fn.eval(ev, f)
	if err != nil {
		return nil, err
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if args[i], err = a.eval(ev, f); err != nil {
			return nil, err
		}
	}
	var kw []kwarg
	if len(e.kwargs) > 0 {
		kw = make([]kwarg, len(e.kwargs))
		for i, k := range e.kwargs {
			v, err := k.e.eval(ev, f)
			if err != nil {
				return nil, err
			}
			kw[i] = kwarg{k.name, v}
		}
	}
	if caller != nil {
		kw = append(kw, kwarg{"caller", caller})
	}
	switch c := fn.(type) {
	case *callable:
		return c.fn(ev, args, kw)
	case *undefined:
		return nil, c.fail()
	}
	return nil, errf("'%s' object is not callable", typeName(fn))
}

func (e *filterExpr) eval(ev *evaluator, f *frame) (any, error) {
	v, err := e.arg.eval(ev, f)
	if err != nil {
		return nil, err
	}
	return e.apply(ev, f, v)
}

func (e *filterExpr) apply(ev *evaluator, f *frame, v any) (any, error) {
	args, kw, err := evalArgs(ev, f, e.args, e.kwargs)
	if err != nil {
		return nil, err
	}
	out, err := e.fn(ev, v, args, kw)
	if err != nil {
		return nil, atLine(err, e.line)
	}
	return out, nil
}

func evalArgs(ev *evaluator, f *frame, es []expr, kes []kwExpr) ([]any, []kwarg, error) {
	var args []any
	if len(es) > 0 {
		args = make([]any, len(es))
		for i, a := range es {
			v, err := a.eval(ev, f)
			if err != nil {
				return nil, nil, err
			}
			args[i] = v
		}
	}
	var kw []kwarg
	if len(kes) > 0 {
		kw = make([]kwarg, len(kes))
		for i, k := range kes {
			v, err := k.e.eval(ev, f)
			if err != nil {
				return nil, nil, err
			}
			kw[i] = kwarg{k.name, v}
		}
	}
	return args, kw, nil
}

func (e *testExpr) eval(ev *evaluator, f *frame) (any, error) {
	v, err := e.arg.eval(ev, f)
	if err != nil {
		return nil, err
	}
	args, kw, err := evalArgs(ev, f, e.args, e.kwargs)
	if err != nil {
		return nil, err
	}
	ok, err := e.fn(ev, v, args, kw)
	if err != nil {
		return nil, atLine(err, e.line)
	}
	return ok, nil
}

func (e *andExpr) eval(ev *evaluator, f *frame) (any, error) {
	l, err := e.l.eval(ev, f)
	if err != nil || !truthy(l) {
		return l, err
	}
	return e.r.eval(ev, f)
}

func (e *orExpr) eval(ev *evaluator, f *frame) (any, error) {
	l, err := e.l.eval(ev, f)
	if err != nil || truthy(l) {
		return l, err
	}
	return e.r.eval(ev, f)
}

func (e *notExpr) eval(ev *evaluator, f *frame) (any, error) {
	v, err := e.e.eval(ev, f)
	if err != nil {
		return nil, err
	}
	return !truthy(v), nil
}

func (e *negExpr) eval(ev *evaluator, f *frame) (any, error) {
	v, err := e.e.eval(ev, f)
	if err != nil {
		return nil, err
	}
	if u, ok := v.(*undefined); ok {
		return nil, u.fail()
	}
	i, fl, isF, ok := asNumber(v)
	if !ok {
		op := "+"
		if e.neg {
			op = "-"
		}
		return nil, errf("bad operand type for unary %s: '%s'", op, typeName(v))
	}
	if !e.neg {
		if isF {
			return fl, nil
		}
		return i, nil
	}
	if isF {
		return -fl, nil
	}
	if i == math.MinInt64 {
		return nil, errf("integer overflow")
	}
	return -i, nil
}

func (e *concatExpr) eval(ev *evaluator, f *frame) (any, error) {
	var b strings.Builder
	for _, it := range e.items {
		v, err := it.eval(ev, f)
		if err != nil {
			return nil, err
		}
		writeStr(&b, v)
		if b.Len() > maxStringBytes {
			return nil, errTooLong
		}
	}
	return b.String(), nil
}

func (e *condExpr) eval(ev *evaluator, f *frame) (any, error) {
	c, err := e.cond.eval(ev, f)
	if err != nil {
		return nil, err
	}
	if truthy(c) {
		return e.yes.eval(ev, f)
	}
	if e.no == nil {
		return &undefined{hint: "the inline if-expression on line " + itoa(e.line) + " evaluated to false and no else section was defined."}, nil
	}
	return e.no.eval(ev, f)
}

func (e *compareExpr) eval(ev *evaluator, f *frame) (any, error) {
	l, err := e.first.eval(ev, f)
	if err != nil {
		return nil, err
	}
	for i, op := range e.ops {
		r, err := e.rest[i].eval(ev, f)
		if err != nil {
			return nil, err
		}
		ok, err := compareOp(op, l, r)
		if err != nil {
			return nil, err
		}
		if !ok {
			return false, nil
		}
		l = r
	}
	return true, nil
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	c, err := compare(l, r, op)
	if err != nil {
		return false, err
	}
	if c == 2 {
		return false, nil
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, nil
}

// contains is Python's item in container.
func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string, markup:
		s, ok := item.(string)
		if !ok {
			m, isM := item.(markup)
			if !isM {
				if u, isU := item.(*undefined); isU {
					return false, u.fail()
				}
				return false, errf("'in <string>' requires string as left operand, not %s", typeName(item))
			}
			s = string(m)
		}
		return strings.Contains(toStr(c), s), nil
	case []any:
		for _, x := range c {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case tuple:
		for _, x := range c {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *Map:
		switch k := item.(type) {
		case string:
			_, ok := c.vals[k]
			return ok, nil
		case markup:
			_, ok := c.vals[string(k)]
			return ok, nil
		case []any, *Map:
			return false, errf("unhashable type: '%s'", typeName(item))
		}
		return false, nil
	case *undefined:
		return false, nil
	}
	return false, errf("argument of type '%s' is not iterable", typeName(container))
}

func (e *binExpr) eval(ev *evaluator, f *frame) (any, error) {
	l, err := e.l.eval(ev, f)
	if err != nil {
		return nil, err
	}
	r, err := e.r.eval(ev, f)
	if err != nil {
		return nil, err
	}
	return binop(e.op, l, r)
}

func itoa(i int) string {
	return toStr(int64(i))
}
