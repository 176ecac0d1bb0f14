package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eas-server/eas-server/internal/metrics"
	_ "github.com/eas-server/eas-server/processors/echo"
	"github.com/eas-server/eas-server/servicejson"
)

// TestDeleteForgetsMetrics checks that a deleted service leaves no series.
func TestDeleteForgetsMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	mt := metrics.New(reg)
	m := NewManager(Options{StateDir: t.TempDir(), Metrics: mt})
	defer m.Shutdown(context.Background())
	spec, err := servicejson.Parse([]byte(`{"name":"gone","processor":"echo","token":"T","metadata":{"instance":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Deploy(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	mt.Request("gone", "1", 200, time.Millisecond)
	mt.Batch("gone", 1, time.Millisecond)
	if n := testutil.CollectAndCount(reg, "eas_requests_total"); n != 1 {
		t.Fatalf("eas_requests_total has %d series before delete, want 1", n)
	}
	if err := m.Delete(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "service" && strings.Contains(l.GetValue(), "gone") {
					t.Errorf("%s still has a series for the deleted service", mf.GetName())
				}
			}
		}
	}
}
