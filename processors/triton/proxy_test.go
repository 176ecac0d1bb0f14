package triton_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/scheduler"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
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

// grpcPeer is a test-only GRPCInferenceService over the peer's services:
// each call runs on the service's real scheduler and ONNX model, so the
// proxy's gRPC path meets a real KServe v2 model server. eas-server has no
// gRPC listener of its own yet.
type grpcPeer struct {
	kservegrpc.UnimplementedGRPCInferenceServiceServer
	mgr   *service.Manager
	delay time.Duration
}

func startGRPCPeer(t *testing.T, mgr *service.Manager, delay time.Duration) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kservegrpc.RegisterGRPCInferenceServiceServer(srv, &grpcPeer{mgr: mgr, delay: delay})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func (g *grpcPeer) live(ctx context.Context, name string) (*service.Live, error) {
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("authorization")) == 0 || md.Get("authorization")[0] != peerToken {
		return nil, status.Error(codes.Unauthenticated, "missing or wrong token")
	}
	svc, ok := g.mgr.Get(name)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "model %q not found", name)
	}
	live, ok := svc.Acquire()
	if !ok {
		return nil, status.Errorf(codes.Unavailable, "model %q is not ready", name)
	}
	return live, nil
}

func (g *grpcPeer) ServerReady(context.Context, *kservegrpc.ServerReadyRequest) (*kservegrpc.ServerReadyResponse, error) {
	ok, _ := g.mgr.Ready()
	return &kservegrpc.ServerReadyResponse{Ready: ok}, nil
}

func (g *grpcPeer) ModelReady(ctx context.Context, r *kservegrpc.ModelReadyRequest) (*kservegrpc.ModelReadyResponse, error) {
	live, err := g.live(ctx, r.GetName())
	if err != nil {
		return nil, err
	}
	live.Release()
	return &kservegrpc.ModelReadyResponse{Ready: true}, nil
}

func (g *grpcPeer) ModelMetadata(ctx context.Context, r *kservegrpc.ModelMetadataRequest) (*kservegrpc.ModelMetadataResponse, error) {
	live, err := g.live(ctx, r.GetName())
	if err != nil {
		return nil, err
	}
	defer live.Release()
	tm := live.Processor.(processors.TensorModel)
	md := tm.Metadata()
	out := &kservegrpc.ModelMetadataResponse{Name: r.GetName(), Versions: []string{"1"}, Platform: tm.Platform()}
	for _, s := range md.Inputs {
		out.Inputs = append(out.Inputs, &kservegrpc.ModelMetadataResponse_TensorMetadata{Name: s.Name, Datatype: s.DType, Shape: s.Shape})
	}
	for _, s := range md.Outputs {
		out.Outputs = append(out.Outputs, &kservegrpc.ModelMetadataResponse_TensorMetadata{Name: s.Name, Datatype: s.DType, Shape: s.Shape})
	}
	return out, nil
}

func (g *grpcPeer) ModelInfer(ctx context.Context, r *kservegrpc.ModelInferRequest) (*kservegrpc.ModelInferResponse, error) {
	live, err := g.live(ctx, r.GetModelName())
	if err != nil {
		return nil, err
	}
	defer live.Release()
	if g.delay > 0 {
		select {
		case <-time.After(g.delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	ins, err := kservegrpc.TensorsFromRequest(r)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var outs []string
	for _, o := range r.GetOutputs() {
		outs = append(outs, o.GetName())
	}
	res, err := live.Scheduler.Do(ctx, &processors.TensorPayload{Inputs: ins, Outputs: outs})
	switch {
	case processors.IsInputError(err):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, scheduler.ErrDeadline):
		return nil, status.Error(codes.DeadlineExceeded, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return kservegrpc.ResponseFromTensors(r.GetModelName(), "1", r.GetId(), res.(*processors.TensorResult).Outputs), nil
}

// proxyService is a triton service proxying to url.
func proxyService(url string, keepaliveMS int) string {
	return `{"name":"tri","processor":"triton","token":"` + token + `","processor_params":["--url=` + url + `","--upstream-token=` + peerToken + `","--allow-grpc=true"],"metadata":{"instance":1,"rpc.keepalive":` + itoa(keepaliveMS) + `}}`
}

func TestProxy(t *testing.T) {
	peer := newPeer(t)
	upstreams := map[string]string{
		"http": peer.URL,
		"grpc": "grpc://" + startGRPCPeer(t, peer.mgr, 0),
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
	for _, url := range []string{slow.URL, "grpc://" + startGRPCPeer(t, peer.mgr, 2*time.Second)} {
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
