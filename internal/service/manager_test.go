package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/internal/wait"
	_ "github.com/eas-server/eas-server/processors/echo"
	_ "github.com/eas-server/eas-server/processors/pmml"
	"github.com/eas-server/eas-server/servicejson"
)

func parse(t *testing.T, js string) *servicejson.Service {
	t.Helper()
	spec, err := servicejson.Parse([]byte(js))
	if err != nil {
		t.Fatalf("service.json %s: %v", js, err)
	}
	return spec
}

func newManager(t *testing.T, dir string) *Manager {
	t.Helper()
	m := NewManager(Options{StateDir: dir})
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// settle waits until the service has no operation in progress and returns
// its snapshot.
func settle(t *testing.T, m *Manager, name string) Info {
	t.Helper()
	var in Info
	wait.Until(t, 10*time.Second, func() error {
		var err error
		if in, err = m.Describe(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		if in.PendingVersion != 0 || in.Status == Creating || in.Status == Updating {
			return fmt.Errorf("service %s still %s (pending version %d)", name, in.Status, in.PendingVersion)
		}
		return nil
	})
	return in
}

// call runs one request through the serving version, as the data plane does.
func call(t *testing.T, s *Service, body string) (int, error) {
	t.Helper()
	l, ok := s.Acquire()
	if !ok {
		return 0, errors.New("no serving version")
	}
	defer l.Release()
	out, err := l.Scheduler.Do(t.Context(), []byte(body))
	if err == nil && string(out.([]byte)) != body {
		t.Fatalf("echo answered %q to %q", out, body)
	}
	return l.Version, err
}

const (
	v1 = `{"name":"svc","processor":"echo","metadata":{"instance":1}}`
	v2 = `{"name":"svc","processor":"echo","model_config":{"sleep_ms":1},"metadata":{"instance":1}}`
	// bad passes servicejson and echo's Configure, and fails to load: its
	// warm-up file does not exist.
	bad = `{"name":"svc","processor":"echo","warm_up_data_path":"/nonexistent/warmup.bin","metadata":{"instance":1}}`
)

func TestCreateUpdateSwitchStopStartDelete(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)

	in, err := m.Create(t.Context(), parse(t, v1))
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != Creating || in.Token == "" || in.CurrentVersion != 1 || in.PendingVersion != 1 {
		t.Fatalf("create answered %+v; want Creating, a token, version 1 pending", in)
	}
	if _, err := m.Create(t.Context(), parse(t, v1)); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	in = settle(t, m, "svc")
	if in.Status != Running || in.RunningInstance != 1 || in.TotalInstance != 1 {
		t.Fatalf("after create: %+v", in)
	}
	token := in.Token
	svc, _ := m.Get("svc")
	if v, err := call(t, svc, "a"); err != nil || v != 1 {
		t.Fatalf("request on v1: version %d, %v", v, err)
	}
	tokFile, err := os.ReadFile(filepath.Join(dir, "services", "svc", "token"))
	if err != nil || string(tokFile) != token {
		t.Fatalf("token file %q (%v), want the service token", tokFile, err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "services", "svc", "token")); st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", st.Mode().Perm())
	}

	// The same configuration is no new version.
	if in, err = m.Update(t.Context(), "svc", parse(t, v1)); err != nil || in.LatestVersion != 1 {
		t.Fatalf("no-op update: %+v, %v", in, err)
	}
	// A renaming update is refused.
	if _, err := m.Update(t.Context(), "svc", parse(t, strings.Replace(v2, `"svc"`, `"other"`, 1))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("rename: %v, want ErrInvalid", err)
	}

	in, err = m.Update(t.Context(), "svc", parse(t, v2))
	if err != nil || in.PendingVersion != 2 || in.Status != Updating {
		t.Fatalf("update answered %+v, %v; want Updating with version 2 pending", in, err)
	}
	in = settle(t, m, "svc")
	if in.Status != Running || in.CurrentVersion != 2 || in.Token != token {
		t.Fatalf("after update: %+v; want Running at 2 with the same token", in)
	}
	if v, err := call(t, svc, "b"); err != nil || v != 2 {
		t.Fatalf("request after update: version %d, %v", v, err)
	}

	// A failing version leaves version 2 serving and says why.
	if _, err = m.Update(t.Context(), "svc", parse(t, bad)); err != nil {
		t.Fatal(err)
	}
	in = settle(t, m, "svc")
	if in.Status != Running || in.CurrentVersion != 2 || in.LatestVersion != 3 || in.Reason != "UpdateFailed" ||
		!strings.Contains(in.Message, "version 3 failed to load") || !strings.Contains(in.Message, "/nonexistent/warmup.bin") {
		t.Fatalf("after failed update: %+v", in)
	}
	if v, err := call(t, svc, "c"); err != nil || v != 2 {
		t.Fatalf("request after failed update: version %d, %v", v, err)
	}

	// Switch back to version 1.
	if _, err := m.SwitchVersion(t.Context(), "svc", 9); !errors.Is(err, ErrInvalid) {
		t.Fatalf("switch to a missing version: %v, want ErrInvalid", err)
	}
	if _, err = m.SwitchVersion(t.Context(), "svc", 1); err != nil {
		t.Fatal(err)
	}
	in = settle(t, m, "svc")
	if in.CurrentVersion != 1 || in.Status != Running || in.Message != "" || in.Token != token {
		t.Fatalf("after switching to 1: %+v", in)
	}
	vs := svc.Versions()
	if len(vs) != 3 || !vs[0].Current || vs[1].Current || string(vs[2].Config) != bad {
		t.Fatalf("versions %+v", vs)
	}

	// Stop: nothing serves, the scheduler is stopped, the state survives.
	l, _ := svc.Acquire()
	l.Release()
	if in, err = m.Stop(t.Context(), "svc"); err != nil || in.Status != Stopped || in.RunningInstance != 0 {
		t.Fatalf("stop: %+v, %v", in, err)
	}
	if _, ok := svc.Acquire(); ok {
		t.Fatal("a stopped service still serves")
	}
	if _, err := l.Scheduler.Do(t.Context(), []byte("x")); !errors.Is(err, scheduler.ErrStopped) {
		t.Fatalf("the stopped version's scheduler answered %v, want ErrStopped", err)
	}
	if ok, _ := m.Readiness(true); !ok {
		t.Fatal("a service stopped on purpose makes the server unready")
	}
	if _, err = m.Start(t.Context(), "svc"); err != nil {
		t.Fatal(err)
	}
	if in = settle(t, m, "svc"); in.Status != Running || in.CurrentVersion != 1 {
		t.Fatalf("after start: %+v", in)
	}

	reasons := map[string]bool{}
	for _, e := range svc.Events() {
		reasons[e.Reason] = true
	}
	for _, want := range []string{"Created", "Running", "Updating", "UpdateFailed", "Stopped", "Starting", "Drained"} {
		if !reasons[want] {
			t.Errorf("no %s event in %v", want, svc.Events())
		}
	}

	if err := m.Delete(t.Context(), "svc"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Describe(t.Context(), "svc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "services", "svc")); !os.IsNotExist(err) {
		t.Fatalf("state of a deleted service remains: %v", err)
	}
	// A new service of the same name starts afresh, with a new token.
	if in, err = m.Create(t.Context(), parse(t, v1)); err != nil || in.LatestVersion != 1 || in.Token == token {
		t.Fatalf("create after delete: %+v, %v", in, err)
	}
}

func TestScaleOnlyKeepsTheModel(t *testing.T) {
	m := newManager(t, t.TempDir())
	if _, err := m.Deploy(t.Context(), parse(t, v1)); err != nil {
		t.Fatal(err)
	}
	svc, _ := m.Get("svc")
	before, _ := svc.Acquire()
	before.Release()

	if _, err := m.Update(t.Context(), "svc", parse(t, strings.Replace(v1, `"instance":1`, `"instance":3`, 1))); err != nil {
		t.Fatal(err)
	}
	in := settle(t, m, "svc")
	after, _ := svc.Acquire()
	after.Release()
	if in.RunningInstance != 3 || after.Version != 2 {
		t.Fatalf("after scaling: %+v (version %d)", in, after.Version)
	}
	if after.Engine != before.Engine {
		t.Fatal("a change of metadata.instance alone reloaded the model")
	}
	if got, want := after.Scheduler.Config().Workers, 3*servicejson.DefaultWorkerThreads; got != want {
		t.Fatalf("workers %d, want %d (instance x worker_threads)", got, want)
	}
	if _, err := call(t, svc, "x"); err != nil {
		t.Fatal(err)
	}

	// Any other change loads a new model.
	if _, err := m.Update(t.Context(), "svc", parse(t, v2)); err != nil {
		t.Fatal(err)
	}
	settle(t, m, "svc")
	again, _ := svc.Acquire()
	again.Release()
	if again.Engine == after.Engine {
		t.Fatal("a change of model_config did not reload the model")
	}
}

func TestTokenRules(t *testing.T) {
	m := newManager(t, t.TempDir())
	withToken := func(js, tok string) string {
		return strings.Replace(js, `"processor"`, `"token":"`+tok+`","processor"`, 1)
	}
	if _, err := m.Deploy(t.Context(), parse(t, withToken(v1, "T1"))); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		config, want string
	}{
		{v2, "T1"},                  // no token in the new config: it survives
		{withToken(v1, "T2"), "T2"}, // the config changes it
		{v2 + " ", "T2"},            // no token again: the last one survives
	}
	for i, st := range steps {
		if _, err := m.Update(t.Context(), "svc", parse(t, st.config)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		in := settle(t, m, "svc")
		svc, _ := m.Get("svc")
		l, _ := svc.Acquire()
		l.Release()
		if in.Token != st.want || string(l.Token) != st.want {
			t.Fatalf("step %d: token %q (live %q), want %q", i, in.Token, l.Token, st.want)
		}
	}
}

func TestBusyServiceRefusesASecondOperation(t *testing.T) {
	m := newManager(t, t.TempDir())
	spec := parse(t, v1)
	svc, created, err := m.register(spec)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	// register returns the service with its operation lock held, as a
	// load in progress holds it.
	if _, err := m.Update(t.Context(), "svc", parse(t, v2)); !errors.Is(err, ErrBusy) {
		t.Fatalf("update during an operation: %v, want ErrBusy", err)
	}
	if _, err := m.Stop(t.Context(), "svc"); !errors.Is(err, ErrBusy) {
		t.Fatalf("stop during an operation: %v, want ErrBusy", err)
	}
	m.leave(svc)
	if _, err := m.Stop(t.Context(), "svc"); err != nil {
		t.Fatal(err)
	}
}

func TestRestore(t *testing.T) {
	dir := t.TempDir()
	m1 := NewManager(Options{StateDir: dir})
	run := func(js string) Info {
		t.Helper()
		spec := parse(t, js)
		if _, err := m1.Deploy(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
		in, _ := m1.Describe(t.Context(), spec.Name)
		return in
	}
	a := run(v1)
	a = run(v2) // version 2
	b := run(`{"name":"b","processor":"echo","token":"fixed","metadata":{"instance":2}}`)
	run(`{"name":"stopped","processor":"echo","metadata":{"instance":1}}`)
	if _, err := m1.Stop(t.Context(), "stopped"); err != nil {
		t.Fatal(err)
	}
	run(`{"name":"corrupt","processor":"echo","metadata":{"instance":1}}`)
	run(`{"name":"badver","processor":"echo","metadata":{"instance":1}}`)
	// No Shutdown: the state dir is left as a crash leaves it.
	must(t, os.WriteFile(filepath.Join(dir, "services", "corrupt", stateFile), []byte(`{"name":"corr`), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "services", "badver", "versions", "1.json"), []byte(`{"name":"badver"`), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "services", "legacy"), 0o700)) // a token-only directory
	must(t, os.WriteFile(filepath.Join(dir, "services", "legacy", "token"), []byte("tok"), 0o600))

	m2 := newManager(t, dir)
	n, problems := m2.Restore()
	if n != 4 || len(problems) != 1 || !strings.Contains(problems[0].Error(), "corrupt") || !strings.Contains(problems[0].Error(), "moved aside") {
		t.Fatalf("restored %d, problems %v; want 4 and one about corrupt", n, problems)
	}
	if _, ok := m2.Get("corrupt"); ok {
		t.Fatal("a service with a corrupt state.json was restored")
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "services", "corrupt.corrupt-*")); len(aside) != 1 {
		t.Fatalf("corrupt state not moved aside: %v", aside)
	}
	for _, want := range []Info{a, b} {
		got := settle(t, m2, want.Name)
		if got.Status != Running || got.Token != want.Token || got.CurrentVersion != want.CurrentVersion || got.TotalInstance != want.TotalInstance {
			t.Fatalf("restored %s: %+v, want token, version and instances of %+v", want.Name, got, want)
		}
	}
	if in := settle(t, m2, "stopped"); in.Status != Stopped {
		t.Fatalf("a stopped service came back %s", in.Status)
	}
	bv := settle(t, m2, "badver")
	if bv.Status != Failed || bv.Reason != "RestoreFailed" || !strings.Contains(bv.Message, "1.json") {
		t.Fatalf("service with an unreadable version: %+v", bv)
	}
	// It can be repaired with an update.
	if _, err := m2.Update(t.Context(), "badver", parse(t, `{"name":"badver","processor":"echo","metadata":{"instance":1}}`)); err != nil {
		t.Fatal(err)
	}
	if in := settle(t, m2, "badver"); in.Status != Running || in.CurrentVersion != 2 {
		t.Fatalf("repaired service: %+v", in)
	}

	// serve --deploy of a restored service: same config is a no-op, a
	// different one an update.
	if _, err := m2.Deploy(t.Context(), parse(t, v2)); err != nil {
		t.Fatal(err)
	}
	if in, _ := m2.Describe(t.Context(), "svc"); in.LatestVersion != 2 {
		t.Fatalf("deploying the same config made version %d", in.LatestVersion)
	}
	if _, err := m2.Deploy(t.Context(), parse(t, v1)); err != nil {
		t.Fatal(err)
	}
	if in, _ := m2.Describe(t.Context(), "svc"); in.LatestVersion != 3 || in.CurrentVersion != 3 || in.Token != a.Token {
		t.Fatalf("deploying a changed config: %+v", in)
	}
	m1.Shutdown(context.Background())
}

