package custom

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/wait"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/custom/cworker"
	"github.com/eas-server/eas-server/processors/custom/frame"
)

// These tests drive a pool directly, with real C workers (this test
// binary in worker mode, as custom_test's TestMain allows), where a test
// needs a setting the service.json does not have (the watchdog's grace) or
// a look at the pool's own state (health, log).

// testLib compiles testdata/<name>.c into a shared library.
func testLib(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lib"+name+".so")
	cmd := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", out, filepath.Join("testdata", name+".c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// cppPool makes (but does not start) a pool of one C worker running lib,
// as Load does.
func cppPool(t *testing.T, lib, config string, threads int, log *slog.Logger) *pool {
	t.Helper()
	exe, err := workerExecutable()
	if err != nil {
		t.Fatal(err)
	}
	command := func(int) *exec.Cmd {
		cmd := exec.Command(exe)
		cmd.Dir = filepath.Dir(lib)
		cmd.Env = append(childEnv(), cworker.EnvMode+"=cpp")
		return cmd
	}
	init := frame.InitInfo{Service: "test", Entry: lib, ModelConfig: config, Threads: threads}
	return newPool("test", log, init, command, 64<<20)
}

func startPool(t *testing.T, p *pool) {
	t.Helper()
	if err := p.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
}

// callFor sends body with a deadline d away.
func callFor(p *pool, d time.Duration, body string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return p.call(ctx, []byte(body))
}

func pidOf(t *testing.T, p *pool) (int, error) {
	t.Helper()
	r := callFor(p, 2*time.Second, "pid")
	if r.Err != nil {
		return 0, r.Err
	}
	n, err := strconv.Atoi(string(r.Body))
	if r.Status != 200 || err != nil {
		t.Fatalf("pid: %d %q", r.Status, r.Body)
	}
	return n, nil
}

// ProcessGone says whether process pid has ended: no such process, or a
// zombie (an orphan whose reaper has not reaped it yet); the stack tests
// (package custom_test) use it too.
func ProcessGone(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return nil
	}
	return fmt.Errorf("process %d still runs", pid)
}

// TestHungWorkerIsReplaced: a worker whose every thread is stuck in
// process past its deadline, answering nothing, is killed and restarted by
// the watchdog; requests are answered again without anyone's help.
func TestHungWorkerIsReplaced(t *testing.T) {
	p := cppPool(t, testLib(t, "upper"), "", 1, slog.New(slog.DiscardHandler))
	p.hangGrace = 200 * time.Millisecond
	startPool(t, p)
	first, err := pidOf(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if r := callFor(p, 100*time.Millisecond, "hang"); !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("hang: %+v, want the deadline", r)
	}
	wait.Until(t, 20*time.Second, func() error {
		pid, err := pidOf(t, p)
		switch {
		case err != nil:
			return fmt.Errorf("no answer: %w", err)
		case pid == first:
			return fmt.Errorf("the hung worker %d still holds the service", first)
		}
		return nil
	})
	wait.Until(t, 20*time.Second, func() error { return ProcessGone(first) })
	if err := p.healthy(); err != nil {
		t.Errorf("healthy after the restart: %v", err)
	}
	if !strings.Contains(p.lastError(), "hung") {
		t.Errorf("why the worker ended: %q, want it to say hung", p.lastError())
	}
}

// TestForkedChildCrashDegradesHealth: a worker that forked a child holding
// its socket, then crashed, is seen to end at once; while no worker can
// start again the pool reports itself unhealthy, saying why; the child is
// killed with its parent; once a restart succeeds the pool is healthy.
func TestForkedChildCrashDegradesHealth(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "fail")
	config := fmt.Sprintf(`{"fail_if":%q}`, marker)
	p := cppPool(t, testLib(t, "upper"), config, 2, slog.New(slog.DiscardHandler))
	startPool(t, p)
	r := callFor(p, 5*time.Second, "fork")
	child, err := strconv.Atoi(string(r.Body))
	if r.Err != nil || err != nil {
		t.Fatalf("fork: %+v", r)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = callFor(p, 10*time.Second, "crash")
	var se *processors.StatusError
	if !errors.As(r.Err, &se) || se.Code != http.StatusInternalServerError {
		t.Fatalf("crash after a fork: %+v, want a 500 at once (not the deadline)", r)
	}
	wait.Until(t, 20*time.Second, func() error { return ProcessGone(child) })
	wait.Until(t, 20*time.Second, func() error {
		err := p.healthy()
		if err == nil || !strings.Contains(err.Error(), "set state 4") {
			return fmt.Errorf("healthy: %v, want no worker, with the failed restart's reason", err)
		}
		return nil
	})
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 30*time.Second, func() error {
		if _, err := pidOf(t, p); err != nil {
			return err
		}
		return p.healthy()
	})
}

// TestCrashSeenPastAnEscapedChild: a child that left the worker's process
// group (setsid) is not killed with it, but still holds the worker's end
// of the socket and its output; the crash is seen at once all the same,
// and the next process serves.
func TestCrashSeenPastAnEscapedChild(t *testing.T) {
	p := cppPool(t, testLib(t, "upper"), "", 2, slog.New(slog.DiscardHandler))
	startPool(t, p)
	first, err := pidOf(t, p)
	if err != nil {
		t.Fatal(err)
	}
	r := callFor(p, 5*time.Second, "setsid")
	child, err := strconv.Atoi(string(r.Body))
	if r.Err != nil || err != nil {
		t.Fatalf("setsid: %+v", r)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) }) //nolint:errcheck // out of the group: ours to end
	r = callFor(p, 10*time.Second, "crash")
	var se *processors.StatusError
	if !errors.As(r.Err, &se) || se.Code != http.StatusInternalServerError {
		t.Fatalf("crash beside an escaped child: %+v, want a 500 at once (not the deadline)", r)
	}
	wait.Until(t, 20*time.Second, func() error {
		pid, err := pidOf(t, p)
		switch {
		case err != nil:
			return err
		case pid == first:
			return fmt.Errorf("still process %d", first)
		}
		return nil
	})
}

// logSize counts what a logger writes, and keeps the records that have
// a given key.
type logSize struct {
	mu   sync.Mutex
	n    int
	keep string
	kept []map[string]any
}

func (l *logSize) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += len(b)
	if bytes.Contains(b, []byte(l.keep)) {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				if _, ok := m[l.keep]; ok {
					l.kept = append(l.kept, m)
				}
			}
		}
	}
	return len(b), nil
}

// TestWorkerOutputIsBounded: a worker writing 20 MB of stdout in one line
// and 20,000 lines in a burst costs the server's log a few hundred KiB at
// most: the long line is cut, the lines past the rate are dropped, and the
// drop is reported with its count.
func TestWorkerOutputIsBounded(t *testing.T) {
	out := &logSize{keep: "dropped_lines"}
	p := cppPool(t, testLib(t, "upper"), "", 1, slog.New(slog.NewJSONHandler(out, nil)))
	startPool(t, p)
	for range 3 {
		if r := callFor(p, 20*time.Second, "flood"); r.Err != nil || string(r.Body) != "flooded" {
			t.Fatalf("flood: %+v", r)
		}
	}
	p.close() // the worker exits; its output is read to the end
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.n > 1<<20 {
		t.Errorf("the server's log grew by %d bytes for 60 MB of worker output, want under 1 MiB", out.n)
	}
	dropped := 0.0
	for _, m := range out.kept {
		n, _ := m["dropped_lines"].(float64)
		dropped += n
	}
	if dropped < 50000 {
		t.Errorf("dropped lines reported: %v in %v, want most of the 60,000", dropped, out.kept)
	}
}
