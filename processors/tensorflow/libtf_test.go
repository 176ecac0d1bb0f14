package tensorflow_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors/tensorflow"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// TestLibTensorFlowRuntime serves SavedModels that TensorFlow writes at test
// time on libtensorflow (model_config.runtime) through the real router, and
// compares every answer with TensorFlow's own outputs in Python:
//   - a Keras network with runtime "libtensorflow", over the EAS TF protobuf
//     (serving_default and a signature of int64, bool and string tensors)
//     and KServe v2;
//   - a model the ONNX translator refuses (a while loop carrying a
//     tf.TensorArray; its lookup table alone would translate):
//     runtime "onnx" fails its deploy as before, "libtensorflow" serves it,
//     and "auto" falls back to libtensorflow with an event saying why;
//   - a GPU code asking for libtensorflow, and a bad runtime, are refused.
func TestLibTensorFlowRuntime(t *testing.T) {
	env := libtftest.Setup(t)
	dir, refs := libtftest.Models(t, env)
	dense, table, plain := filepath.Join(dir, "dense"), filepath.Join(dir, "table"), filepath.Join(dir, "plain")
	svc := func(name, code, path, cfg string) string {
		gpu := 0
		if strings.Contains(code, "gpu") {
			gpu = 1
		}
		return fmt.Sprintf(`{"name":%q,"processor":%q,"model_path":%q,"token":"T","metadata":{"instance":1,"cpu":2,"gpu":%d},"model_config":%s}`, name, code, path, gpu, cfg)
	}
	st := teststack.New(t, teststack.Options{AllowFailedDeploys: true},
		svc("dense", "tensorflow_cpu_2.7", dense, `{"runtime":"libtensorflow"}`),
		svc("table", "tensorflow_cpu_2.7", table, `{"runtime":"libtensorflow","intra_op_threads":1}`),
		svc("table_onnx", "tensorflow_cpu_2.7", table, `{"runtime":"onnx"}`),
		svc("table_auto", "tensorflow_cpu_2.7", table, `{"runtime":"auto"}`),
		svc("dense_auto", "tensorflow_cpu_2.7", dense, `{"runtime":"auto"}`),
		svc("plain_auto", "tensorflow_cpu_2.7", plain, `{"runtime":"auto"}`),
		svc("gpu", "tensorflow_gpu_2.7", dense, `{"runtime":"libtensorflow"}`),
		svc("bad", "tensorflow_cpu_2.7", dense, `{"runtime":"tensorrt"}`),
	)
	for _, name := range []string{"dense", "table", "table_auto", "dense_auto", "plain_auto"} {
		if err := st.DeployErrors[name]; err != nil {
			t.Fatalf("deploy %s: %v", name, err)
		}
	}
	for name, want := range map[string]string{
		"table_onnx": "StatelessWhile",
		"gpu":        "tensorflow_cpu_2.7",
		"bad":        "tensorrt",
	} {
		if err := st.DeployErrors[name]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("deploy %s: %v, want an error naming %s", name, err, want)
		}
	}

	predict := func(service, sig string, c libtftest.Case) {
		t.Helper()
		body, err := tfpb.EncodeRequest(sig, c.Sorted(), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, resp, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+service, "T", body)
		if code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", service, sig, code, resp)
		}
		outs, err := tfpb.DecodeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, service+" "+sig, outs, c.Outputs)
	}
	predict("dense", "serving_default", refs["dense"]["serving_default"])
	predict("dense", "mixed", refs["dense"]["mixed"])
	predict("table", "serving_default", refs["table"]["serving_default"])
	predict("table_auto", "", refs["table"]["serving_default"])
	predict("dense_auto", "serving_default", refs["dense"]["serving_default"])
	predict("dense_auto", "mixed", refs["dense"]["mixed"])
	predict("plain_auto", "serving_default", refs["plain"]["serving_default"])

	// KServe v2 reaches serving_default.
	c := refs["dense"]["serving_default"]
	body, hl, err := kserve.EncodeRequest(&kserve.InferRequest{Inputs: c.Sorted()}, true)
	if err != nil {
		t.Fatal(err)
	}
	code, resp, hdr := teststack.Do(t, http.MethodPost, st.URL+"/v2/models/dense/infer", "T", body,
		kserve.HeaderContentLength, strconv.Itoa(hl))
	if code != http.StatusOK {
		t.Fatalf("kserve: %d %s", code, resp)
	}
	kr, err := kserve.DecodeResponse(resp, hdr.Get(kserve.HeaderContentLength))
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "kserve dense", kr.Outputs, c.Outputs)

	// Bad requests are 400s that say why, before TensorFlow sees them.
	for _, bad := range []struct {
		in   tensor.Tensor
		want string
	}{
		{tensor.FromFloat32("x", []int64{1, 4}, make([]float32, 4)), "[-1,5]"},
		{tensor.FromInt32("x", []int64{1, 5}, make([]int32, 5)), "DT_FLOAT"},
		{tensor.FromFloat32("z", []int64{1, 5}, make([]float32, 5)), `no input "z"`},
	} {
		body, _ := tfpb.EncodeRequest("", []tensor.Tensor{bad.in}, nil)
		code, resp, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/dense", "T", body)
		if code != http.StatusBadRequest || !strings.Contains(string(resp), bad.want) {
			t.Errorf("%s %v: %d %s, want 400 naming %s", bad.in.Name, bad.in.Shape, code, resp, bad.want)
		}
	}

	// output_filter picks outputs, by signature key.
	mc := refs["dense"]["mixed"]
	body, _ = tfpb.EncodeRequest("mixed", mc.Sorted(), []string{"up"})
	code, resp, _ = teststack.Do(t, http.MethodPost, st.URL+"/api/predict/dense", "T", body)
	if outs, err := tfpb.DecodeResponse(resp); code != http.StatusOK || err != nil || len(outs) != 1 {
		t.Errorf("output_filter: %d %s", code, resp)
	} else {
		compare(t, "output_filter", outs, map[string]tensor.Tensor{"up": mc.Outputs["up"]})
	}

	// GET shows the signature, and metadata what runs it.
	code, resp, _ = teststack.Do(t, http.MethodGet, st.URL+"/api/predict/dense", "T", nil)
	if code != http.StatusOK || !strings.Contains(string(resp), `"serving_default"`) || !strings.Contains(string(resp), `"DT_FLOAT"`) {
		t.Errorf("GET: %d %s", code, resp)
	}

	// auto said in the service's events why it runs on libtensorflow (a
	// refused serving_default, or another refused signature: the whole
	// SavedModel moves); a model that translates stays on ONNX Runtime
	// without an event.
	events := func(name string) []string {
		s, ok := st.Manager.Get(name)
		if !ok {
			t.Fatalf("no service %s", name)
		}
		var out []string
		for _, e := range s.Events() {
			if e.Reason == "TensorFlowRuntime" {
				out = append(out, e.Message)
			}
		}
		return out
	}
	if ev := events("table_auto"); len(ev) != 1 || !strings.Contains(ev[0], "libtensorflow 2.") || !strings.Contains(ev[0], "StatelessWhile") {
		t.Errorf("table_auto's events %q, want one saying it falls back to libtensorflow because of StatelessWhile", ev)
	}
	if ev := events("dense_auto"); len(ev) != 1 || !strings.Contains(ev[0], `"mixed"`) || !strings.Contains(ev[0], "StringLength") {
		t.Errorf("dense_auto's events %q, want one saying signature mixed's StringLength moved it to libtensorflow", ev)
	}
	if ev := events("plain_auto"); len(ev) != 0 {
		t.Errorf("plain_auto's events %q, want none (it translates)", ev)
	}

}