func TestShutdownKeepsServicesRestorable(t *testing.T) {
	dir := t.TempDir()
	m1 := NewManager(Options{StateDir: dir})
	if _, err := m1.Deploy(t.Context(), parse(t, v1)); err != nil {
		t.Fatal(err)
	}
	m1.Shutdown(context.Background())
	m2 := newManager(t, dir)
	if n, problems := m2.Restore(); n != 1 || problems != nil {
		t.Fatalf("restored %d, %v", n, problems)
	}
	if in := settle(t, m2, "svc"); in.Status != Running {
		t.Fatalf("after a graceful shutdown the service came back %s", in.Status)
	}
}

func TestDrainWaitsForRequestsHoldingTheOldVersion(t *testing.T) {
	m := newManager(t, t.TempDir())
	if _, err := m.Deploy(t.Context(), parse(t, v1)); err != nil {
		t.Fatal(err)
	}
	svc, _ := m.Get("svc")
	held, _ := svc.Acquire() // a request that has not reached the scheduler yet
	if _, err := m.Update(t.Context(), "svc", parse(t, v2)); err != nil {
		t.Fatal(err)
	}
	settle(t, m, "svc")
	// The drain has seen the held request and waits for it (twice over,
	// so it did not just start).
	wait.Until(t, 5*time.Second, func() error {
		if n := held.heldWaits.Load(); n < 2 {
			return fmt.Errorf("the old version's drain waited %d times for the request holding it, want 2", n)
		}
		return nil
	})
	// The old version must still take the held request.
	if _, err := held.Scheduler.Do(t.Context(), []byte("late")); err != nil {
		t.Fatalf("a request holding the old version failed after the swap: %v", err)
	}
	held.Release()
	wait.Until(t, 5*time.Second, func() error {
		if _, err := held.Scheduler.Do(t.Context(), []byte("x")); !errors.Is(err, scheduler.ErrStopped) {
			return fmt.Errorf("the old version still runs after its last request: %v", err)
		}
		return nil
	})
}

