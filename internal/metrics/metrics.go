// Package metrics holds the Prometheus collectors of the data plane. One
// *Metrics is built in main with a registry passed in, and handed down; labels
// are bounded (service name and status code only).
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is safe for concurrent use.
type Metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	batchSize  *prometheus.HistogramVec
	queueWait  *prometheus.HistogramVec
	compute    *prometheus.HistogramVec
	queueDepth *depthCollector
	// unknownFields counts answers whose records carried keys the model
	// does not read (model_config unknown_fields "warn").
	unknownFields *prometheus.CounterVec
	// series caches each service's children of the vectors above, so
	// that the hot path does not hash label values for every request.
	series sync.Map // service name -> *serviceSeries
}

// serviceSeries is one service's series.
type serviceSeries struct {
	ok                                  prometheus.Counter // eas_requests_total{code="200"}
	duration, queueWait, batch, compute prometheus.Observer
}

func (m *Metrics) of(service string) *serviceSeries {
	if s, ok := m.series.Load(service); ok {
		return s.(*serviceSeries)
	}
	s := &serviceSeries{
		ok:        m.requests.WithLabelValues(service, "200"),
		duration:  m.duration.WithLabelValues(service),
		queueWait: m.queueWait.WithLabelValues(service),
		batch:     m.batchSize.WithLabelValues(service),
		compute:   m.compute.WithLabelValues(service),
	}
	got, _ := m.series.LoadOrStore(service, s)
	return got.(*serviceSeries)
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

// New registers the collectors on reg.
func New(reg prometheus.Registerer) *Metrics {
	latency := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eas_requests_total", Help: "Data-plane requests by service and HTTP status code.",
		}, []string{"service", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eas_request_duration_seconds", Help: "Time from arrival to response, by service.", Buckets: latency,
		}, []string{"service"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eas_batch_size", Help: "Requests per model run, by service.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}, []string{"service"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eas_queue_wait_seconds", Help: "Time from arrival to the start of the model run, by service.", Buckets: latency,
		}, []string{"service"}),
		compute: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eas_compute_seconds", Help: "Duration of one model run (a whole batch), by service.", Buckets: latency,
		}, []string{"service"}),
		queueDepth: &depthCollector{desc: prometheus.NewDesc("eas_queue_depth", "Requests waiting for a worker, by service.", []string{"service"}, nil)},
		unknownFields: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eas_unknown_fields_total", Help: "Answered requests whose records carried keys that are not model features, by service.",
		}, []string{"service"}),
	}
	reg.MustRegister(m.requests, m.duration, m.batchSize, m.queueWait, m.compute, m.queueDepth, m.unknownFields)
	return m
}

// Request records one answered request.
func (m *Metrics) Request(service string, code int, d time.Duration) {
	if m == nil {
		return
	}
	s := m.of(service)
	if code == 200 {
		s.ok.Inc()
	} else {
		m.requests.WithLabelValues(service, strconv.Itoa(code)).Inc()
	}
	s.duration.Observe(d.Seconds())
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
	m.unknownFields.DeletePartialMatch(l)
}
