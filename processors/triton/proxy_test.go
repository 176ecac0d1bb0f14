package triton_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/kserve"
)

const peerToken = "peer-token"

// newPeer starts the upstream: a second eas-server serving mlp.onnx as the
// onnx_cpu service "mlp" on its KServe v2 routes.
func newPeer(t *testing.T) *stack {
	t.Helper()
	model, err := filepath.Abs(filepath.Join("..", "onnx", "testdata", "mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return newStack(t, `{"name":"mlp","processor":"onnx_cpu","model_path":`+quote(model)+`,"token":"`+peerToken+`","metadata":{"instance":1}}`)
}

// startGRPCPeer serves the peer's KServe v2 gRPC API (the server's own
// RegisterGRPC) on loopback; delay, when set, holds every ModelInfer that
// long first, to play a slow upstream.
func startGRPCPeer(t *testing.T, peer *stack, delay time.Duration) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	slow := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if delay > 0 && strings.HasSuffix(info.FullMethod, "/ModelInfer") {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return handler(ctx, req)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(slow))
	peer.srv.RegisterGRPC(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// proxyService is a triton service proxying to url.
func proxyService(url string, keepaliveMS int) string {
	return `{"name":"tri","processor":"triton","token":"` + token + `","processor_params":["--url=` + url + `","--upstream-token=` + peerToken + `","--allow-grpc=true"],"metadata":{"instance":1,"rpc.keepalive":` + itoa(keepaliveMS) + `}}`
}

func TestProxy(t *testing.T) {
	peer := newPeer(t)
	upstreams := map[string]string{
		"http": peer.URL,
		"grpc": "grpc://" + startGRPCPeer(t, peer, 0),
	}
	cases := loadCases(t, "mlp")
	auth := map[string]string{"Authorization": token}
	for kind, url := range upstreams {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, proxyService(url, 5000))
			r := do(t, "GET", s.URL+"/v2/models/mlp", nil, auth)
			var md kserve.ModelMetadata
			if r.code != 200 || json.Unmarshal(r.body, &md) != nil || md.Name != "mlp" || len(md.Inputs) != 1 || md.Inputs[0].Name != "input" {
				t.Fatalf("metadata: %d %s", r.code, r.body)
			}
			if r := do(t, "GET", s.URL+"/v2/models/mlp/ready", nil, auth); r.code != 200 {
				t.Fatalf("ready: %d %s", r.code, r.body)
			}
			if r := do(t, "GET", s.URL+"/v2/health/ready", nil, nil); r.code != 200 {
				t.Fatalf("server ready with the upstream up: %d", r.code)
			}
			for _, c := range cases {
				// JSON in, JSON out, on both route families.
				for _, u := range []string{s.URL + "/v2/models/mlp/infer", s.URL + "/api/predict/tri/mlp"} {
					r := do(t, "POST", u, c.req, auth)
					if r.code != 200 {
						t.Fatalf("%s %s: %d %s", u, c.name, r.code, r.body)
					}
					resp, err := kserve.DecodeResponse(r.body, r.hdr.Get(kserve.HeaderContentLength))
					if err != nil {
						t.Fatal(err)
					}
					checkOutputs(t, resp.Outputs, c.want)
				}
				// Binary in, binary out.
				ir, _ := kserve.DecodeRequest(c.req, "")
				ir.BinaryDataOutput = true
				body, hlen, _ := kserve.EncodeRequest(ir, true)
				r := do(t, "POST", s.URL+"/api/predict/tri/v2/models/mlp/infer", body, map[string]string{"Authorization": token, kserve.HeaderContentLength: itoa(hlen)})
				if r.code != 200 || r.hdr.Get(kserve.HeaderContentLength) == "" {
					t.Fatalf("binary %s: %d %s", c.name, r.code, r.body)
				}
				resp, err := kserve.DecodeResponse(r.body, r.hdr.Get(kserve.HeaderContentLength))
				if err != nil {
					t.Fatal(err)
				}
				checkOutputs(t, resp.Outputs, c.want)
			}
			// The upstream's 4xx pass through with its message.
			r = do(t, "POST", s.URL+"/v2/models/mlp/infer", []byte(`{"inputs":[{"name":"input","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}`), auth)
			if r.code != 400 || !strings.Contains(errorText(r.body), "input") {
				t.Errorf("bad shape: %d %s", r.code, r.body)
			}
			if r := do(t, "POST", s.URL+"/api/predict/tri/nope", []byte(`{"inputs":[]}`), auth); r.code != 404 {
				t.Errorf("unknown upstream model: %d %s", r.code, r.body)
			}
			if r := do(t, "POST", s.URL+"/v2/models/mlp/infer", cases[0].req, map[string]string{"Authorization": "wrong"}); r.code != 401 {
				t.Errorf("wrong token on the proxy: %d", r.code)
			}
		})
	}
}

