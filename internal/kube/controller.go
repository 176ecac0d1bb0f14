package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/eas-server/eas-server/internal/server"
)

// ControllerConfig is eas-server controller's setup.
type ControllerConfig struct {
	Rest          *rest.Config
	Listener      net.Listener // the control plane API, /healthz and /readyz
	AdminToken    string
	Region        string
	Options       Options // Namespace included
	MaxModelBytes int64
	Log           *slog.Logger

	skipNameValidation bool // tests run several controllers in one process
}

// RestConfig is the API server's address and credentials: the kubeconfig
// file named, else $KUBECONFIG, else the pod's in-cluster account, else
// ~/.kube/config.
func RestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes API server to talk to: %w; give --kubeconfig or run in a pod", err)
	}
	return cfg, nil
}

// DefaultNamespace is $POD_NAMESPACE (the chart sets it from the downward
// API), else "default".
func DefaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// Scheme knows the built-in kinds and EASService.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = AddToScheme(s)
	return s
}

// Controller is the reconcile loop (Manager) and the control plane API
// (Handler) of one namespace.
type Controller struct {
	Manager    ctrl.Manager
	Handler    http.Handler
	Reconciler *Reconciler // the loop's; read its Completed count, change nothing
}

// NewController sets a Controller up; Manager.Start runs the loop. It
// refuses a cluster that does not serve the EASService CRD (CheckCRD).
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.AdminToken == "" {
		return nil, errors.New("no admin token: set EAS_ADMIN_TOKEN (the chart sets it from a Secret); the control plane refuses every request without one")
	}
	if err := CheckCRD(cfg.Rest); err != nil {
		return nil, err
	}
	scheme := Scheme()
	ns := cfg.Options.Namespace
	mgr, err := ctrl.NewManager(cfg.Rest, ctrl.Options{
		Scheme:     scheme,
		Cache:      ctrlcache.Options{DefaultNamespaces: map[string]ctrlcache.Config{ns: {}}},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: &cfg.skipNameValidation},
		Logger:     logr.FromSlogHandler(cfg.Log.Handler()),
	})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	rec := &Reconciler{Client: mgr.GetClient(), Options: cfg.Options, Recorder: mgr.GetEventRecorder("eas-server"),
		Log: cfg.Log, MaxModelBytes: cfg.MaxModelBytes}
	if err := rec.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	// The API reads from the API server, not the manager's cache, so a
	// create is seen by the very next call.
	direct, err := client.New(cfg.Rest, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	backend := &Backend{Client: direct, Namespace: ns, MaxModelBytes: cfg.MaxModelBytes}
	srv := server.New(server.Options{Control: backend, AdminToken: cfg.AdminToken, Logger: cfg.Log, Region: cfg.Region})
	return &Controller{Manager: mgr, Handler: srv.ControlHandler(), Reconciler: rec}, nil
}

// RunController runs the reconcile loop and serves the control plane API
// until ctx ends.
func RunController(ctx context.Context, cfg ControllerConfig) error {
	ctrl.SetLogger(logr.FromSlogHandler(cfg.Log.Handler()))
	c, err := NewController(cfg)
	if err != nil {
		return err
	}
	return serveUntilDone(ctx, cfg.Listener, c.Handler, cfg.Log, c.Manager.Start)
}

// GatewayConfig is eas-server gateway's setup.
type GatewayConfig struct {
	Rest      *rest.Config
	Listener  net.Listener
	Namespace string
	Log       *slog.Logger
}

// RunGateway serves the gateway until ctx ends.
func RunGateway(ctx context.Context, cfg GatewayConfig) error {
	cs, err := kubernetes.NewForConfig(cfg.Rest)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{Namespace: cfg.Namespace, Log: cfg.Log}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.Start(ctx, cs)
	return serveUntilDone(ctx, cfg.Listener, g, cfg.Log, nil)
}

// serveUntilDone serves h on ln (and runs background, when given) until
// ctx ends or either fails, then shuts the HTTP server down gracefully.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, background func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	errs := make(chan error, 2)
	go func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	if background != nil {
		go func() { errs <- background(ctx) }()
	}
	log.Info("listening", "addr", ln.Addr().String())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	return err
}
