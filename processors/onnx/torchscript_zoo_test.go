package onnx_test

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// The real architectures of engines/torchscript/testdata/gen_models.py, served as
// pytorch_cpu_1.10 through the real service stack: torchvision's ResNet-18
// and MobileNetV3-Small (traced) and a 2-layer transformer encoder
// (scripted) whose int64 mask input marks real tokens 1 and padding 0, so
// that the pad batcher's pad_value 0 marks its padding as padding.

// zooCase is case c of a generated model, from onnx.TorchScriptCasesForTest
// (one read of refs.json per model; it holds the images and is several MB).
type zooCaseT struct {
	path     string
	ins, out []tensor.Tensor
}

var (
	zooMu    sync.Mutex
	zooCache = map[string][]zooCaseT{}
)

func zooCase(t testing.TB, model string, c int) zooCaseT {
	t.Helper()
	zooMu.Lock()
	defer zooMu.Unlock()
	cs, ok := zooCache[model]
	if !ok {
		path, ins, outs := onnx.TorchScriptCasesForTest(t, model)
		for i := range ins {
			cs = append(cs, zooCaseT{path, ins[i], outs[i]})
		}
		zooCache[model] = cs
	}
	if c >= len(cs) {
		t.Fatalf("%s has %d cases, no case %d", model, len(cs), c)
	}
	return cs[c]
}

// zooStack is the service manager behind the HTTP router and the KServe
// gRPC service, with the metrics the batching tests read.
type zooStack struct {
	url  string
	grpc kservegrpc.GRPCInferenceServiceClient
}

func newZooStack(t *testing.T, services ...string) *zooStack {
	t.Helper()
	st := teststack.Start(t, services...)
	return &zooStack{url: st.URL, grpc: st.GRPC(t)}
}

func (s *zooStack) post(t testing.TB, path string, body []byte, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var pairs []string
	for k, v := range hdr {
		pairs = append(pairs, k, v)
	}
	return teststack.Do(t, "POST", s.url+path, "T", body, pairs...)
}

// zooFormats are the wire formats every tensor service speaks.
var zooFormats = []string{"torch", "kserve-json", "kserve-binary", "grpc"}

// infer sends in to the service in one wire format; the Torch response is
// positional, outNames names its outputs.
func (s *zooStack) infer(t testing.TB, svc, format string, in []tensor.Tensor, outNames []string) ([]tensor.Tensor, error) {
	t.Helper()
	switch format {
	case "torch":
		body, err := torchpb.EncodeRequest(in, true, nil)
		if err != nil {
			return nil, err
		}
		code, out, _ := s.post(t, "/api/predict/"+svc, body, nil)
		if code != 200 {
			return nil, fmt.Errorf("status %d: %s", code, out)
		}
		return torchpb.DecodeResponse(out, outNames)
	case "grpc":
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "T")
		resp, err := s.grpc.ModelInfer(ctx, kservegrpc.RequestFromTensors(svc, "", "r1", in, nil))
		if err != nil {
			return nil, err
		}
		return kservegrpc.TensorsFromResponse(resp)
	}
	binary := format == "kserve-binary"
	body, hlen, err := kserve.EncodeRequest(&kserve.InferRequest{ID: "r1", Inputs: in, BinaryDataOutput: binary}, binary)
	if err != nil {
		return nil, err
	}
	hdr := map[string]string{}
	if hlen > 0 {
		hdr[kserve.HeaderContentLength] = strconv.Itoa(hlen)
	}
	code, out, h := s.post(t, "/v2/models/"+svc+"/infer", body, hdr)
	if code != 200 {
		return nil, fmt.Errorf("status %d: %s", code, out)
	}
	if binary && h.Get(kserve.HeaderContentLength) == "" {
		return nil, fmt.Errorf("binary output asked for, but the response has no %s header", kserve.HeaderContentLength)
	}
	resp, err := kserve.DecodeResponse(out, h.Get(kserve.HeaderContentLength))
	if err != nil {
		return nil, err
	}
	return resp.Outputs, nil
}

