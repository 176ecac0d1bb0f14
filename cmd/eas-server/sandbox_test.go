package main

import (
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

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
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

// TestHostileProcessorAgainstTheRealServer is the attack as it was found,
// on the real binary: a python processor reads --state-dir from
// /proc/<ppid>/cmdline, then the admin token and another service's
// records from the state dir, and sends SIGKILL to the server. It finds
// the state dir, reads nothing in it, and the server serves on, its
// control plane still answering to the admin token only it knows.
func TestHostileProcessorAgainstTheRealServer(t *testing.T) {
	// The state dir is where other uids may reach it (a t.TempDir and the
	// directory above it are 0700): serve makes it 0711 itself.
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(root, "eas-data")
	dir := t.TempDir()
	// The package comes over HTTP, as from OSS: the worker reads it in
	// <state-dir>/cache.
	src, err := os.ReadFile("../../processors/custom/testdata/hostile.py")
	if err != nil {
		t.Fatal(err)
	}
	pkg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hostile.py" {
			http.NotFound(w, r)
			return
		}
		w.Write(src)
	}))
	defer pkg.Close()
	victim := teststack.WriteFile(t, dir, "victim.json", `{"name":"victim","processor":"echo","metadata":{"instance":1}}`)
	evil := teststack.WriteFile(t, dir, "hostile.json", fmt.Sprintf(`{"name":"hostile","processor_path":%q,"processor_type":"python",
		"token":"h","model_config":{"victim":"victim"},"metadata":{"instance":1,"rpc":{"keepalive":20000}}}`, pkg.URL+"/hostile.py"))
	env := []string{"EAS_ADMIN_TOKEN=", "EAS_WORKER_UID="}
	if os.Geteuid() == 0 {
		env = append(env, "EAS_PYTHON=/usr/bin/python3") // reachable by the service's uid
	}
	c := startChild(t, env, "--state-dir", state, "--deploy", victim, "--deploy", evil)
	b, err := os.ReadFile(filepath.Join(state, "admin_token"))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(b))
	do := func(method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(rb)
	}
	wait.Until(t, 60*time.Second, func() error {
		if code, body := do("POST", "/api/predict/hostile", "h", "pid"); code != 200 {
			return fmt.Errorf("the hostile service does not answer yet: %d %s", code, body)
		}
		return nil
	})
	code, body := do("POST", "/api/predict/hostile", "h", "probe")
	var r map[string]any // testdata/hostile.py's report: each attempt "ok: ..." or "denied: ..."
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("probe: %d %s", code, body)
	}
	str := func(k string) string { s, _ := r[k].(string); return s }
	if !strings.Contains(str("cmdline"), "--state-dir") {
		t.Errorf("the hostile processor did not find --state-dir in the server's command line (%q): the test does not retrace the attack", str("cmdline"))
	}
	if uid, _ := r["uid"].(float64); os.Geteuid() == 0 && uid == 0 {
		t.Errorf("the worker runs as root: the service's own uid did not reach its package in the model cache; server log:\n%s", c.stderr())
	}
	if strings.Contains(body, admin) {
		t.Errorf("the admin token reached the hostile processor: %s", body)
	}
	for what, got := range map[string]string{"read the admin token": str("admin_token"), "read the victim's state.json": str("state_json"),
		"list services/": str("list_services"), "read the server's environ": str("server_environ"), "signal the server": str("signal_server")} {
		if !strings.HasPrefix(got, "denied: ") {
			t.Errorf("the hostile processor could %s: %q", what, got)
		}
	}
	if t.Failed() {
		t.Fatalf("the boundary leaks; not sending SIGKILL. Server log:\n%s", c.stderr())
	}
	if code, body := do("POST", "/api/predict/hostile", "h", "kill"); code != 200 || strings.Contains(body, "ok: ") {
		t.Errorf("kill: %d %s; want every SIGKILL denied", code, body)
	}
	select {
	case <-c.done:
		t.Fatalf("the server died; its log:\n%s", c.stderr())
	default:
	}
	if code, body := do("GET", "/api/v2/services", admin, ""); code != 200 || !strings.Contains(body, "victim") {
		t.Errorf("the control plane after the attack: %d %s", code, body)
	}
	if code, _ := do("GET", "/api/v2/services", "", ""); code != http.StatusUnauthorized {
		t.Errorf("the control plane without the admin token: %d, want 401", code)
	}
}
