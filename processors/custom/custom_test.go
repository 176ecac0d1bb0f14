package custom_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	_ "github.com/eas-server/eas-server/processors/custom" // processor_path
	"github.com/eas-server/eas-server/processors/custom/cworker"
	_ "github.com/eas-server/eas-server/processors/echo"
	"github.com/eas-server/eas-server/servicejson"
)

// TestMain lets this test binary be a cpp worker: the pool runs its own
// executable with cworker.EnvMode set, as the eas-server binary does.
func TestMain(m *testing.M) {
	if os.Getenv(cworker.EnvMode) == "cpp" {
		os.Exit(cworker.Main())
	}
	os.Exit(m.Run())
}

const token = "t0ken"

// buildLib compiles testdata/<name>.c into a shared library.
func buildLib(t *testing.T, name string) string { return buildLibTB(t, name) }

func buildLibTB(t testing.TB, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lib"+name+".so")
	cmd := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", out, filepath.Join("testdata", name+".c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, b)
	}
	return out
}

// spec is a custom processor's service.json; extra is more keys, each
// ending with a comma.
func spec(name, typ, path, extra string) string {
	if !strings.Contains(extra, "keepalive") {
		extra += ` "metadata.rpc.keepalive": 10000,`
	}
	return fmt.Sprintf(`{"name": %q, "processor_path": %q, "processor_type": %q, "token": %q, %s
		"metadata": {"instance": 1, "rpc": {"worker_threads": 4}}}`, name, path, typ, token, extra)
}

const echoSpec = `{"name": "plain", "processor": "echo", "token": "t0ken", "metadata": {"instance": 1}}`

// answerCase is a request body and the status and body it must get.
type answerCase struct {
	body string
	code int
	want string
}

// checkAnswers posts each case's body to the service and checks the answer.
func checkAnswers(t *testing.T, st *teststack.Stack, name string, cases []answerCase) {
	t.Helper()
	for _, tc := range cases {
		if code, got := post(t, st, name, tc.body); code != tc.code || got != tc.want {
			t.Errorf("%s %q: %d %q, want %d %q", name, tc.body, code, got, tc.code, tc.want)
		}
	}
}

func post(t *testing.T, st *teststack.Stack, name, body string) (int, string) {
	t.Helper()
	code, b, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+name, token, []byte(body))
	return code, string(b)
}

func TestCppThroughTheStack(t *testing.T) {
	lib := buildLib(t, "upper")
	model := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(model, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := teststack.Start(t,
		spec("upper", "cpp", lib, fmt.Sprintf(`"model_path": %q, "model_config": {"prefix":"p:"},`, model)),
		spec("batched", "cpp", lib, `"processor_entry": "libupper.so", "metadata.rpc.batching": true, "metadata.rpc.max_batch_size": 8,`))
	checkAnswers(t, st, "upper", []answerCase{
		{"abc", 200, "p:ABC"},
		{"", 400, "empty body"},
		{"zero", 200, ""},
		{"entry", 200, model},
	})
	// Batched: a batch is several process calls, each request its own answer.
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("req-%d", i)
			if i%4 == 0 {
				body = "sleep" // a slow one lets the queue fill, so runs batch
			}
			if code, got := post(t, st, "batched", body); code != 200 || got != strings.ToUpper(body) {
				t.Errorf("batched %q: %d %q", body, code, got)
			}
		}()
	}
	wg.Wait()
	if sum, count := batchSizes(t, st, "batched"); count == 0 || sum <= count {
		t.Errorf("batched: %v requests in %v runs; want runs of several", sum, count)
	}
	code, meta, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/upper", token, nil)
	if code != 200 || !strings.Contains(string(meta), "cpp:libupper.so") {
		t.Errorf("metadata: %d %s", code, meta)
	}
}

