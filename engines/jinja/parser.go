package jinja

import (
	"slices"
	"strings"
)

// parser builds the tree from the tokens with jinja2's grammar and
// precedence (Parser.parse_* in jinja2/parser.py, whose names the methods
// keep).
type parser struct {
	toks []token
	i    int
	// names collects the names read inside the macro bodies being parsed
	// (innermost last), for caller/varargs/kwargs.
	names []map[string]bool
	loops int // depth of for bodies, for break and continue
	depth int // nesting of statements and expressions, bounded by maxDepth
}

// maxDepth bounds how deeply statements and expressions nest, so that a
// hostile template cannot exhaust the stack (jinja2 stops at Python's
// recursion limit).
const maxDepth = 200

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.failf(p.cur().line, "the template nests deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func parse(src string) ([]node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if c := p.cur(); c.kind != tEOF {
		return nil, p.failf(c.line, "unexpected %s", c.describe())
	}
	return body, nil
}

func (p *parser) cur() token  { return p.toks[p.i] }
func (p *parser) look() token { return p.toks[min(p.i+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) failf(line int, format string, args ...any) error {
	return newError(KindSyntax, line, format, args...)
}

func (p *parser) isOp(s string) bool {
	t := p.cur()
	return t.kind == tOp && t.s == s
}

func (p *parser) isName(s string) bool {
	t := p.cur()
	return t.kind == tName && t.s == s
}

func (p *parser) skipOp(s string) bool {
	if p.isOp(s) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(s string) bool {
	if p.isName(s) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(s string) (token, error) {
	t := p.cur()
	if t.kind != tOp || t.s != s {
		return t, p.failf(t.line, "expected token '%s', got '%s'", s, t.describe())
	}
	return p.next(), nil
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	t := p.cur()
	if t.kind != k {
		return t, p.failf(t.line, "expected token '%s', got '%s'", what, t.describe())
	}
	return p.next(), nil
}

func (p *parser) expectName(s string) error {
	t := p.cur()
	if t.kind != tName || t.s != s {
		return p.failf(t.line, "expected token '%s', got '%s'", s, t.describe())
	}
	p.next()
	return nil
}

// subparse reads nodes until a block tag named in end (left as the current
// token, after its {%) or the end of the template.
func (p *parser) subparse(end []string) ([]node, error) {
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			return body, nil
		case tData:
			p.next()
			if n := len(body); n > 0 {
				if prev, ok := body[n-1].(*textNode); ok {
					prev.s += t.s
					continue
				}
			}
			body = append(body, &textNode{pos{t.line}, t.s})
		case tVarBegin:
			p.next()
			e, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectKind(tVarEnd, "end of print statement"); err != nil {
				return nil, err
			}
			body = append(body, &outputNode{pos{t.line}, e})
		case tBlockBegin:
			p.next()
			if c := p.cur(); c.kind == tName && slices.Contains(end, c.s) {
				return body, nil
			}
			n, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if n != nil {
				body = append(body, n)
			}
			if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
				return nil, err
			}
		default:
			return nil, p.failf(t.line, "unexpected %s", t.describe())
		}
	}
}

// parseStatements reads the block_end of the current tag and then the
// body up to one of end; drop consumes that end tag's name.
func (p *parser) parseStatements(end []string, drop bool) ([]node, error) {
	p.skipOp(":")
	if _, err := p.expectKind(tBlockEnd, "end of statement block"); err != nil {
		return nil, err
	}
	body, err := p.subparse(end)
	if err != nil {
		return nil, err
	}
	if c := p.cur(); c.kind == tEOF {
		return nil, p.failf(c.line, "unexpected end of template: jinja was looking for the following tags: %s; the innermost block that needs to be closed is '%s'",
			strings.Join(quoteAll(end), " or "), strings.TrimPrefix(end[len(end)-1], "end"))
	}
	if drop {
		p.next()
	}
	return body, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "'" + s + "'"
	}
	return out
}

