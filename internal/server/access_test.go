package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/syncbuf"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// TestRequestID: every data-plane answer carries X-Request-Id, the
// client's own when sane, else a fresh one per request; control and
// health routes do not need one.
func TestRequestID(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	auth := map[string]string{"Authorization": "T"}
	seen := map[string]bool{}
	for _, path := range []string{"/api/predict/echo", "/api/predict/nosuch", "/v2/models/echo/infer"} {
		for range 3 {
			r := do(t, "POST", s.URL+path, []byte("x"), auth)
			id := r.hdr.Get("X-Request-Id")
			if len(id) != 24 || seen[id] {
				t.Fatalf("%s (%d): X-Request-Id %q: want a fresh 24-character id", path, r.code, id)
			}
			seen[id] = true
		}
	}
	for _, path := range []string{"/api/predict/echo", "/v2/models/echo", "/v2/models/echo/ready"} {
		m := "POST"
		if path != "/api/predict/echo" {
			m = "GET"
		}
		r := do(t, m, s.URL+path, []byte("x"), map[string]string{"Authorization": "T", "X-Request-Id": "client-id-42"})
		if got := r.hdr.Get("X-Request-Id"); got != "client-id-42" {
			t.Errorf("%s: the client's X-Request-Id came back as %q", path, got)
		}
	}
	for _, bad := range []string{strings.Repeat("a", 129), "has space", "tab\there", "caf\u00e9"} {
		r := do(t, "POST", s.URL+"/api/predict/echo", []byte("x"), map[string]string{"Authorization": "T", "X-Request-Id": bad})
		if got := r.hdr.Get("X-Request-Id"); got == bad || len(got) != 24 {
			t.Errorf("X-Request-Id %q: answered %q, want a generated id in its place", bad, got)
		}
	}
}

// TestAccessLog: with Options.AccessLog each data-plane request is one
// line with its id, service, version, status and sizes (body_bytes: as
// read; a request refused before its body was read shows 0), never the
// token or the body; without it nothing is logged.
func TestAccessLog(t *testing.T) {
	var buf syncbuf.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, nil))
	s := newStack(t, server.Options{AccessLog: lg}, `{"name":"echo","processor":"echo","token":"SECRET-TOKEN","metadata":{"instance":1}}`)
	do(t, "POST", s.URL+"/api/predict/echo?q=1", []byte("BODY-CONTENT"), map[string]string{"Authorization": "SECRET-TOKEN", "X-Request-Id": "rid-1"})
	do(t, "POST", s.URL+"/api/predict/echo", []byte("BODY-CONTENT"), map[string]string{"Authorization": "wrong", "X-Request-Id": "rid-2"})
	do(t, "POST", s.URL+"/v2/models/echo/infer", []byte("{}"), map[string]string{"Authorization": "SECRET-TOKEN", "X-Request-Id": "rid-3"})
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 access lines, got:\n%s", out)
	}
	for i, want := range [][]string{
		{"msg=access", "proto=http", "method=POST", "path=/api/predict/echo ", "service=echo", "version=1", "status=200", "request_id=rid-1", "body_bytes=12", "answer_bytes=12", "latency=", "remote=127.0.0.1:"},
		{"service=echo", `version=""`, "status=401", "request_id=rid-2"},
		{"path=/v2/models/echo/infer", "service=echo", "status=400", "request_id=rid-3", "body_bytes=0"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("access line %d lacks %q: %s", i, w, lines[i])
			}
		}
	}
	for _, secret := range []string{"SECRET-TOKEN", "BODY-CONTENT", "q=1"} {
		if strings.Contains(out, secret) {
			t.Errorf("the access log shows %q:\n%s", secret, out)
		}
	}

	var quiet syncbuf.Buffer
	q := newStack(t, server.Options{Logger: slog.New(slog.NewTextHandler(&quiet, nil))}, echoT)
	do(t, "POST", q.URL+"/api/predict/echo", []byte("x"), map[string]string{"Authorization": "T"})
	if strings.Contains(quiet.String(), "msg=access") {
		t.Errorf("access lines without an access log:\n%s", quiet.String())
	}
}

// TestDataPlaneMetrics: requests count by the version that answered,
// the in-flight gauge exists and is back to 0, and the service's info,
// state, load time and the build's info are exported.
func TestDataPlaneMetrics(t *testing.T) {
	s := newStack(t, server.Options{}, echoT)
	do(t, "POST", s.URL+"/api/predict/echo", []byte("x"), map[string]string{"Authorization": "T"})
	r := do(t, "GET", s.URL+"/metrics", nil, nil)
	for _, want := range []string{
		`eas_requests_total{code="200",service="echo",version="1"} 1`,
		`eas_requests_in_flight{service="echo"} 0`,
		`eas_service_info{processor="echo",service="echo",version="1"} 1`,
		`eas_service_state{service="echo",state="Running"} 1`,
		`eas_service_state{service="echo",state="Creating"} 0`,
		`eas_model_load_seconds_count{service="echo"} 1`,
		`eas_build_info{goversion="go`,
		`version="` + server.Version + `"} 1`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestGRPCRequestID: a gRPC infer call gets x-request-id in its response
// header, its own when sane, and an access line.
func TestGRPCRequestID(t *testing.T) {
	var buf syncbuf.Buffer
	client := teststack.New(t, teststack.Options{Server: server.Options{AccessLog: slog.New(slog.NewTextHandler(&buf, nil))}}, echoT).GRPC(t)
	for _, sent := range []string{"", "grpc-rid-7"} {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "T")
		if sent != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-request-id", sent)
		}
		var hdr metadata.MD
		_, err := client.ModelInfer(ctx, &kservegrpc.ModelInferRequest{ModelName: "echo"}, grpc.Header(&hdr))
		if err == nil {
			t.Fatal("echo is no tensor model; the call should fail")
		}
		got := hdr.Get("x-request-id")
		switch {
		case len(got) != 1:
			t.Fatalf("x-request-id in the header: %q", got)
		case sent != "" && got[0] != sent, sent == "" && len(got[0]) != 24:
			t.Errorf("sent x-request-id %q, got back %q", sent, got[0])
		}
	}
	if out := buf.String(); !strings.Contains(out, "proto=grpc") || !strings.Contains(out, "request_id=grpc-rid-7") || !strings.Contains(out, "status=InvalidArgument") {
		t.Errorf("gRPC access lines:\n%s", out)
	}
}
