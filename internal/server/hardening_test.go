package server_test

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/wait"
)

// rawRequest writes head (a request without its body) on a new connection
// and returns the connection and a reader of its answers. The body it
// announces is never sent.
func rawRequest(t *testing.T, url, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken server from hanging the test; the
	// assertion is that an answer comes while the body is still unsent.
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn, bufio.NewReader(conn)
}

// Issue 14: a request with a wrong token that announces a body and sends it
// slowly held its connection open (net/http reads a small unread body
// before answering). It must be answered 401 from the headers alone, and
// the connection closed rather than read on.
func TestWrongTokenAnsweredBeforeTheBody(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	for _, path := range []string{"/api/predict/echo", "/api/predict/echo/v2/models/m/infer", "/v2/models/echo/infer", "/api/predict/nope", "/v2/models/nope/infer"} {
		t.Run(path, func(t *testing.T) {
			conn, br := rawRequest(t, s.URL, "POST "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: wrong\r\nContent-Length: 100000\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body is unsent: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got %d, want 401", resp.StatusCode)
			}
			if !resp.Close {
				t.Errorf("the 401 does not close the connection (Connection: %q)", resp.Header.Get("Connection"))
			}
			// The server closes: a read sees EOF, not a wait for more.
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("after the 401 the connection is still open: %v", err)
			}
			_ = conn
		})
	}
}

// A client with the right token that stalls its body gets 408 when the
// body-read deadline passes, and the connection is closed.
func TestStalledBodyTimesOut(t *testing.T) {
	s := newStack(t, server.Options{BodyReadTimeout: 300 * time.Millisecond}, echoT)
	_, br := rawRequest(t, s.URL, "POST /api/predict/echo HTTP/1.1\r\nHost: x\r\nAuthorization: T\r\nContent-Length: 100000\r\n\r\nabc")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("stalled body: %d %q close=%v, want 408 and Connection: close", resp.StatusCode, b, resp.Close)
	}
}

// Issue 14: a signed request replayed with another body passed.
func TestSignedRequestBoundToItsBody(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	body := []byte("the signed body")
	sum := md5.Sum(body)
	md5hex := hex.EncodeToString(sum[:])
	date := time.Now().UTC().Format(http.TimeFormat)
	hdr := map[string]string{
		"Content-MD5":   md5hex,
		"Date":          date,
		"Content-Type":  "application/octet-stream",
		"Authorization": "EAS " + auth.Sign("T", "POST", md5hex, "application/octet-stream", date, "/api/predict/echo"),
	}
	if r := do(t, "POST", s.URL+"/api/predict/echo", body, hdr); r.code != 200 || r.body != string(body) {
		t.Fatalf("signed request: %d %q", r.code, r.body)
	}
	if r := do(t, "POST", s.URL+"/api/predict/echo", []byte("another body"), hdr); r.code != 401 {
		t.Fatalf("same signature, another body: %d %q, want 401", r.code, r.body)
	}
	old := "Mon, 01 Jan 2001 00:00:00 GMT"
	hdr["Date"] = old
	hdr["Authorization"] = "EAS " + auth.Sign("T", "POST", md5hex, "application/octet-stream", old, "/api/predict/echo")
	if r := do(t, "POST", s.URL+"/api/predict/echo", body, hdr); r.code != 401 {
		t.Fatalf("Date in 2001: %d %q, want 401", r.code, r.body)
	}
}

