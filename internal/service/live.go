package service

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

// Live is one loaded version of a service: the processor, the scheduler in
// front of it and the token that admits its requests. The data plane takes a
// Live with Service.Acquire and gives it back with Release; an update swaps
// the service's Live pointer atomically, so every request runs entirely on
// one version, and the old version is stopped only after the last request
// holding it has been released (that is what makes updates lose nothing).
//
// The exported fields are read-only.
type Live struct {
	Version   int
	Spec      *servicejson.Service
	Token     auth.Secret        // "" = open service
	Engine    *processors.Engine // the processor, adapted for the scheduler and the server
	Scheduler *scheduler.Scheduler
	// Sequences runs a generative processor's requests (processors.
	// Generative); nil for every other processor. It belongs to the loaded
	// model, so versions sharing a model share it.
	Sequences *scheduler.Sequences
	Started   time.Time // when this version began to serve

	model     *model
	refs      atomic.Int64 // requests holding this Live
	consumers *consumers   // an asynchronous version's instances; nil for a synchronous one

	// heldWaits counts the times retire found requests still holding this
	// Live and waited: the one sign, for tests, that a drain is waiting for
	// them rather than not yet started.
	heldWaits atomic.Int64
}

// Instances is the number of replicas this version runs
// (metadata.instance).
func (l *Live) Instances() int { return l.Spec.Metadata.Instance }

// Release gives back a Live taken with Service.Acquire.
func (l *Live) Release() { l.refs.Add(-1) }

// model is a loaded processor shared by the Lives that use it: a change of
// metadata.instance alone makes a new Live (a scheduler with more or fewer
// workers) over the same model, without loading it again. The last Live to
// be retired closes it.
type model struct {
	engine    *processors.Engine
	fetched   *fetchList           // local paths from the model cache, released on close
	sequences *scheduler.Sequences // a generative processor's sequence scheduler; nil otherwise
	users     atomic.Int32
}

// Acquire returns the serving version and holds it until Release; ok is
// false when nothing serves (creating, failed, stopped).
func (s *Service) Acquire() (l *Live, ok bool) {
	for {
		l = s.live.Load()
		if l == nil {
			return nil, false
		}
		l.refs.Add(1)
		// A swap between the load and the increment is seen here: the
		// retiring side waits for refs to reach zero only after its swap,
		// so a Live still current after the increment stays usable.
		if s.live.Load() == l {
			return l, true
		}
		l.refs.Add(-1)
	}
}

// newLive builds a Live over m with a scheduler sized for spec.
func (mgr *Manager) newLive(version int, spec *servicejson.Service, token string, m *model, log *slog.Logger) *Live {
	m.users.Add(1)
	return &Live{
		Version:   version,
		Spec:      spec,
		Token:     auth.Secret(token),
		Engine:    m.engine,
		Scheduler: mgr.newScheduler(spec, m.engine, log),
		Sequences: m.sequences,
		Started:   time.Now().UTC(),
		model:     m,
	}
}

// retire stops a Live that no longer receives new requests: it waits for the
// requests that hold it (at most the termination grace period), drains its
// scheduler and closes the model when no other Live uses it.
func (mgr *Manager) retire(ctx context.Context, l *Live, log *slog.Logger) {
	if l.consumers != nil {
		l.consumers.stop() // no more requests from the input queue
	}
	grace := l.Spec.Metadata.TerminationGracePeriod
	if grace <= 0 {
		grace = servicejson.DefaultTerminationGracePeriod
	}
	ctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for l.refs.Load() > 0 {
		l.heldWaits.Add(1)
		select {
		case <-ctx.Done():
			log.Warn("requests still running after the grace period; stopping the version anyway", "version", l.Version, "requests", l.refs.Load(), "grace", grace.String())
		case <-tick.C:
			continue
		}
		break
	}
	if err := l.Scheduler.Stop(ctx); err != nil {
		log.Warn("version drain cut short", "version", l.Version, "err", err)
	}
	if l.model.users.Add(-1) == 0 {
		if q := l.model.sequences; q != nil {
			if err := q.Stop(ctx); err != nil {
				log.Warn("generation drain cut short", "version", l.Version, "err", err)
			}
		}
		closeProcessor(l.model.engine.Processor(), log)
		l.model.fetched.release()
	}
}

func closeProcessor(p processors.Processor, log *slog.Logger) {
	if c, ok := p.(processors.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("closing processor", "err", err)
		}
	}
}
