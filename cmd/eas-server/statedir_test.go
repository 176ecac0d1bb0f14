package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStateDirIsEnteredNotListed: serve makes the state dir 0711, a new one
// and one an older server made 0700, so that custom processors' workers
// running as a uid of their own reach their models in <state-dir>/cache
// without being able to list it (the secrets in it are 0600 and 0700).
func TestStateDirIsEnteredNotListed(t *testing.T) {
	old := filepath.Join(t.TempDir(), "old")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "new"), old} {
		if _, err := setupProcess(serveFlags{stateDir: dir, logLevel: "info", logFormat: "text", gcPercent: 100}); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o711 {
			t.Errorf("%s: mode %04o, want 0711", dir, st.Mode().Perm())
		}
	}
}
