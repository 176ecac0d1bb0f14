package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Allowlist is the skips a run may have. Each entry names a package, a
// pattern of test names, a piece of the skip message and the reason the
// skip is expected, one entry a line:
//
//	# comment
//	<package> <test regexp> "<message piece>" <reason>
//
// The package is an import path, matched whole or by its last elements
// (processors/onnx matches github.com/eas-server/eas-server/processors/onnx),
// or * for any package. The test pattern is a Go regular expression that
// must match the whole test name (subtests: Test/sub_name). The message
// piece is a Go string literal the skip's message must contain, so that
// a test skipped for another reason than the listed one is not excused.
// The reason, the rest of the line, is required.
type Allowlist struct {
	entries []allowed
}

type allowed struct {
	pkg    string
	test   *regexp.Regexp
	msg    string
	reason string
}

// ParseAllowlist reads an allowlist; an error names the line.
func ParseAllowlist(r io.Reader) (*Allowlist, error) {
	a := &Allowlist{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseEntry(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		a.entries = append(a.entries, e)
	}
	return a, sc.Err()
}

func parseEntry(line string) (allowed, error) {
	const form = `want <package> <test regexp> "<message piece>" <reason>`
	pkg, rest, ok := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	test, rest, ok2 := strings.Cut(rest, " ")
	rest = strings.TrimSpace(rest)
	if !ok || !ok2 || pkg == "" || test == "" {
		return allowed{}, errors.New(form)
	}
	re, err := regexp.Compile("^(?:" + test + ")$")
	if err != nil {
		return allowed{}, fmt.Errorf("test pattern %q: %w", test, err)
	}
	lit, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return allowed{}, fmt.Errorf("the message piece must be a quoted Go string after the test pattern (%s): %w", form, err)
	}
	msg, _ := strconv.Unquote(lit)
	if msg == "" {
		return allowed{}, errors.New("the message piece is empty: name what the skip says")
	}
	reason := strings.TrimSpace(rest[len(lit):])
	if reason == "" {
		return allowed{}, fmt.Errorf("no reason: say why this skip is expected (%s)", form)
	}
	return allowed{pkg: pkg, test: re, msg: msg, reason: reason}, nil
}

// Allows says whether s is expected, and why.
func (a *Allowlist) Allows(s Skip) (reason string, ok bool) {
	if a == nil {
		return "", false
	}
	for _, e := range a.entries {
		if e.matchPackage(s.Package) && e.test.MatchString(s.Test) && strings.Contains(s.Message, e.msg) {
			return e.reason, true
		}
	}
	return "", false
}

func (e allowed) matchPackage(pkg string) bool {
	return e.pkg == "*" || pkg == e.pkg || strings.HasSuffix(pkg, "/"+e.pkg)
}
