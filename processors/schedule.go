package processors

import (
	"log/slog"
	"time"

	"github.com/eas-server/eas-server/internal/scheduler"
)

// Schedulers builds the schedulers of a ModelRouter's models (the models of
// a Triton repository), so that they come from the same construction as
// every service's: the service's metadata.rpc limits (RouteConfig combines
// them with the model's own configuration) and the service's eas_* metrics,
// labelled with the model. The loader (package service) sets
// Spec.Schedulers; a processor never sizes or observes a scheduler itself.
type Schedulers interface {
	// NewScheduler builds the scheduler of one version of a routed model.
	// obs receives the model's measurements besides the service's metrics
	// (Triton's statistics); its fields may be nil. The caller stops the
	// scheduler when the version unloads.
	NewScheduler(m ModelSchedule, run RunFunc, key KeyFunc, obs SchedulerObserver) *Scheduler
}

// ModelSchedule is what a routed model's own configuration (config.pbtxt)
// says about its scheduling. A zero field says nothing: the service's
// metadata.rpc decides.
type ModelSchedule struct {
	Model, Version string
	// Instances is how many runs of the model may be in flight at once
	// (instance_group counts); 0 = unset.
	Instances int
	// MaxBatchSize is how many requests one run may hold (max_batch_size);
	// 0 = the model does not batch at all.
	MaxBatchSize int
	// DynamicBatching is set when the model asks to batch requests
	// (dynamic_batching); MaxQueueDelay and PreferredBatchSizes are its
	// settings.
	DynamicBatching     bool
	MaxQueueDelay       time.Duration
	PreferredBatchSizes []int
	// QueueSize bounds the requests waiting for the model
	// (default_queue_policy.max_queue_size); 0 = unset.
	QueueSize int
	// Timeout is each request's deadline from arrival
	// (default_queue_policy.default_timeout_microseconds); 0 = unset.
	Timeout time.Duration
	Logger  *slog.Logger // nil = the service's
}

// RouteConfig combines a service's scheduler configuration (its
// metadata.rpc limits, already multiplied by metadata.instance) with what a
// routed model's configuration asks for. The model's configuration speaks
// first for the model; the service's fills what it leaves out:
//
//   - Workers: the model's instance count, else the service's worker_threads.
//   - QueueSize: the model's max_queue_size, else the service's
//     max_queue_size (full: 450).
//   - RateLimit: the service's rate_limit, for each model (429).
//   - Timeout: the service's keepalive, or the model's default timeout
//     when that is shorter.
//   - Batching: a model with max_batch_size 0 never batches. A model with
//     dynamic_batching batches with its own max_queue_delay and preferred
//     sizes; one without batches only when the service sets rpc.batching,
//     with the service's max_batch_timeout and preferred_batch_sizes.
//     Either way a batch holds at most the model's max_batch_size
//     requests, and at most rpc.max_batch_size when rpc.batching is on.
func RouteConfig(svc SchedulerConfig, m ModelSchedule) SchedulerConfig {
	c := scheduler.Config{
		Workers:   svc.Workers,
		QueueSize: svc.QueueSize,
		Timeout:   svc.Timeout,
		RateLimit: svc.RateLimit,
	}
	if m.Instances > 0 {
		c.Workers = m.Instances
	}
	if m.QueueSize > 0 {
		c.QueueSize = m.QueueSize
	}
	if m.Timeout > 0 && (c.Timeout <= 0 || m.Timeout < c.Timeout) {
		c.Timeout = m.Timeout
	}
	if m.MaxBatchSize <= 0 || !(m.DynamicBatching || svc.Batching) {
		return c
	}
	c.Batching = true
	c.MaxBatchSize = m.MaxBatchSize
	if svc.Batching && svc.MaxBatchSize > 0 {
		c.MaxBatchSize = min(c.MaxBatchSize, svc.MaxBatchSize)
	}
	preferred := svc.PreferredBatchSizes
	if m.DynamicBatching {
		c.MaxBatchTimeout, preferred = m.MaxQueueDelay, m.PreferredBatchSizes
	} else {
		c.MaxBatchTimeout = svc.MaxBatchTimeout
	}
	for _, p := range preferred {
		if p > 0 && p <= c.MaxBatchSize {
			c.PreferredBatchSizes = append(c.PreferredBatchSizes, p)
		}
	}
	return c
}
