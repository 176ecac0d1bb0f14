package onnx_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/all"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// TestTorchScriptOverHTTP deploys a TorchScript model with pytorch_cpu
// through the real loader and router, beside an ONNX service, and checks
// KServe v2 JSON, the Torch protobuf and the model metadata.
func TestTorchScriptOverHTTP(t *testing.T) {
	path, args, in, want := onnx.TorchScriptCaseForTest(t, "named", 0)
	srv := teststack.Start(t,
		fmt.Sprintf(`{"name":"ts","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, path),
		`{"name":"ox","processor":"pytorch_cpu_1.10","model_path":"testdata/mlp.onnx","token":"T","metadata":{"instance":1,"cpu":1}}`)
	do := func(method, p string, body []byte) (int, []byte) {
		t.Helper()
		code, b, _ := teststack.Do(t, method, srv.URL+p, "T", body)
		return code, b
	}
	check := func(label string, got []tensor.Tensor) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d outputs, want %d", label, len(got), len(want))
		}
		for i := range want {
			if got[i].Name != want[i].Name {
				t.Errorf("%s: output %d named %q, want %q", label, i, got[i].Name, want[i].Name)
			}
			if err := tensor.Close(got[i], want[i], tensor.F32Accumulated); err != nil {
				t.Errorf("%s: %v", label, err)
			}
		}
	}

	body, _, err := kserve.EncodeRequest(&kserve.InferRequest{ID: "r1", Inputs: in}, false)
	if err != nil {
		t.Fatal(err)
	}
	code, out := do("POST", "/v2/models/ts/infer", body)
	if code != 200 {
		t.Fatalf("kserve json: %d %s", code, out)
	}
	resp, err := kserve.DecodeResponse(out, "")
	if err != nil {
		t.Fatal(err)
	}
	check("kserve json", resp.Outputs)

	body, err = torchpb.EncodeRequest(in, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, out = do("POST", "/api/predict/ts", body)
	if code != 200 {
		t.Fatalf("torch protobuf: %d %s", code, out)
	}
	outs, err := torchpb.DecodeResponse(out, []string{want[0].Name, want[1].Name})
	if err != nil {
		t.Fatal(err)
	}
	check("torch protobuf", outs)

	code, out = do("GET", "/v2/models/ts", nil)
	if code != 200 {
		t.Fatalf("metadata: %d %s", code, out)
	}
	var md struct {
		Platform string `json:"platform"`
		Inputs   []struct {
			Name     string  `json:"name"`
			DataType string  `json:"datatype"`
			Shape    []int64 `json:"shape"`
		} `json:"inputs"`
		Outputs []struct {
			Name     string `json:"name"`
			DataType string `json:"datatype"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("metadata %s: %v", out, err)
	}
	if md.Platform != "pytorch_libtorch" || len(md.Inputs) != len(args) || md.Inputs[0].Name != args[0] ||
		len(md.Outputs) != 2 || md.Outputs[0].Name != "probs" || md.Outputs[1].DataType != "INT64" {
		t.Errorf("metadata: %s", out)
	}

	// The ONNX service beside it serves as before.
	body, _ = torchpb.EncodeRequest([]tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, make([]float32, 16))}, true, nil)
	if code, out := do("POST", "/api/predict/ox", body); code != 200 {
		t.Errorf("onnx service: %d %s", code, out)
	}
}

// TestBadRequestFailsAlone: 64 clients send ids to a batching ONNX Gather
// over a table of 10 rows, one request in 8 asking for row 99. Each good
// request answers 200 with its row whatever it was batched with; each bad
// one answers 400 with ONNX Runtime's reason.
func TestBadRequestFailsAlone(t *testing.T) {
	srv := teststack.Start(t, fmt.Sprintf(`{"name":"g","processor":"onnx_cpu","model_path":%q,"token":"T",
		"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"worker_threads":2,"max_batch_size":16,"max_batch_timeout":20,"max_queue_size":256}}}`,
		onnx.GatherModelForTest(t)))
	const clients, each = 64, 8
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for r := range each {
				id := int64((c + r) % 10)
				bad := (c*each+r)%8 == 0
				if bad {
					id = 99
				}
				body, _, err := kserve.EncodeRequest(&kserve.InferRequest{Inputs: []tensor.Tensor{tensor.FromInt64("ids", []int64{1}, []int64{id})}}, false)
				if err != nil {
					t.Error(err)
					return
				}
				code, out, _ := teststack.Do(t, "POST", srv.URL+"/v2/models/g/infer", "T", body)
				if bad {
					if code != http.StatusBadRequest || !strings.Contains(string(out), "idx=99 must be within the inclusive range [-10,9]") {
						t.Errorf("client %d request %d (row 99): %d %s, want 400 with ONNX Runtime's reason", c, r, code, out)
					}
					continue
				}
				if code != http.StatusOK {
					t.Errorf("client %d request %d (row %d): %d %s", c, r, id, code, out)
					continue
				}
				resp, err := kserve.DecodeResponse(out, "")
				if err != nil {
					t.Error(err)
					continue
				}
				want := tensor.FromFloat32("rows", []int64{1, 4}, onnx.GatherRowsForTest(id))
				if len(resp.Outputs) != 1 || tensor.Close(resp.Outputs[0], want, tensor.Exact) != nil {
					t.Errorf("client %d request %d (row %d): %v, want %v", c, r, id, resp.Outputs, want)
				}
			}
		}()
	}
	close(start)
	wg.Wait()

	// The failed merged runs are counted as runs too; fewer runs than
	// requests shows requests shared them.
	if runs := teststack.Metric(t, srv.URL, `eas_batch_size_count{service="g"}`); runs < 0 || runs >= clients*each {
		t.Errorf("%v runs for %d requests: nothing was batched", runs, clients*each)
	}
}
