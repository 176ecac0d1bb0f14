// Package history keeps a short per-service history of the data plane's
// metrics in memory, so that the web console can draw charts without a
// Prometheus server: a Sampler reads the server's own registry every
// Interval and turns the counters and histograms into per-interval rates,
// latency quantiles and batch sizes, kept for Window. A generative
// service's points also carry its token latencies, token rates, batch and
// key/value cache (Generation).
package history

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Defaults of Options.
const (
	DefaultInterval    = 2 * time.Second
	DefaultWindow      = 10 * time.Minute
	DefaultMaxServices = 1000
)

// The series the sampler reads (internal/metrics names them).
const (
	requestsName = "eas_requests_total"
	durationName = "eas_request_duration_seconds"
	batchName    = "eas_batch_size"
	depthName    = "eas_queue_depth"
	inFlightName = "eas_requests_in_flight"
	stateName    = "eas_service_state" // only tells that a service exists

	// A generative service's (internal/metrics' generation.go).
	ttftName     = "eas_generation_time_to_first_token_seconds"
	itlName      = "eas_generation_inter_token_seconds"
	promptName   = "eas_generation_prompt_tokens_total"
	outputName   = "eas_generation_tokens_total"
	runningName  = "eas_generation_sequences_running"
	waitingName  = "eas_generation_requests_waiting"
	cacheName    = "eas_generation_cache_tokens"
	capacityName = "eas_generation_cache_capacity_tokens"
)

// Point is one service's interval. The JSON names are the console's.
type Point struct {
	T   int64              // end of the interval, unix milliseconds
	RPS map[string]float64 // requests per second by HTTP status code; {} when none
	// P50Ms and P99Ms are latency quantiles over the interval, interpolated
	// inside histogram buckets as Prometheus' histogram_quantile does;
	// absent when no request was answered in it.
	P50Ms *float64 `json:",omitempty"`
	P99Ms *float64 `json:",omitempty"`
	// Batch is the mean requests per model run; absent when no run.
	Batch      *float64 `json:",omitempty"`
	QueueDepth int      // requests waiting for a worker at T
	InFlight   int      // requests admitted and not yet answered at T
	// Generation is set for a generative service only (one whose
	// eas_generation_ series exist: its sequence scheduler made them), so
	// the console tells the two kinds apart by its presence.
	Generation *Generation `json:",omitempty"`
}

// Generation is a generative service's interval: its token latencies and
// rates over the interval, and its batch and cache at T.
type Generation struct {
	// TTFTP50Ms and TTFTP99Ms are time-to-first-token quantiles (arrival
	// to first generated token), interpolated as P50Ms is; absent when no
	// request got its first token in the interval.
	TTFTP50Ms *float64 `json:",omitempty"`
	TTFTP99Ms *float64 `json:",omitempty"`
	// ITLP50Ms and ITLP99Ms are inter-token latency quantiles (between two
	// tokens of one sequence); absent when no second token came.
	ITLP50Ms *float64 `json:",omitempty"`
	ITLP99Ms *float64 `json:",omitempty"`
	// PromptTokensPerSec is prompt tokens fed to the model per second,
	// TokensPerSec tokens generated per second; 0 when idle.
	PromptTokensPerSec float64
	TokensPerSec       float64
	Running            int // sequences in the running batch at T
	Waiting            int // requests waiting for a place in the batch at T
	CacheTokens        int // tokens held in the key/value cache at T
	CacheCapacity      int // the cache's bound in tokens; 0 when unknown
}

// Options configure a Sampler.
type Options struct {
	// Gatherer is the registry internal/metrics records on. Gathering it
	// runs every collector it holds, so give one with the eas_ series only
	// where it is cheaper (serve does).
	Gatherer    prometheus.Gatherer
	Interval    time.Duration // between samples; 0 = DefaultInterval
	Window      time.Duration // history kept; 0 = DefaultWindow
	MaxServices int           // services tracked at once; 0 = DefaultMaxServices
	Logger      *slog.Logger  // gather errors, services past MaxServices; nil discards
}

