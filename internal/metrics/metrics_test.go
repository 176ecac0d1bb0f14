package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var states = []string{"Creating", "Running", "Updating", "Failed", "Stopped"}

func TestServiceStateIsOneHot(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ServiceState("s", "Creating", states)
	m.ServiceState("s", "Running", states)
	want := `
# HELP eas_service_state 1 for the service's current state, 0 for the others (Creating, Running, Updating, Failed, Stopped).
# TYPE eas_service_state gauge
eas_service_state{service="s",state="Creating"} 0
eas_service_state{service="s",state="Failed"} 0
eas_service_state{service="s",state="Running"} 1
eas_service_state{service="s",state="Stopped"} 0
eas_service_state{service="s",state="Updating"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "eas_service_state"); err != nil {
		t.Fatal(err)
	}
}

func TestServiceInfoReplacesTheVersion(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ServiceInfo("s", "1", "echo")
	m.ServiceInfo("s", "2", "onnx_cpu")
	want := `
# HELP eas_service_info 1 for each service's current version and processor (join on service to label other series with them).
# TYPE eas_service_info gauge
eas_service_info{processor="onnx_cpu",service="s",version="2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "eas_service_info"); err != nil {
		t.Fatal(err)
	}
}

func TestInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	a, b := m.Start("s"), m.Start("s")
	if v := testutil.ToFloat64(m.inFlight.WithLabelValues("s")); v != 2 {
		t.Fatalf("in flight %v, want 2", v)
	}
	a.Done()
	b.Done()
	if v := testutil.ToFloat64(m.inFlight.WithLabelValues("s")); v != 0 {
		t.Fatalf("in flight %v, want 0", v)
	}
	var nilM *Metrics
	nilM.Start("s").Done() // a nil Metrics counts nothing and does not panic
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.BuildInfo("9.9.9")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "eas_build_info" {
			continue
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != "9.9.9" || !strings.HasPrefix(got["goversion"], "go") || got["revision"] == "" {
			t.Fatalf("eas_build_info labels %v", got)
		}
		return
	}
	t.Fatal("no eas_build_info")
}

// TestForgetAndForgetVersions: a deleted service leaves no series; old
// versions' request series can be dropped while the others stay.
func TestForgetAndForgetVersions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Request("s", "1", 200, time.Millisecond)
	m.Request("s", "1", 500, time.Millisecond)
	m.Request("s", "2", 200, time.Millisecond)
	m.Request("s", "", 401, time.Millisecond)
	m.Request("s", "1", 200, time.Millisecond) // the cached 200 counter is version 1's
	m.ForgetVersions("s", "1")
	if n := testutil.CollectAndCount(m.requests); n != 2 {
		t.Fatalf("%d request series after forgetting version 1, want 2", n)
	}
	m.Request("s", "1", 200, time.Millisecond) // the cache must not hand back a deleted child
	if n := testutil.CollectAndCount(m.requests); n != 3 {
		t.Fatalf("%d request series, want 3", n)
	}
	m.Start("s").Done()
	m.ServiceInfo("s", "2", "echo")
	m.ServiceState("s", "Running", states)
	m.ModelLoaded("s", time.Second)
	m.ModelLoadFailed("s", "fetch")
	m.Forget("s")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if len(mf.GetMetric()) > 0 && mf.GetName() != "eas_build_info" {
			t.Errorf("%s keeps %d series after Forget", mf.GetName(), len(mf.GetMetric()))
		}
	}
}

// TestModelSeries checks that a routed model's runs show in the same
// families as the services' own, labelled service and model, without
// changing the services' series, and that Forget drops them.
func TestModelSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Batch("s", 1, time.Millisecond)
	m.ModelBatch("s", "mlp", 4, time.Millisecond)
	m.ModelBatch("s", "mlp", 2, time.Millisecond)
	m.ModelQueueWait("s", "mlp", time.Millisecond)
	m.ModelBatch("t", "conv", 1, time.Millisecond)
	var out strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			if h := mt.GetHistogram(); h != nil {
				fmt.Fprintf(&out, "%s{%s} %d %g\n", mf.GetName(), labels, h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	for _, want := range []string{
		"eas_batch_size{service=s,} 1 1\n",
		"eas_batch_size{model=mlp,service=s,} 2 6\n",
		"eas_batch_size{model=conv,service=t,} 1 1\n",
		"eas_compute_seconds{model=mlp,service=s,} 2 0.002\n",
		"eas_queue_wait_seconds{model=mlp,service=s,} 1 0.001\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("gathered series lack %q:\n%s", want, out.String())
		}
	}
	m.Forget("s")
	if n := testutil.CollectAndCount(m.models, "eas_batch_size"); n != 1 {
		t.Errorf("after Forget(s): %d model batch series, want 1 (t's)", n)
	}
	m.ModelBatch("s", "mlp", 1, time.Millisecond) // a new series, counted from zero
	if n := testutil.CollectAndCount(m.models, "eas_batch_size"); n != 2 {
		t.Errorf("after a new run: %d model batch series, want 2", n)
	}
}
