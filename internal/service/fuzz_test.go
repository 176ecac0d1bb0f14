package service

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRestore feeds arbitrary bytes to Restore as a service's state.json and
// version file: whatever the disk holds, Restore must neither panic nor
// restore a service that contradicts its record.
func FuzzRestore(f *testing.F) {
	good := `{"name":"svc","create_time":"2026-01-01T00:00:00Z","update_time":"2026-01-01T00:00:00Z",` +
		`"current_version":1,"latest_version":1,"stopped":false,"status":"Running",` +
		`"versions":[{"version":1,"create_time":"2026-01-01T00:00:00Z"}],"events":[]}`
	f.Add([]byte(good), []byte(v1))
	f.Add([]byte(good), []byte(`{"name":"other","processor":"echo","metadata":{"instance":1}}`))
	f.Add([]byte(`{"name":"svc","current_version":2,"latest_version":1}`), []byte(v1))
	f.Add([]byte(`{"name":"svc","current_version":1,"latest_version":1,"stopped":true}`), []byte(`{`))
	f.Add([]byte(`{"name":"svc","current_version":1,"latest_version":3,"versions":[{"version":-1}]}`), []byte(v1))
	f.Add([]byte(`null`), []byte(``))
	f.Add([]byte{0xff, 0xfe}, []byte(v1))
	f.Fuzz(func(t *testing.T, state, version []byte) {
		dir := t.TempDir()
		sd := filepath.Join(dir, "services", "svc")
		must(t, os.MkdirAll(filepath.Join(sd, "versions"), 0o700))
		must(t, os.WriteFile(filepath.Join(sd, stateFile), state, 0o600))
		must(t, os.WriteFile(filepath.Join(sd, "versions", "1.json"), version, 0o600))
		m := NewManager(Options{StateDir: dir})
		defer m.Shutdown(context.Background())
		n, problems := m.Restore()
		if n+len(problems) != 1 {
			t.Fatalf("restored %d with %d problems; one directory must give exactly one of them", n, len(problems))
		}
		if n == 0 {
			return
		}
		in, err := m.Describe(t.Context(), "svc")
		if err != nil {
			t.Fatal(err)
		}
		if in.CurrentVersion < 1 || in.CurrentVersion > in.LatestVersion {
			t.Fatalf("restored at version %d of %d", in.CurrentVersion, in.LatestVersion)
		}
	})
}
