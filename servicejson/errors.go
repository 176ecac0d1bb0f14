package servicejson

import (
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem found in a service.json. Path is the canonical
// dotted key (metadata.rpc.keepalive) whichever spelling the file used, so a
// user can search for it in the docs; it is empty for problems that concern
// the whole document, such as a JSON syntax error. Msg says what is wrong,
// with the value and the limit, and how to fix it.
type FieldError struct {
	File   string // file name, set by ParseFile; "" for Parse
	Line   int    // 1-based line of a syntax error; 0 when unknown
	Column int    // 1-based column (in characters) of a syntax error; 0 when unknown
	Path   string
	Msg    string
}

// Error formats the problem as "file:line:col: path: msg", leaving out the
// parts that are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column) + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one service.json, in the order of the
// document followed by the checks that span several keys. Parse returns it
// so that a user fixes a file in one round instead of one error at a time.
type Errors struct {
	Problems []*FieldError
}

// Error lists the problems one per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each problem to errors.Is and errors.As.
func (e *Errors) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// maxProblems bounds the problems one document can produce. Past a hundred
// a user learns nothing more, and a hostile document with thousands of
// unknown keys would otherwise cost a key suggestion each.
const maxProblems = 100

// full reports whether the problem list is at its bound.
func (e *Errors) full() bool { return len(e.Problems) >= maxProblems }

func (e *Errors) add(path, format string, args ...any) {
	switch {
	case len(e.Problems) > maxProblems:
		return
	case len(e.Problems) == maxProblems:
		e.Problems = append(e.Problems, &FieldError{
			Msg: fmt.Sprintf("too many problems; stopped after %d, fix these and validate again", maxProblems)})
		return
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	e.Problems = append(e.Problems, &FieldError{Path: path, Msg: msg})
}

func (e *Errors) err() error {
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}