// Sampler is safe for concurrent use.
type Sampler struct {
	opt       Options
	maxPoints int

	sampleMu sync.Mutex // one Sample at a time: each builds on the last

	mu       sync.RWMutex
	services map[string]*track
	last     time.Time // the previous Sample; zero before the first
	lastErr  string    // the last gather error logged, to log each once
	refused  bool      // a service was refused for MaxServices (logged once)

	life   sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// track is one service: its last reading (the base of the next deltas) and
// its points, oldest first.
type track struct {
	prev     *reading // nil: count every series from zero (new, or recreated)
	points   []Point
	lastSeen time.Time
}

// reading is what one gather holds of one service.
type reading struct {
	requests map[seriesKey]float64
	duration *hist
	batch    *hist
	depth    float64
	inFlight float64
	gen      *genReading // nil: no generation series
}

// genReading is what one gather holds of a generative service.
type genReading struct {
	ttft, itl                         *hist
	prompt, output                    float64
	running, waiting, cache, capacity float64
}

// seriesKey is one eas_requests_total series of a service. Deltas are
// taken per series, not on the sum over versions: a version's series is
// dropped when it is two versions old, and a drop of the sum is no reset.
type seriesKey struct{ version, code string }

// hist is a cumulative histogram: counts at each finite upper bound.
type hist struct {
	count  uint64
	sum    float64
	bounds []float64
	cum    []uint64
}

// New makes a Sampler; nothing is read until Sample or Start.
func New(opt Options) *Sampler {
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.Window <= 0 {
		opt.Window = DefaultWindow
	}
	if opt.MaxServices <= 0 {
		opt.MaxServices = DefaultMaxServices
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	n := int((opt.Window + opt.Interval - 1) / opt.Interval)
	return &Sampler{opt: opt, maxPoints: max(n, 1), services: map[string]*track{}}
}

// Interval is the time between samples.
func (s *Sampler) Interval() time.Duration { return s.opt.Interval }

// Window is how long points are kept.
func (s *Sampler) Window() time.Duration { return s.opt.Window }

// Start samples now and then every Interval until ctx ends or Stop. The
// first sample only takes the base the next one counts from.
func (s *Sampler) Start(ctx context.Context) {
	s.life.Lock()
	defer s.life.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		t := time.NewTicker(s.opt.Interval)
		defer t.Stop()
		for {
			s.logErr(s.Sample(time.Now()))
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}(s.done)
}

// Stop ends Start's sampling and waits for it; the points stay readable.
func (s *Sampler) Stop() {
	s.life.Lock()
	cancel, done := s.cancel, s.done
	s.life.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// logErr logs a gather error once until it changes: a broken collector
// would otherwise log every Interval.
func (s *Sampler) logErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.mu.Lock()
	changed := msg != s.lastErr
	s.lastErr = msg
	s.mu.Unlock()
	if changed && err != nil {
		s.opt.Logger.Warn("metrics history: gathering the registry failed; points may miss series", "err", err)
	}
}

// Sample reads the gatherer and appends, for every service seen, the point
// of the interval since the previous Sample, ending at now. The first call
// appends nothing: counters gathered then count from before it. A Sample
// at or before the previous one changes nothing. A gather error is
// returned after what was gathered is used.
func (s *Sampler) Sample(now time.Time) error {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	mfs, gerr := s.opt.Gatherer.Gather()
	cur := readings(mfs)

	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.last.IsZero()
	elapsed := now.Sub(s.last).Seconds()
	if !first && elapsed <= 0 {
		return gerr // a clock gone back: the next Sample covers the interval
	}
	s.last = now
	for name, t := range s.services {
		if _, ok := cur[name]; !ok {
			// Gone (deleted): a service of the same name later has new
			// series, counted from zero. Dropped first, to make room.
			t.prev = nil
			if now.Sub(t.lastSeen) > s.opt.Window {
				delete(s.services, name)
			}
		}
	}
	names := make([]string, 0, len(cur))
	for name := range cur {
		names = append(names, name)
	}
	sort.Strings(names) // which services get in under MaxServices does not depend on map order
	for _, name := range names {
		r := cur[name]
		t := s.services[name]
		if t == nil {
			if len(s.services) >= s.opt.MaxServices {
				if !s.refused {
					s.refused = true
					s.opt.Logger.Warn("metrics history: too many services; the ones past the bound get no history", "bound", s.opt.MaxServices, "first_refused", name)
				}
				continue
			}
			t = &track{}
			s.services[name] = t
		}
		if !first {
			t.points = append(t.points, point(now, elapsed, t.prev, r))
			if len(t.points) > s.maxPoints {
				t.points = t.points[len(t.points)-s.maxPoints:]
			}
		}
		t.prev, t.lastSeen = r, now
	}
	cutoff := now.Add(-s.opt.Window).UnixMilli()
	for _, t := range s.services {
		i := 0
		for i < len(t.points) && t.points[i].T <= cutoff {
			i++
		}
		t.points = t.points[i:]
	}
	return gerr
}

// Points returns service's points later than since (unix ms; 0 = all),
// oldest first, and whether the service is tracked.
func (s *Sampler) Points(service string, since int64) ([]Point, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.services[service]
	if !ok {
		return nil, false
	}
	return after(t.points, since), true
}

// All returns every tracked service's points later than since.
func (s *Sampler) All(since int64) map[string][]Point {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string][]Point, len(s.services))
	for name, t := range s.services {
		out[name] = after(t.points, since)
	}
	return out
}

