package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Gateway is the one endpoint of every service on Kubernetes: it proxies
// /api/predict/<name>... and the KServe /v2/models/<name>... paths to the
// service's Kubernetes Service, which balances over its ready pods. It
// knows the services from a watch of their Services (no token, no
// Secret: the pods check tokens, as on one machine), so a name that is no
// service is answered here. docs/kubernetes.md says why a gateway rather
// than an Ingress per service.
type Gateway struct {
	Namespace string
	Log       *slog.Logger
	// Upstream is the base URL of a service's Kubernetes Service, from its
	// object name; nil = http://<obj>.<namespace>.svc:8080.
	Upstream func(obj string) string

	services listerscorev1.ServiceLister
	synced   cache.InformerSynced
	proxy    *httputil.ReverseProxy
}

// Start watches the namespace's eas-server Services until ctx ends.
func (g *Gateway) Start(ctx context.Context, cs kubernetes.Interface) {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute,
		informers.WithNamespace(g.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelManagedBy + "=" + ManagedBy }))
	inf := f.Core().V1().Services()
	g.services = inf.Lister()
	g.synced = inf.Informer().HasSynced
	f.Start(ctx.Done())
	if g.Upstream == nil {
		g.Upstream = func(obj string) string {
			return fmt.Sprintf("http://%s.%s.svc:%d", obj, g.Namespace, HTTPPort)
		}
	}
	if g.Log == nil {
		g.Log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	g.proxy = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pr.In.Context().Value(upstreamKey{}).(*url.URL))
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.Log.Warn("gateway: upstream failed", "path", r.URL.Path, "err", err)
			http.Error(w, "the service's pods did not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
}

// upstreamKey carries the chosen upstream from ServeHTTP to Rewrite in
// the request's context.
type upstreamKey struct{}

// ServeHTTP routes one request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		fmt.Fprintln(w, "ok")
		return
	case "/readyz":
		if g.synced == nil || !g.synced() {
			http.Error(w, "not ready: the list of services has not been read yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
		return
	}
	name, ok := serviceOf(r.URL.Path)
	if !ok {
		http.Error(w, "no route for "+r.Method+" "+r.URL.Path+"; the gateway serves /api/predict/<service> and /v2/models/<service>", http.StatusNotFound)
		return
	}
	obj, err := ObjectName(name)
	var svc *corev1.Service
	if err == nil && g.services != nil {
		svc, err = g.services.Services(g.Namespace).Get(obj)
	}
	if err != nil || svc == nil {
		// As on one machine, a caller learns nothing of which names exist
		// from a request it has no token for.
		http.Error(w, fmt.Sprintf("service %q: unauthorized: the token is missing or wrong", name), http.StatusUnauthorized)
		return
	}
	target, err := url.Parse(g.Upstream(obj))
	if err != nil {
		http.Error(w, "gateway: bad upstream for "+obj+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), upstreamKey{}, target)))
}

// serviceOf finds the service a data-plane path names.
func serviceOf(path string) (string, bool) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/api/predict/"):
		rest = strings.TrimPrefix(path, "/api/predict/")
	case strings.HasPrefix(path, "/v2/models/"):
		rest = strings.TrimPrefix(path, "/v2/models/")
	default:
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, name != ""
}
