package triton_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/processors/triton"
)

type statsBody struct {
	ModelStats []triton.ModelStats `json:"model_stats"`
}

func getStats(t *testing.T, url string) triton.ModelStats {
	t.Helper()
	r := do(t, "GET", url, nil, map[string]string{"Authorization": token})
	if r.code != 200 {
		t.Fatalf("stats: %d %s", r.code, r.body)
	}
	var sb statsBody
	if err := json.Unmarshal(r.body, &sb); err != nil || len(sb.ModelStats) != 1 {
		t.Fatalf("stats body %s: %v", r.body, err)
	}
	return sb.ModelStats[0]
}

// TestDynamicBatchingFromConfig sends concurrent single-row requests to
// slow, whose config.pbtxt has one instance and dynamic batching: the
// statistics must show fewer executions than requests, and no batch larger
// than max_batch_size. (The model is slow on purpose: a run must outlast
// the arrival of the next requests for them to queue and batch.)
func TestDynamicBatchingFromConfig(t *testing.T) {
	s := newStack(t, nativeService(t, "tri"))
	row := strings.Repeat("0.25,", 15) + "1"
	body := []byte(`{"inputs":[{"name":"input","shape":[1,16],"datatype":"FP32","data":[` + row + `]}]}`)
	const n = 64
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			codes[i] = do(t, "POST", s.URL+"/v2/models/slow/infer", body, map[string]string{"Authorization": token}).code
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	st := getStats(t, s.URL+"/api/predict/tri/v2/models/slow/stats")
	if st.InferenceCount != n || st.InferenceStats.Success.Count != n {
		t.Errorf("inference_count %d, success %d; want %d", st.InferenceCount, st.InferenceStats.Success.Count, n)
	}
	if st.ExecutionCount >= n {
		t.Errorf("%d executions for %d requests: no batching happened", st.ExecutionCount, n)
	}
	var runs int64
	for _, b := range st.BatchStats {
		if b.BatchSize > 16 {
			t.Errorf("a batch of %d ran; max_batch_size is 16", b.BatchSize)
		}
		runs += b.ComputeInfer.Count
	}
	if runs != st.ExecutionCount {
		t.Errorf("batch_stats count %d runs, execution_count %d", runs, st.ExecutionCount)
	}
	if st.InferenceStats.Queue.Count != n || st.InferenceStats.ComputeInfer.NS == 0 || st.LastInference == 0 {
		t.Errorf("queue/compute/last not counted: %+v", st)
	}
	t.Logf("%d requests ran in %d executions; batch stats %+v", n, st.ExecutionCount, st.BatchStats)
}

// TestWarmupCounts checks that mlp's model_warmup (one request of
// batch_size 2) ran before the service became ready.
func TestWarmupCounts(t *testing.T) {
	s := newStack(t, nativeService(t, "tri"))
	st := getStats(t, s.URL+"/v2/models/mlp/stats")
	if st.ExecutionCount != 1 || st.InferenceCount != 2 {
		t.Errorf("after warm-up: executions %d, inferences %d; want 1 and 2", st.ExecutionCount, st.InferenceCount)
	}
}

// TestRepositoryAPI lists, unloads and loads models through the paths a
// Triton client uses under an EAS endpoint.
func TestRepositoryAPI(t *testing.T) {
	s := newStack(t, nativeService(t, "tri", "--model-control-mode=explicit", "--load-model=mlp"))
	auth := map[string]string{"Authorization": token}
	index := func() []triton.IndexEntry {
		r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/index", []byte("{}"), auth)
		if r.code != 200 {
			t.Fatalf("index: %d %s", r.code, r.body)
		}
		var idx []triton.IndexEntry
		if err := json.Unmarshal(r.body, &idx); err != nil {
			t.Fatal(err)
		}
		return idx
	}
	state := func(idx []triton.IndexEntry, name string) string {
		for _, e := range idx {
			if e.Name == name {
				return e.State
			}
		}
		return "absent"
	}
	idx := index()
	if state(idx, "mlp") != "READY" || state(idx, "multi_io") != "" || state(idx, "conv") != "" {
		t.Fatalf("explicit mode with --load-model=mlp: index %+v", idx)
	}
	if r := do(t, "GET", s.URL+"/v2/models/multi_io", nil, auth); r.code != 404 {
		t.Fatalf("multi_io before load: %d", r.code)
	}
	if r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/models/multi_io/load", []byte("{}"), auth); r.code != 200 {
		t.Fatalf("load: %d %s", r.code, r.body)
	}
	if r := do(t, "GET", s.URL+"/v2/models/multi_io", nil, auth); r.code != 200 {
		t.Fatalf("multi_io after load: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/models/mlp/unload", []byte("{}"), auth); r.code != 200 {
		t.Fatalf("unload: %d %s", r.code, r.body)
	}
	if got := state(index(), "mlp"); got != "UNLOADED" {
		t.Errorf("mlp after unload: %q", got)
	}
	if r := do(t, "POST", s.URL+"/v2/models/mlp/infer", []byte(`{"inputs":[]}`), auth); r.code != 404 {
		t.Errorf("infer on an unloaded model: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/models/mlp/unload", []byte("{}"), auth); r.code != 404 {
		t.Errorf("second unload: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/models/nope/load", []byte("{}"), auth); r.code != 400 {
		t.Errorf("load of a missing model: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/models/..%2f..%2fetc/load", []byte("{}"), auth); r.code == 200 {
		t.Errorf("path escape accepted: %d %s", r.code, r.body)
	}
}

// TestBatchStatsCountRows: one request of 2 rows is a run of batch size 2
// in batch_stats, as Triton counts it (issue 34: it was counted as 1, the
// number of requests).
func TestBatchStatsCountRows(t *testing.T) {
	s := newStack(t, nativeService(t, "tri"))
	row := strings.Repeat("0.25,", 15) + "1"
	body := []byte(`{"inputs":[{"name":"input","shape":[2,16],"datatype":"FP32","data":[` + row + "," + row + `]}]}`)
	if r := do(t, "POST", s.URL+"/v2/models/slow/infer", body, map[string]string{"Authorization": token}); r.code != 200 {
		t.Fatalf("infer: %d %s", r.code, r.body)
	}
	st := getStats(t, s.URL+"/api/predict/tri/v2/models/slow/stats")
	if len(st.BatchStats) != 1 || st.BatchStats[0].BatchSize != 2 || st.BatchStats[0].ComputeInfer.Count != 1 || st.InferenceCount != 2 {
		t.Errorf("one run of 2 rows: batch_stats %+v, inference_count %d; want one run of batch size 2", st.BatchStats, st.InferenceCount)
	}
}