// after copies the points later than since. Points are never changed once
// appended, so their RPS maps are shared.
func after(pts []Point, since int64) []Point {
	i := sort.Search(len(pts), func(i int) bool { return pts[i].T > since })
	return append([]Point{}, pts[i:]...)
}

// point computes the interval from prev (nil: every series from zero) to r.
func point(now time.Time, elapsed float64, prev, r *reading) Point {
	p := Point{T: now.UnixMilli(), RPS: map[string]float64{}, QueueDepth: int(r.depth), InFlight: int(r.inFlight)}
	for k, v := range r.requests {
		d := v
		if prev != nil {
			if old, ok := prev.requests[k]; ok && v >= old {
				d = v - old
			} // else a new series or a reset (recreated): all of v is new
		}
		if d > 0 {
			p.RPS[k.code] += d
		}
	}
	for code, d := range p.RPS {
		p.RPS[code] = round(d / elapsed)
	}
	var prevDur, prevBatch *hist
	if prev != nil {
		prevDur, prevBatch = prev.duration, prev.batch
	}
	if d := delta(prevDur, r.duration); d != nil && d.count > 0 {
		p.P50Ms = ms(quantile(0.5, d))
		p.P99Ms = ms(quantile(0.99, d))
	}
	if d := delta(prevBatch, r.batch); d != nil && d.count > 0 {
		b := round(d.sum / float64(d.count))
		p.Batch = &b
	}
	if r.gen != nil {
		var pg *genReading
		if prev != nil {
			pg = prev.gen
		}
		p.Generation = generation(elapsed, pg, r.gen)
	}
	return p
}

// generation computes a generative service's interval from prev (nil:
// from zero) to g, as point does the request series.
func generation(elapsed float64, prev, g *genReading) *Generation {
	out := &Generation{Running: int(g.running), Waiting: int(g.waiting), CacheTokens: int(g.cache), CacheCapacity: int(g.capacity)}
	var prevTTFT, prevITL *hist
	prompt, output := g.prompt, g.output
	if prev != nil {
		prevTTFT, prevITL = prev.ttft, prev.itl
		prompt, output = grown(prev.prompt, g.prompt), grown(prev.output, g.output)
	}
	out.PromptTokensPerSec = round(prompt / elapsed)
	out.TokensPerSec = round(output / elapsed)
	if d := delta(prevTTFT, g.ttft); d != nil && d.count > 0 {
		out.TTFTP50Ms, out.TTFTP99Ms = ms(quantile(0.5, d)), ms(quantile(0.99, d))
	}
	if d := delta(prevITL, g.itl); d != nil && d.count > 0 {
		out.ITLP50Ms, out.ITLP99Ms = ms(quantile(0.5, d)), ms(quantile(0.99, d))
	}
	return out
}

// grown is a counter's increase from prev to cur; all of cur when it went
// down (a reset: the series was recreated).
func grown(prev, cur float64) float64 {
	if cur >= prev {
		return cur - prev
	}
	return cur
}

// delta is cur less prev, bucket by bucket; all of cur when prev is nil
// or cur is less somewhere (a reset: the series was recreated). The sum
// counts too: every observation here (seconds, batch sizes) is positive,
// so a smaller sum is a reset even where the counts came out even.
func delta(prev, cur *hist) *hist {
	if cur == nil {
		return nil
	}
	if prev == nil || cur.count < prev.count || cur.sum < prev.sum || len(prev.cum) != len(cur.cum) {
		return cur
	}
	d := &hist{count: cur.count - prev.count, sum: cur.sum - prev.sum, bounds: cur.bounds, cum: make([]uint64, len(cur.cum))}
	for i := range cur.cum {
		if cur.cum[i] < prev.cum[i] || cur.bounds[i] != prev.bounds[i] {
			return cur
		}
		d.cum[i] = cur.cum[i] - prev.cum[i]
	}
	return d
}

