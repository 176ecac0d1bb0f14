package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/internal/teststack"
)

// TestCacheLsPruneAndDeleteFreeBytes runs a server whose services load
// models over HTTP and checks the cache's accounting through the CLI and
// /metrics: two services sharing one URL share one entry; deleting one keeps
// it, deleting the other frees its bytes on disk; a stopped service's model
// is not in use, and prune removes it while keeping what is.
func TestCacheLsPruneAndDeleteFreeBytes(t *testing.T) {
	models := map[string][]byte{}
	for _, n := range []string{"lr.pmml", "rf.pmml"} {
		b, err := os.ReadFile(filepath.Join("../../examples/models", n))
		if err != nil {
			t.Fatal(err)
		}
		models["/"+n] = b
	}
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := models[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		// Last-Modified lets a second fetch of the URL reuse the entry.
		http.ServeContent(w, r, r.URL.Path, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), bytes.NewReader(b))
	}))
	defer files.Close()

	stateDir, dir := t.TempDir(), t.TempDir()
	c := startChild(t, []string{"EAS_ADMIN_TOKEN=admin"}, "--state-dir", stateDir)
	cli := func(args ...string) string {
		t.Helper()
		args = append(args, "--endpoint", c.url, "--token", "admin")
		out, errOut, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return out
	}
	svc := func(name, model string) string {
		return teststack.WriteFile(t, dir, name+".json", fmt.Sprintf(`{"name":%q,"processor":"pmml","model_path":%q,"metadata":{"instance":1}}`, name, files.URL+"/"+model))
	}
	for name, model := range map[string]string{"a": "lr.pmml", "a2": "lr.pmml", "b": "rf.pmml"} {
		cli("create", svc(name, model), "--poll", "10ms")
	}
	list := func() controlapi.CacheList {
		t.Helper()
		var l controlapi.CacheList
		if err := json.Unmarshal([]byte(cli("cache", "ls", "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	entriesOnDisk := func() (n int, bytes int64) {
		filepath.Walk(filepath.Join(stateDir, "cache", "entries"), func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				bytes += info.Size()
			}
			if err == nil && info.IsDir() && filepath.Dir(p) == filepath.Join(stateDir, "cache", "entries") {
				n++
			}
			return nil
		})
		return n, bytes
	}
	l := list()
	if l.Usage.Entries != 2 || l.Usage.Bytes != l.Usage.InUseBytes || l.Usage.Bytes == 0 {
		t.Fatalf("two URLs for three services: %+v", l)
	}
	if out := cli("cache", "ls"); !strings.Contains(out, files.URL+"/lr.pmml") || !strings.Contains(out, "2 models") {
		t.Fatalf("cache ls:\n%s", out)
	}
	metric := func(name string) string {
		resp, err := http.Get(c.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		t.Fatalf("/metrics has no %s", name)
		return ""
	}
	if got := metric("eas_model_cache_entries"); got != "2" {
		t.Fatalf("eas_model_cache_entries = %s, want 2", got)
	}
	if got, want := metric("eas_model_cache_bytes"), fmt.Sprint(l.Usage.Bytes); got != want {
		t.Fatalf("eas_model_cache_bytes = %s, want %s", got, want)
	}

	// A shared entry outlives one of its services.
	cli("delete", "a2")
	if n, _ := entriesOnDisk(); n != 2 {
		t.Fatalf("%d entries after deleting one of two services of lr.pmml, want 2", n)
	}
	// A stopped service holds nothing: prune removes its model only.
	cli("stop", "b")
	var pr storage.PruneResult
	if err := json.Unmarshal([]byte(cli("cache", "prune", "-o", "json")), &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Removed != 1 || pr.KeptInUse != 1 || pr.FreedBytes == 0 {
		t.Fatalf("prune: %+v, want rf.pmml removed and lr.pmml kept", pr)
	}
	l = list()
	if len(l.Entries) != 1 || !strings.HasSuffix(l.Entries[0].URL, "/lr.pmml") || !l.Entries[0].InUse {
		t.Fatalf("after prune: %+v", l.Entries)
	}
	// Deleting the last service of a model frees its bytes.
	cli("delete", "a")
	if n, b := entriesOnDisk(); n != 0 || b != 0 {
		t.Fatalf("after deleting every service of lr.pmml: %d entries, %d bytes on disk", n, b)
	}
	if got := metric("eas_model_cache_bytes"); got != "0" {
		t.Fatalf("eas_model_cache_bytes = %s after deletes, want 0", got)
	}
}
