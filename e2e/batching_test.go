package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
)

// TestBatchingUnderLoadThroughHTTP sends many concurrent requests to a
// batching ONNX service: batches must form (the batch-size histogram shows
// more requests than runs) and every answer must equal the unbatched
// service's answer for the same input.
func TestBatchingUnderLoadThroughHTTP(t *testing.T) {
	model := filepath.Join(onnxTestdata, "mlp.onnx")
	s := newStack(t,
		fmt.Sprintf(`{"name":"single","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model),
		fmt.Sprintf(`{"name":"batched","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T",
			"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"worker_threads":1,"max_batch_size":16,"max_batch_timeout":20,"max_queue_size":1000}}}`, model))

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
	single := s
	for i := range inputs {
		out, err := single.inferTo(t, "single", inputs[i], []string{"output"})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out
	}
	// Rounds of all clients at once, until a batch has formed: the MLP runs
	// in microseconds, so in one round the requests may reach the one
	// worker one after another, and then the scheduler rightly runs each
	// at once (waiting would only add latency). Every answer is checked.
	const maxRounds = 50
	var sum, count float64
	rounds := 0
	for rounds < maxRounds && (rounds < 3 || count >= sum) {
		var wg sync.WaitGroup
		for i := range inputs {
			wg.Go(func() {
				got, err := s.inferTo(t, "batched", inputs[i], []string{"output"})
				if err != nil {
					t.Errorf("round %d client %d: %v", rounds, i, err)
					return
				}
				compare(t, fmt.Sprintf("round %d client %d", rounds, i), got, want[i])
			})
		}
		wg.Wait()
		rounds++
		sum = teststack.Metric(t, s.url, `eas_batch_size_sum{service="batched"}`)
		count = teststack.Metric(t, s.url, `eas_batch_size_count{service="batched"}`)
	}
	if sum != float64(rounds*clients) {
		t.Errorf("batched requests counted %v, want %d", sum, rounds*clients)
	}
	if count >= sum {
		t.Errorf("%v runs for %v requests in %d rounds of %d clients: no batch formed under load", count, sum, rounds, clients)
	}
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
	s := newStack(t, fmt.Sprintf(`{"name":"bert","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T",
		"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"batcher":"pad","pad_value":0,"worker_threads":1,
		"max_batch_size":16,"max_batch_timeout":20,"max_queue_size":1000}}}`, filepath.Join(dir, r.Model)))

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
	sum := teststack.Metric(t, s.url, `eas_batch_size_sum{service="bert"}`)
	count := teststack.Metric(t, s.url, `eas_batch_size_count{service="bert"}`)
	if int(sum) != requests || count >= sum {
		t.Errorf("%v runs for %v requests (sent %d): want fewer runs than requests", count, sum, requests)
	}
}