// TestProxyPassthrough forwards an EAS body on a path that names no model
// unchanged: here the peer's own /api/predict/mlp in the HIE protobuf.
func TestProxyPassthrough(t *testing.T) {
	peer := newPeer(t)
	s := newStack(t, proxyService(peer.URL, 5000))
	c := loadCases(t, "mlp")[0]
	ir, _ := kserve.DecodeRequest(c.req, "")
	body, err := hiepb.EncodeDataProto(ir.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	r := do(t, "POST", s.URL+"/api/predict/tri/api/predict/mlp", body, map[string]string{"Authorization": token})
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	outs, err := hiepb.DecodeResponse(r.body)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, outs, c.want)
	// A passthrough to a path the upstream lacks gets the upstream's 404.
	if r := do(t, "POST", s.URL+"/api/predict/tri/api/predict/nope", body, map[string]string{"Authorization": token}); r.code != 404 {
		t.Errorf("missing upstream service: %d %s", r.code, r.body)
	}
}

// TestProxyFailures maps an upstream that is down, slow past the service's
// keepalive, or not ready.
func TestProxyFailures(t *testing.T) {
	peer := newPeer(t)
	c := loadCases(t, "mlp")[0]
	auth := map[string]string{"Authorization": token}

	// Down: a port nothing listens on.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := lis.Addr().String()
	lis.Close()
	for _, url := range []string{"http://" + dead, "grpc://" + dead} {
		s := newStack(t, proxyService(url, 2000))
		if r := do(t, "POST", s.URL+"/v2/models/mlp/infer", c.req, auth); r.code != http.StatusBadGateway {
			t.Errorf("%s down: infer %d %s", url, r.code, r.body)
		}
		if r := do(t, "GET", s.URL+"/v2/models/mlp/ready", nil, auth); r.code != http.StatusServiceUnavailable && r.code != http.StatusBadGateway {
			t.Errorf("%s down: ready %d %s", url, r.code, r.body)
		}
		if r := do(t, "GET", s.URL+"/v2/health/ready", nil, nil); r.code != http.StatusServiceUnavailable {
			t.Errorf("%s down: server ready %d, want 503", url, r.code)
		}
	}

	// Slow: the upstream answers after 2 s; the service keepalive is 300 ms.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/infer") {
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		peer.ts.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	for _, url := range []string{slow.URL, "grpc://" + startGRPCPeer(t, peer, 2*time.Second)} {
		s := newStack(t, proxyService(url, 300))
		start := time.Now()
		r := do(t, "POST", s.URL+"/v2/models/mlp/infer", c.req, auth)
		if r.code != http.StatusRequestTimeout {
			t.Errorf("%s slow: %d %s", url, r.code, r.body)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("%s slow: answered after %v; the deadline is 300ms", url, d)
		}
		// The EAS route through the service's scheduler has the same deadline.
		if r := do(t, "POST", s.URL+"/api/predict/tri/api/predict/mlp/v2/models/mlp/infer", c.req, auth); url == slow.URL && r.code != http.StatusRequestTimeout {
			t.Errorf("%s slow passthrough: %d %s", url, r.code, r.body)
		}
	}

	// Not ready: the upstream's model stops; its 503 is ours.
	s := newStack(t, proxyService(peer.URL, 2000))
	if r := do(t, "GET", s.URL+"/v2/models/mlp/ready", nil, auth); r.code != 200 {
		t.Fatalf("ready before stop: %d %s", r.code, r.body)
	}
	if _, err := peer.mgr.Stop(t.Context(), "mlp"); err != nil {
		t.Fatal(err)
	}
	if r := do(t, "POST", s.URL+"/v2/models/mlp/infer", c.req, auth); r.code != http.StatusServiceUnavailable {
		t.Errorf("stopped upstream model: infer %d %s", r.code, r.body)
	}
	if r := do(t, "GET", s.URL+"/v2/models/mlp/ready", nil, auth); r.code != http.StatusServiceUnavailable {
		t.Errorf("stopped upstream model: ready %d %s", r.code, r.body)
	}
}
