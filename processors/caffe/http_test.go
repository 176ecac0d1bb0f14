package caffe_test

import (
	"google.golang.org/grpc/metadata"

	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/engines/caffe/caffetest"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/caffe"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/caffepb"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// archive zips files (name -> bytes), as a user uploads a Caffe model.
func archive(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, b := range files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serveFiles serves path -> bytes over http on loopback.
func serveFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func eas(t *testing.T, url string, in []tensor.Tensor, filter []string) (int, []tensor.Tensor, string) {
	t.Helper()
	body, err := caffepb.EncodeRequest(in, filter)
	if err != nil {
		t.Fatal(err)
	}
	code, b, _ := teststack.Do(t, http.MethodPost, url, "T", body)
	if code != http.StatusOK {
		return code, nil, string(b)
	}
	outs, err := caffepb.DecodeResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	return code, outs, ""
}

func kserveInfer(t *testing.T, url string, in []tensor.Tensor, binary bool) []tensor.Tensor {
	t.Helper()
	body, hlen, err := kserve.EncodeRequest(&kserve.InferRequest{ID: "k", Inputs: in, BinaryDataOutput: binary}, binary)
	if err != nil {
		t.Fatal(err)
	}
	var hdr []string
	if hlen > 0 {
		hdr = []string{kserve.HeaderContentLength, strconv.Itoa(hlen)}
	}
	code, b, h := teststack.Do(t, http.MethodPost, url, "T", body, hdr...)
	if code != http.StatusOK {
		t.Fatalf("kserve: %d %s", code, b)
	}
	resp, err := kserve.DecodeResponse(b, h.Get(kserve.HeaderContentLength))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Outputs
}

// TestCaffeNetFromHTTPArchive deploys EAS's documented Caffe example:
// CaffeNet in a zip over http://, the two files named in model_config. It
// answers the EAS Caffe protobuf and KServe v2 (JSON and binary) with
// OpenCV's numbers, refuses bad requests with 400, and a second Caffe
// service that cannot be translated fails alone.
func TestCaffeNetFromHTTPArchive(t *testing.T) {
	dir := caffetest.ConformanceDir(t)
	caffetest.RequireOpenCV(t)
	def, err := os.ReadFile(filepath.Join(dir, "bvlc_reference_caffenet", "deploy.prototxt"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := caffetest.Weights(def, 42, false) // the seed of the conformance test: written once
	if err != nil {
		t.Fatal(err)
	}
	bad := append(append([]byte(nil), def...), []byte("\nlayer { name: \"thr\" type: \"Threshold\" bottom: \"prob\" top: \"thr\" }\n")...)
	url := serveFiles(t, map[string][]byte{
		"/caffe_model.zip": archive(t, map[string][]byte{"deploy.prototxt": def, "bvlc_reference_caffenet.caffemodel": w}),
		"/bad.zip":         archive(t, map[string][]byte{"model/deploy.prototxt": bad, "model/x.caffemodel": w}),
	})
	s := teststack.New(t, teststack.Options{AllowFailedDeploys: true},
		fmt.Sprintf(`{"name":"caffenet","processor":"caffe_cpu","model_path":"%s/caffe_model.zip","token":"T",
			"model_config":{"model":"deploy.prototxt","weight":"bvlc_reference_caffenet.caffemodel"},"metadata":{"instance":1}}`, url),
		fmt.Sprintf(`{"name":"bad","processor":"caffe_cpu","model_path":"%s/bad.zip","token":"T","metadata":{"instance":1}}`, url))

	in := []tensor.Tensor{caffetest.Random("data", []int64{2, 3, 227, 227}, 9)}
	code, got, msg := eas(t, s.URL+"/api/predict/caffenet", in, nil)
	if code != http.StatusOK {
		t.Fatalf("predict: %d %s", code, msg)
	}
	tmp := t.TempDir()
	os.WriteFile(filepath.Join(tmp, "deploy.prototxt"), def, 0o644)
	os.WriteFile(filepath.Join(tmp, "w.caffemodel"), w, 0o644)
	want := caffetest.OpenCV(t, filepath.Join(tmp, "deploy.prototxt"), filepath.Join(tmp, "w.caffemodel"), in, []string{"prob"})
	if len(got) != 1 || got[0].Name != "prob" {
		t.Fatalf("outputs %v", got)
	}
	if err := caffetest.Compare(got[0], want[0], tensor.F32Reformulated); err != nil {
		t.Error(err)
	}
	for _, binary := range []bool{false, true} {
		k := kserveInfer(t, s.URL+"/v2/models/caffenet/infer", in, binary)
		if len(k) != 1 || !tensor.Equal(k[0], got[0]) {
			t.Errorf("kserve (binary %v) differs from the EAS answer", binary)
		}
	}
	// Intermediate blobs by output_filter, against OpenCV too: fc8 (the
	// logits) and pool2 (after conv, ReLU, LRN and a ceil-rounded pool).
	mid := []string{"fc8", "pool2"}
	code, outs, msg := eas(t, s.URL+"/api/predict/caffenet", in, mid)
	if code != http.StatusOK || len(outs) != 2 {
		t.Fatalf("output_filter %v: %d %s", mid, code, msg)
	}
	for i, w := range caffetest.OpenCV(t, filepath.Join(tmp, "deploy.prototxt"), filepath.Join(tmp, "w.caffemodel"), in, mid) {
		if outs[i].Name != mid[i] {
			t.Errorf("output %d is %q, want %q", i, outs[i].Name, mid[i])
		}
		if err := caffetest.Compare(outs[i], w, tensor.F32Reformulated); err != nil {
			t.Error(err)
		}
	}
	for name, tc := range map[string]struct {
		in     []tensor.Tensor
		filter []string
		want   string
	}{
		"shape":   {[]tensor.Tensor{caffetest.Random("data", []int64{1, 3, 224, 224}, 1)}, nil, "does not match"},
		"name":    {[]tensor.Tensor{caffetest.Random("image", []int64{1, 3, 227, 227}, 1)}, nil, `unknown input "image"`},
		"filter":  {in, []string{"fc9"}, `no blob "fc9"`},
		"no data": {nil, nil, "no inputs"},
	} {
		code, _, msg := eas(t, s.URL+"/api/predict/caffenet", tc.in, tc.filter)
		if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", name, code, msg, tc.want)
		}
	}
	code, b, _ := teststack.Do(t, http.MethodGet, s.URL+"/api/predict/caffenet", "T", nil)
	if code != http.StatusOK || !strings.Contains(string(b), `"prob"`) || !strings.Contains(string(b), "fc7") {
		t.Errorf("metadata: %d %s", code, b)
	}
	info, err := s.Manager.Describe(t.Context(), "bad")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Message, "Threshold (thr)") {
		t.Errorf("bad service message %q, want the unsupported layer named", info.Message)
	}
}

// TestBatchedAnswersEqualSingle sends concurrent requests to a batching
// SqueezeNet service: batches form, and each answer equals the answer of
// the same input sent alone to a service without batching.
func TestBatchedAnswersEqualSingle(t *testing.T) {
	dir := caffetest.ConformanceDir(t)
	def, err := os.ReadFile(filepath.Join(dir, "squeezenet_v1.1", "deploy.prototxt"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := caffetest.Weights(def, 6, false)
	if err != nil {
		t.Fatal(err)
	}
	model := t.TempDir()
	os.WriteFile(filepath.Join(model, "deploy.prototxt"), def, 0o644)
	os.WriteFile(filepath.Join(model, "squeezenet.caffemodel"), w, 0o644)
	s := teststack.Start(t,
		fmt.Sprintf(`{"name":"single","processor":"caffe_cpu","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model),
		fmt.Sprintf(`{"name":"batched","processor":"caffe_cpu","model_path":%q,"token":"T",
			"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"worker_threads":1,"max_batch_size":8,"max_batch_timeout":50}}}`, model))
	const clients = 12
	ins := make([][]tensor.Tensor, clients)
	want := make([]tensor.Tensor, clients)
	for i := range ins {
		ins[i] = []tensor.Tensor{caffetest.Random("data", []int64{1, 3, 227, 227}, uint64(i))}
		code, outs, msg := eas(t, s.URL+"/api/predict/single", ins[i], nil)
		if code != http.StatusOK {
			t.Fatalf("single: %d %s", code, msg)
		}
		want[i] = outs[0]
	}
	var wg sync.WaitGroup
	got := make([]tensor.Tensor, clients)
	for i := range ins {
		wg.Go(func() {
			code, outs, msg := eas(t, s.URL+"/api/predict/batched", ins[i], nil)
			if code != http.StatusOK {
				t.Errorf("batched %d: %d %s", i, code, msg)
				return
			}
			got[i] = outs[0]
		})
	}
	wg.Wait()
	for i := range got {
		if err := caffetest.Compare(got[i], want[i], tensor.F32Accumulated); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	_, b, _ := teststack.Do(t, http.MethodGet, s.URL+"/metrics", "", nil)
	var sum, count float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, `eas_batch_size_sum{service="batched"}`) {
			fmt.Sscan(strings.Fields(line)[1], &sum)
		}
		if strings.HasPrefix(line, `eas_batch_size_count{service="batched"}`) {
			fmt.Sscan(strings.Fields(line)[1], &count)
		}
	}
	if sum != clients || count >= clients {
		t.Errorf("batch sizes: %v requests in %v runs; want batches to form", sum, count)
	}

	// KServe v2 gRPC gives the same answer, with output_filter's blob
	// choice as its outputs.
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "T")
	resp, err := s.GRPC(t).ModelInfer(ctx, kservegrpc.RequestFromTensors("single", "", "g", ins[0], []string{"prob", "pool10"}))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := kservegrpc.TensorsFromResponse(resp)
	if err != nil || len(outs) != 2 || outs[0].Name != "prob" || outs[1].Name != "pool10" {
		t.Fatalf("grpc outputs %v: %v", outs, err)
	}
	if err := caffetest.Compare(outs[0], want[0], tensor.F32Accumulated); err != nil {
		t.Errorf("grpc: %v", err)
	}
}
