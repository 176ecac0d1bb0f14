package custom_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/syncbuf"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
)

// countEvents counts the service's events with reason.
func countEvents(t *testing.T, st *teststack.Stack, name, reason string) (n int, last service.Event) {
	t.Helper()
	svc, ok := st.Manager.Get(name)
	if !ok {
		t.Fatalf("no service %s", name)
	}
	for _, e := range svc.Events() {
		if e.Reason == reason {
			n, last = n+1, e
		}
	}
	return n, last
}

// TestCppCrashReport: a C processor that crashes (a NULL dereference, on
// a request's thread or one of its own, a division by zero, an abort, a
// NULL handed to strlen)
// costs one ERROR line in the server's log, naming the signal, the fault
// address and where in the library it happened, with a few lines of
// context at most (not the worker's Go runtime dump, line by line); the
// service's events record the crash and the restart.
func TestCppCrashReport(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lib := buildLib(t, "crash")
	st := teststack.New(t, teststack.Options{Service: service.Options{Logger: log}}, spec("crash", "cpp", lib, ""))
	for i, tc := range []struct {
		body   string
		signal string
		want   []string // in the error line besides the signal and the library
	}{
		{"segv", "SIGSEGV", []string{"addr=0x0", "touch_null"}},
		{"thread", "SIGSEGV", []string{"addr=0x0", "touch_null"}},
		{"fpe", "SIGFPE", []string{"integer divide by zero", "divide"}},
		{"abort", "SIGABRT", []string{"abort()", "libc", "called from process+0x"}},
		{"strlen", "SIGSEGV", []string{"addr=0x0", "libc", "called from process+0x"}},
	} {
		mark := len(logs.String())
		if code, body := post(t, st, "crash", tc.body); code != 500 || !strings.Contains(body, "ended while running this request") {
			t.Fatalf("%s: %d %q, want 500", tc.body, code, body)
		}
		wait.Until(t, 20*time.Second, func() error {
			if n, _ := countEvents(t, st, "crash", "WorkerRestarted"); n < i+1 {
				return fmt.Errorf("%s: %d WorkerRestarted events, want %d; events: %v", tc.body, n, i+1, events(t, st, "crash"))
			}
			return nil
		})
		if code, body := post(t, st, "crash", "abc"); code != 200 || body != "abc" {
			t.Fatalf("%s: after the restart: %d %q", tc.body, code, body)
		}
		out := logs.String()[mark:]
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var errs []string
		for _, l := range lines {
			if strings.Contains(l, "level=ERROR") {
				errs = append(errs, l)
			}
		}
		if len(errs) != 1 {
			t.Fatalf("%s: %d ERROR lines, want 1:\n%s", tc.body, len(errs), out)
		}
		for _, w := range append([]string{tc.signal, filepath.Base(lib)}, tc.want...) {
			if !strings.Contains(errs[0], w) {
				t.Errorf("%s: the error line lacks %q: %s", tc.body, w, errs[0])
			}
		}
		t.Logf("%s:\n%s", tc.body, out)
		if len(lines) >= 10 {
			t.Errorf("%s: %d log lines for one crash, want a few:\n%s", tc.body, len(lines), out)
		}
		n, crashed := countEvents(t, st, "crash", "WorkerCrashed")
		if n != i+1 || crashed.Type != service.EventWarning || !strings.Contains(crashed.Message, tc.signal) || !strings.Contains(crashed.Message, filepath.Base(lib)) {
			t.Errorf("%s: %d WorkerCrashed events, the last %+v; want %d, a Warning naming %s and the library", tc.body, n, crashed, i+1, tc.signal)
		}
		if _, restarted := countEvents(t, st, "crash", "WorkerRestarted"); restarted.Type != service.EventNormal {
			t.Errorf("%s: WorkerRestarted is %+v, want a Normal event", tc.body, restarted)
		}
	}
}

func events(t *testing.T, st *teststack.Stack, name string) []string {
	svc, _ := st.Manager.Get(name)
	var out []string
	for _, e := range svc.Events() {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}

// TestPythonScriptWithoutRun: a python processor whose script ends without
// calling run() fails the deploy saying so, and naming the processor class
// when the script defined one.
func TestPythonScriptWithoutRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	norun := write("norun.py", "import allspark\n\nclass Upper(allspark.BaseProcessor):\n    def process(self, data):\n        return data.upper(), 200\n")
	plain := write("plain.py", "print('hello')\n")
	st := teststack.New(t, teststack.Options{AllowFailedDeploys: true},
		spec("norun", "python", norun, ""), spec("plain", "python", plain, ""))
	for name, want := range map[string][]string{
		"norun": {"the processor's script ended without calling run()", "call Upper(...).run() at the end of the script"},
		"plain": {"the processor's script ended without calling run()", "call <your processor>.run() at the end of the script"},
	} {
		err := st.DeployErrors[name]
		if err == nil {
			t.Errorf("%s: deployed", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the deploy error lacks %q: %v", name, w, err)
			}
		}
	}
}

