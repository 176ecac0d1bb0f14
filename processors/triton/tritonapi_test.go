package triton_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// TestTritonClientAPI covers the calls of Triton's clients beyond
// inference, through the KServe door (/v2/...) and through the service's
// EAS endpoint (/api/predict/<service>/v2/..., where EAS points Triton
// clients): model configuration, statistics of every model and of every
// version, server metadata and health, and Triton's not-found, each error
// in KServe's {"error": ...}. e2e/tritonclient_test.go drives the same
// with NVIDIA's own client.
func TestTritonClientAPI(t *testing.T) {
	s := newStack(t, nativeService(t, "tri"))
	auth := map[string]string{"Authorization": token}
	for _, base := range []string{s.URL, s.URL + "/api/predict/tri"} {
		t.Run(strings.TrimPrefix(base, s.URL), func(t *testing.T) {
			for _, c := range []struct {
				name, method, path string
				code               int
				has                []string // substrings of the body
			}{
				{"config", "GET", "/v2/models/mlp/config", 200, []string{`"name":"mlp"`, `"max_batch_size":8`, `"dims":[16]`, `"data_type":"TYPE_FP32"`, `"preferred_batch_size":[4,8]`, `"max_queue_delay_microseconds":20000`, `"kind":"KIND_CPU"`}},
				{"config auto-completed", "GET", "/v2/models/conv/config", 200, []string{`"max_batch_size":4`, `"dynamic_batching"`, `"dims":[1,8,8]`}},
				{"config of a version", "GET", "/v2/models/multi_io/versions/1/config", 200, []string{`"version_policy":{"all":{}}`, `"data_type":"TYPE_FP64"`}},
				{"config of an unknown model", "GET", "/v2/models/nope/config", 404, []string{`{"error":`, `nope`}},
				{"stats of every version", "GET", "/v2/models/multi_io/stats", 200, []string{`"version":"1"`, `"version":"2"`}},
				{"stats of one version", "GET", "/v2/models/multi_io/versions/1/stats", 200, []string{`"version":"1"`}},
				{"stats of every model", "GET", "/v2/models/stats", 200, []string{`"name":"mlp"`, `"name":"conv"`, `"name":"slow"`}},
				{"unknown model ready", "GET", "/v2/models/nope/ready", 404, []string{`{"error":`}},
				{"unknown model metadata", "GET", "/v2/models/nope", 404, []string{`{"error":`, `nope`}},
				{"unknown model infer", "POST", "/v2/models/nope/infer", 404, []string{`{"error":`, `nope`}},
				{"server metadata", "GET", "/v2", 200, []string{`"name":"eas-server"`, `"binary_tensor_data"`}},
				{"server live", "GET", "/v2/health/live", 200, nil},
				{"server ready", "GET", "/v2/health/ready", 200, nil},
				{"no such route", "GET", "/v2/trace/setting", 404, []string{`{"error":`}},
			} {
				t.Run(c.name, func(t *testing.T) {
					var body []byte
					if c.method == "POST" {
						body = []byte(`{"inputs":[]}`)
					}
					r := do(t, c.method, base+c.path, body, auth)
					if r.code != c.code {
						t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, r.code, r.body, c.code)
					}
					for _, h := range c.has {
						if !bytes.Contains(r.body, []byte(h)) {
							t.Errorf("%s %s: %s lacks %s", c.method, c.path, r.body, h)
						}
					}
					if c.code != 200 && !json.Valid(r.body) {
						t.Errorf("error body %q is not JSON", r.body)
					}
				})
			}
		})
	}
	t.Run("stats only of the models the token opens", func(t *testing.T) {
		r := do(t, "GET", s.URL+"/v2/models/stats", nil, map[string]string{"Authorization": "wrong"})
		if r.code != 401 || !json.Valid(r.body) {
			t.Fatalf("%d %s, want 401 in JSON", r.code, r.body)
		}
	})
	t.Run("a wrong token under the EAS endpoint answers in JSON", func(t *testing.T) {
		r := do(t, "GET", s.URL+"/api/predict/tri/v2/models/mlp", nil, map[string]string{"Authorization": "wrong"})
		if r.code != 401 || !json.Valid(r.body) {
			t.Fatalf("%d %s, want 401 in JSON", r.code, r.body)
		}
	})
	t.Run("repository at the KServe door", func(t *testing.T) {
		r := do(t, "POST", s.URL+"/v2/repository/index", nil, auth)
		if r.code != 404 || !bytes.Contains(r.body, []byte(`/api/predict/`)) || !json.Valid(r.body) {
			t.Fatalf("%d %s, want 404 in JSON pointing at the service's endpoint", r.code, r.body)
		}
	})
}

