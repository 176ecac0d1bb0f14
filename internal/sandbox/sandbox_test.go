package sandbox_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/sandbox"
	"github.com/eas-server/eas-server/internal/wait"
)

// TestMain lets this test binary be a worker of its own (Wrap with self):
// SANDBOX_TEST_CHILD=report prints what the process is and may do.
func TestMain(m *testing.M) {
	switch os.Getenv("SANDBOX_TEST_CHILD") {
	case "report":
		_, readErr := os.ReadFile(os.Args[1])
		fmt.Printf("uid=%d gid=%d read=%v\n", os.Getuid(), os.Getgid(), readErr == nil)
		os.Exit(0)
	case "spawn":
		// A server stand-in: start a sandboxed sleep as the pool does
		// (parent-death signal SIGKILL), say its pid, and die.
		os.Unsetenv("SANDBOX_TEST_CHILD")
		ro, rw := sandbox.System()
		uid := -1
		if os.Geteuid() == 0 {
			uid = 100124
		}
		l, err := sandbox.NewLauncher(sandbox.Policy{ReadOnly: ro, ReadWrite: rw, UID: uid, GID: uid})
		if err != nil {
			panic(err)
		}
		cmd := exec.Command("/bin/sleep", "100")
		l.Wrap(cmd, false)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		fmt.Println(cmd.Process.Pid)
		// Wait until the launcher has become sleep (dropped the uid and
		// set the parent-death signal again), so that the signal is the
		// one it set.
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
			if err != nil || strings.TrimSpace(string(b)) == "sleep" {
				break
			}
			runtime.Gosched()
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func needLandlock(t *testing.T, abi int) {
	t.Helper()
	got, err := sandbox.ABI()
	if got < abi {
		t.Skipf("the kernel's Landlock ABI is %d (%v); this test needs %d", got, err, abi)
	}
}

// run starts name args under p (or unsandboxed when p is nil) and returns
// its combined output and error.
func run(t *testing.T, p *sandbox.Policy, self bool, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if p != nil {
		l, err := sandbox.NewLauncher(*p)
		if err != nil {
			t.Fatal(err)
		}
		l.Wrap(cmd, self)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// policy is the system part plus allowed read-only.
func policy(allowed ...string) sandbox.Policy {
	ro, rw := sandbox.System()
	return sandbox.Policy{ReadOnly: append(ro, allowed...), ReadWrite: rw, UID: -1, GID: -1}
}

// secretAndAllowed makes two directories, each with a file.
func secretAndAllowed(t *testing.T) (secret, allowedDir, allowed string) {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"state", "pkg"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret = filepath.Join(root, "state", "admin_token")
	allowed = filepath.Join(root, "pkg", "model.bin")
	for _, f := range []string{secret, allowed} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return secret, filepath.Join(root, "pkg"), allowed
}

// TestLandlockAllowList: a sandboxed worker reads what its policy allows
// and nothing else, though its uid (the same as this test's) may read both
// files; unsandboxed, it reads both (the check can fail).
func TestLandlockAllowList(t *testing.T) {
	needLandlock(t, 1)
	secret, dir, allowed := secretAndAllowed(t)
	p := policy(dir)
	if out, err := run(t, &p, false, "/bin/cat", allowed); err != nil {
		t.Fatalf("cat of an allowed file: %v %s", err, out)
	}
	out, err := run(t, &p, false, "/bin/cat", secret)
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("cat of a file outside the policy: %v %q; want Permission denied", err, out)
	}
	if out, err := run(t, nil, false, "/bin/cat", secret); err != nil {
		t.Errorf("unsandboxed cat: %v %s", err, out)
	}
	// Writing is denied in read-only hierarchies, allowed in read-write ones.
	rw := t.TempDir()
	p.ReadWrite = append(p.ReadWrite, rw)
	if out, err := run(t, &p, false, "/bin/sh", "-c", "echo x > "+filepath.Join(dir, "w")); err == nil {
		t.Errorf("write into a read-only hierarchy succeeded: %s", out)
	}
	if out, err := run(t, &p, false, "/bin/sh", "-c", "echo x > "+filepath.Join(rw, "w")); err != nil {
		t.Errorf("write into a read-write hierarchy: %v %s", err, out)
	}
}

// TestLandlockScopesSignals: a sandboxed worker cannot signal this process
// (its parent, same uid), nor read its environment through /proc; without
// the sandbox it can.
func TestLandlockScopesSignals(t *testing.T) {
	needLandlock(t, 6)
	p := policy()
	me := strconv.Itoa(os.Getpid())
	script := "kill -0 " + me
	if out, err := run(t, nil, false, "/bin/sh", "-c", script); err != nil {
		t.Fatalf("unsandboxed kill -0 of the parent: %v %s", err, out)
	}
	if out, err := run(t, &p, false, "/bin/sh", "-c", script); err == nil {
		t.Errorf("sandboxed kill -0 of the parent succeeded: %s", out)
	}
	if out, err := run(t, &p, false, "/bin/cat", "/proc/"+me+"/environ"); err == nil {
		t.Errorf("sandboxed read of the parent's environ succeeded: %q", out)
	}
	// Its own children are inside its domain: those it may signal.
	if out, err := run(t, &p, false, "/bin/sh", "-c", "sleep 5 & kill $!"); err != nil {
		t.Errorf("sandboxed kill of its own child: %v %s", err, out)
	}
}

// TestLandlockScopesAbstractSockets: a sandboxed worker cannot connect to
// an abstract Unix socket this process listens on (a container runtime's
// shim listens on one); without the sandbox it can.
func TestLandlockScopesAbstractSockets(t *testing.T) {
	needLandlock(t, 6)
	py, err := exec.LookPath("python3")
	if err != nil {
		require.Missing(t, require.Python, "python3 not found: %v", err)
	}
	name := fmt.Sprintf("eas-sandbox-test-%d", os.Getpid())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	script := fmt.Sprintf("import socket; socket.socket(socket.AF_UNIX).connect('\\0%s')", name)
	if out, err := run(t, nil, false, py, "-c", script); err != nil {
		t.Fatalf("unsandboxed connect: %v %s", err, out)
	}
	p := policy(pythonDirs(py)...)
	if out, err := run(t, &p, false, py, "-c", script); err == nil || !strings.Contains(out, "PermissionError") {
		t.Errorf("sandboxed connect to an abstract socket outside the domain: %v %q; want PermissionError", err, out)
	}
}

// pythonDirs is what python3 at py needs beyond the system: its
// installation (a pyenv under /root, say).
func pythonDirs(py string) []string {
	real, err := filepath.EvalSymlinks(py)
	if err != nil {
		real = py
	}
	return []string{filepath.Dir(filepath.Dir(py)), filepath.Dir(filepath.Dir(real))}
}

// TestWorkerDiesWithTheServer: the parent-death signal survives the
// launcher's change of uid (which clears it), so a worker does not outlive
// its server.
func TestWorkerDiesWithTheServer(t *testing.T) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "SANDBOX_TEST_CHILD=spawn")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("spawn: %v %s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("spawn said %q", out)
	}
	wait.Until(t, 10*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // gone
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return nil // killed, not yet reaped by whoever adopted it
		}
		return fmt.Errorf("the sandboxed worker %d outlived its parent: %s", pid, b)
	})
}

