// Package metrics holds the Prometheus collectors of the data plane. One
// *Metrics is built in main with a registry passed in, and handed down; labels
// are bounded (service name and status code only).
package metrics

import (
	"strconv"
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
	queueDepth *prometheus.GaugeVec
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
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eas_queue_depth", Help: "Requests waiting for a worker, by service.",
		}, []string{"service"}),
	}
	reg.MustRegister(m.requests, m.duration, m.batchSize, m.queueWait, m.compute, m.queueDepth)
	return m
}

// Request records one answered request.
func (m *Metrics) Request(service string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(service, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(service).Observe(d.Seconds())
}

// Batch records one model run of size requests.
func (m *Metrics) Batch(service string, size int, compute time.Duration) {
	if m == nil {
		return
	}
	m.batchSize.WithLabelValues(service).Observe(float64(size))
	m.compute.WithLabelValues(service).Observe(compute.Seconds())
}

// QueueWait records how long one request waited before its run.
func (m *Metrics) QueueWait(service string, d time.Duration) {
	if m == nil {
		return
	}
	m.queueWait.WithLabelValues(service).Observe(d.Seconds())
}

// QueueDepth sets the current queue depth of a service.
func (m *Metrics) QueueDepth(service string, n int) {
	if m == nil {
		return
	}
	m.queueDepth.WithLabelValues(service).Set(float64(n))
}

// Forget drops a deleted service's series.
func (m *Metrics) Forget(service string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"service": service}
	m.requests.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.batchSize.DeletePartialMatch(l)
	m.queueWait.DeletePartialMatch(l)
	m.compute.DeletePartialMatch(l)
	m.queueDepth.DeletePartialMatch(l)
}