func TestScaleOnlyAndSameConfig(t *testing.T) {
	tests := []struct {
		a, b        string
		same, scale bool
	}{
		{v1, v1, true, false},
		{v1, `{"metadata":{"instance":1},"processor":"echo","name":"svc"}`, true, false},
		{v1, `{"name":"svc","processor":"echo","metadata.instance":"1"}`, true, false},
		{v1, strings.Replace(v1, `"instance":1`, `"instance":2`, 1), false, true},
		{v1, v2, false, false},
		{v1, strings.Replace(v2, `"instance":1`, `"instance":2`, 1), false, false},
	}
	for i, tc := range tests {
		a, b := parse(t, tc.a), parse(t, tc.b)
		if got := sameConfig(a, b); got != tc.same {
			t.Errorf("%d: sameConfig = %v, want %v", i, got, tc.same)
		}
		if got := scaleOnly(a, b); got != tc.scale {
			t.Errorf("%d: scaleOnly = %v, want %v", i, got, tc.scale)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFetchProgressShowsInTheService(t *testing.T) {
	m := newManager(t, t.TempDir())
	spec := parse(t, v1)
	svc, _, err := m.register(spec) // a create in progress: version 1 pending
	if err != nil {
		t.Fatal(err)
	}
	defer m.leave(svc)
	p, _ := m.fetchReport("svc", "model_path")
	p(0, 3<<30)
	p(3<<29, 3<<30)
	if _, msg, _ := svc.State(); msg != "loading version 1: downloading model_path: 1.5 GiB of 3.0 GiB (50%)" {
		t.Fatalf("message %q", msg)
	}
	p(3<<30, 3<<30)
	var got []string
	for _, e := range svc.Events() {
		got = append(got, e.Reason+": "+e.Message)
	}
	want := []string{
		"Created: service created with version 1",
		"Downloading: version 1: downloading model_path: 0 B of 3.0 GiB (0%)",
		"Downloaded: version 1: downloaded model_path (3.0 GiB)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	p, _ = m.fetchReport("unknown", "model_path")
	p(1, 2) // a deleted service is ignored
}

func TestProcessorSpecUnwrapsModelConfig(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, mc := range []string{
		`{"sleep_ms": 5, "model_sha256": "` + sum + `"}`,
		`"{\"sleep_ms\": 5, \"model_sha256\": \"` + sum + `\"}"`, // EAS's string form
	} {
		spec := parse(t, `{"name":"e","processor":"echo","metadata":{"instance":1},"model_config":`+mc+`}`)
		ps, got, err := ProcessorSpec(spec, 0, nil)
		if err != nil || got != sum {
			t.Fatalf("%s: sha256 %q, %v", mc, got, err)
		}
		if string(ps.ModelConfig) != `{"sleep_ms":5}` {
			t.Fatalf("%s: processor sees %s, want the object without model_sha256", mc, ps.ModelConfig)
		}
	}
}

// TestConfigureBeforeFetch: a model_config the processor refuses fails the
// deploy before model_path is fetched, so a typo costs no download.
func TestConfigureBeforeFetch(t *testing.T) {
	var hits atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("weights"))
	}))
	defer model.Close()
	m := newManager(t, t.TempDir())
	spec := parse(t, `{"name":"e","processor":"echo","metadata":{"instance":1},
		"model_path":"`+model.URL+`/model.bin","model_config":{"sleep_msec": 5}}`)
	_, err := m.Deploy(t.Context(), spec)
	if err == nil || !strings.Contains(err.Error(), `unknown field "sleep_msec"`) {
		t.Fatalf("deploy: %v, want the model_config error", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("model_path was requested %d times before the config was checked", n)
	}
}

// TestFailedLoadReleasesFetchedFiles: a model that downloads but fails to
// load closes its processor and gives its files back to the cache.
func TestFailedLoadReleasesFetchedFiles(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".sha256") {
			http.NotFound(w, r) // no checksum sidecar
			return
		}
		w.Write([]byte("not a pmml document"))
	}))
	defer model.Close()
	m := newManager(t, t.TempDir())
	spec := parse(t, `{"name":"p","processor":"pmml","metadata":{"instance":1},"model_path":"`+model.URL+`/m.pmml"}`)
	if _, err := m.Deploy(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "load") {
		t.Fatalf("deploy: %v, want a load failure", err)
	}
	if n := m.opt.Fetcher.Held(); n != 0 {
		t.Fatalf("%d cached files still held after the failed load", n)
	}
}

