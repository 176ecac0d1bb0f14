package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/servicejson"
)

// The control-plane operations. Each takes the service's operation lock
// without waiting (a second operation gets ErrBusy), does its quick part at
// once and returns a snapshot, and runs a load in the background: the
// caller polls the status (Creating/Updating -> Running or Failed).

// lookup returns the service called name or ErrNotFound.
func (m *Manager) lookup(name string) (*Service, error) {
	s, ok := m.Get(name)
	if !ok {
		return nil, fmt.Errorf("service %q: %w", name, ErrNotFound)
	}
	return s, nil
}

// enter reports whether the service may still be operated on and marks it
// busy; the caller holds its operation lock.
func (m *Manager) enter(s *Service) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = !s.deleted
	return !s.deleted
}

// leave ends an operation.
func (m *Manager) leave(s *Service) {
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
	s.op.Unlock()
}

// begin takes s's operation lock. While another operation is in progress
// it fails with ErrBusy at once; when that operation has already published
// its outcome, begin waits for it to let go.
func (m *Manager) begin(s *Service) error {
	if !s.op.TryLock() {
		s.mu.Lock()
		busy, st, msg := s.busy, s.rec.Status, s.rec.Message
		s.mu.Unlock()
		if busy {
			return fmt.Errorf("service %q is %s (%s): %w; wait until it is Running, Failed or Stopped and retry", s.Name, st, msg, ErrBusy)
		}
		s.op.Lock()
	}
	if !m.enter(s) {
		s.op.Unlock()
		return fmt.Errorf("service %q: %w", s.Name, ErrNotFound)
	}
	return nil
}

// async runs fn in the background; it releases s's operation lock, which
// the caller holds, when fn returns. Delete cancels fn's context.
func (m *Manager) async(s *Service, fn func(ctx context.Context)) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.leave(s)
		return ErrShuttingDown
	}
	m.wg.Add(1)
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(m.ctx)
	s.mu.Lock()
	s.cancelOp = cancel
	s.mu.Unlock()
	go func() {
		defer m.wg.Done()
		fn(ctx)
		s.mu.Lock()
		s.cancelOp = nil
		s.mu.Unlock()
		cancel()
		m.leave(s)
	}()
	return nil
}

// markLoading records that version v is about to load, on disk before the
// load starts: a failed write fails the operation, so nothing loads that the
// state dir does not know about.
func (m *Manager) markLoading(s *Service, v int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = v
	if s.live.Load() != nil {
		s.setStatusLocked(Updating, fmt.Sprintf("loading version %d; version %d serves meanwhile", v, s.rec.CurrentVersion), "")
		s.eventLocked(EventNormal, "Updating", fmt.Sprintf("updating from version %d to version %d", s.rec.CurrentVersion, v))
	} else {
		s.rec.LoadAttempts++
		s.setStatusLocked(Creating, fmt.Sprintf("loading version %d", v), "")
		s.eventLocked(EventNormal, "Loading", fmt.Sprintf("loading version %d", v))
	}
	if err := m.saveLocked(s); err != nil {
		s.pending = 0
		s.setStatusLocked(Failed, "the state dir could not record the load: "+err.Error(), "SaveFailed")
		return err
	}
	return nil
}

