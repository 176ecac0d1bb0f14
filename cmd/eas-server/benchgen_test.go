package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/loadgen"
)

// TestBenchGenerationFlags: the workload subcommand writes a file the load
// generator reads back as its spec says, and wrong flags are refused
// before any request is sent. The load generator itself is tested against
// the real server with a real model in processors/llm (TestGenerationLoad).
func TestBenchGenerationFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.jsonl")
	if _, errOut, code := runCLI(t, "bench-generation", "workload", "-n", "5", "--prompt", "3-9", "--output", "2-4", "--vocab", "100", "-o", file); code != 0 {
		t.Fatalf("workload: exit %d: %s", code, errOut)
	}
	out, _, _ := runCLI(t, "bench-generation", "workload", "-n", "5", "--prompt", "3-9", "--output", "2-4", "--vocab", "100")
	reqs, err := loadgen.ReadWorkload(strings.NewReader(out))
	if err != nil || len(reqs) != 5 {
		t.Fatalf("workload on stdout: %v, %d requests", err, len(reqs))
	}
	for _, r := range reqs {
		if len(r.Prompt) < 3 || len(r.Prompt) > 9 || r.MaxTokens < 2 || r.MaxTokens > 4 {
			t.Errorf("request %+v outside the ranges asked", r)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench-generation", "workload", "--prompt", "9-3"}, "--prompt: want MIN-MAX"},
		{[]string{"bench-generation", "--clients", "1"}, "give --workload"},
		{[]string{"bench-generation", "--workload", file}, "give --clients, --rate or both"},
		{[]string{"bench-generation", "--workload", file, "--clients", "0"}, "--clients: want"},
		{[]string{"bench-generation", "--workload", file, "--rate", "-1"}, "--rate: want"},
		{[]string{"bench-generation", "--workload", file, "-c", "1", "--fields", "[1]"}, "--fields: want a JSON object"},
		{[]string{"bench-generation", "--workload", filepath.Join(t.TempDir(), "none"), "-c", "1"}, "--workload"},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", c.args, code, errOut, c.want)
		}
	}
}