// TestCompressedInfer sends infer bodies compressed as Triton's clients do
// (Content-Encoding over HTTP, gRPC's gzip and deflate message codings).
func TestCompressedInfer(t *testing.T) {
	st := teststack.Start(t, nativeService(t, "tri"))
	c := loadCases(t, "mlp")[0]
	zip := func(gz bool) []byte {
		var b bytes.Buffer
		if gz {
			w := gzip.NewWriter(&b)
			w.Write(c.req)
			w.Close()
		} else {
			w := zlib.NewWriter(&b)
			w.Write(c.req)
			w.Close()
		}
		return b.Bytes()
	}
	for _, enc := range []string{"gzip", "deflate"} {
		r := do(t, "POST", st.URL+"/v2/models/mlp/infer", zip(enc == "gzip"), map[string]string{"Authorization": token, "Content-Encoding": enc})
		if r.code != 200 {
			t.Fatalf("%s: %d %s", enc, r.code, r.body)
		}
		resp, err := kserve.DecodeResponse(r.body, "")
		if err != nil {
			t.Fatal(err)
		}
		checkOutputs(t, resp.Outputs, c.want)
	}
	r := do(t, "POST", st.URL+"/v2/models/mlp/infer", c.req, map[string]string{"Authorization": token, "Content-Encoding": "br"})
	if r.code != 415 || !json.Valid(r.body) {
		t.Fatalf("br: %d %s, want 415 in JSON", r.code, r.body)
	}

	conn, err := grpc.NewClient(st.GRPCAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := kservegrpc.NewGRPCInferenceServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", token)
	ir, err := kserve.DecodeRequest(c.req, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []string{grpcgzip.Name, "deflate"} {
		resp, err := client.ModelInfer(ctx, kservegrpc.RequestFromTensors("mlp", "", "", ir.Inputs, nil), grpc.UseCompressor(codec))
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		outs, err := kservegrpc.TensorsFromResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		checkOutputs(t, outs, c.want)
	}
	// A model that is not there is not ready, as Triton answers.
	if r, err := client.ModelReady(ctx, &kservegrpc.ModelReadyRequest{Name: "nope"}); err != nil || r.GetReady() {
		t.Fatalf("unknown model ready: %v %v, want false", r, err)
	}
}

// TestProxyTritonClientAPI: a proxy answers a Triton client's GETs under
// its EAS endpoint itself, and says what it does not forward.
func TestProxyTritonClientAPI(t *testing.T) {
	peer := newPeer(t)
	s := newStack(t, proxyService(peer.URL, 5000))
	auth := map[string]string{"Authorization": token}
	for _, c := range []struct {
		path string
		code int
	}{
		{"/v2/models/mlp", 200},
		{"/v2/models/mlp/ready", 200},
		{"/v2/health/ready", 200},
		{"/v2/models/mlp/config", 501},
		{"/v2/models/stats", 501},
		{"/v2/models/nope/ready", 404},
	} {
		r := do(t, "GET", s.URL+"/api/predict/tri"+c.path, nil, auth)
		if r.code != c.code || (c.code != 200 && !json.Valid(r.body)) {
			t.Errorf("GET %s: %d %s, want %d (errors in JSON)", c.path, r.code, r.body, c.code)
		}
	}
}