// zooTol is the tolerance against PyTorch: both sides run the same libtorch
// kernels, so only the summation order differs (threads, the batch a request
// ran in, the ISA the kernels were picked for).
var zooTol = tensor.F32Accumulated

// compareZoo checks got against want (names, dtypes, shapes, values) and
// returns the largest difference over the bound zooTol allows (at most 1).
func compareZoo(t testing.TB, label string, got, want []tensor.Tensor) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d outputs, want %d", label, len(got), len(want))
		return math.Inf(1)
	}
	var worst float64
	for i := range want {
		if got[i].Name != want[i].Name {
			t.Errorf("%s: output %d named %q, want %q", label, i, got[i].Name, want[i].Name)
		}
		if err := tensor.Close(got[i], want[i], zooTol); err != nil {
			t.Errorf("%s: %v", label, err)
			return math.Inf(1)
		}
		worst = max(worst, tensor.Ratio(got[i], want[i], zooTol))
	}
	return worst
}

func zooService(name, path, rpc string) string {
	if rpc != "" {
		rpc = `,"rpc":` + rpc
	}
	return fmt.Sprintf(`{"name":%q,"processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":2%s}}`, name, path, rpc)
}

// TestTorchScriptZooEveryFormat serves each real architecture and compares
// every wire format's answer with PyTorch's within tensor.F32Accumulated.
func TestTorchScriptZooEveryFormat(t *testing.T) {
	for _, tc := range []struct {
		model string
		cases []int
	}{
		{"resnet18", []int{0, 1}},
		{"mobilenet_v3_small", []int{0, 1}},
		{"encoder", []int{0, 2}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			s := newZooStack(t, zooService("m", zooCase(t, tc.model, 0).path, ""))
			worst := map[string]float64{}
			for _, c := range tc.cases {
				z := zooCase(t, tc.model, c)
				var names []string
				for _, o := range z.out {
					names = append(names, o.Name)
				}
				for _, f := range zooFormats {
					got, err := s.infer(t, "m", f, z.ins, names)
					if err != nil {
						t.Errorf("case %d %s: %v", c, f, err)
						continue
					}
					worst[f] = max(worst[f], compareZoo(t, fmt.Sprintf("case %d %s", c, f), got, z.out))
				}
			}
			t.Logf("%s: worst difference from PyTorch over the bound, per format: %v", tc.model, worst)
		})
	}
}