// Issue 14: without a token, 404 against 401 told which service names exist.
// A request whose token opens no service gets the same 401 for both.
func TestUnknownServiceIndistinguishableWithoutToken(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	for _, hdr := range []map[string]string{nil, {"Authorization": "wrong"}} {
		known := do(t, "POST", s.URL+"/api/predict/echo", []byte("x"), hdr)
		unknown := do(t, "POST", s.URL+"/api/predict/nope", []byte("x"), hdr)
		if known.code != 401 || unknown.code != 401 {
			t.Fatalf("auth %v: existing service %d, unknown %d; want 401 for both", hdr, known.code, unknown.code)
		}
		if strings.ReplaceAll(known.body, "echo", "nope") != unknown.body {
			t.Errorf("bodies differ beyond the name: %q vs %q", known.body, unknown.body)
		}
		kk := do(t, "POST", s.URL+"/v2/models/nope/infer", []byte("{}"), hdr)
		if kk.code != 401 {
			t.Errorf("KServe unknown model, auth %v: %d, want 401", hdr, kk.code)
		}
	}
	// A caller whose token opens a service still learns of a typo.
	if r := do(t, "POST", s.URL+"/api/predict/nope", []byte("x"), map[string]string{"Authorization": "T"}); r.code != 404 {
		t.Fatalf("unknown service with a valid token: %d, want 404", r.code)
	}
}

// Issue 14: /metrics listed service names to anyone.
func TestMetricsRequireAdmin(t *testing.T) {
	s := newStack(t, server.Options{AdminToken: admin, MetricsRequireAdmin: true}, echoT)
	if r := do(t, "GET", s.URL+"/metrics", nil, nil); r.code != 401 || strings.Contains(r.body, "echo") {
		t.Fatalf("/metrics without the admin token: %d %q", r.code, r.body)
	}
	if r := do(t, "GET", s.URL+"/metrics", nil, adminHdr(admin)); r.code != 200 || !strings.Contains(r.body, "eas_") {
		t.Fatalf("/metrics with the admin token: %d", r.code)
	}
	open := newStack(t, server.Options{AdminToken: admin}, echoT)
	if r := do(t, "GET", open.URL+"/metrics", nil, nil); r.code != 200 {
		t.Fatalf("/metrics by default: %d", r.code)
	}
}

// Issue 14: a long name echoed ~100 KB back in the error body.
func TestErrorBodiesCapped(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	long := strings.Repeat("n", 100_000)
	for _, path := range []string{"/api/predict/" + long, "/v2/models/" + long + "/infer"} {
		r := do(t, "POST", s.URL+path, []byte("x"), map[string]string{"Authorization": "T"})
		if r.code != 404 {
			t.Fatalf("%d", r.code)
		}
		if len(r.body) > 4200 || !strings.Contains(r.body, "...") {
			t.Errorf("%s...: error body of %d bytes, want at most about 4 KiB ending in ...", path[:20], len(r.body))
		}
	}
}

// Issue 33: /readyz gave anyone every service's failure message (and so
// tracebacks and worker output) even with --metrics-require-admin.
func TestReadyzDetailsRequireAdmin(t *testing.T) {
	broken := `{"name":"broken","processor":"xgboost","model_path":"/nonexistent/secret-path/m.json","token":"B","metadata":{"instance":1}}`
	for _, c := range []struct {
		requireAdmin bool
		hdr          map[string]string
		detail       bool
	}{
		{true, nil, false},
		{true, map[string]string{"Authorization": "wrong"}, false},
		{true, adminHdr(admin), true},
		{false, nil, true},
	} {
		s := newStack(t, server.Options{AdminToken: admin, MetricsRequireAdmin: c.requireAdmin}, echoT, broken)
		var r reply
		wait.Until(t, 10*time.Second, func() error {
			if r = do(t, "GET", s.URL+"/readyz", nil, c.hdr); !strings.Contains(r.body, "broken: Failed") {
				return fmt.Errorf("/readyz does not list the failed service yet: %q", r.body)
			}
			return nil
		})
		if !strings.Contains(r.body, "echo: Running") {
			t.Errorf("require admin %v, %v: names and states must stay: %q", c.requireAdmin, c.hdr, r.body)
		}
		if got := strings.Contains(r.body, "secret-path"); got != c.detail {
			t.Errorf("require admin %v, %v: the failure message shown %v, want %v:\n%s", c.requireAdmin, c.hdr, got, c.detail, r.body)
		}
	}
}
