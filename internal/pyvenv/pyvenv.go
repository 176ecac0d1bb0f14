// Package pyvenv finds, for a test, the Python virtual environments that
// scripts/python-venv.sh makes from scripts/requirements/NAME.txt (the
// official Python clients the acceptance tests drive). A missing or stale
// environment skips the test, or fails it under EAS_REQUIRE_PYTHON=1.
package pyvenv

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"testing"

	"github.com/eas-server/eas-server/internal/require"
)

// Dir is where scripts/python-venv.sh puts the environment called name.
func Dir(name string) string {
	root := os.Getenv("EAS_PYVENV_DIR")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "eas-server", "pyvenv")
	}
	return filepath.Join(root, name)
}

// Python returns the interpreter of the environment called name, made from
// the requirements file as it is in this checkout.
func Python(t testing.TB, name string) string {
	t.Helper()
	root := require.RepoRoot()
	if root == "" {
		t.Fatal("pyvenv: the repository's go.mod is not above the test's directory")
	}
	req := filepath.Join(root, "scripts", "requirements", name+".txt")
	b, err := os.ReadFile(req)
	if err != nil {
		t.Fatalf("pyvenv: %v", err)
	}
	sum := sha256.Sum256(b)
	dir := Dir(name)
	stamp, _ := os.ReadFile(filepath.Join(dir, ".requirements.sha256"))
	py := filepath.Join(dir, "bin", "python")
	if _, err := os.Stat(py); err != nil || strings.TrimSpace(string(stamp)) != hex.EncodeToString(sum[:]) {
		require.Missing(t, require.Python, "no up-to-date Python environment %q at %s: run bash scripts/python-venv.sh %s (make test-deps does)", name, dir, name)
	}
	return py
}