// zooConcurrently sends each request reqs[i] rounds times at once over the
// Torch protobuf and checks its answer against want(i); it returns the
// service's runs and requests from /metrics.
func (s *zooStack) zooConcurrently(t *testing.T, svc string, rounds int, reqs []zooCaseT) (runs, requests float64, worst float64) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for r := range rounds {
		for i, z := range reqs {
			var names []string
			for _, o := range z.out {
				names = append(names, o.Name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := s.infer(t, svc, "torch", z.ins, names)
				if err != nil {
					t.Errorf("round %d request %d: %v", r, i, err)
					return
				}
				d := compareZoo(t, fmt.Sprintf("round %d request %d (input %s)", r, i, tensor.FormatShape(z.ins[0].Shape)), got, z.out)
				mu.Lock()
				worst = max(worst, d)
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	return teststack.Metric(t, s.url, `eas_batch_size_count{service="`+svc+`"}`), teststack.Metric(t, s.url, `eas_batch_size_sum{service="`+svc+`"}`), worst
}

// TestTorchScriptZooBatchingResNet: concurrent requests of 1, 2 and 3 images
// to a batching ResNet-18 share runs, and each gets PyTorch's answer for its
// own rows.
func TestTorchScriptZooBatchingResNet(t *testing.T) {
	reqs := []zooCaseT{zooCase(t, "resnet18", 2), zooCase(t, "resnet18", 3), zooCase(t, "resnet18", 4)}
	s := newZooStack(t, zooService("resnet", reqs[0].path,
		`{"batching":true,"worker_threads":1,"max_batch_size":16,"max_batch_timeout":50,"max_queue_size":100}`))
	runs, requests, worst := s.zooConcurrently(t, "resnet", 2, reqs)
	t.Logf("%v requests in %v runs; worst difference over the bound %.3g", requests, runs, worst)
	if requests != 6 || runs >= requests {
		t.Errorf("%v runs for %v requests: want fewer runs than requests", runs, requests)
	}
}

// TestTorchScriptZooPadAndBucket: concurrent token sequences of lengths 3,
// 7, 12, 5, 20 and 32 to the transformer behind the pad and bucket
// batchers are right-padded with 0 (ids: the pad token; mask: padding) into
// shared runs, and each gets PyTorch's answer for its own length. 32 is
// also the hidden size: the output axis of that size is not a sequence axis
// and must not be cut.
func TestTorchScriptZooPadAndBucket(t *testing.T) {
	var reqs []zooCaseT
	for c := 1; c <= 6; c++ {
		reqs = append(reqs, zooCase(t, "encoder", c))
	}
	for _, rpc := range []string{
		`"batcher":"pad","pad_value":0`,
		`"batcher":"bucket","buckets":[8,32]`,
	} {
		t.Run(strings.SplitN(rpc, `"`, 5)[3], func(t *testing.T) {
			s := newZooStack(t, zooService("enc", reqs[0].path,
				`{"batching":true,"worker_threads":1,"max_batch_size":32,"max_batch_timeout":50,"max_queue_size":100,`+rpc+`}`))
			runs, requests, worst := s.zooConcurrently(t, "enc", 3, reqs)
			t.Logf("%v requests in %v runs; worst difference over the bound %.3g", requests, runs, worst)
			if requests != 18 || runs >= requests {
				t.Errorf("%v runs for %v requests: want fewer runs than requests", runs, requests)
			}
		})
	}
}

// TestTorchScriptZooBadInput: inputs ResNet-18 cannot take answer 400 with
// libtorch's reason, without its C++ backtrace, on every door.
func TestTorchScriptZooBadInput(t *testing.T) {
	z := zooCase(t, "resnet18", 2)
	s := newZooStack(t, zooService("resnet", z.path, ""))
	f64 := make([]float64, 3*32*32)
	for _, tc := range []struct {
		name string
		in   tensor.Tensor
		want string
	}{
		{"rank 2", tensor.FromFloat32("x", []int64{3, 32}, make([]float32, 96)), "but got 2-dimensional input of size [3, 32]"},
		{"4 channels", tensor.FromFloat32("x", []int64{1, 4, 32, 32}, make([]float32, 4*32*32)), "to have 3 channels, but got 4 channels"},
		{"float64", tensor.FromFloat64("x", []int64{1, 3, 32, 32}, f64), "expected scalar type Double but found Float"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ins := []tensor.Tensor{tc.in}
			check := func(door string, code int, body string) {
				t.Helper()
				if code != http.StatusBadRequest || !strings.Contains(body, tc.want) || !strings.Contains(body, "model run failed on this input") {
					t.Errorf("%s: %d %s\nwant 400 with %q", door, code, body, tc.want)
				}
				if strings.Contains(body, "Exception raised from") || strings.Contains(body, "frame #") {
					t.Errorf("%s: the body leaks libtorch's C++ backtrace:\n%s", door, body)
				}
			}
			body, err := torchpb.EncodeRequest(ins, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			code, out, _ := s.post(t, "/api/predict/resnet", body, nil)
			check("torch protobuf", code, string(out))

			body, _, err = kserve.EncodeRequest(&kserve.InferRequest{Inputs: ins}, false)
			if err != nil {
				t.Fatal(err)
			}
			code, out, _ = s.post(t, "/v2/models/resnet/infer", body, nil)
			check("kserve json", code, string(out))

			ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "T")
			_, err = s.grpc.ModelInfer(ctx, kservegrpc.RequestFromTensors("resnet", "", "r1", ins, nil))
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) || strings.Contains(st.Message(), "Exception raised from") {
				t.Errorf("grpc: %v, want InvalidArgument with %q", err, tc.want)
			}
		})
	}
	// The service still serves.
	got, err := s.infer(t, "resnet", "torch", z.ins, []string{"output__0"})
	if err != nil {
		t.Fatal(err)
	}
	compareZoo(t, "after the bad inputs", got, z.out)
}
