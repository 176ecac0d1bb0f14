// Package service runs the lifecycle of deployed services: it loads a
// service.json into a processor behind a scheduler (the one loader of the
// processor contract), tracks each service's status, and stops them.
//
// Each service is independent: one that fails to load is kept as Failed with
// its reason and the others serve.
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
	"sync/atomic"
	"time"

	"github.com/eas-server/eas-server/auth"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/scheduler"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/storage"
)

// Status is the state of a service.
type Status string

// The service states (EAS's names).
const (
	Creating Status = "Creating"
	Running  Status = "Running"
	Failed   Status = "Failed"
	Stopped  Status = "Stopped"
)

// Sentinel errors of the manager.
var (
	ErrNotFound = errors.New("service not found")
	ErrExists   = errors.New("service already exists")
)

// Service is one deployed service. Its fields are read-only after deploy
// except the status, which is read with State.
type Service struct {
	Name      string
	Spec      *servicejson.Service
	Token     auth.Secret // the live token ("" = open)
	Processor processors.Processor
	Scheduler *scheduler.Scheduler // nil unless Running

	state atomic.Pointer[stateInfo]
}

type stateInfo struct {
	Status  Status
	Message string
	Since   time.Time
}

// State returns the status, its reason and when it began.
func (s *Service) State() (Status, string, time.Time) {
	st := s.state.Load()
	return st.Status, st.Message, st.Since
}

func (s *Service) setState(st Status, msg string) {
	s.state.Store(&stateInfo{Status: st, Message: msg, Since: time.Now()})
}

// Ready reports whether the service accepts requests.
func (s *Service) Ready() bool { return s.state.Load().Status == Running }

// Options configures a Manager.
type Options struct {
	StateDir string // holds generated tokens and the model cache
	BaseDir  string // relative model paths are resolved against it; "" = working directory
	Logger   *slog.Logger
	Metrics  *metrics.Metrics // may be nil
}

// Manager holds every service. It is safe for concurrent use.
type Manager struct {
	opt Options
	log *slog.Logger

	mu       sync.RWMutex
	services map[string]*Service
}

// NewManager makes an empty manager.
func NewManager(opt Options) *Manager {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opt: opt, log: opt.Logger, services: map[string]*Service{}}
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

// Ready reports whether every deployed service is Running; the slice names
// those that are not.
func (m *Manager) Ready() (bool, []string) {
	var notReady []string
	for _, s := range m.List() {
		if !s.Ready() {
			st, msg, _ := s.State()
			notReady = append(notReady, fmt.Sprintf("%s: %s %s", s.Name, st, msg))
		}
	}
	return len(notReady) == 0, notReady
}

// Deploy registers spec and loads it. The service is visible (Creating) at
// once; the returned error is the load failure, and the service then stays
// listed as Failed with that reason.
func (m *Manager) Deploy(ctx context.Context, spec *servicejson.Service) (*Service, error) {
	svc := &Service{Name: spec.Name, Spec: spec}
	svc.setState(Creating, "loading")
	m.mu.Lock()
	if _, dup := m.services[spec.Name]; dup {
		m.mu.Unlock()
		return nil, fmt.Errorf("deploy %s: %w", spec.Name, ErrExists)
	}
	m.services[spec.Name] = svc
	m.mu.Unlock()

	log := m.log.With("service", spec.Name)
	start := time.Now()
	if err := m.load(ctx, svc, log); err != nil {
		svc.setState(Failed, err.Error())
		log.Error("service failed to load", "err", err)
		return svc, fmt.Errorf("deploy %s: %w", spec.Name, err)
	}
	svc.setState(Running, "")
	log.Info("service running", "processor", spec.Processor, "load_ms", time.Since(start).Milliseconds())
	return svc, nil
}

