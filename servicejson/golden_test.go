package servicejson

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata from the current output")

// checkGolden compares got with the golden file beside a test case, or
// rewrites it under -update.
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
	}
}

// TestInvalidGolden parses every testdata/invalid/*.json and compares the
// problems reported with the .golden file beside it.
func TestInvalidGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d invalid cases, want at least 20", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			s, err := ParseFile(file)
			if err == nil {
				t.Fatalf("ParseFile accepted an invalid file: %+v", s)
			}
			if s != nil {
				t.Errorf("ParseFile returned a Service with an error")
			}
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.Problems) == 0 {
				t.Fatalf("error is %T %v, want *Errors with problems", err, err)
			}
			for _, p := range errs.Problems {
				if p.File != file {
					t.Errorf("problem %q has File %q, want %q", p.Msg, p.File, file)
				}
				if p.Msg == "" || p.Msg != strings.ToLower(p.Msg[:1])+p.Msg[1:] || strings.HasSuffix(p.Msg, ".") {
					t.Errorf("message %q must be lowercase-initial with no final period", p.Msg)
				}
			}
			checkGolden(t, strings.TrimSuffix(file, ".json")+".golden", err.Error()+"\n")
		})
	}
}

// TestValidGolden parses every testdata/valid/*.json and compares the
// resulting Service, defaults included, with the .golden file beside it.
func TestValidGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/valid/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			s, err := ParseFile(file)
			if err != nil {
				t.Fatalf("ParseFile: %v", err)
			}
			view := *s
			view.Raw = nil
			out, err := json.MarshalIndent(view, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(file, ".json")+".golden", string(out)+"\n")
		})
	}
}
