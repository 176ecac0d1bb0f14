// Package metrics holds the Prometheus collectors of the data plane and of
// the service lifecycle. One *Metrics is built in main with a registry
// passed in, and handed down. Labels are bounded: service name, status code,
// the service version that answered (requests only: at most the current and
// the previous version of a service keep series, see ForgetVersions), the
// service state (five values) and a load failure's stage (a few words).
// Histograms carry the service alone; eas_service_info tells which version
// and processor a service runs, for joins. The scheduler histograms
// (eas_batch_size, eas_queue_wait_seconds, eas_compute_seconds) have a
// second kind of series for the models of a routing processor (a Triton
// repository): service and model, beside the service's own series, which
// keep the service label alone.
package metrics

import (
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is safe for concurrent use.
type Metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	batchSize *prometheus.HistogramVec
	queueWait *prometheus.HistogramVec
	compute   *prometheus.HistogramVec
	// models holds the scheduler histograms of routed models, labelled
	// service and model.
	models     *modelCollector
	queueDepth *depthCollector
	// asyncQueues reports the queues of asynchronous services.
	asyncQueues *queueCollector
	// unknownFields counts answers whose records carried keys the model
	// does not read (model_config unknown_fields "warn").
	unknownFields *prometheus.CounterVec
	inFlight      *prometheus.GaugeVec
	serviceInfo   *prometheus.GaugeVec
	serviceState  *prometheus.GaugeVec
	loadSeconds   *prometheus.HistogramVec
	loadFailures  *prometheus.CounterVec
	buildInfo     *prometheus.GaugeVec
	generation    *generation
	// series caches each service's children of the vectors above, so
	// that the hot path does not hash label values for every request.
	series sync.Map // service name -> *serviceSeries
}

// serviceSeries is one service's series.
type serviceSeries struct {
	ok                                  atomic.Pointer[okSeries] // eas_requests_total{code="200"} of the last version seen
	duration, queueWait, batch, compute prometheus.Observer
	inFlight                            prometheus.Gauge
}

// okSeries is the 200 counter of one version of a service.
type okSeries struct {
	version string
	c       prometheus.Counter
}

// okOf returns the 200 counter of version; the version that serves is
// cached, so the hot path hashes no label values.
func (m *Metrics) okOf(s *serviceSeries, service, version string) prometheus.Counter {
	if p := s.ok.Load(); p != nil && p.version == version {
		return p.c
	}
	p := &okSeries{version: version, c: m.requests.WithLabelValues(service, version, "200")}
	s.ok.Store(p)
	return p.c
}

func (m *Metrics) of(service string) *serviceSeries {
	if s, ok := m.series.Load(service); ok {
		return s.(*serviceSeries)
	}
	s := &serviceSeries{
		duration:  m.duration.WithLabelValues(service),
		queueWait: m.queueWait.WithLabelValues(service),
		batch:     m.batchSize.WithLabelValues(service),
		compute:   m.compute.WithLabelValues(service),
		inFlight:  m.inFlight.WithLabelValues(service),
	}
	got, _ := m.series.LoadOrStore(service, s)
	return got.(*serviceSeries)
}

// modelCollector reports the scheduler histograms of routed models in the
// same families as the services' own (eas_batch_size, ...), labelled
// service and model. It is an unchecked collector (it describes nothing):
// a registry refuses two descriptors of one name with different labels,
// while a family may hold series of different label sets, so the services'
// series keep the labels they always had.
type modelCollector struct {
	batch, queueWait, compute *prometheus.HistogramVec
	series                    sync.Map // modelKey -> *modelSeries
}

type modelKey struct{ service, model string }

// modelSeries is one routed model's series.
type modelSeries struct{ batch, queueWait, compute prometheus.Observer }

func (c *modelCollector) Describe(chan<- *prometheus.Desc) {}

func (c *modelCollector) Collect(ch chan<- prometheus.Metric) {
	c.batch.Collect(ch)
	c.queueWait.Collect(ch)
	c.compute.Collect(ch)
}

func (c *modelCollector) of(service, model string) *modelSeries {
	k := modelKey{service, model}
	if s, ok := c.series.Load(k); ok {
		return s.(*modelSeries)
	}
	s := &modelSeries{
		batch:     c.batch.WithLabelValues(service, model),
		queueWait: c.queueWait.WithLabelValues(service, model),
		compute:   c.compute.WithLabelValues(service, model),
	}
	got, _ := c.series.LoadOrStore(k, s)
	return got.(*modelSeries)
}