func compare(t *testing.T, what string, got []tensor.Tensor, want map[string]tensor.Tensor) {
	t.Helper()
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
		w, ok := want[o.Name]
		if !ok {
			t.Errorf("%s: unexpected output %q", what, o.Name)
			continue
		}
		if err := tensor.Close(o, w, tensor.F32Accumulated); err != nil {
			t.Errorf("%s output %s: %v", what, o.Name, err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: outputs %v, want %d", what, names, len(want))
	}
}

// BenchmarkRuntimes serves the same small Keras network (Dense 5->8 relu,
// Dense 8->3) translated to ONNX and on libtensorflow, and times one
// EAS TF protobuf request of one row through the router, sequentially:
//
//	go test -run '^$' -bench Runtimes -benchtime 3s ./processors/tensorflow/
func BenchmarkRuntimes(b *testing.B) {
	env := libtftest.Setup(b)
	dir, refs := libtftest.Models(b, env)
	c := refs["plain"]["serving_default"]
	x := c.Inputs["x"]
	row := tensor.FromBytes("x", tensor.Float32, []int64{1, 5}, x.Data[:5*4])
	body, err := tfpb.EncodeRequest("", []tensor.Tensor{row}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, rt := range []string{tensorflow.RuntimeONNX, tensorflow.RuntimeLibTF} {
		b.Run(rt, func(b *testing.B) {
			st := teststack.New(b, teststack.Options{}, fmt.Sprintf(
				`{"name":"m","processor":"tensorflow_cpu_2.7","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1},"model_config":{"runtime":%q}}`,
				filepath.Join(dir, "plain"), rt))
			url := st.URL + "/api/predict/m"
			for b.Loop() {
				if code, resp, _ := teststack.Do(b, http.MethodPost, url, "T", body); code != http.StatusOK {
					b.Fatalf("%d %s", code, resp)
				}
			}
		})
	}
}
