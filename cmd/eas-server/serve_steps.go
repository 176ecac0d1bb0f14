package main

// The steps of serve, in the order serve runs them. Each exists so that
// serve reads as the list of what starting and stopping the server does;
// moving one changes the order of side effects (what is logged, printed,
// created on disk or listened on), so keep them in serve's order.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/history"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/storage"
)

// setupProcess builds the one logger and readies the process before
// anything is served: the engines' runtimes, the GC target and the state
// dir, which every later step writes under.
func setupProcess(f serveFlags) (*slog.Logger, error) {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return nil, err
	}
	if err := configureRuntimes(f); err != nil {
		return nil, err
	}
	if os.Getenv("GOGC") == "" && f.gcPercent != 100 {
		// The request path allocates per request; a higher GC target lets the
		// collector run less often next to the model's own threads.
		debug.SetGCPercent(f.gcPercent)
	}
	// 0711: entered, never listed, by other uids, so that custom
	// processors' workers running as a uid of their own reach their models
	// in <state-dir>/cache; the secrets (admin_token, services/) are 0600
	// and 0700 (docs/custom-processors.md, Trust boundary). A state dir an
	// older server made 0700 is opened the same way.
	if err := os.MkdirAll(f.stateDir, 0o711); err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	if st, err := os.Stat(f.stateDir); err == nil && st.Mode().Perm() == 0o700 {
		if err := os.Chmod(f.stateDir, 0o711); err != nil {
			return nil, fmt.Errorf("--state-dir: %w", err)
		}
	}
	return log, nil
}

// serveMetrics holds the two registries /metrics serves and the eas_
// series recorded into one of them.
type serveMetrics struct {
	reg    *prometheus.Registry // the Go runtime, the process and the model cache
	easReg *prometheus.Registry // the eas_ series only
	mt     *metrics.Metrics
}

// newServeMetrics builds the registries. The eas_ series get a registry of
// their own: the metrics history reads it every interval without running
// the runtime, process and model cache collectors.
func newServeMetrics() serveMetrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	easReg := prometheus.NewRegistry()
	return serveMetrics{reg: reg, easReg: easReg, mt: metrics.New(easReg)}
}

// loadAdminToken reads (or creates) the control plane's admin token, and
// prints one it created: the one time a secret is shown, on the terminal,
// never in the log. Without a control plane there is no token.
func loadAdminToken(f serveFlags, stderr io.Writer) (string, error) {
	if f.noControl {
		return "", nil
	}
	adminToken, created, err := auth.LoadOrCreateAdminToken(f.stateDir)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	if created {
		fmt.Fprintf(stderr, "\nGenerated the control-plane admin token (kept in %s, mode 0600):\n\n    %s\n\nUse it with: export %s=<token>\n\n",
			filepath.Join(f.stateDir, auth.AdminTokenFile), adminToken, auth.AdminTokenEnv)
	}
	return adminToken, nil
}

// newManager builds the service manager over the model cache and exposes
// the cache's size, so both share the flags that bound models.
func newManager(f serveFlags, log *slog.Logger, m serveMetrics) *service.Manager {
	fetcher := &storage.Fetcher{CacheDir: filepath.Join(f.stateDir, "cache"), MaxCacheBytes: f.cacheBytes, MaxModelBytes: f.maxModel,
		IdleTimeout: f.downloadIdle, FetchTimeout: f.downloadTimeout, Logger: log}
	mgr := service.NewManager(service.Options{StateDir: f.stateDir, Logger: log, Metrics: m.mt, Fetcher: fetcher, MaxModelBytes: f.maxModel,
		QueueBroker: f.queueBroker, QueueSyncEachPut: f.queueSync})
	registerCacheMetrics(m.reg, fetcher)
	return mgr
}

// signatureOptions checks the --signature-* flags and gives the EAS
// signature options they ask for; the replay cache is left to newServer.
func signatureOptions(f serveFlags, log *slog.Logger) (auth.Options, error) {
	zones, err := parseZones(f.sigZones)
	if err != nil {
		return auth.Options{}, err
	}
	if f.sigReplay < 0 {
		return auth.Options{}, fmt.Errorf("--signature-replay-cache: %d is not a number of signatures >= 0", f.sigReplay)
	}
	if len(zones) > 0 && f.sigAnyZone {
		log.Warn("--signature-client-zones has no effect: every zone is accepted unless --signature-any-zone=false")
	}
	return auth.Options{SignatureWindow: f.sigWindow, ClientZones: zones, OnlyClientZones: !f.sigAnyZone}, nil
}

// startHistory starts the metrics history sampler, whose route is on the
// control plane (nil without one). It runs on a context that outlives ctx,
// so the history is kept through the drain; the caller stops it.
func startHistory(ctx context.Context, f serveFlags, m serveMetrics, log *slog.Logger) *history.Sampler {
	if f.noControl {
		return nil
	}
	hist := history.New(history.Options{Gatherer: m.easReg, Logger: log})
	hist.Start(context.WithoutCancel(ctx))
	return hist
}

