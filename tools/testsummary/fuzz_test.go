package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

var closing = regexp.MustCompile(`\n[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped\n$`)

// FuzzCollector feeds arbitrary bytes as a test2json stream. The collector
// must not panic, must echo every line that is no event unchanged, must
// count each test end once, must hold nothing after the end, and the
// report must end with the closing line.
func FuzzCollector(f *testing.F) {
	// More seeds in testdata/fuzz/FuzzCollector.
	b, err := os.ReadFile("testdata/sample.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		c := newCollector(&out, false)
		if err := c.Read(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		s := c.sum
		if len(s.Skips) != s.Skipped || len(s.Failures) != s.Failed || s.Passed < 0 {
			t.Fatalf("skips %d vs %d counted, failures %d vs %d counted", len(s.Skips), s.Skipped, len(s.Failures), s.Failed)
		}
		if len(c.running) != 0 || len(c.order) != 0 {
			t.Fatalf("%d tests held after the end", len(c.running))
		}
		ends := 0
		for line := range bytes.Lines(data) {
			var ev event
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &ev) != nil || ev.Action == "" {
				if !bytes.Contains(out.Bytes(), line) {
					t.Fatalf("the line %q is no event and was not echoed:\n%q", line, out.Bytes())
				}
				continue
			}
			if ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip") {
				ends++
			}
		}
		if s.Ran() != ends {
			t.Fatalf("%d tests counted, %d test ends in the input", s.Ran(), ends)
		}
		var rep bytes.Buffer
		s.Report(&rep, nil, "none")
		if !closing.Match(rep.Bytes()) {
			t.Fatalf("the report does not end with the closing line:\n%s", rep.Bytes())
		}
	})
}
