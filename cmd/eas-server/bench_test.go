package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
)

// TestBenchInProcess runs the processor the way the benchmark scripts do,
// and a GPU code through the same flags: on a machine without CUDA its
// deploy error comes back instead of numbers.
func TestBenchInProcess(t *testing.T) {
	model := "../../processors/onnx/testdata/mlp.onnx"
	out, errOut, code := runCLI(t, "bench", "--in-process", model, "--processor", "onnx_cpu", "--cpu", "1",
		"--tensor", "input:FP32:4x16", "-d", "200ms", "--warmup", "0s", "-o", "json", "--model-config", `{}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Batch int     `json:"batch"`
		Runs  int     `json:"runs"`
		Rows  float64 `json:"rows_per_second"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Batch != 4 || res.Runs == 0 || res.Rows <= 0 {
		t.Fatalf("result %+v from %s", res, out)
	}

	_, errOut, code = runCLI(t, "bench", "--in-process", model, "--processor", "onnx_cpu",
		"--tensor", "input:FP32:4x16", "--model-config", `{"x":`)
	if code == 0 || !strings.Contains(errOut, "model_config") {
		t.Fatalf("bad --model-config: exit %d: %s", code, errOut)
	}

	out, errOut, code = runCLI(t, "bench", "--in-process", model, "--processor", "onnx_cu100", "--gpu", "1",
		"--tensor", "input:FP32:4x16", "-d", "200ms", "--warmup", "0s", "-o", "json")
	if code == 0 {
		if !strings.Contains(out, `"batch": 4`) {
			t.Fatalf("GPU run: %s", out)
		}
		return // a machine with CUDA
	}
	if !strings.Contains(errOut, "CUDA") || !strings.Contains(errOut, "onnx_cpu") {
		t.Fatalf("GPU code without CUDA: exit %d, want the deploy error naming CUDA and the CPU code: %s", code, errOut)
	}
}

// TestBenchReadsTheEndpointEnvironment: bench finds the server through
// $EAS_ENDPOINT like the other client verbs (issue 34: it always called
// 127.0.0.1:8080 unless --endpoint was given).
func TestBenchReadsTheEndpointEnvironment(t *testing.T) {
	st := teststack.Start(t, `{"name":"e","processor":"echo","token":"T","metadata":{"instance":1}}`)
	t.Setenv("EAS_ENDPOINT", st.URL)
	t.Setenv("EAS_TOKEN", "T")
	out, errOut, code := runCLI(t, "bench", "--service", "e", "--body", teststack.WriteFile(t, t.TempDir(), "b", "x"),
		"-c", "1", "-d", "200ms", "--warmup", "0s", "-o", "json")
	var res []struct {
		Requests int            `json:"requests"`
		OK       int            `json:"ok"`
		ByStatus map[string]int `json:"by_status"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res) != 1 || res[0].Requests == 0 || res[0].OK != res[0].Requests {
		t.Fatalf("bench through $EAS_ENDPOINT: exit %d\n%s\n%s", code, out, errOut)
	}
}