// TestSeparateUID: as root, the worker runs as the policy's uid and gid,
// with no capability, and this binary is executed through a descriptor
// though its go test directory (0700) is out of that uid's reach.
func TestSeparateUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the server keeps its own uid for workers (changing uid needs root)")
	}
	secret, dir, allowed := secretAndAllowed(t)
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	const id = 100123
	p := policy(dir)
	p.UID, p.GID = id, id
	exe, _ := os.Executable()
	if err := sandbox.Reachable(exe, id, id); err == nil {
		t.Logf("note: %s is reachable by uid %d; the descriptor path is not exercised", exe, id)
	}
	t.Setenv("SANDBOX_TEST_CHILD", "report")
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil { // t.TempDir is 0700
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, &p, true, exe, allowed)
	if err != nil || out != fmt.Sprintf("uid=%d gid=%d read=true\n", id, id) {
		t.Errorf("self as uid %d reading an allowed 0644 file: %v %q", id, err, out)
	}
	// A 0600 root file: denied by the uid even with Landlock out of the
	// way (the secret's directory is allowed here).
	p.ReadOnly = append(p.ReadOnly, filepath.Dir(secret))
	out, err = run(t, &p, true, exe, secret)
	if err != nil || out != fmt.Sprintf("uid=%d gid=%d read=false\n", id, id) {
		t.Errorf("self as uid %d reading a 0600 root file: %v %q", id, err, out)
	}
	// And it cannot signal root's processes.
	if out, err := run(t, &p, false, "/bin/sh", "-c", "kill -0 "+strconv.Itoa(os.Getpid())); err == nil {
		t.Errorf("uid %d signalled the root parent: %s", id, out)
	}
	if err := sandbox.Reachable(secret, id, id); err == nil {
		t.Errorf("Reachable(%s) for uid %d: nil, want an error", secret, id)
	}
	if err := sandbox.Reachable(allowed, id, id); err != nil {
		t.Errorf("Reachable(%s): %v", allowed, err)
	}
}

