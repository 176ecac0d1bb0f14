package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eas-server/eas-server/internal/history"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/wait"
)

// rig is a real registry with internal/metrics' collectors, recorded on
// through the methods the server and the scheduler call, and a sampler on
// it driven with a fake clock.
type rig struct {
	m   *metrics.Metrics
	h   *history.Sampler
	now time.Time
}

func newRig(t *testing.T, opt history.Options) *rig {
	t.Helper()
	reg := prometheus.NewRegistry()
	opt.Gatherer = reg
	r := &rig{m: metrics.New(reg), h: history.New(opt), now: time.UnixMilli(1_733_100_000_000)}
	r.sample(t, 0) // the base
	return r
}

// sample advances the clock by d and samples.
func (r *rig) sample(t *testing.T, d time.Duration) {
	t.Helper()
	r.now = r.now.Add(d)
	if err := r.h.Sample(r.now); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) requests(svc, version string, code, n int, d time.Duration) {
	for range n {
		r.m.Request(svc, version, code, d)
	}
}

func (r *rig) points(t *testing.T, svc string) []history.Point {
	t.Helper()
	pts, ok := r.h.Points(svc, 0)
	if !ok {
		t.Fatalf("service %s is not tracked", svc)
	}
	return pts
}

func last(t *testing.T, pts []history.Point) history.Point {
	t.Helper()
	if len(pts) == 0 {
		t.Fatal("no points")
	}
	return pts[len(pts)-1]
}

func near(got *float64, want float64) bool {
	return got != nil && math.Abs(*got-want) < 1e-9
}

func show(p history.Point) string {
	b, _ := json.Marshal(p)
	return string(b)
}

func TestPointOfAnInterval(t *testing.T) {
	r := newRig(t, history.Options{})
	r.m.SetQueueDepthFunc(func() map[string]int { return map[string]int{"s": 4} })
	// 6 answers of 200 and 2 of 400, all 3 ms: in the (2.5 ms, 5 ms] bucket.
	r.requests("s", "1", 200, 6, 3*time.Millisecond)
	r.requests("s", "1", 400, 2, 3*time.Millisecond)
	r.m.Batch("s", 2, time.Millisecond)
	r.m.Batch("s", 4, time.Millisecond)
	f1, f2 := r.m.Start("s"), r.m.Start("s")
	f2.Done()
	defer f1.Done()
	r.sample(t, 2*time.Second)

	pts := r.points(t, "s")
	if len(pts) != 1 {
		t.Fatalf("got %d points, want 1: the first Sample is the base", len(pts))
	}
	p := pts[0]
	if p.T != r.now.UnixMilli() {
		t.Errorf("T = %d, want %d", p.T, r.now.UnixMilli())
	}
	if len(p.RPS) != 2 || p.RPS["200"] != 3 || p.RPS["400"] != 1 {
		t.Errorf("RPS = %v, want 200: 3, 400: 1", p.RPS)
	}
	// histogram_quantile: 2.5 + 2.5*(rank/8) ms, rank = q*8.
	if !near(p.P50Ms, 3.75) || !near(p.P99Ms, 4.975) {
		t.Errorf("P50Ms, P99Ms = %s, want 3.75 and 4.975", show(p))
	}
	if !near(p.Batch, 3) {
		t.Errorf("Batch = %s, want 3", show(p))
	}
	if p.QueueDepth != 4 || p.InFlight != 1 {
		t.Errorf("QueueDepth, InFlight = %d, %d; want 4, 1", p.QueueDepth, p.InFlight)
	}

	// An idle interval: no rates, no quantiles, no batch; the gauges stay.
	r.sample(t, 2*time.Second)
	p = last(t, r.points(t, "s"))
	if len(p.RPS) != 0 || p.P50Ms != nil || p.P99Ms != nil || p.Batch != nil || p.InFlight != 1 {
		t.Errorf("idle point = %s", show(p))
	}
	js := show(p)
	for _, absent := range []string{"P50Ms", "P99Ms", "Batch"} {
		if strings.Contains(js, absent) {
			t.Errorf("idle point %s has %s", js, absent)
		}
	}
	if !strings.Contains(js, `"RPS":{}`) {
		t.Errorf("idle point %s: RPS should be {}", js)
	}

	// Rates divide by the time actually elapsed.
	r.requests("s", "1", 200, 5, time.Millisecond)
	r.sample(t, 5*time.Second)
	if p := last(t, r.points(t, "s")); p.RPS["200"] != 1 {
		t.Errorf("5 requests in 5 s: RPS = %v", p.RPS)
	}
}