// quantile is Prometheus' histogram_quantile on h (bucketQuantile in
// promql/quantile.go): linear interpolation inside the bucket holding the
// rank, the first bucket starting at 0, the highest finite bound when the
// rank falls in +Inf. NaN when h is empty.
func quantile(q float64, h *hist) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	bounds, cum := h.bounds, h.cum
	if !math.IsInf(bounds[len(bounds)-1], 1) {
		bounds = append(append([]float64{}, bounds...), math.Inf(1))
		cum = append(append([]uint64{}, cum...), h.count)
	}
	if len(bounds) < 2 {
		return math.NaN()
	}
	// Monotonic, as Prometheus forces it.
	c := make([]float64, len(cum))
	for i, v := range cum {
		c[i] = float64(v)
		if i > 0 && c[i] < c[i-1] {
			c[i] = c[i-1]
		}
	}
	rank := q * c[len(c)-1]
	b := sort.Search(len(c)-1, func(i int) bool { return c[i] >= rank })
	if b == len(c)-1 {
		return bounds[len(bounds)-2]
	}
	if b == 0 && bounds[0] <= 0 {
		return bounds[0]
	}
	start, end, count := 0.0, bounds[b], c[b]
	if b > 0 {
		start = bounds[b-1]
		count -= c[b-1]
		rank -= c[b-1]
	}
	return start + (end-start)*(rank/count)
}

// ms turns seconds into rounded milliseconds; nil for NaN.
func ms(sec float64) *float64 {
	if math.IsNaN(sec) {
		return nil
	}
	v := round(sec * 1000)
	return &v
}

// round keeps three decimals: charts need no more, the JSON stays short.
func round(x float64) float64 { return math.Round(x*1000) / 1000 }

// readings extracts each service's series from a gather.
func readings(mfs []*dto.MetricFamily) map[string]*reading {
	out := map[string]*reading{}
	of := func(m *dto.Metric) (*reading, map[string]string) {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		svc, ok := labels["service"]
		if !ok {
			return nil, nil
		}
		r := out[svc]
		if r == nil {
			r = &reading{requests: map[seriesKey]float64{}}
			out[svc] = r
		}
		return r, labels
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case requestsName, durationName, batchName, depthName, inFlightName, stateName,
			ttftName, itlName, promptName, outputName, runningName, waitingName, cacheName, capacityName:
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			r, labels := of(m)
			if r == nil {
				continue
			}
			switch mf.GetName() {
			case requestsName:
				r.requests[seriesKey{labels["version"], labels["code"]}] += m.GetCounter().GetValue()
			case durationName:
				r.duration = histOf(m.GetHistogram())
			case batchName:
				// A service's own runs and those of its routed models
				// (a Triton repository's, labelled model) make its point.
				r.batch = r.batch.add(histOf(m.GetHistogram()))
			case depthName:
				r.depth = m.GetGauge().GetValue()
			case inFlightName:
				r.inFlight = m.GetGauge().GetValue()
			case ttftName, itlName, promptName, outputName, runningName, waitingName, cacheName, capacityName:
				readGeneration(r, mf.GetName(), m)
			}
		}
	}
	return out
}

// readGeneration puts one eas_generation_ series into r.
func readGeneration(r *reading, name string, m *dto.Metric) {
	if r.gen == nil {
		r.gen = &genReading{}
	}
	g := r.gen
	switch name {
	case ttftName:
		g.ttft = histOf(m.GetHistogram())
	case itlName:
		g.itl = histOf(m.GetHistogram())
	case promptName:
		g.prompt = m.GetCounter().GetValue()
	case outputName:
		g.output = m.GetCounter().GetValue()
	case runningName:
		g.running = m.GetGauge().GetValue()
	case waitingName:
		g.waiting = m.GetGauge().GetValue()
	case cacheName:
		g.cache = m.GetGauge().GetValue()
	case capacityName:
		g.capacity = m.GetGauge().GetValue()
	}
}

// add is h and o summed, bucket by bucket; either may be nil. Histograms
// of different buckets do not add up: the first is kept.
func (h *hist) add(o *hist) *hist {
	switch {
	case h == nil:
		return o
	case o == nil || !slices.Equal(h.bounds, o.bounds):
		return h
	}
	out := &hist{count: h.count + o.count, sum: h.sum + o.sum, bounds: h.bounds, cum: make([]uint64, len(h.cum))}
	for i := range h.cum {
		out.cum[i] = h.cum[i] + o.cum[i]
	}
	return out
}

func histOf(h *dto.Histogram) *hist {
	if h == nil {
		return nil
	}
	out := &hist{count: h.GetSampleCount(), sum: h.GetSampleSum()}
	for _, b := range h.GetBucket() {
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.cum = append(out.cum, b.GetCumulativeCount())
	}
	return out
}