func (c *modelCollector) forget(service string) {
	c.series.Range(func(k, _ any) bool {
		if k.(modelKey).service == service {
			c.series.Delete(k)
		}
		return true
	})
	l := prometheus.Labels{"service": service}
	c.batch.DeletePartialMatch(l)
	c.queueWait.DeletePartialMatch(l)
	c.compute.DeletePartialMatch(l)
}

// depthCollector reads every service's queue depth when scraped, so the
// hot path never updates a gauge.
type depthCollector struct {
	desc *prometheus.Desc
	mu   sync.RWMutex
	fn   func() map[string]int
}

func (d *depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *depthCollector) Collect(ch chan<- prometheus.Metric) {
	d.mu.RLock()
	fn := d.fn
	d.mu.RUnlock()
	if fn == nil {
		return
	}
	for svc, n := range fn() {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, float64(n), svc)
	}
}

// QueueStat is one queue of an asynchronous service at scrape time.
type QueueStat struct {
	Service, Queue string // queue: "input" or "sink"
	Length         int
	InFlight       int
	Consumers      int
	OldestAge      time.Duration
	Redeliveries   int64
	DeadLettered   int64
}

// queueCollector reports the queues of asynchronous services at scrape
// time.
type queueCollector struct {
	length, inFlight, consumers, oldest, redeliveries, deadLettered *prometheus.Desc
	mu                                                              sync.RWMutex
	fn                                                              func() []QueueStat
}

func newQueueCollector() *queueCollector {
	l := []string{"service", "queue"}
	return &queueCollector{
		length:       prometheus.NewDesc("eas_async_queue_length", "Entries in an asynchronous service's queue (input or sink).", l, nil),
		inFlight:     prometheus.NewDesc("eas_async_queue_in_flight", "Entries delivered to consumers and not yet committed.", l, nil),
		consumers:    prometheus.NewDesc("eas_async_queue_consumers", "Consumers watching the queue (the service's instances on input).", l, nil),
		oldest:       prometheus.NewDesc("eas_async_queue_oldest_age_seconds", "Age of the oldest entry in the queue; 0 when empty.", l, nil),
		redeliveries: prometheus.NewDesc("eas_async_queue_redeliveries_total", "Entries given back to the queue (a consumer gone, a negative acknowledgement) since the server started.", l, nil),
		deadLettered: prometheus.NewDesc("eas_async_queue_dead_lettered_total", "Entries given back past queue.max_delivery since the server started: requests answered 500 into the sink (input), answers deleted (sink).", l, nil),
	}
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{q.length, q.inFlight, q.consumers, q.oldest, q.redeliveries, q.deadLettered} {
		ch <- d
	}
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	q.mu.RLock()
	fn := q.fn
	q.mu.RUnlock()
	if fn == nil {
		return
	}
	for _, s := range fn() {
		ch <- prometheus.MustNewConstMetric(q.length, prometheus.GaugeValue, float64(s.Length), s.Service, s.Queue)
		ch <- prometheus.MustNewConstMetric(q.inFlight, prometheus.GaugeValue, float64(s.InFlight), s.Service, s.Queue)
		ch <- prometheus.MustNewConstMetric(q.consumers, prometheus.GaugeValue, float64(s.Consumers), s.Service, s.Queue)
		ch <- prometheus.MustNewConstMetric(q.oldest, prometheus.GaugeValue, s.OldestAge.Seconds(), s.Service, s.Queue)
		ch <- prometheus.MustNewConstMetric(q.redeliveries, prometheus.CounterValue, float64(s.Redeliveries), s.Service, s.Queue)
		ch <- prometheus.MustNewConstMetric(q.deadLettered, prometheus.CounterValue, float64(s.DeadLettered), s.Service, s.Queue)
	}
}

// SetAsyncQueuesFunc sets the function that reports the asynchronous
// services' queues at scrape time.
func (m *Metrics) SetAsyncQueuesFunc(fn func() []QueueStat) {
	if m == nil {
		return
	}
	m.asyncQueues.mu.Lock()
	m.asyncQueues.fn = fn
	m.asyncQueues.mu.Unlock()
}