// activate makes version v (spec) serve. The new version loads beside the
// serving one and takes traffic only once ready, by an atomic swap; the old
// one then drains and closes in the background. A change of
// metadata.instance alone reuses the loaded model. When the load fails the
// serving version (if any) keeps serving and the failure is recorded. The
// operation lock is held.
func (m *Manager) activate(ctx context.Context, s *Service, v int, spec *servicejson.Service) error {
	log := m.log.With("service", s.Name, "version", v)
	old := s.live.Load()
	s.mu.Lock()
	saved := s.token
	s.mu.Unlock()
	token := saved
	if !spec.Token.IsZero() {
		token = spec.Token.Reveal()
	}

	var nl *Live
	var loadTime time.Duration // 0 when no model loaded (a scale change)
	scaled := old != nil && scaleOnly(old.Spec, spec)
	if scaled {
		nl = m.newLive(v, spec, token, old.model, log)
	} else {
		began := time.Now()
		engine, fetched, err := m.load(ctx, spec, m.processorEvents(s, v), log)
		// A load reads, parses and rewrites the model in Go memory (up to
		// a few times the file), garbage once it is in the runtime; with
		// serve's high GC target the heap would keep it for a long time
		// (a 500 MB model: gigabytes held). Loads are rare: collect now.
		debug.FreeOSMemory()
		if err != nil {
			m.opt.Metrics.ModelLoadFailed(s.Name, loadFailureReason(err))
			m.loadFailed(s, v, old, err)
			return err
		}
		loadTime = time.Since(began)
		nl = m.newLive(v, spec, token, &model{engine: engine, fetched: fetched, sequences: m.newSequences(spec, engine, log)}, log)
	}
	if token != saved {
		if err := m.saveToken(s.Name, token); err != nil {
			log.Error("token not saved; the version will not be switched", "err", err)
			m.retire(context.Background(), nl, log)
			m.opt.Metrics.ModelLoadFailed(s.Name, "state")
			m.loadFailed(s, v, old, err)
			return err
		}
	}

	if spec.IsAsync() {
		qs, err := m.queuesFor(ctx, s, spec)
		if err != nil {
			m.retire(context.Background(), nl, log)
			err = fmt.Errorf("queue service: %w", err)
			m.loadFailed(s, v, old, err)
			return err
		}
		nl.consumers = startConsumers(nl, qs, log)
	}

	s.mu.Lock()
	if s.deleted { // deleted while loading: nothing may serve
		s.mu.Unlock()
		m.retire(context.Background(), nl, log)
		return fmt.Errorf("service %q: %w", s.Name, ErrNotFound)
	}
	s.live.Store(nl)
	from := s.rec.CurrentVersion
	s.rec.CurrentVersion, s.spec, s.token, s.pending = v, spec, token, 0
	s.rec.LoadAttempts, s.rec.Retryable = 0, false
	s.busy = false // the outcome is published
	s.setStatusLocked(Running, "", "")
	switch {
	case scaled:
		s.eventLocked(EventNormal, "Scaled", fmt.Sprintf("version %d serves with %d instances (was %d), without a reload", v, spec.Metadata.Instance, old.Spec.Metadata.Instance))
	case old != nil:
		s.eventLocked(EventNormal, "Running", fmt.Sprintf("version %d serves; version %d drains", v, from))
	default:
		s.eventLocked(EventNormal, "Running", fmt.Sprintf("version %d serves (processor %s, %d instances)", v, spec.ProcessorName(), spec.Metadata.Instance))
	}
	if loadTime > 0 {
		m.opt.Metrics.ModelLoaded(s.Name, loadTime)
	}
	// Request series are kept for the version serving and the one
	// draining; older ones go.
	var gone []string
	for _, vr := range s.rec.Versions {
		if vr.Version != v && vr.Version != from {
			gone = append(gone, strconv.Itoa(vr.Version))
		}
	}
	m.opt.Metrics.ForgetVersions(s.Name, gone...)
	_ = m.saveLocked(s)
	s.mu.Unlock()

	if old != nil {
		m.drain(s, old)
	}
	return nil
}

// retryable reports whether a failed load may succeed unchanged at the next
// start: a network error that outlasted storage's own retries, or a load cut
// short by shutdown.
func (m *Manager) retryable(err error) bool {
	var fe *storage.FetchError
	if errors.As(err, &fe) && fe.Retryable {
		return true
	}
	return errors.Is(err, context.Canceled) && m.ctx.Err() != nil
}

// loadFailed records a failed load of version v.
func (m *Manager) loadFailed(s *Service, v int, old *Live, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending, s.busy = 0, false
	s.rec.LoadAttempts, s.rec.Retryable = 0, m.retryable(err)
	if old != nil {
		msg := fmt.Sprintf("version %d failed to load: %v; version %d keeps serving", v, err, old.Version)
		s.setStatusLocked(Running, msg, "UpdateFailed")
		s.versionEventLocked(v, EventWarning, "UpdateFailed", msg)
	} else {
		s.rec.CurrentVersion = v
		s.setStatusLocked(Failed, err.Error(), "LoadFailed")
		s.versionEventLocked(v, EventWarning, "LoadFailed", fmt.Sprintf("version %d failed to load: %v", v, err))
	}
	_ = m.saveLocked(s)
}

