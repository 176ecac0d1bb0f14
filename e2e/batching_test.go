package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/tensor"
)

// TestBatchingUnderLoadThroughHTTP sends many concurrent requests to a
// batching ONNX service: batches must form (the batch-size histogram shows
// more requests than runs) and every answer must equal the unbatched
// service's answer for the same input.
func TestBatchingUnderLoadThroughHTTP(t *testing.T) {
	model := filepath.Join(onnxTestdata, "mlp.onnx")
	reg := prometheus.NewRegistry()
	mt := metrics.New(reg)
	mgr := service.NewManager(service.Options{StateDir: t.TempDir(), Metrics: mt})
	for _, js := range []string{
		fmt.Sprintf(`{"name":"single","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model),
		fmt.Sprintf(`{"name":"batched","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T",
			"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"worker_threads":1,"max_batch_size":16,"max_batch_timeout":20,"max_queue_size":1000}}}`, model),
	} {
		spec, err := servicejson.Parse([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mgr.Deploy(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(server.New(server.Options{Manager: mgr, Metrics: mt, Gatherer: reg}).Handler())
	defer func() { ts.Close(); mgr.Shutdown(context.Background()) }()
	s := &stack{url: ts.URL}

	const clients = 48
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := make([][]tensor.Tensor, clients)
	want := make([][]tensor.Tensor, clients)
	for i := range inputs {
		v := make([]float32, 16)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		inputs[i] = []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, v)}
	}
	// The unbatched answers, one request at a time through the "single" service.
	single := &stack{url: ts.URL}
	for i := range inputs {
		out, err := single.inferTo(t, "single", inputs[i], []string{"output"})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out
	}
	var wg sync.WaitGroup
	for round := range 3 {
		for i := range inputs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := s.inferTo(t, "batched", inputs[i], []string{"output"})
				if err != nil {
					t.Errorf("round %d client %d: %v", round, i, err)
					return
				}
				compare(t, fmt.Sprintf("round %d client %d", round, i), got, want[i])
			}()
		}
	}
	wg.Wait()

	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := metricValue(t, string(body), `eas_batch_size_sum{service="batched"}`)
	count := metricValue(t, string(body), `eas_batch_size_count{service="batched"}`)
	if sum != 3*clients {
		t.Errorf("batched requests counted %v, want %d", sum, 3*clients)
	}
	if count >= sum {
		t.Errorf("%v runs for %v requests: no batch formed under load", count, sum)
	}
}

func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\S+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics lacks %s", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPadBatcherOnBERT serves the small BERT with the pad batcher: requests
// of different sequence lengths share padded runs (the attention mask is
// padded with 0, so real tokens never see the padding), and every request
// still gets PyTorch's outputs for its own length.
func TestPadBatcherOnBERT(t *testing.T) {
	dir := "testdata/real"
	var r refs
	b, err := os.ReadFile(filepath.Join(dir, "bert_tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	mt := metrics.New(reg)
	mgr := service.NewManager(service.Options{StateDir: t.TempDir(), Metrics: mt})
	spec, err := servicejson.Parse([]byte(fmt.Sprintf(`{"name":"bert","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T",
		"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"batcher":"pad","pad_value":0,"worker_threads":1,
		"max_batch_size":16,"max_batch_timeout":20,"max_queue_size":1000}}}`, filepath.Join(dir, r.Model))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Deploy(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.New(server.Options{Manager: mgr, Metrics: mt, Gatherer: reg}).Handler())
	defer func() { ts.Close(); mgr.Shutdown(context.Background()) }()
	s := &stack{url: ts.URL}

	// Decode every case first, so that the requests go out together.
	ins := make([][]tensor.Tensor, len(r.Cases))
	wants := make([][]tensor.Tensor, len(r.Cases))
	for i, c := range r.Cases {
		ins[i], wants[i] = tensorsOf(t, c.Inputs, "inputs"), tensorsOf(t, c.Outputs, "outputs")
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	requests := 0
	for round := range 8 {
		for i, c := range r.Cases {
			in, want := ins[i], wants[i]
			requests++
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := s.inferTo(t, "bert", in, namesOf(want))
				if err != nil {
					t.Errorf("round %d %s: %v", round, c.Name, err)
					return
				}
				compareTol(t, fmt.Sprintf("round %d %s", round, c.Name), got, want, tensor.F32Reformulated)
			}()
		}
	}
	close(start)
	wg.Wait()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := metricValue(t, string(body), `eas_batch_size_sum{service="bert"}`)
	count := metricValue(t, string(body), `eas_batch_size_count{service="bert"}`)
	if int(sum) != requests || count >= sum {
		t.Errorf("%v runs for %v requests (sent %d): want fewer runs than requests", count, sum, requests)
	}
}