// TestStopCancelsALoad: stop during a load that would never end (a model
// server that never answers) cancels it and stops at once; the stop is on
// disk, so a restart leaves the service stopped.
func TestStopCancelsALoad(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".sha256") {
			http.NotFound(w, r)
			return
		}
		close(started)
		<-r.Context().Done()
		close(cancelled)
	}))
	defer model.Close()
	dir := t.TempDir()
	m := newManager(t, dir)
	spec := parse(t, `{"name":"p","processor":"pmml","metadata":{"instance":1},"model_path":"`+model.URL+`/m.pmml"}`)
	if _, err := m.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	<-started // the model download is under way, and never ends by itself
	if _, err := m.Stop(t.Context(), "p"); err != nil {
		t.Fatalf("stop during the load: %v", err)
	}
	<-cancelled // the download was cancelled, not left running
	if in := settle(t, m, "p"); in.Status != Stopped {
		t.Fatalf("status %s (%s), want Stopped", in.Status, in.Message)
	}
	m.Shutdown(context.Background())
	m2 := newManager(t, dir)
	if n, problems := m2.Restore(); n != 1 || len(problems) > 0 {
		t.Fatal(n, problems)
	}
	if in := settle(t, m2, "p"); in.Status != Stopped {
		t.Fatalf("after restart: %s (%s), want Stopped", in.Status, in.Message)
	}
}

