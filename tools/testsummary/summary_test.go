package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// sample is a real go test -json run (tools/testsummary/testdata): package
// a passes, fails and skips (a subtest too), b panics, c does not build,
// and a line of the go command that is no event comes first.
func sample(t *testing.T) (*collector, string) {
	t.Helper()
	f, err := os.Open("testdata/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	c := newCollector(&out, false)
	if err := c.Read(f); err != nil {
		t.Fatal(err)
	}
	return c, out.String()
}

func TestSampleCounts(t *testing.T) {
	c, _ := sample(t)
	s := c.sum
	if s.Passed != 4 || s.Failed != 2 || s.Skipped != 2 || s.Ran() != 8 {
		t.Errorf("passed %d, failed %d, skipped %d, ran %d; want 4, 2, 2, 8", s.Passed, s.Failed, s.Skipped, s.Ran())
	}
	wantSkips := []Skip{
		{"example.com/sample/a", "TestSkipped", "a_test.go:9: no NVIDIA GPU on this machine (/dev/nvidia0 missing)"},
		{"example.com/sample/a", "TestSubtests/two_words", "a_test.go:13: needs python3\nsecond line"},
	}
	if len(s.Skips) != len(wantSkips) {
		t.Fatalf("skips %q, want %q", s.Skips, wantSkips)
	}
	for i, w := range wantSkips {
		if s.Skips[i] != w {
			t.Errorf("skip %d: %q, want %q", i, s.Skips[i], w)
		}
	}
	if got := strings.Join(s.Failures, ", "); got != "example.com/sample/a TestFail, example.com/sample/b TestPanics" {
		t.Errorf("failures %s", got)
	}
	if got := strings.Join(s.FailedPackages, ", "); got != "example.com/sample/a, example.com/sample/c, example.com/sample/b" {
		t.Errorf("failed packages %s", got)
	}
}

// The echo is what go test without -v prints: failed tests' output and
// each package's lines, not the output of the tests that passed or
// skipped.
func TestSampleEcho(t *testing.T) {
	_, out := sample(t)
	for _, want := range []string{
		"go: downloading example.com/dep v1.0.0\n",
		"c/c_test.go:5:28: undefined: undefined\n",
		"    a_test.go:7: wrong answer\n--- FAIL: TestFail (0.00s)\n",
		"panic: boom [recovered, repanicked]\n",
		"FAIL\texample.com/sample/c [build failed]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the echo lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"a_test.go:5: fine", "=== RUN   TestPass", "--- SKIP", "needs python3"} {
		if strings.Contains(out, not) {
			t.Errorf("the echo has %q, which go test without -v does not print:\n%s", not, out)
		}
	}
	var v bytes.Buffer
	c := newCollector(&v, true)
	f, _ := os.Open("testdata/sample.jsonl")
	defer f.Close()
	c.Read(f)
	if !strings.Contains(v.String(), "a_test.go:5: fine") || strings.Count(v.String(), "wrong answer") != 1 {
		t.Errorf("-v echoes every output line once:\n%s", v.String())
	}
}

func TestReport(t *testing.T) {
	c, _ := sample(t)
	allow, err := ParseAllowlist(strings.NewReader(`# comment
sample/a TestSkipped "no NVIDIA GPU" there is no GPU here
`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	unexpected := c.sum.Report(&out, allow, "list.txt")
	if len(unexpected) != 1 || unexpected[0].Test != "TestSubtests/two_words" {
		t.Errorf("unexpected skips %q, want the subtest only", unexpected)
	}
	text := out.String()
	for _, want := range []string{
		"example.com/sample/a TestSkipped: a_test.go:9: no NVIDIA GPU on this machine (/dev/nvidia0 missing) [expected: there is no GPU here]",
		"1 skips are not in list.txt",
		"  package example.com/sample/c\n",
		"8 tests ran\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "\n4 passed, 2 failed, 2 skipped\n") {
		t.Errorf("the report does not end with the closing line:\n%s", text)
	}
	if code := exitCode(&c.sum, unexpected); code != 1 {
		t.Errorf("exit code %d for a failed run, want 1", code)
	}
	if code := exitCode(&Summary{Events: 3, Passed: 3}, nil); code != 0 {
		t.Errorf("exit code %d for a clean run, want 0", code)
	}
	if code := exitCode(&Summary{}, nil); code != 1 {
		t.Errorf("exit code %d for no events, want 1", code)
	}
	if code := exitCode(&Summary{Events: 3, Skipped: 1}, []Skip{{}}); code != 1 {
		t.Errorf("exit code %d for an unexpected skip alone, want 1", code)
	}
}

func TestAllowlist(t *testing.T) {
	allow, err := ParseAllowlist(strings.NewReader(`
processors/onnx TestCUDAProvider "no NVIDIA GPU" no GPU on this machine
* .* "no sparse files here" the file system has no sparse files
pmml TestZero.*|TestOther "race detector" -race inflates allocation counts
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    Skip
		want string // "" = not allowed
	}{
		{Skip{"github.com/x/y/processors/onnx", "TestCUDAProvider", "cuda_test.go:1: no NVIDIA GPU on this machine"}, "no GPU on this machine"},
		{Skip{"processors/onnx", "TestCUDAProvider", "no NVIDIA GPU"}, "no GPU on this machine"},
		// Another reason than the listed one.
		{Skip{"github.com/x/y/processors/onnx", "TestCUDAProvider", "the CUDA provider is not installed"}, ""},
		// The package matches by whole path elements only.
		{Skip{"github.com/x/y/myprocessors/onnx", "TestCUDAProvider", "no NVIDIA GPU"}, ""},
		// The test pattern matches the whole name.
		{Skip{"github.com/x/y/processors/onnx", "TestCUDAProviderMore", "no NVIDIA GPU"}, ""},
		{Skip{"github.com/x/y/processors/onnx", "TestCUDAProvider/sub", "no NVIDIA GPU"}, ""},
		{Skip{"anything/at/all", "TestLoad/big", "loadtest.go:31: no sparse files here: operation not supported"}, "the file system has no sparse files"},
		{Skip{"github.com/x/y/pmml", "TestOther", "the race detector"}, "-race inflates allocation counts"},
		{Skip{"github.com/x/y/pmml", "TestZeroAllocations", "the race detector"}, "-race inflates allocation counts"},
	} {
		reason, ok := allow.Allows(c.s)
		if ok != (c.want != "") || reason != c.want {
			t.Errorf("%+v: allowed %v (%q), want %q", c.s, ok, reason, c.want)
		}
	}
	if _, ok := (*Allowlist)(nil).Allows(Skip{"p", "T", "m"}); ok {
		t.Error("no allowlist allows a skip")
	}
}

func TestAllowlistErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"pkg", "line 1: want <package>"},
		{"pkg TestX", "line 1: want <package>"},
		{"\n\npkg TestX no quotes here", "line 3: the message piece must be a quoted Go string"},
		{`pkg TestX "msg"`, "no reason"},
		{`pkg TestX "" why`, "the message piece is empty"},
		{`pkg Test( "msg" why`, "test pattern"},
	} {
		_, err := ParseAllowlist(strings.NewReader(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.text, err, c.want)
		}
	}
}

// A test that never ends (the binary timed out or crashed outside it) has
// its output shown when its package fails, or when the stream ends.
func TestUnfinishedTestsShown(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestHangs"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"    x_test.go:3: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 20m0s\n"}
{"Action":"fail","Package":"p"}
{"Action":"output","Package":"q","Test":"TestCut","Output":"    y_test.go:9: half a line"}
`
	var out bytes.Buffer
	c := newCollector(&out, false)
	if err := c.Read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"panic: test timed out after 20m0s\n",
		"--- p TestHangs: the package failed before the test ended; its output:\n=== RUN   TestHangs\n    x_test.go:3: waiting\n",
		"--- q TestCut: the stream ended before the test did; its output:\n    y_test.go:9: half a line",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the echo lacks %q:\n%s", want, out.String())
		}
	}
	if len(c.running) != 0 || len(c.order) != 0 {
		t.Errorf("%d tests still held after the end", len(c.running))
	}
}

// A test's kept output is bounded; what is left out is said, and the
// start and the end are kept.
func TestOutputBounded(t *testing.T) {
	var in strings.Builder
	in.WriteString(`{"Action":"output","Package":"p","Test":"TestLoud","Output":"first line\n"}` + "\n")
	line := `{"Action":"output","Package":"p","Test":"TestLoud","Output":"` + strings.Repeat("x", 1000) + `\n"}` + "\n"
	for range 2 * maxTestOutput / 1000 {
		in.WriteString(line)
	}
	in.WriteString(`{"Action":"output","Package":"p","Test":"TestLoud","Output":"last line\n"}` + "\n")
	in.WriteString(`{"Action":"fail","Package":"p","Test":"TestLoud"}` + "\n")
	var out bytes.Buffer
	c := newCollector(&out, false)
	if err := c.Read(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if len(got) > maxTestOutput+200 || !strings.HasPrefix(got, "first line\n") || !strings.HasSuffix(got, "last line\n") || !strings.Contains(got, "bytes of output left out") {
		t.Errorf("%d bytes echoed for a failed test that printed %d: want at most about %d, its first and last lines and a note", len(got), in.Len(), maxTestOutput)
	}
}

// A line past maxLine is passed through, not parsed, and the lines after
// it are read as usual.
func TestLongLinePassedThrough(t *testing.T) {
	long := `{"Action":"pass","Package":"p","Test":"TestHidden","Output":"` + strings.Repeat("y", maxLine) + `"}`
	in := long + "\n" + `{"Action":"pass","Package":"p","Test":"TestSeen"}` + "\n"
	var out bytes.Buffer
	c := newCollector(&out, false)
	if err := c.Read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if out.String() != long+"\n" || c.sum.Passed != 1 {
		t.Errorf("echoed %d bytes (want the %d of the long line), passed %d (want 1)", out.Len(), len(long)+1, c.sum.Passed)
	}
}
