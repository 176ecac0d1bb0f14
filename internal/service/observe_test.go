package service

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/internal/syncbuf"
)

// gauge reads one series of reg; -1 when it does not exist.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

// TestLifecycleMetricsAndLog follows a service through create, update,
// stop, start and delete, and a second one through a failed load: the
// state gauge shows the one current state, the info gauge the current
// version and processor, loads are timed and failures counted by stage,
// every transition is one log line with service, version and reason, and a
// deleted service leaves no series.
func TestLifecycleMetricsAndLog(t *testing.T) {
	reg := prometheus.NewRegistry()
	mt := metrics.New(reg)
	var logs syncbuf.Buffer
	m := NewManager(Options{StateDir: t.TempDir(), Metrics: mt, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer m.Shutdown(context.Background())

	state := func(svc string) string {
		t.Helper()
		cur := ""
		for _, st := range allStates {
			switch gauge(t, reg, "eas_service_state", map[string]string{"service": svc, "state": st}) {
			case 1:
				if cur != "" {
					t.Fatalf("%s: states %s and %s are both 1", svc, cur, st)
				}
				cur = st
			case 0:
			default:
				t.Fatalf("%s: no eas_service_state series for %s", svc, st)
			}
		}
		return cur
	}

	if _, err := m.Deploy(t.Context(), parse(t, `{"name":"a","processor":"echo","token":"T","metadata":{"instance":1}}`)); err != nil {
		t.Fatal(err)
	}
	if st := state("a"); st != "Running" {
		t.Fatalf("after deploy: state %s", st)
	}
	if v := gauge(t, reg, "eas_service_info", map[string]string{"service": "a", "version": "1", "processor": "echo"}); v != 1 {
		t.Fatalf("eas_service_info for version 1: %v", v)
	}
	if n := gauge(t, reg, "eas_model_load_seconds", map[string]string{"service": "a"}); n != 1 {
		t.Fatalf("eas_model_load_seconds count %v, want 1", n)
	}
	mt.Request("a", "1", 200, time.Millisecond)

	// Two updates: version 3 serves, version 2 was the previous one, and
	// version 1's request series is dropped.
	for i, cfg := range []string{`{"sleep_ms":1}`, `{"sleep_ms":2}`} {
		if _, err := m.Update(t.Context(), "a", parse(t, `{"name":"a","processor":"echo","token":"T","model_config":`+cfg+`,"metadata":{"instance":1}}`)); err != nil {
			t.Fatal(err)
		}
		if in := settle(t, m, "a"); in.CurrentVersion != i+2 || in.Status != Running {
			t.Fatalf("update %d: %+v", i+2, in)
		}
	}
	if v := gauge(t, reg, "eas_service_info", map[string]string{"service": "a", "version": "3"}); v != 1 {
		t.Fatalf("eas_service_info for version 3: %v", v)
	}
	if v := gauge(t, reg, "eas_service_info", map[string]string{"service": "a", "version": "1"}); v != -1 {
		t.Fatal("eas_service_info still shows version 1")
	}
	if n := testutil.CollectAndCount(reg, "eas_requests_total"); n != 0 {
		t.Fatalf("version 1's requests still have %d series two versions later", n)
	}
	if n := gauge(t, reg, "eas_model_load_seconds", map[string]string{"service": "a"}); n != 3 {
		t.Fatalf("eas_model_load_seconds count %v after two updates, want 3", n)
	}

	if _, err := m.Stop(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if st := state("a"); st != "Stopped" {
		t.Fatalf("after stop: state %s", st)
	}
	if _, err := m.Start(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	settle(t, m, "a")
	if st := state("a"); st != "Running" {
		t.Fatalf("after start: state %s", st)
	}

	// A load that fails: counted by its stage, state Failed.
	if _, err := m.Deploy(t.Context(), parse(t, `{"name":"b","processor":"echo","token":"T","model_config":{"sleep_ms":-5},"metadata":{"instance":1}}`)); err == nil {
		t.Fatal("a bad model_config deployed")
	}
	if st := state("b"); st != "Failed" {
		t.Fatalf("failed load: state %s", st)
	}
	if v := gauge(t, reg, "eas_model_load_failures_total", map[string]string{"service": "b", "reason": "config"}); v != 1 {
		t.Fatalf("eas_model_load_failures_total{reason=config}: %v", v)
	}

	if err := m.Delete(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "service" && l.GetValue() == "a" {
					t.Errorf("%s keeps a series of the deleted service", mf.GetName())
				}
			}
		}
	}

	out := logs.String()
	for _, want := range []string{
		"msg=lifecycle service=a version=1 reason=Created",
		"msg=lifecycle service=a version=2 reason=VersionCreated",
		"msg=lifecycle service=a version=1 reason=Running",
		"msg=lifecycle service=a version=2 reason=Updating",
		"msg=lifecycle service=a version=2 reason=Running",
		"msg=lifecycle service=a version=1 reason=Drained",
		"msg=lifecycle service=a version=3 reason=Stopped",
		"msg=lifecycle service=a version=3 reason=Starting",
		"msg=lifecycle service=a version=3 reason=Loading",
		"msg=lifecycle service=a version=3 reason=Running",
		"msg=lifecycle service=a version=3 reason=Deleted",
		"level=WARN msg=lifecycle service=b version=1 reason=LoadFailed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", out)
	}
}

// TestLoadFailureReason: the stage of a failed load, a bounded label.
func TestLoadFailureReason(t *testing.T) {
	for err, want := range map[error]string{
		errors.New("model_config.sleep_ms: must be between 0 and 600000"):                     "config",
		errors.New("model_path: no such file"):                                                "fetch",
		&storage.FetchError{Retryable: true, Err: errors.New("reset")}:                        "fetch",
		errors.New("load: bad model"):                                                         "load",
		errors.New("warm-up: bad request"):                                                    "warmup",
		errors.New("warm_up_data_path: processor x does not support warm-up; remove the key"): "config",
		context.Canceled: "canceled",
	} {
		if got := loadFailureReason(err); got != want {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
	}
}