func TestQuantileEdges(t *testing.T) {
	r := newRig(t, history.Options{})
	// Past the last finite bound (10 s): the highest finite bound, as
	// Prometheus answers.
	r.requests("slow", "1", 200, 10, 20*time.Second)
	// All in the first bucket (0, 0.1 ms]: interpolated from 0.
	r.requests("fast", "1", 200, 4, 50*time.Microsecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "slow")); !near(p.P50Ms, 10000) || !near(p.P99Ms, 10000) {
		t.Errorf("slow: %s, want 10000 ms", show(p))
	}
	if p := last(t, r.points(t, "fast")); !near(p.P50Ms, 0.05) || !near(p.P99Ms, 0.099) {
		t.Errorf("fast: %s, want 0.05 and 0.099 ms", show(p))
	}
	// Only the interval counts: the slow requests are gone from the next.
	r.requests("slow", "1", 200, 1, 3*time.Millisecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "slow")); !near(p.P99Ms, 4.975) {
		t.Errorf("slow, next interval: %s, want P99Ms 4.975", show(p))
	}
}

// The rate sums the versions that answered, and a version's series being
// dropped (two versions old) is not a reset.
func TestVersionsAndForgottenVersions(t *testing.T) {
	r := newRig(t, history.Options{})
	r.requests("s", "1", 200, 10, time.Millisecond)
	r.sample(t, 2*time.Second)
	r.requests("s", "1", 200, 2, time.Millisecond)
	r.requests("s", "2", 200, 4, time.Millisecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "s")); p.RPS["200"] != 3 {
		t.Errorf("versions 1 and 2: RPS = %v, want 200: 3", p.RPS)
	}
	r.m.ForgetVersions("s", "1")
	r.requests("s", "2", 200, 2, time.Millisecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "s")); p.RPS["200"] != 1 {
		t.Errorf("after version 1's series went: RPS = %v, want 200: 1", p.RPS)
	}
}

// A service deleted and recreated starts its counters again: no negative
// rate, and what the new one counted is its rate.
func TestResetIsNoNegativeRate(t *testing.T) {
	r := newRig(t, history.Options{})
	r.requests("s", "1", 200, 20, time.Millisecond)
	r.requests("s", "1", 500, 20, time.Millisecond)
	r.m.Batch("s", 8, time.Millisecond)
	r.sample(t, 2*time.Second)

	// Deleted and recreated within one interval.
	r.m.Forget("s")
	r.requests("s", "1", 200, 4, 3*time.Millisecond)
	r.m.Batch("s", 2, time.Millisecond)
	r.sample(t, 2*time.Second)
	p := last(t, r.points(t, "s"))
	for code, v := range p.RPS {
		if v < 0 {
			t.Errorf("RPS[%s] = %v < 0", code, v)
		}
	}
	if p.RPS["200"] != 2 || len(p.RPS) != 1 || !near(p.P99Ms, 4.975) || !near(p.Batch, 2) {
		t.Errorf("after a reset: %s, want RPS 200: 2, P99Ms 4.975, Batch 2", show(p))
	}

	// Deleted, absent for a sample, then recreated: counted from zero.
	r.m.Forget("s")
	r.sample(t, 2*time.Second)
	n := len(r.points(t, "s"))
	r.requests("s", "1", 200, 6, time.Millisecond)
	r.sample(t, 2*time.Second)
	pts := r.points(t, "s")
	if len(pts) != n+1 || pts[len(pts)-1].RPS["200"] != 3 {
		t.Errorf("recreated: %d points (had %d), last %s; want one more with RPS 200: 3", len(pts), n, show(pts[len(pts)-1]))
	}
}

