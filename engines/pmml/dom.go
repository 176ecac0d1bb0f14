package pmml

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxDepth bounds element nesting so a hostile document cannot exhaust the
// stack of the recursive compiler.
const maxDepth = 512

// node is one XML element of the document, kept with its line so that every
// load-time error can point at the offending element.
type node struct {
	name     string
	attrs    []xml.Attr
	children []*node
	text     string
	line     int
}

// attr returns the attribute's value, or "" when it is absent.
func (n *node) attr(name string) string {
	for _, a := range n.attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// has reports whether the attribute is present.
func (n *node) has(name string) bool {
	for _, a := range n.attrs {
		if a.Name.Local == name {
			return true
		}
	}
	return false
}

// attrOr returns the attribute's value or def when it is absent.
func (n *node) attrOr(name, def string) string {
	for _, a := range n.attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return def
}

// float parses a numeric attribute, returning def when it is absent.
func (n *node) float(name string, def float64) (float64, error) {
	s, ok := "", false
	for _, a := range n.attrs {
		if a.Name.Local == name {
			s, ok = a.Value, true
			break
		}
	}
	if !ok {
		return def, nil
	}
	f, err := parseFloat(s)
	if err != nil {
		return 0, n.errf("attribute %s=%q is not a number", name, s)
	}
	return f, nil
}

// int parses an integer attribute, returning def when it is absent.
func (n *node) int(name string, def int) (int, error) {
	if !n.has(name) {
		return def, nil
	}
	s := n.attr(name)
	i, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, n.errf("attribute %s=%q is not an integer", name, s)
	}
	return i, nil
}

// child returns the first child with the name, or nil.
func (n *node) child(name string) *node {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// all returns the children with the name.
func (n *node) all(name string) []*node {
	var out []*node
	for _, c := range n.children {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

// errf builds a load-time error that names the element and its line.
func (n *node) errf(format string, args ...any) error {
	return &LoadError{Element: n.name, Line: n.line, Msg: fmt.Sprintf(format, args...)}
}

// unsupported is the error for an element the evaluator does not implement.
func (n *node) unsupported(what string) error {
	if what == "" {
		return &LoadError{Element: n.name, Line: n.line, Msg: "element is not supported", Unsupported: true}
	}
	return &LoadError{Element: n.name, Line: n.line, Msg: what + " is not supported", Unsupported: true}
}

// ignorable reports elements that never change a score.
func ignorable(name string) bool {
	switch name {
	case "Extension", "Header", "ModelStats", "ModelExplanation", "ModelVerification", "MiningBuildTask",
		"Annotation", "Timestamp", "Application", "CustomProperties":
		return true
	}
	return false
}

// LoadError is a problem found while parsing or compiling a PMML document.
type LoadError struct {
	Element     string // the PMML element, e.g. "Node"
	Line        int    // 1-based line of the element in the document
	Msg         string
	Unsupported bool // the element or attribute value is valid PMML this evaluator does not implement
}

// Error implements error.
func (e *LoadError) Error() string {
	return fmt.Sprintf("pmml: <%s> at line %d: %s", e.Element, e.Line, e.Msg)
}

// ErrUnsupported is matched by errors.Is for every LoadError about a valid
// PMML construct this evaluator does not implement.
var ErrUnsupported = errors.New("unsupported pmml construct")

// Is lets errors.Is(err, ErrUnsupported) find unsupported constructs.
func (e *LoadError) Is(target error) bool { return target == ErrUnsupported && e.Unsupported }

// readDOM decodes the whole document into a node tree.
func readDOM(ctx context.Context, r io.Reader) (*node, error) {
	d := xml.NewDecoder(r)
	d.Strict = true
	d.CharsetReader = func(charset string, input io.Reader) (io.Reader, error) {
		switch strings.ToLower(charset) {
		case "utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin1", "windows-1252":
			// Latin-1 documents in the wild are almost always ASCII; decode bytes
			// as they are rather than refusing the model.
			return input, nil
		}
		return nil, fmt.Errorf("unsupported charset %q: re-encode the document as UTF-8", charset)
	}
	var stack []*node
	var root *node
	for i := 0; ; i++ {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		line, _ := d.InputPos()
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr // the reader gave up on ctx
			}
			return nil, fmt.Errorf("pmml: malformed xml near line %d: %w", line, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= maxDepth {
				return nil, fmt.Errorf("pmml: elements nested deeper than %d near line %d", maxDepth, line)
			}
			l, _ := d.InputPos()
			n := &node{name: t.Name.Local, attrs: t.Attr, line: l}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.children = append(p.children, n)
			} else if root == nil {
				root = n
			} else {
				return nil, fmt.Errorf("pmml: second root element <%s> at line %d", n.name, l)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.text += string(t)
			}
		}
	}
	if root == nil {
		return nil, errors.New("pmml: empty document: expected a <PMML> root element")
	}
	if root.name != "PMML" {
		return nil, fmt.Errorf("pmml: root element is <%s> at line %d, want <PMML>", root.name, root.line)
	}
	return root, nil
}
