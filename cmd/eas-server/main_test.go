package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
)

// runAsMainEnv makes the test binary run main() instead of the tests, so
// that tests can start the real server as a child process without building
// the binary first.
const runAsMainEnv = "EAS_SERVER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is a server process started from the test binary.
type child struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
}

var listenLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startChild runs `serve` in a child process and waits until it listens.
func startChild(t *testing.T, env []string, args ...string) *child {
	t.Helper()
	c := &child{done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	c.cmd.Env = append(os.Environ(), append(env, runAsMainEnv+"=1")...)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.mu.Lock()
			c.logs.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	select {
	case a := <-addr:
		c.url = "http://" + a
	case <-time.After(20 * time.Second):
		t.Fatalf("server did not listen within 20s; stderr:\n%s", c.stderr())
	}
	return c
}

func (c *child) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.String()
}

// kill sends SIGKILL: no shutdown code runs.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
	<-c.done
}

func TestKillAndRestartKeepsEveryService(t *testing.T) {
	stateDir := t.TempDir()
	dir := t.TempDir()
	gen := teststack.WriteFile(t, dir, "gen.json", `{"name":"gen","processor":"echo","metadata":{"instance":1}}`)
	gen2 := teststack.WriteFile(t, dir, "gen2.json", `{"name":"gen","processor":"echo","model_config":{"sleep_ms":1},"metadata":{"instance":1}}`)
	fixed := teststack.WriteFile(t, dir, "fixed.json", `{"name":"fixed","processor":"echo","token":"fixed-token","metadata":{"instance":2}}`)
	off := teststack.WriteFile(t, dir, "off.json", `{"name":"off","processor":"echo","metadata":{"instance":1}}`)

	// First start: no EAS_ADMIN_TOKEN, so a token is generated, kept and
	// printed once.
	env := []string{"EAS_ADMIN_TOKEN="}
	a := startChild(t, env, "--state-dir", stateDir)
	tokFile := filepath.Join(stateDir, "admin_token")
	b, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(b))
	if st, _ := os.Stat(tokFile); st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file mode %v, want 0600", st.Mode().Perm())
	}
	if strings.Count(a.stderr(), admin) != 1 {
		t.Fatalf("the new admin token must be printed exactly once; stderr:\n%s", a.stderr())
	}
	t.Setenv("EAS_ADMIN_TOKEN", "")
	run := func(url string, args ...string) string {
		t.Helper()
		args = append(args, "--endpoint", url, "--token", admin)
		if args[0] != "stop" {
			args = append(args, "--poll", "10ms")
		}
		out, errOut, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return out
	}
	run(a.url, "create", gen)
	run(a.url, "modify", "gen", "-s", gen2)
	run(a.url, "create", fixed)
	run(a.url, "create", off)
	run(a.url, "stop", "off")
	before := map[string]controlapi.ServiceObject{}
	for _, name := range []string{"gen", "fixed", "off"} {
		out, _, _ := runCLI(t, "desc", name, "-o", "json", "--endpoint", a.url, "--token", admin)
		var obj controlapi.ServiceObject
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			t.Fatal(err)
		}
		before[name] = obj
	}

	a.kill(t)

	// Second start on the same state dir, deploying fixed.json again
	// (the same configuration: no new version).
	bsrv := startChild(t, env, "--state-dir", stateDir, "--deploy", fixed)
	if strings.Contains(bsrv.stderr(), admin) || strings.Contains(bsrv.stderr(), "Generated") {
		t.Fatalf("the admin token was printed again:\n%s", bsrv.stderr())
	}
	t.Setenv("EAS_ADMIN_TOKEN", admin)
	for name, want := range before {
		var got controlapi.ServiceObject
		wait.Until(t, 10*time.Second, func() error {
			out, errOut, code := runCLI(t, "desc", name, "-o", "json", "--endpoint", bsrv.url)
			if code != 0 {
				t.Fatalf("desc %s after restart: %s\nserver:\n%s", name, errOut, bsrv.stderr())
			}
			got = controlapi.ServiceObject{}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("desc %s after restart: %v in %s", name, err, out)
			}
			if got.Status != want.Status {
				return fmt.Errorf("%s is %s after the restart, want %s as before", name, got.Status, want.Status)
			}
			return nil
		})
		if got.Status != want.Status || got.AccessToken != want.AccessToken || got.CurrentVersion != want.CurrentVersion ||
			got.LatestVersion != want.LatestVersion || got.RunningInstance != want.RunningInstance {
			t.Errorf("%s after kill -9 and restart:\n got %+v\nwant %+v", name, got, want)
		}
	}
	for _, name := range []string{"gen", "fixed"} {
		if code, body, _ := teststack.Do(t, "POST", bsrv.url+"/api/predict/"+name, before[name].AccessToken, []byte("after restart")); code != 200 || string(body) != "after restart" {
			t.Errorf("predict %s after restart: %d %q", name, code, body)
		}
	}
	if code, _, _ := teststack.Do(t, "POST", bsrv.url+"/api/predict/off", before["off"].AccessToken, []byte("x")); code != 503 {
		t.Errorf("the stopped service answered %d after restart, want 503", code)
	}
	if strings.Contains(bsrv.stderr(), before["gen"].AccessToken) || strings.Contains(bsrv.stderr(), "fixed-token") {
		t.Errorf("a service token reached the log:\n%s", bsrv.stderr())
	}
}

