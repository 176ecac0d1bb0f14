package custom_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	"github.com/eas-server/eas-server/processors/custom"
)

// forkThenCrash checks a worker that forked a child (which keeps the
// worker's socket and output) and then died: the request that killed it
// gets 500 at once, not its keepalive's 408; the child goes with it; the
// next worker answers.
func forkThenCrash(t *testing.T, st *teststack.Stack, name, die string) {
	t.Helper()
	first := workerPID(t, st, name)
	code, body := post(t, st, name, "fork")
	child, err := strconv.Atoi(body)
	if code != 200 || err != nil {
		t.Fatalf("fork: %d %q", code, body)
	}
	if err := custom.ProcessGone(child); err == nil {
		t.Fatalf("the forked child %d is not running", child)
	}
	// keepalive is 10 s: a 408 means the death went unseen.
	if code, body := post(t, st, name, die); code != 500 || !strings.Contains(body, "ended while running this request") {
		t.Errorf("%s after a fork: %d %q, want 500 at once", die, code, body)
	}
	waitNewPID(t, func() int { return workerPID(t, st, name) }, first)
	if code, body := post(t, st, name, "abc"); code != 200 || body != "ABC" {
		t.Errorf("after the restart: %d %q", code, body)
	}
	wait.Until(t, 20*time.Second, func() error { return custom.ProcessGone(child) })
}

// TestCppForkedChildThenCrash: a forked child holding the socket does not
// hide its parent's crash (the server waits on the process, not only on the
// socket), and is killed with it.
func TestCppForkedChildThenCrash(t *testing.T) {
	st := teststack.Start(t, spec("upper", "cpp", buildLib(t, "upper"), ""))
	forkThenCrash(t, st, "upper", "crash")
}

// TestPythonForkedHelperThenExit: the same with a multiprocessing helper and
// os._exit.
func TestPythonForkedHelperThenExit(t *testing.T) {
	st := teststack.Start(t, spec("py", "python", filepath.Join(testdataDir(t), "state.py"), ""))
	forkThenCrash(t, st, "py", "die")
}

// TestCppBadOutputSize: an *output_size below 0 or past the buffer process
// allocated answers 500 saying so, and the worker goes on.
func TestCppBadOutputSize(t *testing.T) {
	st := teststack.Start(t, spec("upper", "cpp", buildLib(t, "upper"), ""))
	for _, body := range []string{"negative", "oversize"} {
		if code, got := post(t, st, "upper", body); code != 500 || !strings.Contains(got, "*output_size") {
			t.Errorf("%s: %d %q, want 500 naming *output_size", body, code, got)
		}
	}
	checkAnswers(t, st, "upper", []answerCase{{"abc", 200, "ABC"}})
}

// TestReadyzShowsADegradedService: while a custom service has no live
// worker (it crashed and its restarts fail), /readyz says so on the
// service's line; once a restart succeeds, the mark goes.
func TestReadyzShowsADegradedService(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "fail")
	st := teststack.Start(t, spec("upper", "cpp", buildLib(t, "upper"), fmt.Sprintf(`"model_config": {"fail_if": %q},`, marker)))
	readyz := func() string {
		_, b, _ := teststack.Do(t, "GET", st.URL+"/readyz", "", nil)
		return string(b)
	}
	if r := readyz(); !strings.Contains(r, "upper: Running, serving\n") {
		t.Fatalf("/readyz before the crash: %q", r)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, st, "upper", "crash"); code != 500 {
		t.Fatalf("crash: %d %q", code, body)
	}
	wait.Until(t, 20*time.Second, func() error {
		if r := readyz(); !strings.Contains(r, "upper: Running, serving, degraded (no worker process") {
			return fmt.Errorf("/readyz while no worker runs: %q", r)
		}
		return nil
	})
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 30*time.Second, func() error {
		if r := readyz(); !strings.Contains(r, "upper: Running, serving\n") {
			return fmt.Errorf("/readyz after a restart succeeded: %q", r)
		}
		return nil
	})
}