// TestFailedLoadIsNotRetriedAtStart: a load that failed (a file that is not
// a model) is restored Failed with the reason, not loaded again; one cut
// short by the server dying is loaded again at most once more.
func TestFailedLoadIsNotRetriedAtStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pmml")
	if err := os.WriteFile(bad, []byte("not pmml"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, dir)
	if _, err := m.Deploy(t.Context(), parse(t, `{"name":"p","processor":"pmml","metadata":{"instance":1},"model_path":"`+bad+`"}`)); err == nil {
		t.Fatal("a bad model deployed")
	}
	m.Shutdown(context.Background())

	m2 := newManager(t, dir)
	m2.Restore()
	in := settle(t, m2, "p")
	if in.Status != Failed || in.Reason != "LoadFailed" || !strings.Contains(in.Message, "not loaded at start") {
		t.Fatalf("restored %s %s %q, want Failed, not loaded", in.Status, in.Reason, in.Message)
	}
	// Issue 34: the message wrapped itself again at every restart.
	for range 3 {
		m2.Shutdown(context.Background())
		m2 = newManager(t, dir)
		m2.Restore()
		if again := settle(t, m2, "p"); again.Message != in.Message || again.Status != Failed {
			t.Fatalf("after another restart: %s %q, want the same message as after the first:\n%q", again.Status, again.Message, in.Message)
		}
	}
	for _, e := range m2.mustGet(t, "p").Events() {
		if e.Reason == "Loading" || e.Reason == "Running" {
			t.Fatalf("a failed load was retried at start: %+v", e)
		}
	}
	m2.Shutdown(context.Background())

	// A server that died twice during the load of the current version.
	statePath := filepath.Join(dir, "services", "p", stateFile)
	var rec record
	b, _ := os.ReadFile(statePath)
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Status, rec.LoadAttempts, rec.Retryable = Creating, maxLoadAttempts, false
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(statePath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	m3 := newManager(t, dir)
	m3.Restore()
	if in := settle(t, m3, "p"); in.Status != Failed || in.Reason != "LoadInterrupted" {
		t.Fatalf("after %d interrupted loads: %s %s %q", maxLoadAttempts, in.Status, in.Reason, in.Message)
	}
}

// TestStopThatCannotBeSavedIsNotReported: a stop the state dir cannot
// record (here state.json cannot be replaced; on a full disk the write
// fails alike) fails, and the service keeps serving.
func TestStopThatCannotBeSavedIsNotReported(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	if _, err := m.Deploy(t.Context(), parse(t, v1)); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "services", "svc", stateFile)
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state, "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stop(t.Context(), "svc"); err == nil {
		t.Fatal("a stop that was not written reported success")
	}
	if in := m.mustGet(t, "svc").Info(t.Context()); in.Status != Running || !m.mustGet(t, "svc").Ready() {
		t.Fatalf("status %s after a failed stop, want Running and serving", in.Status)
	}
}

