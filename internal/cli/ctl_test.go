package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"

	_ "github.com/eas-server/eas-server/processors/all" // the servers the verbs drive serve every code
)

const testAdmin = "test-admin-token"

// startServer runs the real router and manager on a loopback listener.
func startServer(t *testing.T) string {
	t.Helper()
	return teststack.New(t, teststack.Options{Server: server.Options{AdminToken: testAdmin}}).URL
}

// runCLI runs the client verbs with args, as the binary would.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	return runCLIStdin(t, "", args...)
}

// runCLIStdin is runCLI with stdin.
func runCLIStdin(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := &cobra.Command{Use: "eas-server", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Commands()...)
	var out, errb bytes.Buffer
	code = Run(t.Context(), root, args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// ctl runs a client verb against url with the admin token.
func ctl(t *testing.T, url string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	args = append(args, "--endpoint", url, "--token", testAdmin)
	switch args[0] {
	case "create", "modify", "start", "version":
		args = append(args, "--poll", "10ms", "--timeout", "20s")
	}
	return runCLI(t, args...)
}

func predict(t *testing.T, url, name, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/predict/"+name, strings.NewReader(body))
	req.Header.Set("Authorization", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

var tokenRow = regexp.MustCompile(`\|\s+Token \| (\S+)\s+\|`)

func TestCLILifecycle(t *testing.T) {
	t.Setenv("EAS_ADMIN_TOKEN", "")
	t.Setenv("EAS_ENDPOINT", "")
	url := startServer(t)
	dir := t.TempDir()
	v1 := teststack.WriteFile(t, dir, "v1.json", `{"name":"svc","processor":"echo","metadata":{"instance":1}}`)
	v2 := teststack.WriteFile(t, dir, "v2.json", `{"name":"svc","processor":"echo","model_config":{"sleep_ms":1},"metadata":{"instance":1}}`)
	bad := teststack.WriteFile(t, dir, "bad.json", `{"name":"broken","processor":"echo","warm_up_data_path":"/nonexistent/warmup.bin","metadata":{"instance":1}}`)

	out, errOut, code := ctl(t, url, "create", v1)
	m := tokenRow.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "| Intranet Endpoint | "+url+"/api/predict/svc") ||
		!strings.Contains(out, "[OK] Service svc is running at version 1") || !strings.Contains(errOut, "Created") {
		t.Fatalf("create: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	token := m[1]
	if c, body := predict(t, url, "svc", token, "hello"); c != 200 || body != "hello" {
		t.Fatalf("predict with the printed token: %d %q", c, body)
	}

	out, _, code = ctl(t, url, "ls")
	if code != 0 || !strings.HasPrefix(out, "NAME") || !regexp.MustCompile(`(?m)^svc\s+Running\s+1/1\s+1/1\s`).MatchString(out) {
		t.Fatalf("ls: exit %d\n%s", code, out)
	}
	out, _, code = ctl(t, url, "desc", "svc")
	for _, want := range []string{"|      AccessToken | " + token, "|   CurrentVersion | 1 ", "|           Status | Running ", `"processor":"echo"`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("desc: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	out, errOut, code = ctl(t, url, "modify", "svc", "-s", v2)
	if code != 0 || !strings.Contains(out, "running at version 2") || !strings.Contains(errOut, "updating from version 1 to version 2") || tokenRow.FindStringSubmatch(out)[1] != token {
		t.Fatalf("modify: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, _, code = ctl(t, url, "versions", "svc")
	if code != 0 || !regexp.MustCompile(`(?m)^1\s+\S+ \S+\s+echo\n2\s+\*\s+`).MatchString(out) {
		t.Fatalf("versions: exit %d\n%s", code, out)
	}

	out, _, code = ctl(t, url, "version", "svc", "1")
	if code != 0 || !strings.Contains(out, "running at version 1") {
		t.Fatalf("version svc 1: exit %d\n%s", code, out)
	}
	out, _, code = ctl(t, url, "versions", "svc", "-o", "json")
	var vl controlapi.VersionList
	if code != 0 || json.Unmarshal([]byte(out), &vl) != nil || vl.CurrentVersion != 1 || len(vl.Versions) != 2 || !vl.Versions[0].Current {
		t.Fatalf("versions -o json: exit %d\n%s", code, out)
	}
	if _, errOut, code = ctl(t, url, "version", "svc", "5"); code == 0 || !strings.Contains(errOut, "version 5 does not exist") {
		t.Fatalf("version svc 5: exit %d, %s", code, errOut)
	}

	out, _, code = ctl(t, url, "stop", "svc")
	if code != 0 || !strings.Contains(out, "[OK] Service svc is Stopped") {
		t.Fatalf("stop: exit %d\n%s", code, out)
	}
	if c, body := predict(t, url, "svc", token, "x"); c != 503 {
		t.Fatalf("predict on a stopped service: %d %q", c, body)
	}
	out, _, code = ctl(t, url, "start", "svc")
	if code != 0 || !strings.Contains(out, "running at version 1") {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	if c, _ := predict(t, url, "svc", token, "x"); c != 200 {
		t.Fatalf("predict after start: %d", c)
	}
	out, _, code = ctl(t, url, "events", "svc")
	for _, want := range []string{"TIME", "Stopped", "Starting", "Updating", "Drained"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("events: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	// A service that fails: exit 1 with the reason, listed as Failed.
	_, errOut, code = ctl(t, url, "create", bad)
	if code != 1 || !strings.Contains(errOut, "[FAILED] Service broken") || !strings.Contains(errOut, "/nonexistent/warmup.bin") {
		t.Fatalf("create of a failing service: exit %d\n%s", code, errOut)
	}
	out, _, _ = ctl(t, url, "ls", "-o", "json")
	var list controlapi.ServiceList
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.TotalCount != 2 || list.Services[0].Status != "Failed" {
		t.Fatalf("ls -o json: %v\n%s", err, out)
	}

	out, _, code = ctl(t, url, "delete", "svc")
	if code != 0 || !strings.Contains(out, "[OK] Service svc deleted") {
		t.Fatalf("delete: exit %d\n%s", code, out)
	}
	if _, errOut, code = ctl(t, url, "desc", "svc"); code == 0 || !strings.Contains(errOut, "404") {
		t.Fatalf("desc after delete: exit %d, %s", code, errOut)
	}
	if c, _ := predict(t, url, "svc", token, "x"); c != 401 {
		t.Fatalf("predict after delete: %d", c)
	}

	// Credentials.
	if _, errOut, code = runCLI(t, "ls", "--endpoint", url); code == 0 || !strings.Contains(errOut, "no admin token") {
		t.Fatalf("ls without a token: exit %d, %s", code, errOut)
	}
	if _, errOut, code = runCLI(t, "ls", "--endpoint", url, "--token", "wrong"); code == 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("ls with a wrong token: exit %d, %s", code, errOut)
	}
	t.Setenv("EAS_ADMIN_TOKEN", testAdmin)
	t.Setenv("EAS_ENDPOINT", url)
	if out, _, code = runCLI(t, "ls"); code != 0 || !strings.Contains(out, "broken") {
		t.Fatalf("ls with the environment: exit %d, %s", code, out)
	}
}

// load sends requests from several clients until stop and counts the
// answers by status code.
type load struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	total atomic.Int64
	mu    sync.Mutex
	codes map[int]int
	fails []string
}

func startLoad(url, name, token string, clients int) *load {
	l := &load{stop: make(chan struct{}), codes: map[int]int{}}
	for i := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			hc := &http.Client{Timeout: 10 * time.Second}
			body := []byte("client " + string(rune('a'+i)))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", url+"/api/predict/"+name, bytes.NewReader(body))
				req.Header.Set("Authorization", token)
				resp, err := hc.Do(req)
				code := -1
				var got bytes.Buffer
				if err == nil {
					got.ReadFrom(resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				l.mu.Lock()
				l.codes[code]++
				if (code != 200 || !bytes.Equal(got.Bytes(), body)) && len(l.fails) < 3 {
					l.fails = append(l.fails, got.String())
				}
				l.mu.Unlock()
				l.total.Add(1)
			}
		}()
	}
	return l
}

// waitFor blocks until n more requests have been answered.
func (l *load) waitFor(t *testing.T, n int64) {
	t.Helper()
	target := l.total.Load() + n
	wait.Until(t, 10*time.Second, func() error {
		if got := l.total.Load(); got < target {
			return fmt.Errorf("load stalled at %d requests, want %d", got, target)
		}
		return nil
	})
}

func TestCLIModifyUnderLoadDropsNothing(t *testing.T) {
	url := startServer(t)
	dir := t.TempDir()
	conf := func(extra string) string {
		return `{"name":"live","processor":"echo","token":"T",` + extra + `}`
	}
	v1 := teststack.WriteFile(t, dir, "v1.json", conf(`"model_config":{"sleep_ms":2},"metadata":{"instance":1}`))
	v2 := teststack.WriteFile(t, dir, "v2.json", conf(`"model_config":{"sleep_ms":3},"metadata":{"instance":1}`))
	scaled := teststack.WriteFile(t, dir, "v3.json", conf(`"model_config":{"sleep_ms":3},"metadata":{"instance":2}`))
	bad := teststack.WriteFile(t, dir, "bad.json", conf(`"warm_up_data_path":"/nonexistent/warmup.bin","metadata":{"instance":1}`))
	if _, errOut, code := ctl(t, url, "create", v1); code != 0 {
		t.Fatalf("create: %s", errOut)
	}

	l := startLoad(url, "live", "T", 6)
	defer func() {
		select {
		case <-l.stop:
		default:
			close(l.stop)
		}
	}()
	l.waitFor(t, 50)
	steps := []struct {
		args    []string
		code    int
		version int
	}{
		{[]string{"modify", "live", "-s", v2}, 0, 2},
		{[]string{"modify", "live", "-s", bad}, 1, 2}, // fails to load: version 2 keeps serving
		{[]string{"modify", "live", "-s", scaled}, 0, 4},
		{[]string{"version", "live", "1"}, 0, 1},
	}
	for _, st := range steps {
		before := l.total.Load()
		out, errOut, code := ctl(t, url, st.args...)
		if code != st.code {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", st.args, code, st.code, out, errOut)
		}
		if st.code != 0 && !strings.Contains(errOut, "keeps serving") {
			t.Fatalf("%v: the failure does not say the old version keeps serving:\n%s", st.args, errOut)
		}
		l.waitFor(t, 30) // traffic keeps flowing after the switch
		var obj controlapi.ServiceObject
		out, _, _ = ctl(t, url, "desc", "live", "-o", "json")
		if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.CurrentVersion != st.version || obj.Status != "Running" {
			t.Fatalf("%v: service %+v (%v), want Running at version %d", st.args, obj, err, st.version)
		}
		t.Logf("%v: %d requests during and after the switch", st.args, l.total.Load()-before)
	}
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.codes) != 1 || l.codes[200] == 0 || len(l.fails) != 0 {
		t.Fatalf("answers by status %v, first wrong bodies %q: every request must succeed", l.codes, l.fails)
	}
	t.Logf("%d requests, all 200", l.codes[200])
}