// crashWindow posts body (or runs act) to service name, waits for the
// restart, and returns the log lines written meanwhile and the ERROR ones.
func crashWindow(t *testing.T, st *teststack.Stack, logs *syncbuf.Buffer, name string, act func()) (lines, errs []string) {
	t.Helper()
	before, _ := countEvents(t, st, name, "WorkerRestarted")
	mark := len(logs.String())
	act()
	wait.Until(t, 20*time.Second, func() error {
		if n, _ := countEvents(t, st, name, "WorkerRestarted"); n <= before {
			return fmt.Errorf("no WorkerRestarted event; events: %v", events(t, st, name))
		}
		return nil
	})
	out := logs.String()[mark:]
	t.Logf("the log of the crash:\n%s", out)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if strings.Contains(l, "level=ERROR") {
			errs = append(errs, l)
		}
	}
	return lines, errs
}

// TestCppGoRuntimeDumpCollapsed: a cpp worker that dies with the Go
// runtime's dump (here SIGQUIT, which its Go runtime answers with every
// goroutine's stack and its registers) costs one ERROR line, quoting the
// dump's first lines, not the dump line by line.
func TestCppGoRuntimeDumpCollapsed(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := teststack.New(t, teststack.Options{Service: service.Options{Logger: log}}, spec("crash", "cpp", buildLib(t, "crash"), ""))
	pid := workerPID(t, st, "crash")
	lines, errs := crashWindow(t, st, &logs, "crash", func() {
		if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
			t.Fatal(err)
		}
	})
	if len(errs) != 1 || !strings.Contains(errs[0], "SIGQUIT: quit") || !strings.Contains(errs[0], "Go runtime") {
		t.Errorf("%d ERROR lines, want one quoting the Go runtime's dump (SIGQUIT: quit): %q", len(errs), errs)
	}
	if len(lines) >= 10 {
		t.Errorf("%d log lines for one dump, want a few", len(lines))
	}
}

// TestCppCrashInInitialize: a crash in initialize fails the deploy with
// the signal and the symbol.
func TestCppCrashInInitialize(t *testing.T) {
	st := teststack.New(t, teststack.Options{AllowFailedDeploys: true},
		spec("crash", "cpp", buildLib(t, "crash"), `"model_config": "segv",`))
	err := st.DeployErrors["crash"]
	if err == nil || !strings.Contains(err.Error(), "initialize: crashed: SIGSEGV (address not mapped) at address 0x0, in touch_null") {
		t.Errorf("deploy error %v, want initialize: crashed: SIGSEGV ... in touch_null", err)
	}
}

// TestHookCrashEvents: a pre_process hook's crash and restart are the
// service's events too, named as the hook's.
func TestHookCrashEvents(t *testing.T) {
	st := teststack.Start(t, fmt.Sprintf(`{"name": "hooked", "processor": "echo", "token": %q,
		"pre_process": {"processor_path": %q, "processor_type": "cpp"},
		"metadata": {"instance": 1, "rpc": {"keepalive": 10000}}}`, token, buildLib(t, "crash")))
	if code, body := post(t, st, "hooked", "segv"); code != 500 {
		t.Fatalf("segv: %d %q, want 500", code, body)
	}
	wait.Until(t, 20*time.Second, func() error {
		if n, e := countEvents(t, st, "hooked", "WorkerRestarted"); n != 1 || !strings.HasPrefix(e.Message, "version 1: pre_process: worker 0 restarted") {
			return fmt.Errorf("%d WorkerRestarted events, the last %q; events: %v", n, e.Message, events(t, st, "hooked"))
		}
		return nil
	})
	if n, e := countEvents(t, st, "hooked", "WorkerCrashed"); n != 1 || !strings.HasPrefix(e.Message, "version 1: pre_process: worker process") || !strings.Contains(e.Message, "SIGSEGV") {
		t.Errorf("%d WorkerCrashed events, the last %q; want one of the pre_process hook naming SIGSEGV", n, e.Message)
	}
}