// drain retires old in the background, outside the operation lock, so the
// next operation need not wait for slow requests.
func (m *Manager) drain(s *Service, old *Live) {
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.wg.Add(1)
	}
	m.mu.Unlock()
	log := m.log.With("service", s.Name)
	if closed {
		m.retire(context.Background(), old, log)
		return
	}
	go func() {
		defer m.wg.Done()
		m.retire(context.Background(), old, log)
		s.mu.Lock()
		s.versionEventLocked(old.Version, EventNormal, "Drained", fmt.Sprintf("version %d drained and closed", old.Version))
		_ = m.saveLocked(s)
		s.mu.Unlock()
	}()
}

// switchStopped makes version v current for a stopped service; it loads at
// the next start.
func (m *Manager) switchStopped(s *Service, v int, spec *servicejson.Service) error {
	s.mu.Lock()
	token := s.token
	s.mu.Unlock()
	if !spec.Token.IsZero() && spec.Token.Reveal() != token {
		token = spec.Token.Reveal()
		if err := m.saveToken(s.Name, token); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.CurrentVersion, s.spec, s.token = v, spec, token
	s.rec.UpdateTime = time.Now().UTC()
	s.publishLocked()
	s.eventLocked(EventNormal, "VersionSwitched", fmt.Sprintf("version %d is current; the service is stopped and loads it at start", v))
	return m.saveLocked(s)
}

// Create adds a service and loads it in the background. The snapshot shows
// it Creating, with its token.
func (m *Manager) Create(ctx context.Context, spec *servicejson.Service) (Info, error) {
	if err := m.precheck(spec); err != nil {
		return Info{}, fmt.Errorf("create %s: %w", spec.Name, err)
	}
	s, created, err := m.register(spec)
	if err != nil {
		return Info{}, fmt.Errorf("create %s: %w", spec.Name, err)
	}
	if !created {
		return Info{}, fmt.Errorf("create %s: %w; change it with modify (PUT), or delete it first", spec.Name, ErrExists)
	}
	info := s.Info(ctx)
	return info, m.async(s, func(ctx context.Context) { _ = m.activate(ctx, s, 1, spec) })
}

// Update stores spec as the service's next version and switches to it in
// the background. The same configuration is no change (no new version).
// A stopped service stays stopped and runs the new version at start.
func (m *Manager) Update(ctx context.Context, name string, spec *servicejson.Service) (Info, error) {
	s, err := m.lookup(name)
	if err != nil {
		return Info{}, err
	}
	if spec.Name != name {
		return Info{}, fmt.Errorf("service.json names service %q, but the request is for %q; a service cannot be renamed, create a new one instead: %w", spec.Name, name, ErrInvalid)
	}
	if err := m.precheck(spec); err != nil {
		return Info{}, fmt.Errorf("modify %s: %w", name, err)
	}
	if err := m.begin(s); err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	cur, stopped := s.spec, s.rec.Stopped
	s.mu.Unlock()
	if cur != nil && sameConfig(cur, spec) {
		if s.Ready() || stopped {
			m.leave(s)
			return s.Info(ctx), nil
		}
		// The current version failed: load it again, as no new version.
		return m.switchTo(ctx, s, s.Info(ctx).CurrentVersion, cur, false)
	}
	v, err := m.addVersion(s, spec)
	if err != nil {
		m.leave(s)
		return Info{}, err
	}
	return m.switchTo(ctx, s, v, spec, stopped)
}

// SwitchVersion makes stored version v current, in the background like
// Update; switching back to a previous version is how a bad update is
// rolled back.
func (m *Manager) SwitchVersion(ctx context.Context, name string, v int) (Info, error) {
	s, err := m.lookup(name)
	if err != nil {
		return Info{}, err
	}
	if err := m.begin(s); err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	latest, cur, stopped, raw := s.rec.LatestVersion, s.rec.CurrentVersion, s.rec.Stopped, s.configs[v]
	s.mu.Unlock()
	if v < 1 || v > latest {
		m.leave(s)
		return Info{}, fmt.Errorf("version %d does not exist; service %q has versions 1 to %d: %w", v, name, latest, ErrInvalid)
	}
	if v == cur && (s.Ready() || stopped) {
		m.leave(s)
		return s.Info(ctx), nil
	}
	if raw == nil {
		m.leave(s)
		return Info{}, fmt.Errorf("version %d of %q could not be read from the state dir; update the service with a new service.json instead: %w", v, name, ErrInvalid)
	}
	spec, err := servicejson.Parse(raw)
	if err != nil {
		m.leave(s)
		return Info{}, fmt.Errorf("version %d of %q is no longer valid: %w: %w", v, name, err, ErrInvalid)
	}
	return m.switchTo(ctx, s, v, spec, stopped)
}

// switchTo finishes Update and SwitchVersion; the operation lock is held
// and released here or by the background load.
func (m *Manager) switchTo(ctx context.Context, s *Service, v int, spec *servicejson.Service, stopped bool) (Info, error) {
	if stopped {
		err := m.switchStopped(s, v, spec)
		m.leave(s)
		return s.Info(ctx), err
	}
	if err := m.markLoading(s, v); err != nil {
		m.leave(s)
		return s.Info(ctx), err
	}
	info := s.Info(ctx)
	return info, m.async(s, func(ctx context.Context) { _ = m.activate(ctx, s, v, spec) })
}

// Start loads a stopped (or failed) service's current version in the
// background. A serving service is left as it is.
func (m *Manager) Start(ctx context.Context, name string) (Info, error) {
	s, err := m.lookup(name)
	if err != nil {
		return Info{}, err
	}
	if err := m.begin(s); err != nil {
		return Info{}, err
	}
	if s.Ready() {
		m.leave(s)
		return s.Info(ctx), nil
	}
	s.mu.Lock()
	spec, v := s.spec, s.rec.CurrentVersion
	s.rec.Stopped = false
	if spec == nil {
		_ = m.saveLocked(s) // the error below is the one to report
		s.mu.Unlock()
		m.leave(s)
		return Info{}, fmt.Errorf("version %d of %q cannot be read; update the service with a valid service.json: %w", v, name, ErrInvalid)
	}
	s.eventLocked(EventNormal, "Starting", "start requested")
	s.rec.LoadAttempts = 0 // a start by hand tries again
	s.mu.Unlock()
	if err := m.markLoading(s, v); err != nil {
		m.leave(s)
		return s.Info(ctx), err
	}
	info := s.Info(ctx)
	return info, m.async(s, func(ctx context.Context) { _ = m.activate(ctx, s, v, spec) })
}

// Stop stops serving: a load in progress is cancelled, requests get 503,
// the serving version drains (until ctx ends or the termination grace
// period) and its model is closed, releasing its memory. The service stays
// stopped across restarts until Start. The stop is written to the state
// dir before anything stops; when that write fails the service is left as
// it was and the error returned.
func (m *Manager) Stop(ctx context.Context, name string) (Info, error) {
	s, err := m.lookup(name)
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	cancel := s.cancelOp
	s.mu.Unlock()
	if cancel != nil {
		// A load in progress: stop it rather than wait for it (or fail).
		cancel()
		s.op.Lock()
		if !m.enter(s) {
			s.op.Unlock()
			return Info{}, fmt.Errorf("service %q: %w", name, ErrNotFound)
		}
	} else if err := m.begin(s); err != nil {
		return Info{}, err
	}
	defer m.leave(s)
	s.mu.Lock()
	was := s.rec
	s.rec.Stopped = true
	s.eventLocked(EventNormal, "Stopped", "stopped on request; the model is released")
	s.rec.Status, s.rec.Message, s.rec.Reason = Stopped, "", ""
	if err := m.saveLocked(s); err != nil {
		s.rec = was
		s.mu.Unlock()
		return s.Info(ctx), fmt.Errorf("stop %s: not stopped: %w", name, err)
	}
	l := s.live.Swap(nil)
	s.setStatusLocked(Stopped, "", "")
	s.mu.Unlock()
	if l != nil {
		m.retire(ctx, l, m.log.With("service", name))
	}
	return s.Info(ctx), nil
}

// Delete removes a service: a load in progress is cancelled, the serving
// version drains and closes, and its state and model cache are removed
// from the state dir.
func (m *Manager) Delete(ctx context.Context, name string) error {
	s, err := m.lookup(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.cancelOp != nil {
		s.cancelOp()
	}
	s.mu.Unlock()
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	s.busy = true
	if s.deleted {
		s.mu.Unlock()
		return fmt.Errorf("service %q: %w", name, ErrNotFound)
	}
	s.deleted = true
	s.eventLocked(EventNormal, "Deleted", "deleted on request; its state, model cache entries and metrics go")
	s.setStatusLocked(Stopped, "deleted", "")
	s.mu.Unlock()
	// The name stays taken until the files are gone: a create of the same
	// name meanwhile gets ErrBusy, instead of writing into a directory
	// that is being removed.
	defer func() {
		m.mu.Lock()
		if m.services[name] == s {
			delete(m.services, name)
		}
		m.mu.Unlock()
	}()
	if l := s.live.Swap(nil); l != nil {
		m.retire(ctx, l, m.log.With("service", name))
	}
	if qs := s.Queues(); qs != nil {
		qs.close() // its file goes with the service's directory
	}
	m.opt.Metrics.Forget(name) // a deleted service leaves no series behind
	// Its downloads go too: partial files and cache entries no other
	// service holds.
	if err := m.opt.Fetcher.Forget(ctx, m.sourcesOf(s)...); err != nil {
		m.log.Warn("model cache entries of the deleted service not removed", "service", name, "err", err)
	}
	if m.persistent() {
		var errs []error
		for _, dir := range []string{m.svcDir(name), filepath.Join(m.opt.StateDir, "cache", name)} {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("delete %s: the service is gone but its files remain: %w", name, err)
		}
	}
	return nil
}

// sourcesOf lists the model_path and warm_up_data_path of every stored
// version of s, as the fetcher was given them.
func (m *Manager) sourcesOf(s *Service) []string {
	s.mu.Lock()
	raws := make([][]byte, 0, len(s.configs))
	for _, raw := range s.configs {
		raws = append(raws, raw)
	}
	s.mu.Unlock()
	var out []string
	for _, raw := range raws {
		spec, err := servicejson.Parse(raw)
		if err != nil {
			continue
		}
		for _, src := range []string{spec.ModelPath, spec.WarmUpDataPath} {
			if src == "" {
				continue
			}
			if !strings.Contains(src, "://") && !filepath.IsAbs(src) && m.opt.BaseDir != "" {
				src = filepath.Join(m.opt.BaseDir, src)
			}
			out = append(out, src)
		}
	}
	return out
}

// Describe returns a snapshot of the service called name.
func (m *Manager) Describe(ctx context.Context, name string) (Info, error) {
	s, err := m.lookup(name)
	if err != nil {
		return Info{}, err
	}
	return s.Info(ctx), nil
}

// precheck is Precheck with this manager's model size bound.
func (m *Manager) precheck(spec *servicejson.Service) error {
	return Precheck(spec, m.opt.MaxModelBytes)
}

// Precheck runs the processor's Configure (no I/O: model_config and
// model_path as written) before create and modify accept a service.json, so
// what the background load would refuse at that step (a Java processor, a
// custom processor's bad processor_entry, a code this build cannot serve, a
// bad model_config) is a 400 now, with the
// same message, instead of a Failed service a moment later. The Kubernetes
// backend runs it too, before it writes any object.
func Precheck(spec *servicejson.Service, maxModelBytes int64) error {
	ps, _, err := ProcessorSpec(spec, maxModelBytes, nil)
	if err == nil {
		_, err = Configure(spec, ps)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}
