package require

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// modulePath is the root module's path, as its go.mod declares it.
const modulePath = "github.com/eas-server/eas-server"

// RepoRoot is the repository's root: the folder of this module's go.mod,
// found by walking up from the working directory (a test runs in its
// package's folder), so the answer is the same from every package, however
// deep, and from the benchmark modules' nested go.mod files. "" when no
// root is found.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declares(b, modulePath) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// ConformanceRoot is the folder of the external conformance corpora
// (caffe/, lightgbm/, pmml/, tensorflow/): $EAS_CONFORMANCE_DIR when set,
// else ../shared/conformance beside RepoRoot. "" when no root is found.
func ConformanceRoot() string {
	if d := os.Getenv("EAS_CONFORMANCE_DIR"); d != "" {
		return d
	}
	root := RepoRoot()
	if root == "" {
		return ""
	}
	return filepath.Join(root, "..", "shared", "conformance")
}

// declares says whether the go.mod text gomod declares module path.
func declares(gomod []byte, path string) bool {
	for line := range bytes.Lines(gomod) {
		if f := bytes.Fields(line); len(f) == 2 && string(f[0]) == "module" && string(f[1]) == path {
			return true
		}
	}
	return false
}

// ConformanceDir returns the path of sub (a corpus, "lightgbm", or a
// file or folder in one, "tensorflow/saved_model_half_plus_two_cpu")
// under ConformanceRoot. When it is absent t ends through Missing: a skip,
// or a failure under EAS_REQUIRE_CONFORMANCE=1.
func ConformanceDir(t testing.TB, sub string) string {
	t.Helper()
	root := ConformanceRoot()
	p := filepath.Join(root, filepath.FromSlash(sub))
	if root == "" {
		Missing(t, Conformance, "no conformance data %s: the repository root (the go.mod of %s) is not above %s; set EAS_CONFORMANCE_DIR", sub, modulePath, mustGetwd())
	}
	if _, err := os.Stat(p); err != nil {
		Missing(t, Conformance, "no conformance data at %s (the corpora live in ../shared/conformance beside the checkout, or $EAS_CONFORMANCE_DIR): %v", p, err)
	}
	return p
}

func mustGetwd() string {
	d, err := os.Getwd()
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return d
}