func (p *parser) parseStatement() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	if t.kind != tName {
		return nil, p.failf(t.line, "tag name expected")
	}
	switch t.s {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "print":
		p.next()
		e, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &outputNode{pos{t.line}, e}, nil
	case "break", "continue":
		p.next()
		if p.loops == 0 {
			return nil, p.failf(t.line, "'%s' outside of a loop", t.s)
		}
		if t.s == "break" {
			return &breakNode{pos{t.line}}, nil
		}
		return &continueNode{pos{t.line}}, nil
	case "generation":
		p.next()
		body, err := p.parseStatements([]string{"endgeneration"}, true)
		if err != nil {
			return nil, err
		}
		return &scopeNode{pos{t.line}, body}, nil
	case "block", "extends", "include", "import", "from", "autoescape":
		return nil, newError(KindUnsupported, t.line, "the '%s' tag is not supported (a chat template is one self-contained template)", t.s)
	case "do":
		return nil, p.failf(t.line, "encountered unknown tag 'do' (the do extension is not enabled in transformers' environment)")
	}
	return nil, p.failf(t.line, "encountered unknown tag '%s'", t.s)
}

func (p *parser) parseIf() (node, error) {
	t := p.next()
	n := &ifNode{pos: pos{t.line}}
	for {
		c, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"elif", "else", "endif"}, false)
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, c)
		n.bodies = append(n.bodies, body)
		switch p.next().s {
		case "elif":
			continue
		case "else":
			n.els, err = p.parseStatements([]string{"endif"}, true)
			if err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (p *parser) parseFor() (node, error) {
	t := p.next()
	tg, err := p.parseAssignTarget(true, false, []string{"in"}, false)
	if err != nil {
		return nil, err
	}
	if err := p.expectName("in"); err != nil {
		return nil, err
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	n := &forNode{pos: pos{t.line}, target: tg, iter: iter}
	if p.skipName("if") {
		n.cond, err = p.parseExpression(true)
		if err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, newError(KindUnsupported, p.cur().line, "recursive for loops are not supported")
	}
	p.loops++
	n.body, err = p.parseStatements([]string{"endfor", "else"}, false)
	p.loops--
	if err != nil {
		return nil, err
	}
	if p.next().s == "else" {
		n.els, err = p.parseStatements([]string{"endfor"}, true)
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseSet() (node, error) {
	t := p.next()
	tg, err := p.parseAssignTarget(true, false, nil, true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		e, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &setNode{pos{t.line}, tg, e}, nil
	}
	filters, err := p.parseFilterChain(false)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endset"}, true)
	if err != nil {
		return nil, err
	}
	return &setBlockNode{pos{t.line}, tg, filters, body}, nil
}

func (p *parser) parseWith() (node, error) {
	t := p.next()
	n := &withNode{pos: pos{t.line}}
	for p.cur().kind != tBlockEnd {
		if len(n.targets) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tg, err := p.parseAssignTarget(true, false, nil, false)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, tg)
		n.values = append(n.values, v)
	}
	var err error
	n.body, err = p.parseStatements([]string{"endwith"}, true)
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (p *parser) parseFilterBlock() (node, error) {
	t := p.next()
	filters, err := p.parseFilterChain(true)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endfilter"}, true)
	if err != nil {
		return nil, err
	}
	return &filterBlockNode{pos{t.line}, filters, body}, nil
}

// parseSignature reads (a, b=default, ...) into m.
func (p *parser) parseSignature(m *macroDef) error {
	if _, err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(m.params) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return err
			}
		}
		t, err := p.expectKind(tName, "name")
		if err != nil {
			return err
		}
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return err
			}
			m.defaults = append(m.defaults, d)
		} else if len(m.defaults) > 0 {
			return p.failf(t.line, "non-default argument follows default argument")
		}
		m.params = append(m.params, t.s)
	}
	p.next()
	return nil
}

// parseMacroBody parses a macro's (or caller's) body with loop depth reset
// and records which of caller/varargs/kwargs it names.
func (p *parser) parseMacroBody(m *macroDef, end string) error {
	names := map[string]bool{}
	p.names = append(p.names, names)
	loops := p.loops
	p.loops = 0
	body, err := p.parseStatements([]string{end}, true)
	p.loops = loops
	p.names = p.names[:len(p.names)-1]
	if err != nil {
		return err
	}
	m.body = body
	m.usesCaller, m.usesVarargs, m.usesKwargs = names["caller"], names["varargs"], names["kwargs"]
	for _, outer := range p.names {
		for k := range names {
			outer[k] = true
		}
	}
	return nil
}