// Names, help and buckets of the scheduler histograms, shared by the
// services' series and the routed models'.
var (
	latency      = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	batchOpts    = prometheus.HistogramOpts{Name: "eas_batch_size", Help: "Requests per model run, by service (and model, for the models of a routing processor).", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}}
	queueOpts    = prometheus.HistogramOpts{Name: "eas_queue_wait_seconds", Help: "Time from arrival to the start of the model run, by service (and model, for the models of a routing processor).", Buckets: latency}
	computeOpts  = prometheus.HistogramOpts{Name: "eas_compute_seconds", Help: "Duration of one model run (a whole batch), by service (and model, for the models of a routing processor).", Buckets: latency}
	serviceLabel = []string{"service"}
	modelLabels  = []string{"service", "model"}
)

// New registers the collectors on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eas_requests_total", Help: "Data-plane requests by service, the service version that answered (empty when none did: unknown token, nothing serving) and HTTP status code.",
		}, []string{"service", "version", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eas_request_duration_seconds", Help: "Time from arrival to response, by service.", Buckets: latency,
		}, []string{"service"}),
		batchSize: prometheus.NewHistogramVec(batchOpts, serviceLabel),
		queueWait: prometheus.NewHistogramVec(queueOpts, serviceLabel),
		compute:   prometheus.NewHistogramVec(computeOpts, serviceLabel),
		models: &modelCollector{
			batch:     prometheus.NewHistogramVec(batchOpts, modelLabels),
			queueWait: prometheus.NewHistogramVec(queueOpts, modelLabels),
			compute:   prometheus.NewHistogramVec(computeOpts, modelLabels),
		},
		asyncQueues: newQueueCollector(),
		queueDepth:  &depthCollector{desc: prometheus.NewDesc("eas_queue_depth", "Requests waiting for a worker, by service.", []string{"service"}, nil)},
		unknownFields: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eas_unknown_fields_total", Help: "Answered requests whose records carried keys that are not model features, by service.",
		}, []string{"service"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eas_requests_in_flight", Help: "Data-plane requests admitted and not yet answered, by service.",
		}, []string{"service"}),
		serviceInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eas_service_info", Help: "1 for each service's current version and processor (join on service to label other series with them).",
		}, []string{"service", "version", "processor"}),
		serviceState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eas_service_state", Help: "1 for the service's current state, 0 for the others (Creating, Running, Updating, Failed, Stopped).",
		}, []string{"service", "state"}),
		loadSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eas_model_load_seconds", Help: "Time to load a model version that went on to serve (configure, fetch, load, warm-up), by service.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"service"}),
		loadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eas_model_load_failures_total", Help: "Model loads that failed, by service and stage (config, fetch, load, warmup, canceled, state).",
		}, []string{"service", "reason"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eas_build_info", Help: "1, labelled with the server's version, the Go version that built it and its VCS revision.",
		}, []string{"version", "goversion", "revision"}),
	}
	m.generation = newGeneration()
	reg.MustRegister(m.generation.collectors()...)
	reg.MustRegister(m.asyncQueues, m.models)
	reg.MustRegister(m.requests, m.duration, m.batchSize, m.queueWait, m.compute, m.queueDepth, m.unknownFields,
		m.inFlight, m.serviceInfo, m.serviceState, m.loadSeconds, m.loadFailures, m.buildInfo)
	return m
}

// BuildInfo sets eas_build_info for the server's version; the Go version
// and revision come from the binary's build information.
func (m *Metrics) BuildInfo(version string) {
	if m == nil {
		return
	}
	goVersion, revision := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, goVersion, revision).Set(1)
}

// Request records one answered request. version is the service version
// that answered it, "" when none did.
func (m *Metrics) Request(service, version string, code int, d time.Duration) {
	if m == nil {
		return
	}
	s := m.of(service)
	if code == 200 {
		m.okOf(s, service, version).Inc()
	} else {
		m.requests.WithLabelValues(service, version, strconv.Itoa(code)).Inc()
	}
	s.duration.Observe(d.Seconds())
}

// Flight is one admitted request of a service, counted in
// eas_requests_in_flight until Done. The zero Flight counts nothing.
type Flight struct{ g prometheus.Gauge }

// Start counts one request of service in flight; call Done on the result
// when it is answered.
func (m *Metrics) Start(service string) Flight {
	if m == nil {
		return Flight{}
	}
	g := m.of(service).inFlight
	g.Inc()
	return Flight{g}
}

