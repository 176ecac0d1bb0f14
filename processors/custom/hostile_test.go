package custom_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/sandbox"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors/custom"
)

// hostileReport is testdata/hostile.py's answer to "probe".
type hostileReport struct {
	UID           int      `json:"uid"`
	Cmdline       string   `json:"cmdline"`
	AdminToken    string   `json:"admin_token"`
	StateJSON     string   `json:"state_json"`
	VersionJSON   string   `json:"version_json"`
	ListServices  string   `json:"list_services"`
	ListStateDir  string   `json:"list_state_dir"`
	ServerEnviron string   `json:"server_environ"`
	SignalServer  string   `json:"signal_server"`
	WorkersSeen   int      `json:"workers_seen"`
	SignalWorkers []string `json:"signal_workers"`
	WorkerEnviron []string `json:"worker_environ"`
}

// readableTempDir is a t.TempDir that other uids may enter (t.TempDir
// and the directory above it are 0700), as a model directory a root
// server's workers get their own uid for must be.
func readableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestHostileProcessorCannotTakeOverTheServer: user code (a python
// processor, a cpp one) tries what an attacker's package from OSS would:
// find the state dir, read the admin token and another service's records,
// read the server's environment, signal the server and the other
// services' workers, then SIGKILL them all. Every attempt fails, and the
// server and the other services serve on with the same worker processes.
// "own uids" is the default (as root: a uid per service, and Landlock);
// "landlock alone" keeps a root server's workers root (EAS_WORKER_UID=0,
// without capabilities), so Landlock has to stop it all by itself.
func TestHostileProcessorCannotTakeOverTheServer(t *testing.T) {
	t.Run("own uids", func(t *testing.T) { hostileScenario(t, true) })
	t.Run("landlock alone", func(t *testing.T) {
		if abi, err := sandbox.ABI(); abi < 6 {
			t.Skipf("the kernel's Landlock ABI is %d (%v): signal scoping needs 6", abi, err)
		}
		hostileScenario(t, false)
	})
}

func hostileScenario(t *testing.T, ownUIDs bool) {
	t.Setenv(auth.AdminTokenEnv, "")
	t.Setenv(sandbox.EnvWorkerUID, "")
	if !ownUIDs {
		t.Setenv(sandbox.EnvWorkerUID, "0")
	}
	if os.Geteuid() == 0 {
		// The service's uid must reach the interpreter for the python
		// worker to get it (python3 on PATH may be a shim under /root).
		t.Setenv(custom.EnvPython, "/usr/bin/python3")
	}
	state := filepath.Join(t.TempDir(), "eas-data")
	if err := os.MkdirAll(state, 0o711); err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.LoadOrCreateAdminToken(state); err != nil {
		t.Fatal(err)
	}
	libDir := readableTempDir(t)
	lib := buildLib(t, "hostile")
	if err := os.Rename(lib, filepath.Join(libDir, "libhostile.so")); err != nil {
		t.Fatal(err)
	}
	lib = filepath.Join(libDir, "libhostile.so")
	if err := os.Chmod(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	td := testdataDir(t)
	cfg := fmt.Sprintf(`"model_config": {"state_dir": %q, "victim": "victim"},`, state)
	st := teststack.New(t, teststack.Options{Service: service.Options{StateDir: state}},
		spec("victim", "python", filepath.Join(td, "state.py"), ""),
		spec("victim_cpp", "cpp", buildLib(t, "upper"), ""),
		spec("hostile", "python", filepath.Join(td, "hostile.py"), cfg),
		spec("hostile_cpp", "cpp", lib, ""),
		echoSpec)
	for _, f := range []string{filepath.Join(state, "admin_token"), filepath.Join(state, "services", "victim", "state.json"),
		filepath.Join(state, "services", "victim", "versions", "1.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the state dir lacks what the hostile processor is after: %v", err)
		}
	}
	victimPID, victimCppPID := workerPID(t, st, "victim"), workerPID(t, st, "victim_cpp")

	code, body := post(t, st, "hostile", "probe")
	var r hostileReport
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("probe: %d %s", code, body)
	}
	for what, got := range map[string]string{
		"read the admin token":                  r.AdminToken,
		"read the victim's state.json":          r.StateJSON,
		"read the victim's service.json":        r.VersionJSON,
		"list the state dir's services":         r.ListServices,
		"list the state dir":                    r.ListStateDir,
		"read the server's /proc/<pid>/environ": r.ServerEnviron,
		"signal the server (signal 0)":          r.SignalServer,
	} {
		if !strings.HasPrefix(got, "denied: ") {
			t.Errorf("the python processor could %s: %q", what, got)
		}
	}
	// It does find the other workers (listing /proc is not prevented), so
	// the attempts on them below are real ones.
	if r.WorkersSeen < 3 {
		t.Errorf("the python processor found %d other workers of the server, want at least 3 (victim, victim_cpp, hostile_cpp)", r.WorkersSeen)
	}
	for i := range r.SignalWorkers {
		if !strings.HasPrefix(r.SignalWorkers[i], "denied: ") || !strings.HasPrefix(r.WorkerEnviron[i], "denied: ") {
			t.Errorf("the python processor reached another worker: signal %q, environ %q", r.SignalWorkers[i], r.WorkerEnviron[i])
		}
	}

	// The cpp processor, attempt by attempt.
	ppid := strconv.Itoa(os.Getpid())
	for _, cmd := range []string{
		"read " + filepath.Join(state, "admin_token"),
		"read " + filepath.Join(state, "services", "victim", "state.json"),
		"list " + filepath.Join(state, "services"),
		"read /proc/" + ppid + "/environ",
		"signal " + ppid + " 0",
		"signal " + strconv.Itoa(victimPID) + " 0",
		"signal " + strconv.Itoa(victimCppPID) + " 0",
	} {
		if code, got := post(t, st, "hostile_cpp", cmd); code != 200 || !strings.HasPrefix(got, "denied: ") {
			t.Errorf("the cpp processor's %q: %d %q, want denied", cmd, code, got)
		}
	}
	if code, got := post(t, st, "hostile_cpp", "ppid"); code != 200 || got != ppid {
		t.Errorf("the cpp worker's parent is %q (%d), want the server %s", got, code, ppid)
	}
	if t.Failed() {
		t.Fatal("the boundary leaks: not trying SIGKILL on the server (this test process)")
	}

	t.Run("uid", func(t *testing.T) {
		_, got := post(t, st, "hostile_cpp", "uid")
		switch {
		case !ownUIDs:
			if me := strconv.Itoa(os.Geteuid()); got != me || strconv.Itoa(r.UID) != me {
				t.Errorf("worker uids: python %d, cpp %s; want the server's, %s", r.UID, got, me)
			}
		case os.Geteuid() != 0:
			t.Skip("not root: workers keep the server's uid (changing uid needs root); Landlock alone is checked above")
		case r.UID == 0 || got == "0" || strconv.Itoa(r.UID) == got:
			t.Errorf("worker uids: python %d, cpp %s; want two non-root uids, one per service", r.UID, got)
		}
	})

	// SIGKILL for the server and every other worker: all refused.
	code, body = post(t, st, "hostile", "kill")
	var kills []string
	if code != 200 || json.Unmarshal([]byte(body), &kills) != nil || len(kills) < 4 {
		t.Fatalf("kill: %d %s", code, body)
	}
	for _, k := range kills {
		if !strings.HasPrefix(k, "denied: ") {
			t.Errorf("a SIGKILL from the python processor went through: %q (all: %v)", k, kills)
		}
	}
	if code, got := post(t, st, "hostile_cpp", "signal "+ppid+" 9"); !strings.HasPrefix(got, "denied: ") {
		t.Errorf("the cpp processor's SIGKILL of the server: %d %q", code, got)
	}
	if code, got := post(t, st, "plain", "still here"); code != 200 || got != "still here" {
		t.Errorf("the echo service after the attacks: %d %q", code, got)
	}
	if p := workerPID(t, st, "victim"); p != victimPID {
		t.Errorf("the victim's worker is process %d, was %d: it was killed", p, victimPID)
	}
	if p := workerPID(t, st, "victim_cpp"); p != victimCppPID {
		t.Errorf("victim_cpp's worker is process %d, was %d: it was killed", p, victimCppPID)
	}
	if code, _, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/hostile", token, nil); code != 200 {
		t.Errorf("the hostile service itself is still served: %d", code)
	}
}

