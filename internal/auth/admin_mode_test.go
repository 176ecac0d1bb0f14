package auth

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAdminTokenFileIsMadePrivate: an admin_token file others may read
// (written by hand, or restored from a backup as 0644) is made 0600 when
// the server reads it, so a worker running as another uid cannot.
func TestAdminTokenFileIsMadePrivate(t *testing.T) {
	t.Setenv(AdminTokenEnv, "")
	dir := t.TempDir()
	path := filepath.Join(dir, AdminTokenFile)
	if err := os.WriteFile(path, []byte("by-hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, created, err := LoadOrCreateAdminToken(dir)
	if err != nil || created || tok != "by-hand" {
		t.Fatalf("LoadOrCreateAdminToken: %q %v %v", tok, created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("admin_token: mode %04o after the server read it, want 0600", st.Mode().Perm())
	}
	// A generated one is 0600 from the start.
	dir2 := t.TempDir()
	if _, created, err := LoadOrCreateAdminToken(dir2); err != nil || !created {
		t.Fatalf("generate: %v %v", created, err)
	}
	if st, err := os.Stat(filepath.Join(dir2, AdminTokenFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("generated admin_token: %v %v, want mode 0600", st.Mode(), err)
	}
}