func (p *parser) parseMacro() (node, error) {
	t := p.next()
	nt, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	m := &macroDef{name: nt.s}
	if err := p.parseSignature(m); err != nil {
		return nil, err
	}
	if err := p.parseMacroBody(m, "endmacro"); err != nil {
		return nil, err
	}
	return &macroNode{pos{t.line}, m}, nil
}

func (p *parser) parseCallBlock() (node, error) {
	t := p.next()
	m := &macroDef{name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(m); err != nil {
			return nil, err
		}
	}
	e, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callExpr)
	if !ok {
		return nil, p.failf(t.line, "expected call")
	}
	if err := p.parseMacroBody(m, "endcall"); err != nil {
		return nil, err
	}
	return &callBlockNode{pos{t.line}, call, m}, nil
}

// parseAssignTarget reads a name, a tuple of names, or (withNamespace)
// name.attr.
func (p *parser) parseAssignTarget(withTuple, nameOnly bool, extraEnd []string, withNamespace bool) (target, error) {
	t := p.cur()
	if withNamespace && t.kind == tName && p.look().kind == tOp && p.look().s == "." {
		p.next()
		p.next()
		a, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		return &nsTarget{pos{t.line}, t.s, a.s}, nil
	}
	if nameOnly {
		n, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		return &nameTarget{pos{n.line}, n.s}, nil
	}
	var e expr
	var err error
	if withTuple {
		e, err = p.parseTuple(true, false, extraEnd, false)
	} else {
		e, err = p.parsePrimary()
	}
	if err != nil {
		return nil, err
	}
	return toTarget(e, p)
}

func toTarget(e expr, p *parser) (target, error) {
	switch x := e.(type) {
	case *nameExpr:
		switch x.name {
		case "true", "false", "none", "True", "False", "None":
			return nil, p.failf(x.line, "can't assign to '%s'", x.name)
		}
		return &nameTarget{x.pos, x.name}, nil
	case *tupleExpr:
		tt := &tupleTarget{pos: x.pos}
		for _, it := range x.items {
			sub, err := toTarget(it, p)
			if err != nil {
				return nil, err
			}
			tt.items = append(tt.items, sub)
		}
		return tt, nil
	}
	what := "expression"
	switch e.(type) {
	case *constExpr:
		what = "const"
	case *getattrExpr:
		what = "getattr"
	case *getitemExpr, *sliceExpr:
		what = "getitem"
	case *callExpr:
		what = "call"
	}
	return nil, p.failf(e.exprLine(), "can't assign to '%s'", what)
}

func (p *parser) isTupleEnd(extraEnd []string) bool {
	t := p.cur()
	switch t.kind {
	case tVarEnd, tBlockEnd:
		return true
	case tOp:
		return t.s == ")"
	case tName:
		return slices.Contains(extraEnd, t.s)
	}
	return false
}

// parseTuple is jinja2's parse_tuple: comma-separated expressions make a
// tuple, one expression alone is itself.
func (p *parser) parseTuple(simplified, withCondexpr bool, extraEnd []string, explicitParens bool) (expr, error) {
	line := p.cur().line
	var args []expr
	isTuple := false
	for {
		if len(args) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		var e expr
		var err error
		switch {
		case simplified:
			e, err = p.parsePrimary()
		default:
			e, err = p.parseExpression(withCondexpr)
		}
		if err != nil {
			return nil, err
		}
		args = append(args, e)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
		line = p.cur().line
	}
	if !isTuple {
		if len(args) > 0 {
			return args[0], nil
		}
		if !explicitParens {
			t := p.cur()
			return nil, p.failf(t.line, "expected an expression, got '%s'", t.describe())
		}
	}
	return &tupleExpr{pos{line}, args}, nil
}

