// Package service runs the lifecycle of deployed services: it loads a
// service.json into a processor behind a scheduler (the one loader of the
// processor contract), keeps every version of every service in the state
// dir, swaps versions without dropping a request, and stops, starts and
// deletes services.
//
// Each service is independent: one that fails to load is kept as Failed with
// its reason and the others serve. Lifecycle operations on one service are
// serialised (one at a time); the data plane never waits for them, because
// it reads the serving version through an atomic pointer (see Live).
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/sandbox"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

// Status is the state of a service.
type Status string

// The service states (EAS's names). Updating means a new version is loading
// while the current one keeps serving.
const (
	Creating Status = "Creating"
	Running  Status = "Running"
	Updating Status = "Updating"
	Failed   Status = "Failed"
	Stopped  Status = "Stopped"
)

// Sentinel errors of the manager. The server maps them to status codes.
var (
	ErrNotFound     = errors.New("service not found")
	ErrExists       = errors.New("service already exists")
	ErrBusy         = errors.New("another operation on the service is in progress")
	ErrInvalid      = errors.New("invalid request")
	ErrShuttingDown = errors.New("the server is shutting down")
)

// Options configures a Manager.
type Options struct {
	StateDir string // holds each service's versions, token, status and the model cache
	BaseDir  string // relative model paths are resolved against it; "" = working directory
	Logger   *slog.Logger
	Metrics  *metrics.Metrics // may be nil
	// Fetcher brings model_path and warm_up_data_path to local disk; nil
	// means a Fetcher caching under <StateDir>/cache with no size bound.
	Fetcher *storage.Fetcher
	// MaxModelBytes bounds one service's model: each download and what a
	// processor reads at load (0 = processors.DefaultMaxModelBytes).
	MaxModelBytes int64
	// QueueSyncEachPut makes every put into an asynchronous service's
	// queue its own fsync instead of one per batch of concurrent puts.
	QueueSyncEachPut bool
	// QueueBroker, when set, keeps asynchronous services' queues on a NATS
	// JetStream server (nats://host:4222) instead of the state dir.
	QueueBroker string
}

// Manager holds every service. It is safe for concurrent use.
type Manager struct {
	opt Options
	log *slog.Logger

	ctx    context.Context // cancelled by Shutdown: ends loads in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup // operations and drains in progress

	mu       sync.RWMutex
	services map[string]*Service
	closed   bool
}

