package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent), the
// fields read here.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	// build-output and build-fail events (go 1.24 and later) name the
	// package being built here instead of in Package.
	ImportPath string
}

// Skip is one skipped test and the message it gave.
type Skip struct {
	Package, Test, Message string
}

func (s Skip) String() string { return s.Package + " " + s.Test }

// Summary is what a run of go test said.
type Summary struct {
	Passed, Failed, Skipped int
	Skips                   []Skip   // in the order they ended
	Failures                []string // "package Test" of each failed test, in order
	FailedPackages          []string // packages that failed (a test, a build, a panic outside tests)
	Events                  int      // test2json events read
}

// Ran is how many tests (subtests included) ended.
func (s *Summary) Ran() int { return s.Passed + s.Failed + s.Skipped }

// maxTestOutput bounds the output kept per running test: a test that
// prints without end must not take the collector's memory with it. The
// first half and the last half are kept.
const maxTestOutput = 256 << 10

// maxLine is the longest input line parsed as an event; a longer one is
// echoed as it is.
const maxLine = 4 << 20

// testKey names one test of one package.
type testKey struct{ pkg, test string }

// testOutput is the output of one running test, bounded: head, then the
// newest bytes in tail once head is full.
type testOutput struct {
	head, tail []byte
	dropped    int
}

func (o *testOutput) add(s string) {
	if len(o.head) < maxTestOutput/2 {
		n := min(len(s), maxTestOutput/2-len(o.head))
		o.head = append(o.head, s[:n]...)
		s = s[n:]
	}
	o.tail = append(o.tail, s...)
	if over := len(o.tail) - maxTestOutput/2; over > 0 {
		o.dropped += over
		o.tail = append(o.tail[:0], o.tail[over:]...)
	}
}

func (o *testOutput) String() string {
	if o.dropped == 0 {
		return string(o.head) + string(o.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes of output left out ...]\n%s", o.head, o.dropped, o.tail)
}

// collector reads a test2json stream, echoes the human output to out and
// sums the results up. Output lines not in a test (a package's "ok" or
// "FAIL" line, build errors) are echoed as they come; a test's output is
// kept until it ends and echoed only when it fails (or, with verbose, all
// of it as it comes), which is what go test without -v prints. Lines that
// are not test2json events are echoed unchanged.
type collector struct {
	out     io.Writer
	verbose bool
	running map[testKey]*testOutput
	order   []testKey // running tests, in the order they first printed
	sum     Summary
}

func newCollector(out io.Writer, verbose bool) *collector {
	return &collector{out: out, verbose: verbose, running: map[testKey]*testOutput{}}
}

// Read consumes r to its end. A line longer than maxLine is not parsed:
// it is passed through as it comes.
func (c *collector) Read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	passing := false // the current line is past maxLine
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case passing:
			c.echo(chunk)
		case len(line)+len(chunk) > maxLine:
			c.echo(line)
			c.echo(chunk)
			line, passing = line[:0], true
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !passing && len(line) > 0 {
			c.Line(line)
		}
		line, passing = line[:0], false
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	c.flushAll("the stream ended before the test did")
	return nil
}

// Line handles one line of input (with or without its newline).
func (c *collector) Line(line []byte) {
	trimmed := bytes.TrimSpace(line)
	var ev event
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &ev) != nil || ev.Action == "" {
		c.echo(line)
		return
	}
	c.sum.Events++
	pkg := ev.Package
	if pkg == "" {
		pkg = ev.ImportPath
	}
	switch ev.Action {
	case "build-output":
		io.WriteString(c.out, ev.Output)
	case "output":
		if ev.Test == "" {
			// go test without -v prints no "PASS" line before "ok".
			if c.verbose || ev.Output != "PASS\n" {
				io.WriteString(c.out, ev.Output)
			}
			return
		}
		if c.verbose {
			io.WriteString(c.out, ev.Output)
		}
		c.buffer(testKey{pkg, ev.Test}).add(ev.Output)
	case "pass", "fail", "skip":
		if ev.Test == "" {
			// A package's end: "skip" is a package without tests.
			if ev.Action == "fail" {
				c.sum.FailedPackages = append(c.sum.FailedPackages, pkg)
				c.flushPackage(pkg, "the package failed before the test ended")
			}
			return
		}
		k := testKey{pkg, ev.Test}
		o := c.running[k]
		c.forget(k)
		switch ev.Action {
		case "pass":
			c.sum.Passed++
		case "fail":
			c.sum.Failed++
			c.sum.Failures = append(c.sum.Failures, pkg+" "+ev.Test)
			if o != nil && !c.verbose {
				io.WriteString(c.out, o.String())
			}
		case "skip":
			c.sum.Skipped++
			msg := ""
			if o != nil {
				msg = skipMessage(o.String())
			}
			c.sum.Skips = append(c.sum.Skips, Skip{Package: pkg, Test: ev.Test, Message: msg})
		}
	}
}