// batchSizes reads eas_batch_size's sum and count for a service.
func batchSizes(t *testing.T, st *teststack.Stack, name string) (sum, count float64) {
	t.Helper()
	mfs, err := st.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "eas_batch_size" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "service" && l.GetValue() == name {
					sum += m.GetHistogram().GetSampleSum()
					count += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return sum, count
}

// TestCppCrashIsolation: a request that crashes the worker, and a kill -9
// under load, cost only the requests in flight on that worker; the worker
// comes back and the other service never notices.
func TestCppCrashIsolation(t *testing.T) {
	lib := buildLib(t, "upper")
	st := teststack.Start(t, spec("upper", "cpp", lib, ""), echoSpec)
	pid := func() int { return workerPID(t, st, "upper") }
	first := pid()
	if first == 0 {
		t.Fatal("no worker")
	}
	stop := make(chan struct{})
	var ok, failed, otherBad atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch code, body := post(t, st, "upper", "sleep"); {
				case code == 200 && body == "SLEEP":
					ok.Add(1)
				case code == 500 && strings.Contains(body, "ended while running this request"):
					failed.Add(1)
				default:
					t.Errorf("under crashes: %d %q", code, body)
				}
				if code, body := post(t, st, "plain", "x"); code != 200 || body != "x" {
					otherBad.Add(1)
				}
			}
		}()
	}
	// flowing waits for a request answered on the current worker: the
	// load runs there, so requests are in flight when it dies.
	flowing := func(worker string) {
		t.Helper()
		from := ok.Load()
		wait.Until(t, 20*time.Second, func() error {
			if ok.Load() == from {
				return fmt.Errorf("no request answered on the %s worker (%d before it)", worker, from)
			}
			return nil
		})
	}
	flowing("first")
	if code, body := post(t, st, "upper", "crash"); code != 500 || !strings.Contains(body, "ended while running this request") {
		t.Errorf("crash: %d %q", code, body)
	}
	second := waitNewPID(t, pid, first)
	flowing("second")
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNewPID(t, pid, second)
	flowing("third")
	close(stop)
	wg.Wait()
	if ok.Load() == 0 || failed.Load() == 0 || otherBad.Load() != 0 {
		t.Errorf("ok %d, failed in flight %d, other service failures %d: want ok > 0, failed > 0, other 0", ok.Load(), failed.Load(), otherBad.Load())
	}
	if code, body := post(t, st, "upper", "abc"); code != 200 || body != "ABC" {
		t.Errorf("after the restarts: %d %q", code, body)
	}
}

// workerPID asks a worker for its process id; 0 when the request failed
// (a worker that just died takes the requests sent to it along).
func workerPID(t *testing.T, st *teststack.Stack, name string) int {
	t.Helper()
	code, body := post(t, st, name, "pid")
	if code == 500 && strings.Contains(body, "ended while running this request") {
		return 0
	}
	n, err := strconv.Atoi(body)
	if code != 200 || err != nil {
		t.Fatalf("pid: %d %q", code, body)
	}
	return n
}

// waitNewPID waits for the worker to come back as another process.
func waitNewPID(t *testing.T, pid func() int, old int) int {
	t.Helper()
	var p int
	wait.Until(t, 20*time.Second, func() error {
		if p = pid(); p == old || p == 0 {
			return fmt.Errorf("the worker is still process %d", old)
		}
		return nil
	})
	return p
}

