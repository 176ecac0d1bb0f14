// Package teststack starts the real serving stack for tests: a service
// manager on a temporary state dir with the given service.json texts
// deployed, and the real router, with /metrics, on an httptest server. It is
// the one copy of that setup the tests of many packages share (only
// internal/server's BenchmarkRequestPath builds a bare router, without
// metrics, to measure the request path alone); it imports
// testing and is for tests only.
package teststack

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/eas-server/eas-server/internal/history"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// Options tune New. The zero value deploys every service and fails the test
// when one does not load.
type Options struct {
	// Server configures the router; its Manager, Metrics and Gatherer are
	// filled in, and History when nil.
	Server server.Options
	// Service configures the manager (a Logger, a Fetcher, QueueBroker
	// for JetStream, ...); its Metrics are filled in, and StateDir, when
	// empty, with a temporary directory.
	Service service.Options
	// AllowFailedDeploys keeps going when a service does not load (the
	// service stays listed, Failed, and its error is in
	// Stack.DeployErrors): for tests of broken services.
	AllowFailedDeploys bool
	// HistoryInterval, when set, starts the metrics history sampler at this
	// interval (the console's charts move by themselves); by default it is
	// never started and tests take samples with History.Sample.
	HistoryInterval time.Duration
}

// Stack is a running stack; it is closed when the test ends.
type Stack struct {
	URL      string           // the router's base URL
	HTTP     *httptest.Server // serving the router
	StateDir string           // the manager's state dir (its model cache is StateDir/cache)
	Manager  *service.Manager
	Server   *server.Server
	Registry *prometheus.Registry // what /metrics serves
	History  *history.Sampler     // what /api/v2/metrics serves; sampled by Sample unless Options.HistoryInterval
	// DeployErrors holds the load error of each service given to New that
	// did not load (only with Options.AllowFailedDeploys), by name.
	DeployErrors map[string]error
}

// New deploys services (service.json texts) and serves them. A text that
// does not parse always fails the test.
func New(t testing.TB, opt Options, services ...string) *Stack {
	t.Helper()
	reg := prometheus.NewRegistry()
	mt := metrics.New(reg)
	if opt.Service.StateDir == "" {
		opt.Service.StateDir = t.TempDir()
	}
	opt.Service.Metrics = mt
	mgr := service.NewManager(opt.Service)
	deployErrs := map[string]error{}
	for _, js := range services {
		spec, err := servicejson.Parse([]byte(js))
		if err != nil {
			t.Fatalf("service.json %s: %v", js, err)
		}
		if _, err := mgr.Deploy(context.Background(), spec); err != nil {
			if !opt.AllowFailedDeploys {
				t.Fatalf("deploy %s: %v", spec.Name, err)
			}
			deployErrs[spec.Name] = err
		}
	}
	opt.Server.Manager, opt.Server.Metrics, opt.Server.Gatherer = mgr, mt, reg
	if opt.Server.History == nil {
		// The first sample is the base the next counts from.
		opt.Server.History = history.New(history.Options{Gatherer: reg, Interval: opt.HistoryInterval})
		opt.Server.History.Sample(time.Now())
		if opt.HistoryInterval > 0 {
			opt.Server.History.Start(context.Background())
			t.Cleanup(opt.Server.History.Stop)
		}
	}
	srv := server.New(opt.Server)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		mgr.Shutdown(context.Background())
	})
	return &Stack{URL: ts.URL, HTTP: ts, StateDir: opt.Service.StateDir, Manager: mgr, Server: srv, Registry: reg,
		History: opt.Server.History, DeployErrors: deployErrs}
}

// Start is New with the default options.
func Start(t testing.TB, services ...string) *Stack {
	t.Helper()
	return New(t, Options{}, services...)
}

// GRPC serves the stack's KServe gRPC service on a loopback port and
// returns a client of it (messages up to 64 MiB); both close when the test
// ends.
func (s *Stack) GRPC(t testing.TB) kservegrpc.GRPCInferenceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.GRPCAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return kservegrpc.NewGRPCInferenceServiceClient(conn)
}

// GRPCAddr serves the stack's KServe gRPC service on a loopback port
// (messages up to 64 MiB) and returns its host:port, for clients of other
// processes; it stops when the test ends.
func (s *Stack) GRPCAddr(t testing.TB) string {
	t.Helper()
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	s.Server.RegisterGRPC(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// Do sends one request, with token as its Authorization ("" sends none)
// and header as name, value pairs, and returns the answer's status, body
// and header. A request that gets no answer is an error of the test (not
// fatal, so that goroutines may call Do): status 0, the error as the body.
func Do(t testing.TB, method, url, token string, body []byte, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, []byte(err.Error()), nil
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("reading the answer to %s %s: %v", method, url, err)
	}
	return resp.StatusCode, b, resp.Header
}

// Metric reads one series of baseURL's /metrics (e.g.
// `eas_batch_size_count{service="s"}`, labels as Prometheus prints them);
// -1 when the series is absent (no sample is negative).
func Metric(t testing.TB, baseURL, series string) float64 {
	t.Helper()
	code, body, _ := Do(t, http.MethodGet, baseURL+"/metrics", "", nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("/metrics: %s: %v", series, err)
	}
	return v
}

// WriteFile writes body to dir/name and returns the file's path.
func WriteFile(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