// load runs the processor lifecycle: New -> Configure -> fetch -> Load ->
// Warmup, then starts the scheduler. On failure whatever was opened is closed.
func (m *Manager) load(ctx context.Context, svc *Service, log *slog.Logger) (err error) {
	spec := svc.Spec
	token, err := m.token(spec, log)
	if err != nil {
		return err
	}
	svc.Token = auth.Secret(token)

	if spec.Processor == "" {
		return fmt.Errorf("processor_path: custom %s processors are not supported by this server; use a built-in processor code (eas-server processors lists them)", spec.ProcessorType)
	}
	proc, err := processors.New(spec.Processor)
	if err != nil {
		return fmt.Errorf("processor: %w", err)
	}
	defer func() {
		if err != nil {
			if c, ok := proc.(processors.Closer); ok {
				c.Close()
			}
		}
	}()
	ps := processors.Spec{
		Service:     spec.Name,
		Code:        spec.Processor,
		ModelEntry:  spec.ModelEntry,
		ModelConfig: spec.ModelConfig,
		CPU:         spec.Metadata.CPU,
		GPU:         spec.Metadata.GPU,
		Logger:      log,
	}
	cacheDir := filepath.Join(m.opt.StateDir, "cache", spec.Name)
	if spec.ModelPath != "" {
		if ps.ModelPath, err = storage.Fetch(ctx, spec.ModelPath, m.opt.BaseDir, cacheDir); err != nil {
			return fmt.Errorf("model_path: %w", err)
		}
	}
	if spec.WarmUpDataPath != "" {
		if ps.WarmupPath, err = storage.Fetch(ctx, spec.WarmUpDataPath, m.opt.BaseDir, cacheDir); err != nil {
			return fmt.Errorf("warm_up_data_path: %w", err)
		}
	}
	if err := proc.Configure(ps); err != nil {
		return err
	}
	if err := proc.Load(ctx); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if ps.WarmupPath != "" {
		w, ok := proc.(processors.Warmer)
		if !ok {
			return fmt.Errorf("warm_up_data_path: processor %s does not support warm-up; remove the key", spec.Processor)
		}
		if err := w.Warmup(ctx, ps.WarmupPath); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	svc.Processor = proc
	svc.Scheduler = m.newScheduler(spec, proc, log)
	return nil
}

func (m *Manager) newScheduler(spec *servicejson.Service, proc processors.Processor, log *slog.Logger) *scheduler.Scheduler {
	rpc := spec.Metadata.RPC
	cfg := scheduler.Config{
		Workers:         rpc.WorkerThreads,
		QueueSize:       rpc.MaxQueueSize,
		Timeout:         rpc.Keepalive,
		RateLimit:       float64(rpc.RateLimit),
		Batching:        rpc.Batching,
		MaxBatchSize:    rpc.MaxBatchSize,
		MaxBatchTimeout: rpc.MaxBatchTimeout,
	}
	var key scheduler.KeyFunc
	if b, ok := proc.(processors.Batcher); ok {
		key = b.BatchKey
	}
	name := spec.Name
	mt := m.opt.Metrics
	obs := scheduler.Observer{
		Batch:     func(size int, d time.Duration) { mt.Batch(name, size, d) },
		QueueWait: func(d time.Duration) { mt.QueueWait(name, d) },
	}
	return scheduler.New(cfg, proc.Run, key, obs, log)
}

// token returns the service's token: the one given, else a generated one
// kept in the state dir so it survives restarts. Generated tokens are never
// logged; the log says where to read them.
func (m *Manager) token(spec *servicejson.Service, log *slog.Logger) (string, error) {
	if !spec.Token.IsZero() {
		return spec.Token.Reveal(), nil
	}
	if m.opt.StateDir == "" {
		return "", errors.New("token: no token given and no state dir to keep a generated one; set \"token\" or start the server with --state-dir")
	}
	path := filepath.Join(m.opt.StateDir, "services", spec.Name, "token")
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

// Shutdown stops every running service: each scheduler drains (queued
// requests finish) until ctx ends, then the processors are closed.
func (m *Manager) Shutdown(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range m.List() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop(ctx, s)
		}()
	}
	wg.Wait()
}

func (m *Manager) stop(ctx context.Context, s *Service) {
	if s.Scheduler != nil {
		if err := s.Scheduler.Stop(ctx); err != nil {
			m.log.Warn("service drain cut short", "service", s.Name, "err", err)
		}
	}
	if c, ok := s.Processor.(processors.Closer); ok {
		if err := c.Close(); err != nil {
			m.log.Warn("closing processor", "service", s.Name, "err", err)
		}
	}
	s.setState(Stopped, "")
}

// writeFileAtomic writes data to path through a temporary file, fsync and
// rename, so a crash never leaves a half-written file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
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
	return os.Rename(tmp, path)
}