func TestLoadErrors(t *testing.T) {
	pkg := t.TempDir()
	lib := buildLib(t, "upper")
	if err := os.Link(lib, filepath.Join(pkg, "libupper.so")); err != nil {
		t.Fatal(err)
	}
	st := teststack.Start(t, echoSpec)
	for _, tc := range []struct {
		name, js string
		want     []string
	}{
		{"badinit", spec("badinit", "cpp", buildLib(t, "badinit"), ""), []string{"set state 3", "badinit: cannot load"}},
		{"noprocess", spec("noprocess", "cpp", buildLib(t, "noprocess"), ""), []string{"does not export process()"}},
		{"noentry", spec("noentry", "cpp", pkg, ""), []string{"processor_entry: required", "libupper.so"}},
		{"wrongentry", spec("wrongentry", "cpp", pkg, `"processor_entry": "libother.so",`), []string{`"libother.so" is not in the package`, "libupper.so"}},
		{"notaso", spec("notaso", "cpp", pkg, `"processor_entry": "app.py",`), []string{"is not a shared library"}},
		{"java", spec("java", "java", pkg, `"processor_mainclass": "com.example.P",`), []string{"Java processors are not run here", "processor_type cpp"}},
		{"pyinit", spec("pyinit", "python", filepath.Join(testdataDir(t), "state.py"), `"model_config": {"fail_init": true},`), []string{"initialize failed", "RuntimeError: initialize was told to fail"}},
	} {
		s, err := servicejson.Parse([]byte(tc.js))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = st.Manager.Deploy(context.Background(), s)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, w)
			}
		}
	}
	if code, body := post(t, st, "plain", "still here"); code != 200 || body != "still here" {
		t.Errorf("the other service: %d %q", code, body)
	}
}

