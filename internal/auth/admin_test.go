package auth

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoadOrCreateAdminToken(t *testing.T) {
	t.Run("env wins", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("from-file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv(AdminTokenEnv, "from-env")
		tok, created, err := LoadOrCreateAdminToken(dir)
		if err != nil || tok != "from-env" || created {
			t.Fatalf("got %q, %v, %v; want from-env, false, nil", tok, created, err)
		}
	})
	t.Run("creates then reads back", func(t *testing.T) {
		t.Setenv(AdminTokenEnv, "")
		dir := filepath.Join(t.TempDir(), "state", "nested")
		tok, created, err := LoadOrCreateAdminToken(dir)
		if err != nil || !created || len(tok) != 40 {
			t.Fatalf("first call: %q, %v, %v", tok, created, err)
		}
		fi, err := os.Stat(filepath.Join(dir, AdminTokenFile))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Fatalf("admin_token mode %o, want 600", perm)
		}
		again, created, err := LoadOrCreateAdminToken(dir)
		if err != nil || created || again != tok {
			t.Fatalf("second call: %q, %v, %v; want %q, false, nil", again, created, err, tok)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("state dir holds %d entries, want only admin_token (temp files left behind?)", len(entries))
		}
	})
	t.Run("reads existing file trimmed", func(t *testing.T) {
		t.Setenv(AdminTokenEnv, "")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("  mine \n"), 0o600)
		tok, created, err := LoadOrCreateAdminToken(dir)
		if err != nil || tok != "mine" || created {
			t.Fatalf("got %q, %v, %v", tok, created, err)
		}
	})
	t.Run("empty file is an error", func(t *testing.T) {
		t.Setenv(AdminTokenEnv, "")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("\n"), 0o600)
		_, _, err := LoadOrCreateAdminToken(dir)
		if err == nil || !strings.Contains(err.Error(), "is empty") {
			t.Fatalf("err = %v, want an 'is empty' error", err)
		}
	})
	t.Run("concurrent starts agree", func(t *testing.T) {
		t.Setenv(AdminTokenEnv, "")
		dir := t.TempDir()
		const n = 8
		toks := make([]string, n)
		createdCount := 0
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				tok, created, err := LoadOrCreateAdminToken(dir)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				toks[i] = tok
				if created {
					createdCount++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, tok := range toks {
			if tok != toks[0] {
				t.Fatalf("callers disagree: %q", toks)
			}
		}
		if createdCount != 1 {
			t.Fatalf("%d callers report created, want 1", createdCount)
		}
	})
}