// TestRootWithoutSeparateUIDHasNoCapabilities: a worker that stays root
// (EAS_WORKER_UID=0) has empty capability sets.
func TestRootWithoutSeparateUIDHasNoCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: a non-root server's workers have no capabilities to drop")
	}
	p := policy()
	out, err := run(t, &p, false, "/bin/grep", "^Cap", "/proc/self/status")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.Trim(f[1], "0") != "" {
			t.Errorf("capability line %q: want all zero", line)
		}
	}
}

func TestWorkerUID(t *testing.T) {
	t.Setenv(sandbox.EnvWorkerUID, "")
	a, _, err := sandbox.WorkerUID("svc_a")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := sandbox.WorkerUID("svc_b")
	if os.Geteuid() != 0 {
		if a != -1 {
			t.Errorf("not root: uid %d, want -1", a)
		}
		return
	}
	if a < sandbox.UIDBase || a >= sandbox.UIDBase+sandbox.UIDCount || a == b {
		t.Errorf("per-service uids %d, %d: want two in [%d, %d)", a, b, sandbox.UIDBase, sandbox.UIDBase+sandbox.UIDCount)
	}
	t.Setenv(sandbox.EnvWorkerUID, "0")
	if u, _, _ := sandbox.WorkerUID("svc_a"); u != -1 {
		t.Errorf("%s=0: uid %d, want -1 (stay root)", sandbox.EnvWorkerUID, u)
	}
	t.Setenv(sandbox.EnvWorkerUID, "4242")
	if u, g, _ := sandbox.WorkerUID("svc_a"); u != 4242 || g != 4242 {
		t.Errorf("%s=4242: %d:%d", sandbox.EnvWorkerUID, u, g)
	}
	t.Setenv(sandbox.EnvWorkerUID, "nobody")
	if _, _, err := sandbox.WorkerUID("svc_a"); err == nil {
		t.Errorf("%s=nobody: no error", sandbox.EnvWorkerUID)
	}
}

func TestCheckPolicyRefusesTheStateDir(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "eas-data")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	sandbox.Protect(state)
	if err := sandbox.CheckPolicy(sandbox.Policy{ReadOnly: []string{root}}); err == nil {
		t.Errorf("a policy holding the state dir passed")
	}
	if err := sandbox.CheckPolicy(sandbox.Policy{ReadOnly: []string{filepath.Join(state, "cache", "m")}}); err != nil {
		t.Errorf("a path inside the state dir (a cached model): %v", err)
	}
}