func testdataDir(t *testing.T) string {
	d, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPythonThroughTheStack(t *testing.T) {
	t.Setenv("TEST_ALLSPARK_PROCESSES", "2")
	py := filepath.Join(testdataDir(t), "state.py")
	st := teststack.Start(t,
		spec("py", "python", py, `"model_config": {"prefix":"p:"},`),
		spec("quick", "python", py, `"metadata.rpc.keepalive": 500,`))
	checkAnswers(t, st, "py", []answerCase{
		{"abc", 200, "p:ABC"},
		{"missing", 404, "no such thing"},
		{"raise", 500, "process raised ValueError: asked to raise"},
		{"abc", 200, "p:ABC"},
	})
	// Two processes, each with its own state from initialize.
	pids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := post(t, st, "py", "pid")
			if code != 200 {
				t.Errorf("pid: %d %q", code, body)
			}
			mu.Lock()
			pids[body] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(pids) != 2 {
		t.Errorf("answers came from processes %v, want 2 (worker_processes=2)", pids)
	}
	code, c1 := post(t, st, "py", "count")
	code2, c2 := post(t, st, "py", "count")
	n1, _ := strconv.Atoi(c1)
	n2, _ := strconv.Atoi(c2)
	if code != 200 || code2 != 200 || n1 < 2 || n2 < 2 {
		t.Errorf("counters kept from initialize: %q %q", c1, c2)
	}
	// Past the deadline: 408, and the service goes on (the other process
	// answers while the first still sleeps).
	if code, body := post(t, st, "quick", "sleep"); code != http.StatusRequestTimeout {
		t.Errorf("sleep past rpc.keepalive: %d %q, want 408", code, body)
	}
	if code, body := post(t, st, "quick", "abc"); code != 200 || body != "ABC" {
		t.Errorf("after a timeout: %d %q", code, body)
	}
}

func TestPythonKilledWorkerComesBack(t *testing.T) {
	st := teststack.Start(t, spec("py", "python", filepath.Join(testdataDir(t), "state.py"), ""), echoSpec)
	pid := func() int { return workerPID(t, st, "py") }
	first := pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNewPID(t, pid, first)
	// The new process ran initialize afresh: its counter has seen the pid
	// request that found it, and this one.
	if code, body := post(t, st, "py", "count"); code != 200 || body != "2" {
		t.Errorf("a new process initializes anew: count %d %q, want 2", code, body)
	}
}

// TestPythonRequirements: a package with requirements.txt runs in a
// virtualenv of its own (here with nothing to install: no index is
// reachable from the tests).
func TestPythonRequirements(t *testing.T) {
	venvs := t.TempDir()
	t.Setenv("EAS_VENV_DIR", venvs)
	pkg := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "state.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "app.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "requirements.txt"), []byte("# nothing beyond the system's packages\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := teststack.Start(t, spec("py", "python", pkg, `"processor_entry": "app.py",`))
	code, prefix := post(t, st, "py", "sys.prefix")
	if code != 200 || !strings.HasPrefix(prefix, venvs) {
		t.Fatalf("sys.prefix %d %q, want a virtualenv under %s", code, prefix, venvs)
	}
}

// TestRollingUpdateAndQueue: a modify loads new worker processes beside
// the serving ones and switches between requests; the old processes go. A
// custom processor's queue is the scheduler's: over worker_threads +
// max_queue_size it answers 450.
func TestRollingUpdateAndQueue(t *testing.T) {
	t.Setenv("TEST_ALLSPARK_THREADS", "4") // allspark's worker_threads: 4 sleeps at once
	py := filepath.Join(testdataDir(t), "state.py")
	st := teststack.Start(t, spec("py", "python", py, `"model_config": {"prefix":"v1:"},`))
	oldPID := workerPID(t, st, "py")
	s, err := servicejson.Parse([]byte(spec("py", "python", py, `"model_config": {"prefix":"v2:"}, "metadata.rpc.max_queue_size": 1,`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Manager.Update(t.Context(), "py", s); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 20*time.Second, func() error {
		code, body := post(t, st, "py", "abc")
		if code != 200 || (body != "v1:ABC" && body != "v2:ABC") {
			t.Fatalf("during the update: %d %q", code, body)
		}
		if body != "v2:ABC" {
			return fmt.Errorf("the update did not switch: version 1 still answers %q", body)
		}
		return nil
	})
	wait.Until(t, 20*time.Second, func() error {
		if syscall.Kill(oldPID, 0) == nil {
			return fmt.Errorf("the old version's worker %d still runs", oldPID)
		}
		return nil
	})
	// worker_threads 4, queue 1: of 12 sleeping requests at once, the ones
	// beyond 5 are refused at once.
	var wg sync.WaitGroup
	var full atomic.Int64
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch code, body := post(t, st, "py", "sleep"); code {
			case 450:
				full.Add(1)
			case 200:
			default:
				t.Errorf("sleep: %d %q", code, body)
			}
		}()
	}
	wg.Wait()
	if full.Load() < 12-5 {
		t.Errorf("%d requests answered 450, want at least %d", full.Load(), 12-5)
	}
	// sys.exit in a request on one of allspark's threads: that request
	// gets the reason, and the process is replaced.
	before := workerPID(t, st, "py")
	if code, body := post(t, st, "py", "exit"); code != 500 || !strings.Contains(body, "process raised SystemExit: 3") {
		t.Errorf("exit: %d %q", code, body)
	}
	waitNewPID(t, func() int { return workerPID(t, st, "py") }, before)
}

// TestHooksAroundEcho: pre_process and post_process around a built-in
// processor, in one request; a hook's own status is the answer; a hook
// past rpc.keepalive is a 408.
func TestHooksAroundEcho(t *testing.T) {
	py := filepath.Join(testdataDir(t), "state.py")
	st := teststack.Start(t, fmt.Sprintf(`{"name": "hooked", "processor": "echo", "token": %q,
		"pre_process": {"processor_path": %q, "processor_type": "python", "model_config": {"prefix": "pre:"}},
		"post_process": {"processor_path": %q, "processor_type": "python", "model_config": "{\"prefix\": \"post:\"}"},
		"metadata": {"instance": 1, "rpc": {"keepalive": 1000, "batching": true}}}`, token, py, py))
	checkAnswers(t, st, "hooked", []answerCase{
		{"abc", 200, "post:PRE:ABC"},
		{"missing", 404, "pre_process: no such thing\n"},
		{"sleep", 408, "pre_process did not answer within rpc.keepalive (1s)\n"},
	})
	code, meta, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/hooked", token, nil)
	if code != 200 || !strings.Contains(string(meta), `"pre_process":"python:state.py"`) || !strings.Contains(string(meta), `"post_process":"python:state.py"`) {
		t.Errorf("metadata: %d %s", code, meta)
	}
}