// A service first seen after the base counts from zero.
func TestNewServiceCountsFromZero(t *testing.T) {
	r := newRig(t, history.Options{})
	r.requests("late", "1", 200, 8, time.Millisecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "late")); p.RPS["200"] != 4 {
		t.Errorf("RPS = %v, want 200: 4", p.RPS)
	}
}

func TestWindowSinceAndBounds(t *testing.T) {
	r := newRig(t, history.Options{Interval: 2 * time.Second, Window: 10 * time.Second})
	r.requests("s", "1", 200, 1, time.Millisecond)
	r.requests("gone", "1", 200, 1, time.Millisecond)
	for range 3 {
		r.sample(t, 2*time.Second)
	}
	r.m.Forget("gone")
	for range 7 {
		r.sample(t, 2*time.Second)
	}
	pts := r.points(t, "s")
	if len(pts) != 5 {
		t.Fatalf("%d points, want Window/Interval = 5", len(pts))
	}
	cutoff := r.now.Add(-10 * time.Second).UnixMilli()
	for i, p := range pts {
		if p.T <= cutoff || (i > 0 && p.T <= pts[i-1].T) {
			t.Errorf("point %d at %d: outside the window (after %d) or out of order", i, p.T, cutoff)
		}
	}
	// Sampled faster than Interval, the count bound still holds.
	for range 20 {
		r.sample(t, 100*time.Millisecond)
	}
	if n := len(r.points(t, "s")); n != 5 {
		t.Errorf("%d points after fast samples, want 5", n)
	}
	// A long gap leaves only the points inside the window.
	r.sample(t, 11*time.Second)
	if n := len(r.points(t, "s")); n != 1 {
		t.Errorf("after an 11 s gap: %d points, want 1 (the window is 10 s)", n)
	}

	// "gone" disappeared 14 s ago: dropped after the window.
	if _, ok := r.h.Points("gone", 0); ok {
		t.Error("a service gone for longer than the window is still tracked")
	}
	if _, ok := r.h.All(0)["gone"]; ok {
		t.Error("All lists a dropped service")
	}

	// since: only the points after it.
	for range 4 {
		r.sample(t, 2*time.Second)
	}
	all := r.points(t, "s")
	since := all[2].T
	got, _ := r.h.Points("s", since)
	if len(got) != len(all)-3 || got[0].T <= since {
		t.Errorf("since %d: %d points from %d, want %d after it", since, len(got), got[0].T, len(all)-3)
	}
	if got, _ := r.h.Points("s", r.now.UnixMilli()); got == nil || len(got) != 0 {
		t.Errorf("since the last point: %v, want an empty list", got)
	}
	if got := r.h.All(since)["s"]; len(got) != len(all)-3 {
		t.Errorf("All(since): %d points, want %d", len(got), len(all)-3)
	}
}

// A service recently gone keeps its points for the window.
func TestGoneServiceKeptForTheWindow(t *testing.T) {
	r := newRig(t, history.Options{Interval: 2 * time.Second, Window: 10 * time.Second})
	r.requests("s", "1", 200, 2, time.Millisecond)
	r.sample(t, 2*time.Second)
	r.m.Forget("s")
	r.sample(t, 8*time.Second)
	if pts, ok := r.h.Points("s", 0); !ok || len(pts) != 1 {
		t.Errorf("gone 8 s ago: %d points, tracked %v; want its 1 point", len(pts), ok)
	}
	r.sample(t, 4*time.Second)
	if _, ok := r.h.Points("s", 0); ok {
		t.Error("gone 12 s ago with a 10 s window: still tracked")
	}
}

func TestMaxServices(t *testing.T) {
	r := newRig(t, history.Options{MaxServices: 2})
	for _, s := range []string{"c", "a", "b"} {
		r.requests(s, "1", 200, 1, time.Millisecond)
	}
	r.sample(t, 2*time.Second)
	all := r.h.All(0)
	if len(all) != 2 || all["a"] == nil || all["b"] == nil {
		t.Errorf("tracked %v, want a and b (the first two by name)", all)
	}
	// Room frees when a service is dropped.
	r.m.Forget("a")
	r.sample(t, 2*time.Second)
	r.sample(t, 11*time.Minute)
	if all := r.h.All(0); len(all) != 2 || all["c"] == nil {
		t.Errorf("after a was dropped, tracked %v, want b and c", all)
	}
}