// TestSecondServerOnOneStateDirRefuses: a second serve on a state dir in
// use exits non-zero naming the first's pid, changes no file under the
// directory, and leaves the first's services (an async one's queue file
// included) serving.
func TestSecondServerOnOneStateDirRefuses(t *testing.T) {
	stateDir := t.TempDir()
	dir := t.TempDir()
	svc := teststack.WriteFile(t, dir, "a.json", `{"name":"a","processor":"echo","token":"T","metadata":{"instance":1,"type":"Async"}}`)
	first := startChild(t, []string{"EAS_ADMIN_TOKEN=admin"}, "--state-dir", stateDir, "--deploy", svc)
	wait.Until(t, 20*time.Second, func() error {
		if code, body, _ := teststack.Do(t, "GET", first.url+"/readyz", "", nil); code != 200 {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	before := snapshotDir(t, stateDir)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a second server that serves instead of refusing
	defer cancel()
	second := exec.CommandContext(ctx, os.Args[0], "serve", "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--deploy", svc)
	second.Env = append(os.Environ(), runAsMainEnv+"=1", "EAS_ADMIN_TOKEN=admin")
	out, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("the second server on one state dir: %v, want a non-zero exit; output:\n%s", err, out)
	}
	want := fmt.Sprintf("is in use by another eas-server (pid %d)", first.cmd.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Fatalf("the second server's refusal does not say %q:\n%s", want, out)
	}
	if after := snapshotDir(t, stateDir); !maps.Equal(before, after) {
		t.Fatalf("the refused server changed the state dir:\nbefore %v\nafter  %v", before, after)
	}
	code, body, _ := teststack.Do(t, "POST", first.url+"/api/predict/a", "T", []byte("still here"))
	if code != 200 {
		t.Fatalf("the first server's async service after the refusal: %d %s\n%s", code, body, first.stderr())
	}
	if strings.Contains(first.stderr(), "Failed") || strings.Contains(first.stderr(), "timeout") {
		t.Fatalf("the first server logged a failure:\n%s", first.stderr())
	}

	// Its lock goes with it: once the first is killed, a server starts there.
	first.kill(t)
	startChild(t, []string{"EAS_ADMIN_TOKEN=admin"}, "--state-dir", stateDir)
}

// snapshotDir maps every file under dir to its size, mode and
// modification time.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%d %v %d", info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