func (c *collector) echo(b []byte) {
	if len(b) > 0 {
		c.out.Write(b)
	}
}

func (c *collector) buffer(k testKey) *testOutput {
	o := c.running[k]
	if o == nil {
		o = &testOutput{}
		c.running[k] = o
		c.order = append(c.order, k)
	}
	return o
}

func (c *collector) forget(k testKey) {
	if _, ok := c.running[k]; !ok {
		return
	}
	delete(c.running, k)
	if i := slices.Index(c.order, k); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
}

// flushPackage echoes the output of pkg's tests that never ended (a panic,
// a timeout): it is what explains the failure.
func (c *collector) flushPackage(pkg, why string) {
	for _, k := range slices.Clone(c.order) {
		if k.pkg == pkg {
			c.flush(k, why)
		}
	}
}

func (c *collector) flushAll(why string) {
	for _, k := range slices.Clone(c.order) {
		c.flush(k, why)
	}
}

func (c *collector) flush(k testKey, why string) {
	o := c.running[k]
	c.forget(k)
	if o == nil || c.verbose {
		return
	}
	fmt.Fprintf(c.out, "--- %s %s: %s; its output:\n%s", k.pkg, k.test, why, o.String())
}

// skipMessage is what a skipped test printed, without go test's framing
// (=== RUN, --- SKIP) and the indentation of its log lines.
func skipMessage(out string) string {
	var lines []string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		lines = append(lines, t)
	}
	return strings.Join(lines, "\n")
}

// Report writes the skips, the unexpected ones, the failures and the
// counts; the last line is exactly "N passed, N failed, N skipped". It
// returns the skips that expected does not allow.
func (s *Summary) Report(w io.Writer, expected *Allowlist, source string) []Skip {
	var unexpected []Skip
	if len(s.Skips) > 0 {
		fmt.Fprintf(w, "\nskipped (%d):\n", len(s.Skips))
		skips := slices.Clone(s.Skips)
		sort.SliceStable(skips, func(i, j int) bool { return skips[i].String() < skips[j].String() })
		for _, sk := range skips {
			reason, ok := expected.Allows(sk)
			mark := "expected: " + reason
			if !ok {
				mark = "NOT EXPECTED"
				unexpected = append(unexpected, sk)
			}
			fmt.Fprintf(w, "  %s: %s [%s]\n", sk, indent(sk.Message), mark)
		}
	}
	if len(unexpected) > 0 {
		fmt.Fprintf(w, "\n%d skips are not in %s; make the test run, or list the skip there with the reason it is expected:\n", len(unexpected), source)
		for _, sk := range unexpected {
			fmt.Fprintf(w, "  %s: %s\n", sk, indent(sk.Message))
		}
	}
	if len(s.Failures) > 0 || len(s.FailedPackages) > 0 {
		fmt.Fprintf(w, "\nfailed:\n")
		for _, f := range s.Failures {
			fmt.Fprintf(w, "  %s\n", f)
		}
		for _, p := range s.FailedPackages {
			fmt.Fprintf(w, "  package %s\n", p)
		}
	}
	fmt.Fprintf(w, "\n%d tests ran\n%d passed, %d failed, %d skipped\n", s.Ran(), s.Passed, s.Failed, s.Skipped)
	return unexpected
}

func indent(msg string) string {
	if msg == "" {
		return "(no message)"
	}
	return strings.ReplaceAll(msg, "\n", "\n      ")
}
