package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --pprof-listen
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/eas-server/eas-server/auth"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/storage"
)

type serveFlags struct {
	listen      string
	stateDir    string
	deploy      []string
	maxBody     int64
	logLevel    string
	logFormat   string
	grace       time.Duration
	onnxRuntime string
	cacheBytes  int64
	grpcListen  string
	pprofListen string
	gcPercent   int
}

func serveCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server, deploying the given service.json files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":8080", "address to listen on")
	fl.StringVar(&f.stateDir, "state-dir", "./eas-data", "directory for tokens, state and the model cache")
	fl.StringArrayVar(&f.deploy, "deploy", nil, "service.json to deploy at start (repeatable)")
	fl.Int64Var(&f.maxBody, "max-body-size", server.DefaultMaxBodyBytes, "request body limit in bytes; larger bodies get 413")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "how long a shutdown may drain requests")
	fl.IntVar(&f.gcPercent, "gc-percent", 400, "Go GC target percentage when $GOGC is unset; models live outside the Go heap (ONNX Runtime) or are small, so trading heap for less GC CPU pays (100 = Go's default)")
	fl.StringVar(&f.pprofListen, "pprof-listen", "", "address for Go's pprof profiling endpoints (keep it on loopback), e.g. 127.0.0.1:6060; empty = off")
	fl.StringVar(&f.grpcListen, "grpc-listen", "", "address for the KServe v2 gRPC inference service (GRPCInferenceService), e.g. :8081; empty = off")
	fl.Int64Var(&f.cacheBytes, "cache-size", 0, "bound of the model cache in <state-dir>/cache, in bytes; least recently used models of stopped services go first (0 = no bound)")
	fl.StringVar(&f.onnxRuntime, "onnxruntime-lib", "", "path of libonnxruntime.so (default: $ONNXRUNTIME_LIB, then the project's third_party copy)")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: must be text or json, got %q", format)
}

func serve(ctx context.Context, f serveFlags, stderr io.Writer) error {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if err := configureRuntimes(f); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" && f.gcPercent != 100 {
		// The request path allocates per request; a higher GC target lets the
		// collector run less often next to the model's own threads.
		debug.SetGCPercent(f.gcPercent)
	}
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mt := metrics.New(reg)
	adminToken, created, err := auth.LoadOrCreateAdminToken(f.stateDir)
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	if created {
		// The one time a secret is printed: on the terminal, never in the log.
		fmt.Fprintf(stderr, "\nGenerated the control-plane admin token (kept in %s, mode 0600):\n\n    %s\n\nUse it with: export %s=<token>\n\n",
			filepath.Join(f.stateDir, auth.AdminTokenFile), adminToken, auth.AdminTokenEnv)
	}
	fetcher := &storage.Fetcher{CacheDir: filepath.Join(f.stateDir, "cache"), MaxCacheBytes: f.cacheBytes, Logger: log}
	mgr := service.NewManager(service.Options{StateDir: f.stateDir, Logger: log, Metrics: mt, Fetcher: fetcher})
	srv := server.New(server.Options{Manager: mgr, Logger: log, Metrics: mt, Gatherer: reg, MaxBodyBytes: f.maxBody, AdminToken: adminToken})

	// Restore registers every stored service before the first request; their
	// models load in the background.
	restored, problems := mgr.Restore()
	log.Info("restored services from the state dir", "services", restored, "problems", len(problems))

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "state_dir", f.stateDir)
	if f.pprofListen != "" {
		go func() {
			// net/http/pprof registers on http.DefaultServeMux, which nothing else uses.
			log.Info("pprof listening", "addr", f.pprofListen, "err", http.ListenAndServe(f.pprofListen, nil))
		}()
	}
	var gs *grpc.Server
	if f.grpcListen != "" {
		gln, err := net.Listen("tcp", f.grpcListen)
		if err != nil {
			return fmt.Errorf("--grpc-listen: %w", err)
		}
		gs = grpc.NewServer(grpc.MaxRecvMsgSize(int(f.maxBody)))
		srv.RegisterGRPC(gs)
		go func() {
			if err := gs.Serve(gln); err != nil {
				log.Error("grpc server stopped", "err", err)
			}
		}()
		log.Info("grpc listening", "addr", gln.Addr().String())
	}

	deployAll(ctx, mgr, f.deploy, log)

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// A second signal now kills the process at once (default behaviour).
	signalStop(ctx)
	log.Info("shutting down", "grace", f.grace.String())
	srv.SetDraining()
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

// deployAll parses and deploys the files concurrently. A file that fails is
// reported and skipped; the others serve. A file whose service was restored
// from the state dir with the same configuration changes nothing; with a
// different one it becomes the service's next version.
func deployAll(ctx context.Context, mgr *service.Manager, files []string, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, path := range files {
		spec, err := servicejson.ParseFile(path)
		if err != nil {
			log.Error("service.json rejected; fix it and restart", "file", path, "problems", strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := mgr.Deploy(ctx, spec); err != nil {
				log.Error("deploy failed", "file", path, "err", err)
			}
		}()
	}
	wg.Wait()
}
