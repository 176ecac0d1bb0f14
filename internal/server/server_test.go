package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/custom" // processor_path (a java one is refused)
	_ "github.com/eas-server/eas-server/processors/echo"
)

// stack is a real router over a real manager with the given services.
type stack struct {
	URL string
	mgr *service.Manager
}

// newStack serves services through the real stack; a service that fails to
// load stays listed, as some tests want.
func newStack(t *testing.T, opt server.Options, services ...string) *stack {
	t.Helper()
	st := teststack.New(t, teststack.Options{Server: opt, AllowFailedDeploys: true}, services...)
	return &stack{URL: st.URL, mgr: st.Manager}
}

type reply struct {
	code int
	body string
	hdr  http.Header
}

func do(t *testing.T, method, url string, body []byte, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header}
}

const echoT = `{"name":"echo","processor":"echo","token":"T","metadata":{"instance":1}}`

func TestEchoAuthAndRouting(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	url := s.URL + "/api/predict/echo"
	body := []byte(`[{"x":1}]`)

	// The Go and Python SDKs sign a hex MD5 and a GMT date.
	sum := md5.Sum(body)
	md5hex := hex.EncodeToString(sum[:])
	date := time.Now().UTC().Format(time.RFC1123)
	signed := map[string]string{
		"Content-MD5":   md5hex,
		"Date":          date,
		"Content-Type":  "application/octet-stream",
		"Authorization": "EAS " + auth.Sign("T", "POST", md5hex, "application/octet-stream", date, "/api/predict/echo"),
	}

	tests := []struct {
		name     string
		method   string
		url      string
		hdr      map[string]string
		wantCode int
		wantBody string
	}{
		{"raw token", "POST", url, map[string]string{"Authorization": "T"}, 200, string(body)},
		{"signed", "POST", url, signed, 200, string(body)},
		{"trailing slash", "POST", url + "/", map[string]string{"Authorization": "T"}, 200, string(body)},
		{"no token", "POST", url, nil, 401, "unauthorized"},
		{"wrong token", "POST", url, map[string]string{"Authorization": "X"}, 401, "unauthorized"},
		{"wrong signature", "POST", url, map[string]string{"Authorization": "EAS bm90IGEgc2lnbmF0dXJl"}, 401, "unauthorized"},
		{"unknown service", "POST", s.URL + "/api/predict/nope", map[string]string{"Authorization": "T"}, 404, `service "nope" not found`},
		{"method", "PUT", url, map[string]string{"Authorization": "T"}, 405, "not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.method, tc.url, body, tc.hdr)
			if r.code != tc.wantCode || !strings.Contains(r.body, tc.wantBody) {
				t.Fatalf("%s %s: got %d %q, want %d containing %q", tc.method, tc.url, r.code, r.body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestMetadataOnGet(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	r := do(t, "GET", s.URL+"/api/predict/echo", nil, map[string]string{"Authorization": "T"})
	if r.code != 200 || !strings.Contains(r.body, `"processor":"echo"`) {
		t.Fatalf("GET metadata: %d %q", r.code, r.body)
	}
}

func TestKeepaliveGives408(t *testing.T) {
	s := newStack(t, server.Options{},
		`{"name":"slow","processor":"echo","token":"T","model_config":{"sleep_ms":2000},"metadata":{"instance":1,"rpc":{"keepalive":100}}}`)
	start := time.Now()
	r := do(t, "POST", s.URL+"/api/predict/slow", []byte("x"), map[string]string{"Authorization": "T"})
	if r.code != 408 || !strings.Contains(r.body, "metadata.rpc.keepalive") {
		t.Fatalf("sleep beyond keepalive: got %d %q, want 408 naming metadata.rpc.keepalive", r.code, r.body)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("408 came after %v, want about the 100ms keepalive", el)
	}
}

func TestQueueFullGives450(t *testing.T) {
	const workers, queue = 2, 3
	s := newStack(t, server.Options{},
		`{"name":"busy","processor":"echo","token":"T","model_config":{"sleep_ms":1500},
		  "metadata":{"instance":1,"rpc":{"worker_threads":2,"max_queue_size":3,"keepalive":10000}}}`)
	const total = workers + queue + 4
	codes := make([]int, total)
	elapsed := make([]time.Duration, total)
	var wg sync.WaitGroup
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			codes[i] = do(t, "POST", s.URL+"/api/predict/busy", []byte("x"), map[string]string{"Authorization": "T"}).code
			elapsed[i] = time.Since(start)
		}()
	}
	wg.Wait()
	var ok, full int
	for i, c := range codes {
		switch c {
		case 200:
			ok++
		case 450:
			full++
			if elapsed[i] > time.Second {
				t.Errorf("a 450 took %v; it must come at once", elapsed[i])
			}
		default:
			t.Errorf("unexpected status %d", c)
		}
	}
	if ok != workers+queue || full != total-workers-queue {
		t.Fatalf("got %d x 200 and %d x 450, want %d and %d", ok, full, workers+queue, total-workers-queue)
	}
}

func TestRateLimitGives429(t *testing.T) {
	s := newStack(t, server.Options{},
		`{"name":"rl","processor":"echo","token":"T","metadata":{"instance":1,"rpc":{"rate_limit":1}}}`)
	var limited int
	for range 5 {
		if do(t, "POST", s.URL+"/api/predict/rl", []byte("x"), map[string]string{"Authorization": "T"}).code == 429 {
			limited++
		}
	}
	if limited < 3 {
		t.Fatalf("rate_limit 1: %d of 5 back-to-back requests got 429, want at least 3", limited)
	}
}

func TestBodyLimitGives413(t *testing.T) {
	s := newStack(t, server.Options{MaxBodyBytes: 1024}, echoT)
	r := do(t, "POST", s.URL+"/api/predict/echo", bytes.Repeat([]byte("a"), 2048), map[string]string{"Authorization": "T"})
	if r.code != 413 || !strings.Contains(r.body, "1 KiB") {
		t.Fatalf("oversized body: %d %q, want 413 naming the limit", r.code, r.body)
	}
}

func TestDecompressor(t *testing.T) {
	s := newStack(t, server.Options{},
		`{"name":"gz","processor":"echo","token":"T","metadata":{"instance":1,"rpc":{"decompressor":"gzip"}}}`)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("hello, compressed world"))
	zw.Close()
	r := do(t, "POST", s.URL+"/api/predict/gz", buf.Bytes(), map[string]string{"Authorization": "T"})
	if r.code != 200 || r.body != "hello, compressed world" {
		t.Fatalf("gzip body: %d %q", r.code, r.body)
	}
	r = do(t, "POST", s.URL+"/api/predict/gz", []byte("not gzip"), map[string]string{"Authorization": "T"})
	if r.code != 400 {
		t.Fatalf("corrupt gzip body: %d %q, want 400", r.code, r.body)
	}
}

func TestPanicIsRecoveredAndServiceKeepsServing(t *testing.T) {
	s := newStack(t, server.Options{},
		`{"name":"p","processor":"echo","token":"T","model_config":{"panic_on":"boom"},"metadata":{"instance":1}}`)
	url := s.URL + "/api/predict/p"
	if r := do(t, "POST", url, []byte("boom"), map[string]string{"Authorization": "T"}); r.code != 500 {
		t.Fatalf("panicking request: %d %q, want 500", r.code, r.body)
	}
	if r := do(t, "POST", url, []byte("fine"), map[string]string{"Authorization": "T"}); r.code != 200 || r.body != "fine" {
		t.Fatalf("after a panic: %d %q, want 200 fine", r.code, r.body)
	}
}

func TestBrokenServiceDoesNotDisturbOthers(t *testing.T) {
	s := newStack(t, server.Options{}, echoT,
		`{"name":"broken","processor":"echo","token":"T","model_config":{"sleep_ms":-5},"metadata":{"instance":1}}`)
	if r := do(t, "POST", s.URL+"/api/predict/echo", []byte("ok"), map[string]string{"Authorization": "T"}); r.code != 200 {
		t.Fatalf("healthy service: %d %q", r.code, r.body)
	}
	r := do(t, "POST", s.URL+"/api/predict/broken", []byte("ok"), map[string]string{"Authorization": "T"})
	if r.code != 503 || !strings.Contains(r.body, "sleep_ms") {
		t.Fatalf("failed service: %d %q, want 503 with the reason", r.code, r.body)
	}
	// One bad deploy does not take the healthy service out of rotation:
	// the process stays ready and the report names the failed one.
	r = do(t, "GET", s.URL+"/readyz", nil, nil)
	if r.code != 200 || !strings.HasPrefix(r.body, "ready\n") || !strings.Contains(r.body, "broken: Failed, not serving: ") ||
		!strings.Contains(r.body, "echo: Running, serving\n") || strings.Contains(r.body, "holds readiness") {
		t.Fatalf("/readyz with a failed service: %d %q, want 200 naming it", r.code, r.body)
	}
	if r := do(t, "GET", s.URL+"/v2/health/ready", nil, nil); r.code != 200 {
		t.Fatalf("/v2/health/ready with a failed service: %d", r.code)
	}
	if r := do(t, "GET", s.URL+"/v2/models/broken/ready", nil, map[string]string{"Authorization": "T"}); r.code == 200 {
		t.Fatalf("the failed service's own readiness: %d", r.code)
	}
	if r := do(t, "GET", s.URL+"/healthz", nil, nil); r.code != 200 {
		t.Fatalf("/healthz: %d", r.code)
	}
}

// TestStrictReadiness: with StrictReadiness (serve --readyz-strict) a
// Failed service fails the process's readiness, and the report says which.
func TestStrictReadiness(t *testing.T) {
	s := newStack(t, server.Options{StrictReadiness: true}, echoT,
		`{"name":"broken","processor":"echo","token":"T","model_config":{"sleep_ms":-5},"metadata":{"instance":1}}`)
	r := do(t, "GET", s.URL+"/readyz", nil, nil)
	if r.code != 503 || !strings.HasPrefix(r.body, "not ready\n") || !strings.Contains(r.body, "broken: Failed, not serving, holds readiness: ") {
		t.Fatalf("strict /readyz with a failed service: %d %q", r.code, r.body)
	}
	if r := do(t, "GET", s.URL+"/v2/health/ready", nil, nil); r.code != 503 {
		t.Fatalf("strict /v2/health/ready with a failed service: %d", r.code)
	}
	// Stopping the failed service on purpose makes the process ready.
	if _, err := s.mgr.Stop(t.Context(), "broken"); err != nil {
		t.Fatal(err)
	}
	if r := do(t, "GET", s.URL+"/readyz", nil, nil); r.code != 200 || !strings.Contains(r.body, "broken: Stopped") {
		t.Fatalf("strict /readyz after stopping the failed service: %d %q", r.code, r.body)
	}
}

func TestReadyAndMetrics(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	if r := do(t, "GET", s.URL+"/readyz", nil, nil); r.code != 200 {
		t.Fatalf("/readyz: %d %q", r.code, r.body)
	}
	do(t, "POST", s.URL+"/api/predict/echo", []byte("x"), map[string]string{"Authorization": "T"})
	do(t, "POST", s.URL+"/api/predict/echo", []byte("x"), nil)
	r := do(t, "GET", s.URL+"/metrics", nil, nil)
	for _, want := range []string{
		`eas_requests_total{code="200",service="echo",version="1"} 1`,
		`eas_requests_total{code="401",service="echo",version=""} 1`,
		`eas_batch_size_count{service="echo"} 1`,
		`eas_queue_depth{service="echo"} 0`,
		`eas_queue_wait_seconds_count{service="echo"} 1`,
		`eas_compute_seconds_count{service="echo"} 1`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestBodyLengthMismatch(t *testing.T) {
	s := newStack(t, server.Options{}, `{"name":"echo","processor":"echo","token":"t","metadata":{"instance":1}}`)
	// A body that ends before its Content-Length is a 400, not a hang or a
	// short payload.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /api/predict/echo HTTP/1.1\r\nHost: x\r\nAuthorization: t\r\nContent-Length: 10\r\n\r\nabc")
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "shorter than its Content-Length of 10") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// An exact body is read whole.
	r := do(t, "POST", s.URL+"/api/predict/echo", []byte("0123456789"), map[string]string{"Authorization": "t"})
	if r.code != 200 || r.body != "0123456789" {
		t.Fatalf("%d %q", r.code, r.body)
	}
}

// TestNotReadyWhileStarting: until the services given at start are
// registered, an empty list must not look ready.
func TestNotReadyWhileStarting(t *testing.T) {
	ts := teststack.Start(t)
	srv := ts.Server
	srv.SetStarting()
	if r := do(t, "GET", ts.URL+"/readyz", nil, nil); r.code != 503 || !strings.Contains(r.body, "deploying the services given at start") {
		t.Fatalf("/readyz while starting: %d %q", r.code, r.body)
	}
	srv.SetStarted()
	if r := do(t, "GET", ts.URL+"/readyz", nil, nil); r.code != 200 {
		t.Fatalf("/readyz once started: %d %q", r.code, r.body)
	}
}