func (p *parser) parseExpression(withCondexpr bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if withCondexpr {
		return p.parseCondexpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondexpr() (expr, error) {
	line := p.cur().line
	e1, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		e2, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var e3 expr
		if p.skipName("else") {
			if e3, err = p.parseCondexpr(); err != nil {
				return nil, err
			}
		}
		e1 = &condExpr{pos{line}, e2, e1, e3}
		line = p.cur().line
	}
	return e1, nil
}

func (p *parser) parseOr() (expr, error) {
	line := p.cur().line
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.skipName("or") {
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &orExpr{pos{line}, l, r}
		line = p.cur().line
	}
	return l, nil
}

func (p *parser) parseAnd() (expr, error) {
	line := p.cur().line
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.skipName("and") {
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &andExpr{pos{line}, l, r}
		line = p.cur().line
	}
	return l, nil
}

func (p *parser) parseNot() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.isName("not") {
		t := p.next()
		e, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notExpr{pos{t.line}, e}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	line := p.cur().line
	e, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var ops []string
	var rest []expr
	for {
		t := p.cur()
		var op string
		switch {
		case t.kind == tOp && (t.s == "==" || t.s == "!=" || t.s == "<" || t.s == "<=" || t.s == ">" || t.s == ">="):
			p.next()
			op = t.s
		case t.kind == tName && t.s == "in":
			p.next()
			op = "in"
		case t.kind == tName && t.s == "not" && p.look().kind == tName && p.look().s == "in":
			p.next()
			p.next()
			op = "notin"
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		rest = append(rest, r)
	}
	if len(ops) == 0 {
		return e, nil
	}
	return &compareExpr{pos{line}, e, ops, rest}, nil
}

func (p *parser) parseMath1() (expr, error) {
	line := p.cur().line
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		op := p.next().s
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos{line}, op, l, r}
		line = p.cur().line
	}
	return l, nil
}

func (p *parser) parseConcat() (expr, error) {
	line := p.cur().line
	e, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	args := []expr{e}
	for p.skipOp("~") {
		e, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		args = append(args, e)
	}
	if len(args) == 1 {
		return args[0], nil
	}
	return &concatExpr{pos{line}, args}, nil
}

func (p *parser) parseMath2() (expr, error) {
	line := p.cur().line
	l, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		op := p.next().s
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos{line}, op, l, r}
		line = p.cur().line
	}
	return l, nil
}