// Done ends a request counted by Start.
func (f Flight) Done() {
	if f.g != nil {
		f.g.Dec()
	}
}

// ForgetVersions drops the request series of the given versions of
// service: the lifecycle keeps those of the current and the previous
// version only, so a service updated many times does not pile up series.
func (m *Metrics) ForgetVersions(service string, versions ...string) {
	if m == nil {
		return
	}
	for _, v := range versions {
		m.requests.DeletePartialMatch(prometheus.Labels{"service": service, "version": v})
	}
	if ss, ok := m.series.Load(service); ok {
		ss.(*serviceSeries).ok.Store(nil) // it may hold a deleted child
	}
}

// ServiceInfo sets eas_service_info for service's current version and
// processor, replacing the previous one.
func (m *Metrics) ServiceInfo(service, version, processor string) {
	if m == nil {
		return
	}
	m.serviceInfo.DeletePartialMatch(prometheus.Labels{"service": service})
	m.serviceInfo.WithLabelValues(service, version, processor).Set(1)
}

// ServiceState sets eas_service_state: 1 for state, 0 for the other states
// of all.
func (m *Metrics) ServiceState(service, state string, all []string) {
	if m == nil {
		return
	}
	for _, st := range all {
		v := 0.0
		if st == state {
			v = 1
		}
		m.serviceState.WithLabelValues(service, st).Set(v)
	}
}

// ModelLoaded records the load of a model version that went on to serve.
func (m *Metrics) ModelLoaded(service string, d time.Duration) {
	if m == nil {
		return
	}
	m.loadSeconds.WithLabelValues(service).Observe(d.Seconds())
}

// ModelLoadFailed records a failed load; reason is a bounded word (the
// stage that failed).
func (m *Metrics) ModelLoadFailed(service, reason string) {
	if m == nil {
		return
	}
	m.loadFailures.WithLabelValues(service, reason).Inc()
}

// Batch records one model run of size requests.
func (m *Metrics) Batch(service string, size int, compute time.Duration) {
	if m == nil {
		return
	}
	s := m.of(service)
	s.batch.Observe(float64(size))
	s.compute.Observe(compute.Seconds())
}

// QueueWait records how long one request waited before its run.
func (m *Metrics) QueueWait(service string, d time.Duration) {
	if m == nil {
		return
	}
	m.of(service).queueWait.Observe(d.Seconds())
}

// ModelBatch records one run of size requests of model, a routed model of
// service (a model of a Triton repository).
func (m *Metrics) ModelBatch(service, model string, size int, compute time.Duration) {
	if m == nil {
		return
	}
	s := m.models.of(service, model)
	s.batch.Observe(float64(size))
	s.compute.Observe(compute.Seconds())
}

// ModelQueueWait records how long one request of a routed model waited
// before its run.
func (m *Metrics) ModelQueueWait(service, model string, d time.Duration) {
	if m == nil {
		return
	}
	m.models.of(service, model).queueWait.Observe(d.Seconds())
}

// UnknownFields records one answer whose records carried keys the model
// does not read: a client sending misspelled features shows up here before
// anyone reads its headers.
func (m *Metrics) UnknownFields(service string) {
	if m == nil {
		return
	}
	m.unknownFields.WithLabelValues(service).Inc()
}

// SetQueueDepthFunc sets the function that reports each service's queue
// depth at scrape time.
func (m *Metrics) SetQueueDepthFunc(fn func() map[string]int) {
	if m == nil {
		return
	}
	m.queueDepth.mu.Lock()
	m.queueDepth.fn = fn
	m.queueDepth.mu.Unlock()
}

// Forget drops a deleted service's series.
func (m *Metrics) Forget(service string) {
	if m == nil {
		return
	}
	m.series.Delete(service)
	l := prometheus.Labels{"service": service}
	m.requests.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.batchSize.DeletePartialMatch(l)
	m.queueWait.DeletePartialMatch(l)
	m.compute.DeletePartialMatch(l)
	m.models.forget(service)
	m.unknownFields.DeletePartialMatch(l)
	m.inFlight.DeletePartialMatch(l)
	m.serviceInfo.DeletePartialMatch(l)
	m.serviceState.DeletePartialMatch(l)
	m.loadSeconds.DeletePartialMatch(l)
	m.loadFailures.DeletePartialMatch(l)
	m.generation.forget(l)
}