// NewManager makes an empty manager. Call Restore to bring back the services
// of the state dir.
func NewManager(opt Options) *Manager {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Fetcher == nil {
		opt.Fetcher = &storage.Fetcher{CacheDir: filepath.Join(opt.StateDir, "cache"), MaxModelBytes: opt.MaxModelBytes, Logger: opt.Logger}
	}
	if opt.StateDir != "" {
		// Custom processors' workers are never given the state dir
		// (internal/sandbox), and its secrets are the server's alone.
		sandbox.Protect(opt.StateDir)
		secureStateDir(opt.StateDir, opt.Logger)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{opt: opt, log: opt.Logger, ctx: ctx, cancel: cancel, services: map[string]*Service{}}
	opt.Metrics.SetQueueDepthFunc(m.queueDepths)
	opt.Metrics.SetAsyncQueuesFunc(m.asyncQueueStats)
	return m
}

// queueDepths reports the queue depth of every serving service.
func (m *Manager) queueDepths() map[string]int {
	out := map[string]int{}
	for _, s := range m.List() {
		if live, ok := s.Acquire(); ok {
			out[s.Name] = live.Scheduler.QueueDepth()
			live.Release()
		}
	}
	return out
}

// Get returns the service called name.
func (m *Manager) Get(name string) (*Service, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.services[name]
	return s, ok
}

// List returns every service, sorted by name.
func (m *Manager) List() []*Service {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*Service, 0, len(m.services))
	for _, s := range m.services {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Fetcher is the model fetcher and cache the manager's services load from.
func (m *Manager) Fetcher() *storage.Fetcher { return m.opt.Fetcher }

// ServiceReadiness is one service's line of the readiness report.
type ServiceReadiness struct {
	Name    string
	Status  Status
	Message string
	Serving bool // a version answers requests now
	Blocks  bool // this service holds the process's readiness back
}

// Readiness reports whether the process should get traffic, with every
// service's line. A service that is meant to serve but has nothing serving
// yet (Creating, or Updating from nothing) holds the process back; one
// stopped on purpose never does; a Failed one with nothing serving does only
// when strict: by default one bad deploy must not take every healthy service
// out of a load balancer's rotation. Its state stays in the report, and its
// own readiness (/v2/models/<name>/ready) is false.
func (m *Manager) Readiness(strict bool) (bool, []ServiceReadiness) {
	ready := true
	var out []ServiceReadiness
	for _, s := range m.List() {
		st, msg, _ := s.State()
		r := ServiceReadiness{Name: s.Name, Status: st, Message: msg, Serving: s.Ready()}
		r.Blocks = !r.Serving && st != Stopped && (st != Failed || strict)
		if r.Blocks {
			ready = false
		}
		out = append(out, r)
	}
	return ready, out
}

// Deploy makes spec serve and waits for the outcome; serve --deploy uses
// it. A new service is created; an existing one (restored from the state
// dir) with the same configuration is left as it is, and with a different
// one it is updated to a new version. The returned error is the load
// failure; the service stays listed with it.
func (m *Manager) Deploy(ctx context.Context, spec *servicejson.Service) (*Service, error) {
	svc, created, err := m.register(spec)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", spec.Name, err)
	}
	if !created {
		svc.op.Lock() // waits for a restore in progress
		if !m.enter(svc) {
			svc.op.Unlock()
			return nil, fmt.Errorf("deploy %s: %w", spec.Name, ErrNotFound)
		}
	}
	defer m.leave(svc)
	if created {
		err = m.activate(ctx, svc, 1, spec)
	} else {
		err = m.deployExisting(ctx, svc, spec)
	}
	if err != nil {
		return svc, fmt.Errorf("deploy %s: %w", spec.Name, err)
	}
	return svc, nil
}

func (m *Manager) deployExisting(ctx context.Context, svc *Service, spec *servicejson.Service) error {
	svc.mu.Lock()
	cur, stopped := svc.spec, svc.rec.Stopped
	svc.mu.Unlock()
	if cur != nil && sameConfig(cur, spec) {
		switch {
		case stopped:
			m.log.Info("service is stopped; start it to serve", "service", svc.Name)
			return nil
		case svc.Ready():
			return nil
		}
		// The restored version failed to load: try it again.
		v := svc.Info(ctx).CurrentVersion
		if err := m.markLoading(svc, v); err != nil {
			return err
		}
		return m.activate(ctx, svc, v, cur)
	}
	v, err := m.addVersion(svc, spec)
	if err != nil {
		return err
	}
	if stopped {
		return m.switchStopped(svc, v, spec)
	}
	if err := m.markLoading(svc, v); err != nil {
		return err
	}
	return m.activate(ctx, svc, v, spec)
}

// ProcessorSpec is what Configure sees of spec: service.json without I/O.
// model_sha256 is storage's key, stripped here: processors never see it.
// maxModelBytes is the model size limit (0 = the processors' default).
func ProcessorSpec(spec *servicejson.Service, maxModelBytes int64, log *slog.Logger) (processors.Spec, string, error) {
	ps := processors.Spec{
		MaxModelBytes: maxModelBytes,
		Service:       spec.Name,
		Code:          spec.Processor,
		ModelSource:   spec.ModelPath,
		ModelEntry:    spec.ModelEntry,
		CPU:           spec.Metadata.CPU,
		GPU:           spec.Metadata.GPU,
		Params:        spec.ProcessorParams,
		Logger:        log,
		WorkerThreads: spec.Metadata.RPC.WorkerThreads,
		Keepalive:     spec.Metadata.RPC.Keepalive,
	}
	if spec.ProcessorPath != "" {
		ps.Code = "custom_" + spec.ProcessorType
		ps.ProcessorType, ps.ProcessorEntry = spec.ProcessorType, spec.ProcessorEntry
	}
	for _, h := range []struct {
		from *servicejson.Hook
		to   **processors.Hook
	}{{spec.PreProcess, &ps.PreProcess}, {spec.PostProcess, &ps.PostProcess}} {
		if h.from != nil {
			*h.to = &processors.Hook{Path: h.from.Path, Type: h.from.Type, Entry: h.from.Entry, Config: h.from.ConfigBytes()}
		}
	}
	if rpc := spec.Metadata.RPC; rpc.Batching {
		ps.Batcher, ps.PadValue, ps.Buckets = rpc.Batcher, rpc.PadValue, rpc.Buckets
	}
	sum, mc, err := storage.SplitModelSHA256(spec.ModelConfigBytes())
	if err != nil {
		return ps, "", fmt.Errorf("model_config: %w", err)
	}
	ps.ModelConfig = mc
	return ps, sum, nil
}

// Configure makes spec's processor and configures it, without any I/O: the
// check `eas-server validate` runs, and the first step of every load, so a
// model_config mistake is found before a download starts.
func Configure(spec *servicejson.Service, ps processors.Spec) (*processors.Engine, error) {
	var e *processors.Engine
	var err error
	if spec.ProcessorPath != "" {
		e, err = processors.NewCustom(spec.ProcessorType)
	} else if e, err = processors.New(spec.Processor); err != nil {
		err = fmt.Errorf("processor: %w", err)
	} else if ps.PreProcess != nil || ps.PostProcess != nil {
		e, err = processors.WithHooks(e)
	}
	if err != nil {
		return nil, err
	}
	if err := e.Processor().Configure(ps); err != nil {
		return nil, err
	}
	return e, nil
}

// load runs the processor lifecycle: New -> Configure -> fetch -> Load ->
// Warmup. On failure whatever was opened is closed and whatever was
// fetched is released; on success the caller releases fetched (the model
// cache may then evict its files) once the model is closed. event is the
// processor's processors.Spec.Event: how it adds to the service's events.
func (m *Manager) load(ctx context.Context, spec *servicejson.Service, event func(bool, string, string), log *slog.Logger) (e *processors.Engine, fetched *fetchList, err error) {
	fo := storage.FetchOptions{BaseDir: m.opt.BaseDir, OSSEndpoint: spec.OSSEndpoint, Logger: log}
	fetched = &fetchList{fetcher: m.opt.Fetcher, opts: fo}
	ps, sum, err := ProcessorSpec(spec, m.opt.MaxModelBytes, log)
	if err != nil {
		return nil, nil, err
	}
	ps.Fetcher = fetched
	ps.Schedulers = m.modelSchedulers(spec, log)
	ps.Event = event
	if e, err = Configure(spec, ps); err != nil {
		return nil, nil, err
	}
	engine, list := e, fetched // the returns below clear e and fetched
	defer func() {
		if err != nil {
			closeProcessor(engine.Processor(), log)
			list.release()
		}
	}()
	var files processors.Files
	if spec.ModelPath != "" {
		mo := fo
		mo.SHA256 = sum
		mo.Progress, mo.Retry = m.fetchReport(spec.Name, "model_path")
		if files.ModelPath, err = fetched.fetch(ctx, spec.ModelPath, mo); err != nil {
			return nil, nil, fmt.Errorf("model_path: %w", err)
		}
	}
	if spec.ProcessorPath != "" {
		po := fo
		po.Progress, po.Retry = m.fetchReport(spec.Name, "processor_path")
		if files.ProcessorPath, err = fetched.fetch(ctx, spec.ProcessorPath, po); err != nil {
			return nil, nil, fmt.Errorf("processor_path: %w", err)
		}
	}
	if spec.WarmUpDataPath != "" {
		wo := fo
		wo.Progress, wo.Retry = m.fetchReport(spec.Name, "warm_up_data_path")
		if files.WarmupPath, err = fetched.fetch(ctx, spec.WarmUpDataPath, wo); err != nil {
			return nil, nil, fmt.Errorf("warm_up_data_path: %w", err)
		}
	}
	if err := e.Processor().Load(ctx, files); err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	if files.WarmupPath != "" {
		w, ok := e.Processor().(processors.Warmer)
		if !ok {
			return nil, nil, fmt.Errorf("warm_up_data_path: processor %s does not support warm-up; remove the key", spec.ProcessorName())
		}
		if err := w.Warmup(ctx, files.WarmupPath); err != nil {
			return nil, nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	return e, fetched, nil
}

// fetchList is the model cache as one loaded model uses it: every path it
// fetched, the model's own and the ones its processor fetches later (a
// Triton repository), released together when the model is closed, so that
// --cache-size can evict them.
type fetchList struct {
	fetcher *storage.Fetcher
	opts    storage.FetchOptions

	mu    sync.Mutex
	paths []string
}

func (f *fetchList) fetch(ctx context.Context, source string, opts storage.FetchOptions) (string, error) {
	p, err := f.fetcher.Fetch(ctx, source, opts)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.paths = append(f.paths, p)
	f.mu.Unlock()
	return p, nil
}

// Fetch is processors.Fetcher: a source a processor asks for.
func (f *fetchList) Fetch(ctx context.Context, source string) (string, error) {
	return f.fetch(ctx, source, f.opts)
}

// release tells the cache that nothing uses these paths any more.
func (f *fetchList) release() {
	if f == nil {
		return
	}
	f.mu.Lock()
	paths := f.paths
	f.paths = nil
	f.mu.Unlock()
	for _, p := range paths {
		f.fetcher.Release(p)
	}
}

// initialToken returns a new service's token: the one given, else the one
// kept in the state dir (a service deployed before under this name), else a
// generated one. The result is written to the state dir so that it survives
// restarts. Tokens are never logged; the log says where to read them.
func (m *Manager) initialToken(spec *servicejson.Service, log *slog.Logger) (string, error) {
	if !spec.Token.IsZero() {
		return spec.Token.Reveal(), nil
	}
	if m.opt.StateDir == "" {
		return "", errors.New("token: no token given and no state dir to keep a generated one; set \"token\" or start the server with --state-dir")
	}
	path := m.tokenPath(spec.Name)
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return string(b), nil
	}
	tok, err := auth.GenerateToken()
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	if err := writeFileAtomic(path, []byte(tok), 0o600); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	log.Info("generated a token for the service", "token_file", path)
	return tok, nil
}

// Shutdown ends loads in progress and stops every serving version: each
// scheduler drains (queued requests finish) until ctx ends, then the
// processors are closed. The state dir keeps every service as it was, so
// the next start restores them.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	var wg sync.WaitGroup
	for _, s := range m.List() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.op.Lock() // lets a cancelled load finish first
			defer s.op.Unlock()
			if l := s.live.Swap(nil); l != nil {
				m.retire(ctx, l, m.log.With("service", s.Name))
			}
			if qs := s.Queues(); qs != nil {
				qs.close()
			}
			s.mu.Lock()
			s.setStatusLocked(Stopped, "server shut down", "")
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// writeFileAtomic writes data to path through a temporary file, fsync and
// rename, then syncs the directory, so a crash never leaves a half-written
// file or loses the new name.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // some filesystems refuse to sync directories; not fatal
		d.Close()
	}
	return nil
}
