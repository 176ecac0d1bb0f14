package service

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestStateDirSecretsArePrivate: everything under services/ (tokens,
// state.json, versions, queues) is the server's alone, directories 0700 and
// files 0600, including what an older server or a hand left looser: a
// custom processor's worker running as another uid reads none of it.
func TestStateDirSecretsArePrivate(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "services", "legacy")
	must(t, os.MkdirAll(legacy, 0o755))
	must(t, os.WriteFile(filepath.Join(legacy, "token"), []byte("tok"), 0o644))
	must(t, os.Chmod(legacy, 0o755))
	must(t, os.Chmod(filepath.Join(dir, "services"), 0o755))
	must(t, os.Chmod(filepath.Join(legacy, "token"), 0o644))

	m := newManager(t, dir)
	for _, js := range []string{
		`{"name":"gen","processor":"echo","metadata":{"instance":1}}`, // a generated token file
		`{"name":"q","processor":"echo","token":"x","metadata":{"instance":1,"type":"Async"}}`,
	} {
		if _, err := m.Deploy(t.Context(), parse(t, js)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	must(t, filepath.WalkDir(filepath.Join(dir, "services"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", p, info.Mode().Perm(), want)
		}
		rel, _ := filepath.Rel(dir, p)
		seen[rel] = true
		return nil
	}))
	for _, f := range []string{"services/gen/token", "services/gen/state.json", "services/gen/versions/1.json",
		"services/legacy/token", "services/q/queues.db"} {
		if !seen[f] {
			t.Errorf("%s was not written; the check above did not see it", f)
		}
	}
}