// TestHostileRequirementsBuild: building a package's virtualenv runs the
// package's code (here a local requirement whose setup.py reads the admin
// token and puts what it got in its error); that code is inside the
// sandbox too, so the load fails without the token in its message.
func TestHostileRequirementsBuild(t *testing.T) {
	t.Setenv(auth.AdminTokenEnv, "")
	t.Setenv(sandbox.EnvWorkerUID, "")
	if os.Geteuid() == 0 {
		t.Setenv(custom.EnvPython, "/usr/bin/python3") // reachable by the service's uid
	}
	state := filepath.Join(t.TempDir(), "eas-data")
	if err := os.MkdirAll(state, 0o711); err != nil {
		t.Fatal(err)
	}
	tok, _, err := auth.LoadOrCreateAdminToken(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("EVIL_TARGET", filepath.Join(state, auth.AdminTokenFile))
	t.Setenv("EAS_VENV_DIR", readableTempDir(t))
	t.Setenv("PIP_NO_INDEX", "1")
	t.Setenv("PIP_NO_BUILD_ISOLATION", "0") // the system's setuptools: no index here
	pkg := readableTempDir(t)
	src, err := os.ReadFile(filepath.Join("testdata", "state.py"))
	if err != nil {
		t.Fatal(err)
	}
	teststack.WriteFile(t, pkg, "app.py", string(src))
	teststack.WriteFile(t, pkg, "requirements.txt", "./evil\n")
	if err := os.Mkdir(filepath.Join(pkg, "evil"), 0o755); err != nil {
		t.Fatal(err)
	}
	teststack.WriteFile(t, pkg, "evil/setup.py", `import os
try:
    r = "ok: " + open(os.environ["EVIL_TARGET"]).read()
except OSError as e:
    r = "denied: " + e.strerror
raise SystemExit("EVIL-RESULT " + r)
`)
	st := teststack.New(t, teststack.Options{Service: service.Options{StateDir: state}, AllowFailedDeploys: true},
		spec("evil", "python", pkg, `"processor_entry": "app.py",`))
	err = st.DeployErrors["evil"]
	if err == nil || !strings.Contains(err.Error(), "EVIL-RESULT denied: ") || strings.Contains(err.Error(), tok) {
		t.Fatalf("the load of a package whose setup.py reads the admin token: %v; want it to fail with EVIL-RESULT denied", err)
	}
}
