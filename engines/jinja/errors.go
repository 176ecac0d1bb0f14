package jinja

import (
	"errors"
	"fmt"
)

// Kind classifies an Error the way jinja2's exception classes do.
type Kind string

// The kinds of Error.
const (
	// KindSyntax: the template does not parse (jinja2's TemplateSyntaxError,
	// and TemplateAssertionError for an unknown filter or test).
	KindSyntax Kind = "syntax"
	// KindUndefined: an undefined value was used where jinja2's Undefined
	// raises (an attribute or item of it, arithmetic, a call).
	KindUndefined Kind = "undefined"
	// KindType: an operation Python refuses for its operands' types
	// (TypeError, ValueError, ZeroDivisionError, IndexError in a filter).
	KindType Kind = "type"
	// KindSecurity: the sandbox refused (a list's append, an attribute that
	// starts with "_", a range over 100000 items).
	KindSecurity Kind = "security"
	// KindRaised: the template called raise_exception(message).
	KindRaised Kind = "raised"
	// KindUnsupported: jinja2 would accept it, this package does not (see
	// the README's list).
	KindUnsupported Kind = "unsupported"
)

// Error is what Parse and Render return: a kind, the template line it
// happened on (1-based; 0 when unknown) and jinja2's message.
type Error struct {
	Kind Kind
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("jinja: template line %d: %s", e.Line, e.Msg)
	}
	return "jinja: " + e.Msg
}

func newError(k Kind, line int, format string, args ...any) *Error {
	return &Error{Kind: k, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// errf is a runtime TypeError without a line yet: the evaluator adds the
// line of the node it was evaluating.
func errf(format string, args ...any) *Error {
	return &Error{Kind: KindType, Msg: fmt.Sprintf(format, args...)}
}

func kindErr(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// atLine gives err the line if it has none.
func atLine(err error, line int) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Line == 0 {
			e.Line = line
		}
		return e
	}
	if err == errBreak || err == errContinue {
		return err
	}
	return &Error{Kind: KindType, Line: line, Msg: err.Error()}
}
