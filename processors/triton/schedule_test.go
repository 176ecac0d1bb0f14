package triton_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
)

// slowRequest is one single-row request for the slow model.
var slowRequest = []byte(`{"inputs":[{"name":"input","shape":[1,16],"datatype":"FP32","data":[` + strings.Repeat("0.25,", 15) + `1]}]}`)

// inferAll sends n concurrent slow requests to a model's infer URL and
// returns how many got each status code.
func inferAll(t *testing.T, url string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c := do(t, "POST", url, slowRequest, map[string]string{"Authorization": token}).code
			mu.Lock()
			codes[c]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// TestModelBatchesInServiceMetrics sends concurrent requests to slow, which
// batches (dynamic_batching), in a service whose metadata.rpc turns
// batching on: its runs show in the service's eas_* histograms under the
// model's label, in fewer runs than requests and none over max_batch_size
// (16) or rpc.max_batch_size (8, the smaller); the service's own series are
// not touched.
func TestModelBatchesInServiceMetrics(t *testing.T) {
	js := strings.Replace(nativeService(t, "tri"), `"rpc.keepalive":5000`, `"rpc.keepalive":5000,"rpc.batching":true,"rpc.max_batch_size":8`, 1)
	s := newStack(t, js)
	const n = 48
	if codes := inferAll(t, s.URL+"/v2/models/slow/infer", n); codes[200] != n {
		t.Fatalf("status codes %v; want %d 200s", codes, n)
	}
	const labels = `{model="slow",service="tri"}`
	sum := teststack.Metric(t, s.URL, "eas_batch_size_sum"+labels)
	count := teststack.Metric(t, s.URL, "eas_batch_size_count"+labels)
	if sum != n || count < 1 || count >= n {
		t.Errorf("eas_batch_size%s: sum %v, count %v; want %d requests in fewer runs", labels, sum, count, n)
	}
	if over := count - teststack.Metric(t, s.URL, `eas_batch_size_bucket{model="slow",service="tri",le="8"}`); over != 0 {
		t.Errorf("%v runs held more than rpc.max_batch_size 8 requests", over)
	}
	if c := teststack.Metric(t, s.URL, "eas_queue_wait_seconds_count"+labels); c != n {
		t.Errorf("eas_queue_wait_seconds_count%s = %v, want %d", labels, c, n)
	}
	if c := teststack.Metric(t, s.URL, "eas_compute_seconds_count"+labels); c != count {
		t.Errorf("eas_compute_seconds_count%s = %v, want the %v runs", labels, c, count)
	}
	// mlp's warm-up ran through the same construction.
	if c := teststack.Metric(t, s.URL, `eas_batch_size_count{model="mlp",service="tri"}`); c != 1 {
		t.Errorf("mlp's warm-up: %v runs in eas_batch_size, want 1", c)
	}
	if c := teststack.Metric(t, s.URL, `eas_batch_size_count{service="tri"}`); c > 0 {
		t.Errorf("the service's own series counts %v runs of its models", c)
	}
	st := getStats(t, s.URL+"/v2/models/slow/stats")
	if float64(st.ExecutionCount) != count {
		t.Errorf("Triton statistics: %d executions; eas_batch_size counts %v", st.ExecutionCount, count)
	}
}

// TestServiceLimitsApplyToModels checks that a service's metadata.rpc
// admission limits hold for each of its models: rate_limit answers 429,
// max_queue_size 450. The queue test's repository holds slow's model with
// one instance, no dynamic batching and no queue bound of its own, so two
// requests fit (one running, one waiting); bursts are sent until one of
// them finds both places taken.
func TestServiceLimitsApplyToModels(t *testing.T) {
	repo := t.TempDir()
	if err := os.CopyFS(filepath.Join(repo, "slow"), os.DirFS(filepath.Join(repoPath(t), "slow"))); err != nil {
		t.Fatal(err)
	}
	cfg := `name: "slow"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "input" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "output" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`
	if err := os.WriteFile(filepath.Join(repo, "slow", "config.pbtxt"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	rate := strings.Replace(nativeService(t, "rated"), `"rpc.keepalive":5000`, `"rpc.keepalive":5000,"rpc.rate_limit":2`, 1)
	queue := `{"name":"queued","processor":"triton","processor_params":["--model-repository=` + repo + `"],"token":"` + token +
		`","metadata":{"instance":1,"rpc.keepalive":5000,"rpc.max_queue_size":1}}`
	s := newStack(t, rate, queue)
	const n = 48
	codes := inferAll(t, s.URL+"/api/predict/rated/v2/models/slow/infer", n)
	if codes[429] == 0 || codes[200] == 0 || codes[200]+codes[429] != n {
		t.Errorf("rate_limit 2: status codes %v; want some 200s and the rest 429", codes)
	}
	for burst := 1; ; burst++ {
		codes = inferAll(t, s.URL+"/api/predict/queued/v2/models/slow/infer", n)
		if codes[200]+codes[450] != n || codes[200] < 2 {
			t.Fatalf("max_queue_size 1, burst %d: status codes %v; want 200s and 450s only, at least two 200s", burst, codes)
		}
		if codes[450] > 0 {
			t.Logf("burst %d: status codes %v", burst, codes)
			break
		}
		if burst == 20 {
			t.Fatalf("max_queue_size 1: %d bursts of %d requests, none refused with 450", burst, n)
		}
	}
}
