package nativelib

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	lib := filepath.Join(root, "third_party", "x", "lib", "libx.so")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("elf"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	s := Search{Dir: "x/lib", File: "libx.so"}
	if got, _, explicit := s.Find(); got != lib || explicit {
		t.Fatalf("from a subdirectory: %q %v, want %q", got, explicit, lib)
	}
	// An explicit directory means the file inside it; an explicit path
	// that does not exist is the only candidate.
	s.Explicit = filepath.Dir(lib)
	if got, _, explicit := s.Find(); got != lib || !explicit {
		t.Fatalf("explicit dir: %q %v", got, explicit)
	}
	s.Explicit = filepath.Join(root, "nope.so")
	if got, cands, explicit := s.Find(); got != "" || !explicit || len(cands) != 1 || cands[0] != s.Explicit {
		t.Fatalf("explicit missing: %q %v %v", got, cands, explicit)
	}
	// Nothing found: System is the last place tried.
	if got, cands, _ := (Search{Dir: "y", File: "liby.so", System: []string{"/nonexistent/liby.so"}}).Find(); got != "" || cands[len(cands)-1] != "/nonexistent/liby.so" {
		t.Fatalf("none: %q %v", got, cands)
	}
}
