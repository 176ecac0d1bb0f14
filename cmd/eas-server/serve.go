package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	_ "net/http/pprof" // served only with --pprof-listen
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/queue"
	"github.com/eas-server/eas-server/servicejson"
)

type serveFlags struct {
	listen      string
	stateDir    string
	deploy      []string
	tokenFile   string // --token-file: the token of --deploy services that give none
	noControl   bool   // --no-control-plane: serve the --deploy services only
	console     bool   // --console: the web console at /console/
	maxBody     int64
	queueRead   int64
	logLevel    string
	logFormat   string
	grace       time.Duration
	delay       time.Duration // --shutdown-delay: not-ready but serving
	strictReady bool
	onnxRuntime string
	// tensorflowLib is --tensorflow-lib: libtensorflow_cc.so.2 for
	// tensorflow_* services with model_config.runtime libtensorflow/auto.
	tensorflowLib string
	// tensorflowOpDirs is --tensorflow-op-library-dir: folders whose custom
	// op libraries services may load by absolute path.
	tensorflowOpDirs []string
	cacheBytes       int64
	maxModel         int64
	queueBroker      string // --queue-broker: asynchronous services' queues on NATS JetStream
	queueSync        bool   // --queue-fsync-each-put
	// downloadIdle and downloadTimeout bound model downloads.
	downloadIdle, downloadTimeout time.Duration
	grpcListen                    string
	pprofListen                   string
	gcPercent                     int

	idleTimeout     time.Duration
	bodyReadTimeout time.Duration
	maxConns        int
	grpcMaxStreams  uint32
	sigWindow       time.Duration
	sigZones        string
	sigAnyZone      bool
	sigReplay       int
	metricsAdmin    bool
	accessLog       bool
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
	fl.BoolVar(&f.console, "console", true, "serve the web console at /console/ (and send / there); it calls the control plane with the admin token the user types, so it needs the control plane")
	fl.BoolVar(&f.noControl, "no-control-plane", false, "serve only the --deploy services: no /api/v2/services and no admin token (how the pods of eas-server controller run)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the token of the --deploy services whose service.json gives none (on Kubernetes, a mounted Secret); without it they get a token generated and kept in the state dir")
	fl.Int64Var(&f.maxBody, "max-body-size", server.DefaultMaxBodyBytes, "request body limit in bytes; larger bodies get 413")
	fl.Int64Var(&f.queueRead, "queue-max-read-bytes", queue.DefaultMaxReadBytes, "the most bytes of entries one read of an asynchronous service's queue answers (at least one entry; the rest by X-Eas-Queueservice-Next-Index)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fl.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "after --shutdown-delay, how long in-flight and queued requests may take to finish")
	fl.DurationVar(&f.delay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long to keep serving while /readyz answers 503 (so load balancers stop sending) before new connections are refused")
	fl.BoolVar(&f.strictReady, "readyz-strict", false, "a Failed service makes /readyz answer 503 too (by default only services still loading do)")
	fl.IntVar(&f.gcPercent, "gc-percent", 400, "Go GC target percentage when $GOGC is unset; models live outside the Go heap (ONNX Runtime) or are small, so trading heap for less GC CPU pays (100 = Go's default)")
	fl.StringVar(&f.pprofListen, "pprof-listen", "", "address for Go's pprof profiling endpoints (keep it on loopback), e.g. 127.0.0.1:6060; empty = off")
	fl.StringVar(&f.grpcListen, "grpc-listen", "", "address for the KServe v2 gRPC inference service (GRPCInferenceService), e.g. :8081; empty = off")
	fl.StringVar(&f.queueBroker, "queue-broker", "", "keep asynchronous services' queues on a NATS JetStream server (nats://host:4222) instead of in <state-dir>; empty = embedded")
	fl.BoolVar(&f.queueSync, "queue-fsync-each-put", false, "fsync every put into an embedded queue on its own, instead of once per batch of concurrent puts (both are durable when the put answers; batching is faster)")
	fl.Int64Var(&f.maxModel, "max-model-size", processors.DefaultMaxModelBytes, "most bytes of one service's model: each download (storage) and what a processor reads at load; larger models fail the deploy")
	fl.DurationVar(&f.downloadIdle, "download-idle-timeout", storage.DefaultIdleTimeout, "a model download attempt that receives no byte for this long fails (and is retried)")
	fl.DurationVar(&f.downloadTimeout, "download-timeout", 6*time.Hour, "most time one model download may take, retries included (0 = no limit)")
	fl.Int64Var(&f.cacheBytes, "cache-size", 0, "bound of the model cache in <state-dir>/cache, in bytes; least recently used models of stopped services go first (0 = no bound)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 120*time.Second, "close a keep-alive connection (HTTP or gRPC) idle this long")
	fl.DurationVar(&f.bodyReadTimeout, "body-read-timeout", server.DefaultBodyReadTimeout, "how long a request body may take to arrive; a data-plane request gets at least its service's rpc.keepalive; a late body gets 408")
	fl.IntVar(&f.maxConns, "max-connections", 10000, "most connections open at once on each listener (HTTP, gRPC); more wait to be accepted (0 = no cap)")
	fl.Uint32Var(&f.grpcMaxStreams, "grpc-max-streams", 1000, "most concurrent gRPC calls on one connection")
	fl.DurationVar(&f.sigWindow, "signature-window", auth.DefaultSignatureWindow, "how far the Date of an EAS-signed request may lie from the server's clock read in the client's zone, either way, and how long after its first use a signature is good (negative = neither checked)")
	fl.BoolVar(&f.sigAnyZone, "signature-any-zone", true, "accept EAS-signed requests stamped in any time zone (UTC-12:00..UTC+14:00: the Go and Python SDKs stamp local time labelled GMT), each signature good only within --signature-window of its first use; false = only UTC, the server's zone and --signature-client-zones, with no memory of signatures")
	fl.StringVar(&f.sigZones, "signature-client-zones", "", "with --signature-any-zone=false, the UTC offsets of the clients' zones besides UTC and the server's, e.g. +08:00,-05:00")
	fl.IntVar(&f.sigReplay, "signature-replay-cache", auth.DefaultReplayEntries, "most EAS signatures remembered for the replay check (about 52 bytes each; a day of signed requests needs 86400 x their rate per second); past it the oldest are forgotten early")
	fl.BoolVar(&f.accessLog, "access-log", false, "log one line per data-plane request (method, path, service, version, status, latency, request id, remote address, body bytes; never tokens or bodies)")
	fl.BoolVar(&f.metricsAdmin, "metrics-require-admin", false, "serve /metrics, and /readyz's per-service messages, only with the admin token (they name every service and say why each failed)")
	fl.StringVar(&f.onnxRuntime, "onnxruntime-lib", "", "path of libonnxruntime.so (default: $ONNXRUNTIME_LIB, then the project's third_party copy)")
	fl.StringVar(&f.tensorflowLib, "tensorflow-lib", "", "path of TensorFlow's libtensorflow_cc.so.2, or its folder (a pip wheel's site-packages/tensorflow), for tensorflow_* services with model_config.runtime libtensorflow or auto (default: $EAS_TENSORFLOW_LIB, then third_party/tensorflow, then the Python site-packages processors/tensorflow/README.md lists)")
	fl.StringArrayVar(&f.tensorflowOpDirs, "tensorflow-op-library-dir", nil, "a folder whose custom op libraries (.so) tensorflow_* services on libtensorflow may load by absolute path in model_config.op_libraries (repeatable; paths relative to the TensorFlow installation are always allowed). An op library runs inside this process with its rights: allow only folders you trust")
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

// serve runs `eas-server serve`: it builds the server from the flags,
// serves until a signal, then drains and shuts down. Each step is a
// function in serve_steps.go; their order is the order of side effects.
func serve(ctx context.Context, f serveFlags, stderr io.Writer) error {
	log, err := setupProcess(f)
	if err != nil {
		return err
	}
	lock, err := service.LockStateDir(f.stateDir)
	if err != nil {
		return err
	}
	defer lock.Release() //nolint:errcheck // the kernel releases it at exit anyway
	m := newServeMetrics()
	adminToken, err := loadAdminToken(f, stderr)
	if err != nil {
		return err
	}
	mgr := newManager(f, log, m)
	sig, err := signatureOptions(f, log)
	if err != nil {
		return err
	}
	hist := startHistory(ctx, f, m, log)
	if hist != nil {
		defer hist.Stop()
	}
	srv := newServer(f, log, m, mgr, adminToken, sig, hist)
	token, err := readDeployToken(f.tokenFile)
	if err != nil {
		return err
	}
	if len(f.deploy) > 0 {
		srv.SetStarting() // until deployAtStart has registered (and loaded) them
	}
	restore(mgr, log)
	hs, serveErr, err := listenHTTP(f, srv, log)
	if err != nil {
		return err
	}
	startPprof(f.pprofListen, log)
	gs, err := listenGRPC(f, srv, log)
	if err != nil {
		return err
	}
	deployAtStart(ctx, f, mgr, srv, token, log)
	if err := waitForSignal(ctx, serveErr); err != nil {
		return err
	}
	return drainAndShutdown(ctx, f, log, srv, hs, serveErr, gs, mgr)
}

// parseZones reads --signature-client-zones: comma-separated UTC offsets
// such as +08:00 or -05:30.
func parseZones(list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, z := range strings.Split(list, ",") {
		z = strings.TrimSpace(z)
		if z == "" {
			continue
		}
		t, err := time.Parse("-07:00", z)
		if err != nil {
			return nil, fmt.Errorf("--signature-client-zones: %q is not a UTC offset such as +08:00", z)
		}
		_, off := t.Zone()
		out = append(out, time.Duration(off)*time.Second)
	}
	return out, nil
}

// deployAll parses and deploys the files concurrently. A file that fails is
// reported and skipped; the others serve. A file whose service was restored
// from the state dir with the same configuration changes nothing; with a
// different one it becomes the service's next version.
func deployAll(ctx context.Context, mgr *service.Manager, files []string, token string, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, path := range files {
		spec, err := servicejson.ParseFile(path)
		if err != nil {
			log.Error("service.json rejected; fix it and restart", "file", path, "problems", strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		if spec.Token.IsZero() && token != "" {
			spec.Token = servicejson.NewSecret(token)
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

// registerCacheMetrics exposes the model cache's size, read once per scrape
// (a walk of the entries' metadata and of the partial downloads).
func registerCacheMetrics(reg prometheus.Registerer, f *storage.Fetcher) {
	reg.MustRegister(cacheCollector{f})
}

var (
	cacheBytesDesc   = prometheus.NewDesc("eas_model_cache_bytes", "Bytes of complete models in the model cache.", nil, nil)
	cacheEntriesDesc = prometheus.NewDesc("eas_model_cache_entries", "Complete models in the model cache.", nil, nil)
	cacheInUseDesc   = prometheus.NewDesc("eas_model_cache_in_use_bytes", "Bytes of cached models a service holds (prune and eviction keep them).", nil, nil)
	cachePartialDesc = prometheus.NewDesc("eas_model_cache_partial_bytes", "Bytes of partial (resumable) downloads in the model cache.", nil, nil)
	cacheMaxDesc     = prometheus.NewDesc("eas_model_cache_max_bytes", "The model cache's bound (--cache-size); 0 = unbounded.", nil, nil)
)

type cacheCollector struct{ f *storage.Fetcher }

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheBytesDesc, cacheEntriesDesc, cacheInUseDesc, cachePartialDesc, cacheMaxDesc} {
		ch <- d
	}
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	_, u := c.f.CacheList()
	for d, v := range map[*prometheus.Desc]int64{
		cacheBytesDesc: u.Bytes, cacheEntriesDesc: int64(u.Entries), cacheInUseDesc: u.InUseBytes,
		cachePartialDesc: u.PartialBytes, cacheMaxDesc: u.MaxBytes,
	} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
}

// consoleHost turns a listening address into one a browser can open: an
// unspecified host (:8080, [::]:8080) becomes 127.0.0.1.
func consoleHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