func (p *parser) parsePow() (expr, error) {
	line := p.cur().line
	l, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.skipOp("**") {
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos{line}, "**", l, r}
		line = p.cur().line
	}
	return l, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	var e expr
	var err error
	switch {
	case t.kind == tOp && (t.s == "-" || t.s == "+"):
		p.next()
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &negExpr{pos{t.line}, inner, t.s == "-"}
	default:
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if e, err = p.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	switch t.kind {
	case tName:
		p.next()
		switch t.s {
		case "true", "True":
			return &constExpr{pos{t.line}, true}, nil
		case "false", "False":
			return &constExpr{pos{t.line}, false}, nil
		case "none", "None":
			return &constExpr{pos{t.line}, nil}, nil
		}
		for _, m := range p.names {
			m[t.s] = true
		}
		return &nameExpr{pos{t.line}, t.s}, nil
	case tString:
		p.next()
		s := t.s
		for p.cur().kind == tString {
			s += p.next().s
		}
		return &constExpr{pos{t.line}, s}, nil
	case tInt:
		p.next()
		return &constExpr{pos{t.line}, t.i}, nil
	case tFloat:
		p.next()
		return &constExpr{pos{t.line}, t.f}, nil
	case tOp:
		switch t.s {
		case "(":
			p.next()
			e, err := p.parseTuple(false, true, nil, true)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return e, nil
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	}
	return nil, p.failf(t.line, "unexpected '%s'", t.describe())
}

func (p *parser) parseList() (expr, error) {
	t := p.next()
	l := &listExpr{pos: pos{t.line}}
	for !p.isOp("]") {
		if len(l.items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("]") {
			break
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		l.items = append(l.items, e)
	}
	p.next()
	return l, nil
}

func (p *parser) parseDict() (expr, error) {
	t := p.next()
	d := &dictExpr{pos: pos{t.line}}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("}") {
			break
		}
		k, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
	}
	p.next()
	return d, nil
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			e, err = p.parseSubscript(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			var fs []*filterExpr
			fs, err = p.parseFilterChainOn(e, false)
			if err == nil {
				e = fs[len(fs)-1]
			}
		case p.isName("is"):
			e, err = p.parseTest(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(e expr) (expr, error) {
	t := p.next()
	if t.s == "." {
		a := p.next()
		switch a.kind {
		case tName:
			return &getattrExpr{pos{t.line}, e, a.s}, nil
		case tInt:
			return &getitemExpr{pos{t.line}, e, &constExpr{pos{a.line}, a.i}}, nil
		}
		return nil, p.failf(a.line, "expected name or number")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		a, err := p.parseSubscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	p.next()
	switch len(args) {
	case 0:
		return nil, p.failf(t.line, "expected an expression, got ']'")
	case 1:
		if s, ok := args[0].(*sliceExpr); ok {
			s.obj = e
			return s, nil
		}
		return &getitemExpr{pos{t.line}, e, args[0]}, nil
	}
	for _, a := range args {
		if _, ok := a.(*sliceExpr); ok {
			return nil, newError(KindUnsupported, t.line, "a subscript with several slices is not supported")
		}
	}
	return &getitemExpr{pos{t.line}, e, &tupleExpr{pos{t.line}, args}}, nil
}

func (p *parser) parseSubscribed() (expr, error) {
	line := p.cur().line
	s := &sliceExpr{pos: pos{line}}
	if !p.isOp(":") {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return e, nil
		}
		s.lo = e
	}
	p.next()
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		s.hi = e
	}
	if p.skipOp(":") {
		if !p.isOp("]") && !p.isOp(",") {
			e, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			s.step = e
		}
	}
	return s, nil
}

// parseCallArgs reads (args, name=kwargs); *args and **kwargs are refused.
func (p *parser) parseCallArgs() ([]expr, []kwExpr, error) {
	t, err := p.expectOp("(")
	if err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwExpr
	first := true
	for !p.isOp(")") {
		if !first {
			if _, err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		first = false
		if p.isOp("*") || p.isOp("**") {
			return nil, nil, newError(KindUnsupported, p.cur().line, "*args and **kwargs in a call are not supported")
		}
		if c := p.cur(); c.kind == tName && p.look().kind == tOp && p.look().s == "=" {
			p.next()
			p.next()
			v, err := p.parseExpression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwExpr{c.s, v})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.failf(t.line, "invalid syntax for function call expression")
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	p.next()
	return args, kwargs, nil
}

func (p *parser) parseCall(e expr) (expr, error) {
	line := p.cur().line
	args, kwargs, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos{line}, e, args, kwargs}, nil
}

// parseFilterChain reads |f1(args)|f2... (startInline: the first filter has
// no pipe, as in {% filter upper %}) with no argument expression.
func (p *parser) parseFilterChain(startInline bool) ([]*filterExpr, error) {
	return p.parseFilterChainOn(nil, startInline)
}

func (p *parser) parseFilterChainOn(arg expr, startInline bool) ([]*filterExpr, error) {
	var out []*filterExpr
	for p.isOp("|") || startInline {
		if !startInline {
			p.next()
		}
		startInline = false
		t, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		name := t.s
		for p.isOp(".") {
			p.next()
			n, err := p.expectKind(tName, "name")
			if err != nil {
				return nil, err
			}
			name += "." + n.s
		}
		fn, ok := filters[name]
		if !ok {
			return nil, newError(KindSyntax, t.line, "no filter named '%s'", name)
		}
		f := &filterExpr{pos: pos{t.line}, arg: arg, name: name, fn: fn}
		if p.isOp("(") {
			if f.args, f.kwargs, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
		arg = f
	}
	return out, nil
}

func (p *parser) parseTest(e expr) (expr, error) {
	t := p.next()
	negated := p.skipName("not")
	nt, err := p.expectKind(tName, "name")
	if err != nil {
		return nil, err
	}
	name := nt.s
	for p.isOp(".") {
		p.next()
		n, err := p.expectKind(tName, "name")
		if err != nil {
			return nil, err
		}
		name += "." + n.s
	}
	fn, ok := tests[name]
	if !ok {
		return nil, newError(KindSyntax, nt.line, "no test named '%s'", name)
	}
	te := &testExpr{pos: pos{t.line}, arg: e, name: name, fn: fn}
	c := p.cur()
	switch {
	case c.kind == tOp && c.s == "(":
		if te.args, te.kwargs, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (c.kind == tName && c.s != "else" && c.s != "or" && c.s != "and") || c.kind == tString || c.kind == tInt || c.kind == tFloat ||
		(c.kind == tOp && (c.s == "(" || c.s == "[" || c.s == "{")):
		if c.kind == tName && c.s == "is" {
			return nil, p.failf(c.line, "you cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		te.args = []expr{a}
	}
	if negated {
		return &notExpr{pos{t.line}, te}, nil
	}
	return te, nil
}
