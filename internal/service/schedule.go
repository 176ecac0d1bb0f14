package service

import (
	"log/slog"
	"time"

	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

// This file is the one place where schedulers are built: a service
// version's own (newScheduler) and those of the models of a routing
// processor (a Triton repository), which the processor asks for through
// processors.Spec.Schedulers. Both take the service's metadata.rpc limits
// and report to the service's eas_* metrics.

// schedulerConfig sizes a scheduler for all of the service's instances:
// metadata.instance replicas in this process behave like one replica with
// instance times the workers, queue and rate limit of metadata.rpc.
func schedulerConfig(spec *servicejson.Service) scheduler.Config {
	rpc := spec.Metadata.RPC
	n := max(spec.Metadata.Instance, 1)
	return scheduler.Config{
		Workers:         rpc.WorkerThreads * n,
		QueueSize:       rpc.MaxQueueSize * n,
		Timeout:         rpc.Keepalive,
		RateLimit:       float64(rpc.RateLimit * n),
		Batching:        rpc.Batching,
		MaxBatchSize:    rpc.MaxBatchSize,
		MaxBatchTimeout: rpc.MaxBatchTimeout,
		// The batch key decides who may share a run; preferred sizes shape it.
		PreferredBatchSizes: rpc.PreferredBatchSizes,
	}
}

// observer reports a scheduler's runs and waits to the metrics: the
// service's own series when model is "", else the routed model's.
func (m *Manager) observer(service, model string) scheduler.Observer {
	mt := m.opt.Metrics
	if model == "" {
		return scheduler.Observer{
			Batch:     func(size int, d time.Duration) { mt.Batch(service, size, d) },
			QueueWait: func(d time.Duration) { mt.QueueWait(service, d) },
		}
	}
	return scheduler.Observer{
		Batch:     func(size int, d time.Duration) { mt.ModelBatch(service, model, size, d) },
		QueueWait: func(d time.Duration) { mt.ModelQueueWait(service, model, d) },
	}
}

// newScheduler builds a service version's scheduler.
// A processor whose model says how it batches (processors.BatchSizer)
// batches so while metadata.rpc.batching is off; rpc.batching on takes
// rpc's max_batch_size and max_batch_timeout.
func (m *Manager) newScheduler(spec *servicejson.Service, e *processors.Engine, log *slog.Logger) *scheduler.Scheduler {
	cfg := schedulerConfig(spec)
	if bs, ok := e.Processor().(processors.BatchSizer); ok && !cfg.Batching {
		if n, wait, ok := bs.BatchSize(); ok && n > 1 {
			cfg.Batching, cfg.MaxBatchSize, cfg.MaxBatchTimeout, cfg.PreferredBatchSizes = true, n, wait, nil
		}
	}
	return scheduler.New(cfg, e.Run, scheduler.KeyFunc(e.BatchKey()), m.observer(spec.Name, ""), log)
}

// modelSchedulers is processors.Schedulers for the models of one loaded
// version of a service. The limits are those of the version it loaded
// with: a change of metadata.instance alone (scale) keeps the model and so
// its models' schedulers.
type modelSchedulers struct {
	mgr     *Manager
	service string
	cfg     scheduler.Config
	log     *slog.Logger
}

func (m *Manager) modelSchedulers(spec *servicejson.Service, log *slog.Logger) processors.Schedulers {
	return &modelSchedulers{mgr: m, service: spec.Name, cfg: schedulerConfig(spec), log: log}
}

// NewScheduler builds a routed model's scheduler: processors.RouteConfig
// over the service's limits, observed by the service's metrics under the
// model's name and by obs.
func (s *modelSchedulers) NewScheduler(ms processors.ModelSchedule, run scheduler.RunFunc, key scheduler.KeyFunc, obs scheduler.Observer) *scheduler.Scheduler {
	log := ms.Logger
	if log == nil {
		log = s.log.With("model", ms.Model, "model_version", ms.Version)
	}
	return scheduler.New(processors.RouteConfig(s.cfg, ms), run, key, both(s.mgr.observer(s.service, ms.Model), obs), log)
}

// both is an observer that calls a, then b.
func both(a, b scheduler.Observer) scheduler.Observer {
	return scheduler.Observer{
		Batch: func(size int, d time.Duration) {
			a.Batch(size, d)
			if b.Batch != nil {
				b.Batch(size, d)
			}
		},
		QueueWait: func(d time.Duration) {
			a.QueueWait(d)
			if b.QueueWait != nil {
				b.QueueWait(d)
			}
		},
	}
}

var _ processors.Schedulers = (*modelSchedulers)(nil)

// newSequences starts the sequence scheduler of a generative processor
// (nil for the others): model_config's limits (Generator.Limits) with
// metadata.rpc's queue and rate limit for all instances, and rpc.keepalive
// as the whole request's deadline only when service.json sets it.
func (m *Manager) newSequences(spec *servicejson.Service, e *processors.Engine, log *slog.Logger) *scheduler.Sequences {
	g, ok := e.Processor().(processors.Generative)
	if !ok {
		return nil
	}
	gen := g.Generator()
	cfg, rpc := gen.Limits, spec.Metadata.RPC
	n := max(spec.Metadata.Instance, 1)
	cfg.MaxWaiting = rpc.MaxQueueSize * n
	cfg.RateLimit = float64(rpc.RateLimit * n)
	if rpc.KeepaliveSet {
		cfg.Timeout = rpc.Keepalive
	}
	var obs scheduler.SeqObserver
	if gs := m.opt.Metrics.Generation(spec.Name); gs != nil {
		obs = scheduler.SeqObserver{Step: gs.Step, FirstToken: gs.FirstToken, InterToken: gs.InterToken, Tokens: gs.Tokens, State: gs.State}
	}
	return scheduler.NewSequences(cfg, gen, obs, log)
}