// TestCreateDuringDeleteIsBusy: a create of a name whose delete is still
// removing files gets ErrBusy, never a half-written directory.
func TestCreateDuringDeleteIsBusy(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir)
	for round := range 20 {
		if _, err := m.Deploy(t.Context(), parse(t, v1)); err != nil {
			t.Fatalf("round %d: deploy: %v", round, err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Delete(t.Context(), "svc") }()
		wait.Until(t, 10*time.Second, func() error {
			_, err := m.Create(t.Context(), parse(t, v1))
			if err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrExists) {
				t.Fatalf("round %d: create during delete: %v, want ErrBusy, ErrExists or success", round, err)
			}
			return err // busy or there: the delete is still running
		})
		if err := <-done; err != nil {
			t.Fatalf("round %d: delete: %v", round, err)
		}
		settle(t, m, "svc")
		if _, err := os.Stat(filepath.Join(dir, "services", "svc", stateFile)); err != nil {
			t.Fatalf("round %d: the created service has no state: %v", round, err)
		}
	}
}

func (m *Manager) mustGet(t *testing.T, name string) *Service {
	t.Helper()
	s, ok := m.Get(name)
	if !ok {
		t.Fatalf("no service %q", name)
	}
	return s
}

// TestDeleteForgetsTheModelCache: a deleted service's downloaded model
// leaves the cache with it (issue 14: a 3 GB entry outlived its service).
func TestDeleteForgetsTheModelCache(t *testing.T) {
	pmmlDoc, err := os.ReadFile("../../examples/models/lr.pmml")
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".sha256") {
			http.NotFound(w, r)
			return
		}
		w.Write(pmmlDoc)
	}))
	defer model.Close()
	dir := t.TempDir()
	m := newManager(t, dir)
	if _, err := m.Deploy(t.Context(), parse(t, `{"name":"p","processor":"pmml","metadata":{"instance":1},"model_path":"`+model.URL+`/lr.pmml"}`)); err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		es, _ := os.ReadDir(filepath.Join(dir, "cache", "entries"))
		return len(es)
	}
	if entries() == 0 {
		t.Fatal("the model was not cached")
	}
	if err := m.Delete(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d cache entries outlived the deleted service", n)
	}
}