func TestFirstSampleAndClockGoingBack(t *testing.T) {
	r := newRig(t, history.Options{})
	r.requests("s", "1", 200, 4, time.Millisecond)
	before := r.now
	r.now = before.Add(-time.Second)
	if err := r.h.Sample(r.now); err != nil {
		t.Fatal(err)
	}
	if pts, _ := r.h.Points("s", 0); len(pts) != 0 {
		t.Fatalf("a sample before the last made %d points", len(pts))
	}
	r.now = before
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "s")); p.RPS["200"] != 2 {
		t.Errorf("the interval after the clock went back: RPS = %v, want 200: 2", p.RPS)
	}
}

func TestDefaults(t *testing.T) {
	h := history.New(history.Options{Gatherer: prometheus.NewRegistry()})
	if h.Interval() != 2*time.Second || h.Window() != 10*time.Minute {
		t.Errorf("defaults: %s, %s", h.Interval(), h.Window())
	}
}

// Start samples on its own; readers and recorders run meanwhile (-race).
func TestStartStopConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	h := history.New(history.Options{Gatherer: reg, Interval: 5 * time.Millisecond, Window: time.Second})
	h.Start(context.Background())
	h.Start(context.Background()) // a second Start is a no-op
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.Request("s", "1", 200, time.Millisecond)
				h.All(0)
				h.Points("s", 0)
			}
		})
	}
	wait.Until(t, 5*time.Second, func() error {
		pts, _ := h.Points("s", 0)
		if len(pts) == 0 || pts[len(pts)-1].RPS["200"] <= 0 {
			return fmt.Errorf("no point with requests from sampling every 5 ms (%d points)", len(pts))
		}
		return nil
	})
	close(stop)
	wg.Wait()
	h.Stop()
	h.Stop()
	n := len(h.All(0)["s"])
	// Not synchronisation: six intervals in which a sampler that still ran
	// would add points; the check is that none come.
	time.Sleep(30 * time.Millisecond)
	if len(h.All(0)["s"]) != n {
		t.Error("still sampling after Stop")
	}
}

// TestModelBatchesCount checks that the runs of a service's routed models
// (eas_batch_size labelled model) count in the service's batch size beside
// its own runs, and keep counting from one interval to the next.
func TestModelBatchesCount(t *testing.T) {
	r := newRig(t, history.Options{})
	r.m.Request("s", "1", 200, time.Millisecond) // the service is seen from the base on
	r.sample(t, 2*time.Second)
	r.m.Batch("s", 1, time.Millisecond)
	r.m.ModelBatch("s", "mlp", 4, time.Millisecond)
	r.m.ModelBatch("s", "conv", 7, time.Millisecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "s")); !near(p.Batch, 4) {
		t.Errorf("Batch = %s, want 4: (1 + 4 + 7) / 3 runs", show(p))
	}
	r.m.ModelBatch("s", "mlp", 2, time.Millisecond)
	r.sample(t, 2*time.Second)
	if p := last(t, r.points(t, "s")); !near(p.Batch, 2) {
		t.Errorf("Batch = %s, want 2: one run of 2 in the interval", show(p))
	}
}

