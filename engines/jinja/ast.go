package jinja

// node is one statement of a template body.
type node interface{ nodeLine() int }

// expr is one expression.
type expr interface {
	eval(ev *evaluator, f *frame) (any, error)
	exprLine() int
}

type pos struct{ line int }

func (p pos) nodeLine() int { return p.line }
func (p pos) exprLine() int { return p.line }

type (
	textNode struct {
		pos
		s string
	}
	outputNode struct {
		pos
		e expr
	}
	ifNode struct {
		pos
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		pos
		target target
		iter   expr
		cond   expr // the "if" filter, or nil
		body   []node
		els    []node
	}
	setNode struct {
		pos
		target target
		e      expr
	}
	setBlockNode struct {
		pos
		target  target
		filters []*filterExpr // applied to the captured text, in order
		body    []node
	}
	macroNode struct {
		pos
		m *macroDef
	}
	callBlockNode struct {
		pos
		call   *callExpr
		caller *macroDef
	}
	filterBlockNode struct {
		pos
		filters []*filterExpr
		body    []node
	}
	withNode struct {
		pos
		targets []target
		values  []expr
		body    []node
	}
	// scopeNode is a body rendered in its own scope: the {% generation %}
	// block of transformers' AssistantTracker, a call block in jinja2.
	scopeNode struct {
		pos
		body []node
	}
	breakNode    struct{ pos }
	continueNode struct{ pos }
)

// macroDef is a macro's (or a call block's caller's) signature and body.
type macroDef struct {
	name     string
	params   []string
	defaults []expr // for the last len(defaults) params
	body     []node
	// usesCaller, usesVarargs, usesKwargs: the body names caller, varargs
	// or kwargs, which is how jinja2 decides whether the macro accepts a
	// caller, extra positional or extra keyword arguments.
	usesCaller, usesVarargs, usesKwargs bool
}

// target is the left side of set, for and with.
type target interface{ targetLine() int }

type (
	nameTarget struct {
		pos
		name string
	}
	tupleTarget struct {
		pos
		items []target
	}
	nsTarget struct {
		pos
		name, attr string
	}
)

func (p nameTarget) targetLine() int  { return p.line }
func (p tupleTarget) targetLine() int { return p.line }
func (p nsTarget) targetLine() int    { return p.line }

type (
	constExpr struct {
		pos
		v any
	}
	nameExpr struct {
		pos
		name string
	}
	listExpr struct {
		pos
		items []expr
	}
	tupleExpr struct {
		pos
		items []expr
	}
	dictExpr struct {
		pos
		keys, vals []expr
	}
	getattrExpr struct {
		pos
		obj  expr
		name string
	}
	getitemExpr struct {
		pos
		obj, key expr
	}
	sliceExpr struct {
		pos
		obj          expr
		lo, hi, step expr // nil when absent
	}
	callExpr struct {
		pos
		fn     expr
		args   []expr
		kwargs []kwExpr
	}
	kwExpr struct {
		name string
		e    expr
	}
	filterExpr struct {
		pos
		arg    expr // nil inside a filter block or set block: the captured text
		name   string
		fn     filterFunc
		args   []expr
		kwargs []kwExpr
	}
	testExpr struct {
		pos
		arg    expr
		name   string
		fn     testFunc
		args   []expr
		kwargs []kwExpr
	}
	binExpr struct {
		pos
		op   string // + - * / // % **
		l, r expr
	}
	andExpr struct {
		pos
		l, r expr
	}
	orExpr struct {
		pos
		l, r expr
	}
	notExpr struct {
		pos
		e expr
	}
	negExpr struct {
		pos
		e   expr
		neg bool // false: unary plus
	}
	concatExpr struct {
		pos
		items []expr
	}
	compareExpr struct {
		pos
		first expr
		ops   []string // == != < <= > >= in notin
		rest  []expr
	}
	condExpr struct {
		pos
		cond, yes, no expr // no may be nil: an Undefined
	}
)