// newServer builds the HTTP and gRPC handlers over the manager from the
// flags that shape what is served and how.
func newServer(f serveFlags, log *slog.Logger, m serveMetrics, mgr *service.Manager, adminToken string, sig auth.Options, hist *history.Sampler) *server.Server {
	var accessLog *slog.Logger
	if f.accessLog {
		accessLog = log
	}
	sig.Replay = auth.NewReplayCache(f.sigReplay)
	return server.New(server.Options{
		Manager: mgr, Logger: log, Metrics: m.mt, Gatherer: prometheus.Gatherers{m.reg, m.easReg}, MaxBodyBytes: f.maxBody, QueueReadBytes: f.queueRead, AdminToken: adminToken,
		Auth:                sig,
		BodyReadTimeout:     f.bodyReadTimeout,
		MetricsRequireAdmin: f.metricsAdmin,
		NoConsole:           !f.console || f.noControl,
		StrictReadiness:     f.strictReady,
		AccessLog:           accessLog,
		History:             hist,
	})
}

// readDeployToken reads --token-file: the token of the --deploy services
// whose service.json gives none ("" without the flag).
func readDeployToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("--token-file: %s is empty; it must hold the services' token", path)
	}
	return token, nil
}

// restore registers every stored service before the first request; their
// models load in the background.
func restore(mgr *service.Manager, log *slog.Logger) {
	restored, problems := mgr.Restore()
	log.Info("restored services from the state dir", "services", restored, "problems", len(problems))
}

// listenHTTP listens on --listen and serves the router in the background;
// the channel gets the error that ends serving. It logs where to point a
// browser for the console, and which token it asks for.
func listenHTTP(f serveFlags, srv *server.Server, log *slog.Logger) (*http.Server, <-chan error, error) {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, nil, fmt.Errorf("--listen: %w", err)
	}
	hs := newHTTPServer(srv.Handler(), f.idleTimeout)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(limitConns(ln, f.maxConns)) }()
	log.Info("listening", "addr", ln.Addr().String(), "state_dir", f.stateDir)
	if f.console && !f.noControl {
		log.Info("web console", "url", "http://"+consoleHost(ln.Addr().String())+"/console/",
			"admin_token", filepath.Join(f.stateDir, auth.AdminTokenFile)+" (or $"+auth.AdminTokenEnv+")")
	}
	return hs, serveErr, nil
}

// startPprof serves Go's profiling endpoints on addr, if one is given; it
// is apart from the router so that profiles never share its port.
func startPprof(addr string, log *slog.Logger) {
	if addr == "" {
		return
	}
	go func() {
		// net/http/pprof registers on http.DefaultServeMux, which nothing else uses.
		log.Info("pprof listening", "addr", addr, "err", http.ListenAndServe(addr, nil))
	}()
}

// listenGRPC listens on --grpc-listen, if given, and serves the KServe v2
// gRPC service in the background (nil without the flag).
func listenGRPC(f serveFlags, srv *server.Server, log *slog.Logger) (*grpc.Server, error) {
	if f.grpcListen == "" {
		return nil, nil
	}
	gln, err := net.Listen("tcp", f.grpcListen)
	if err != nil {
		return nil, fmt.Errorf("--grpc-listen: %w", err)
	}
	opts := append(grpcLimits(f.idleTimeout, f.grpcMaxStreams), grpc.MaxRecvMsgSize(int(f.maxBody)), grpc.InTapHandle(srv.GRPCTap))
	gs := grpc.NewServer(opts...)
	srv.RegisterGRPC(gs)
	go func() {
		if err := gs.Serve(limitConns(gln, f.maxConns)); err != nil {
			log.Error("grpc server stopped", "err", err)
		}
	}()
	log.Info("grpc listening", "addr", gln.Addr().String())
	return gs, nil
}

// deployAtStart deploys the --deploy files; readiness reports starting
// from before the restore until they are registered (and loaded).
func deployAtStart(ctx context.Context, f serveFlags, mgr *service.Manager, srv *server.Server, token string, log *slog.Logger) {
	deployAll(ctx, mgr, f.deploy, token, log)
	srv.SetStarted()
}

// waitForSignal blocks until ctx ends (a signal) or the HTTP server stops
// on its own, which is an error.
func waitForSignal(ctx context.Context, serveErr <-chan error) error {
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// drainAndShutdown stops in the order a load balancer needs: report
// not-ready while still serving (answers carry Connection: close), then
// stop accepting and let in-flight and queued work finish within --shutdown-grace.
// A second signal during it kills the process at once.
func drainAndShutdown(ctx context.Context, f serveFlags, log *slog.Logger, srv *server.Server, hs *http.Server, serveErr <-chan error, gs *grpc.Server, mgr *service.Manager) error {
	// A second signal now kills the process at once (default behaviour).
	signalStop(ctx)
	log.Info("draining: reporting not-ready, still serving", "delay", f.delay.String(), "grace", f.grace.String())
	srv.SetDraining()
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("shutting down: refusing new connections, finishing requests", "grace", f.grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", err)
	}
	if gs != nil {
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-sctx.Done():
			gs.Stop()
		}
	}
	mgr.Shutdown(sctx)
	log.Info("stopped")
	return nil
}