// TestGenerationPoint: a generative service's point carries its token
// latency quantiles over the interval, its token rates and its batch and
// cache gauges, fed through the series its sequence scheduler records on;
// a service without those series has no Generation at all.
func TestGenerationPoint(t *testing.T) {
	r := newRig(t, history.Options{})
	g := r.m.Generation("llm")
	r.requests("plain", "1", 200, 2, time.Millisecond)
	// 4 first tokens at 30 ms: the (25 ms, 50 ms] bucket.
	for range 4 {
		g.FirstToken(30 * time.Millisecond)
	}
	// 10 inter-token gaps of 7 ms: the (5 ms, 10 ms] bucket.
	for range 10 {
		g.InterToken(7 * time.Millisecond)
	}
	g.Step(3, 120, 5*time.Millisecond)
	g.Tokens(120, 4)
	g.Step(3, 0, 5*time.Millisecond)
	g.Tokens(0, 16)
	g.State(3, 2, 700, 2048)
	r.sample(t, 2*time.Second)

	p := last(t, r.points(t, "llm"))
	gen := p.Generation
	if gen == nil {
		t.Fatalf("a generative service's point has no Generation: %s", show(p))
	}
	// histogram_quantile: 25 + 25*(q*4)/4 ms and 5 + 5*(q*10)/10 ms.
	if !near(gen.TTFTP50Ms, 37.5) || !near(gen.TTFTP99Ms, 49.75) {
		t.Errorf("TTFT p50, p99 = %s, want 37.5 and 49.75", show(p))
	}
	if !near(gen.ITLP50Ms, 7.5) || !near(gen.ITLP99Ms, 9.95) {
		t.Errorf("ITL p50, p99 = %s, want 7.5 and 9.95", show(p))
	}
	if gen.PromptTokensPerSec != 60 || gen.TokensPerSec != 10 {
		t.Errorf("token rates = %s, want 120 and 20 tokens in 2 s: 60/s and 10/s", show(p))
	}
	if gen.Running != 3 || gen.Waiting != 2 || gen.CacheTokens != 700 || gen.CacheCapacity != 2048 {
		t.Errorf("gauges = %s, want running 3, waiting 2, cache 700 of 2048", show(p))
	}
	if !near(p.Batch, 3) {
		t.Errorf("Batch = %s, want 3: a step is a model run of its sequences", show(p))
	}
	if pl := last(t, r.points(t, "plain")); pl.Generation != nil || strings.Contains(show(pl), "Generation") {
		t.Errorf("a service without generation series: %s", show(pl))
	}

	// An idle interval: no quantiles, rates 0, the gauges as set.
	g.State(1, 0, 300, 2048)
	r.sample(t, 2*time.Second)
	p = last(t, r.points(t, "llm"))
	js := show(p)
	for _, absent := range []string{"TTFTP50Ms", "TTFTP99Ms", "ITLP50Ms", "ITLP99Ms"} {
		if strings.Contains(js, absent) {
			t.Errorf("idle point %s has %s", js, absent)
		}
	}
	if gen := p.Generation; gen == nil || gen.PromptTokensPerSec != 0 || gen.TokensPerSec != 0 || gen.Running != 1 || gen.CacheTokens != 300 {
		t.Errorf("idle point = %s, want rates 0, running 1, cache 300", js)
	}

	// Only the interval counts, and rates divide by the time elapsed.
	g.FirstToken(3 * time.Millisecond) // (2.5 ms, 5 ms]
	g.Tokens(10, 25)
	r.sample(t, 5*time.Second)
	p = last(t, r.points(t, "llm"))
	if gen := p.Generation; gen == nil || !near(gen.TTFTP99Ms, 4.975) || gen.ITLP50Ms != nil || gen.PromptTokensPerSec != 2 || gen.TokensPerSec != 5 {
		t.Errorf("next interval = %s, want TTFTP99Ms 4.975, no ITL, 2 and 5 tokens/s", show(p))
	}
}

// A generative service deleted and recreated within one interval counts
// its tokens from zero: no negative rate.
func TestGenerationReset(t *testing.T) {
	r := newRig(t, history.Options{})
	g := r.m.Generation("llm")
	g.Tokens(400, 100)
	g.FirstToken(time.Second)
	r.sample(t, 2*time.Second)
	r.m.Forget("llm")
	g = r.m.Generation("llm")
	g.Tokens(8, 2)
	g.FirstToken(3 * time.Millisecond)
	g.State(1, 0, 10, 64)
	r.sample(t, 2*time.Second)
	p := last(t, r.points(t, "llm"))
	if gen := p.Generation; gen == nil || gen.PromptTokensPerSec != 4 || gen.TokensPerSec != 1 || !near(gen.TTFTP99Ms, 4.975) || gen.CacheCapacity != 64 {
		t.Errorf("after a reset: %s, want 4 and 1 tokens/s, TTFTP99Ms 4.975, capacity 64", show(p))
	}
}
