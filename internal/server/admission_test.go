package server_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	_ "github.com/eas-server/eas-server/processors/treeensemble" // xgboost: a tensor service in pure Go
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// hookedEcho is an echo service whose Decode runs a python pre_process
// hook that counts its calls (processors/custom/testdata/state.py answers
// "count" with them): the decode a refusal before decoding saves.
func hookedEcho(t *testing.T, name, model, rpc string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the pre_process hook is a python processor")
	}
	py, err := filepath.Abs("../../processors/custom/testdata/state.py")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"name":%q,"processor":"echo","token":"T","model_config":%s,
		"pre_process":{"processor_path":%q,"processor_type":"python"},
		"metadata":{"instance":1,"rpc":%s}}`, name, model, py, rpc)
}

// decodes asks the hook of service name how often it ran, the asking
// included; it retries while the service refuses (429).
func decodes(t *testing.T, url, name string) string {
	t.Helper()
	var got string
	wait.Until(t, 30*time.Second, func() error {
		r := do(t, "POST", url+"/api/predict/"+name, []byte("count"), map[string]string{"Authorization": "T"})
		if r.code != http.StatusOK {
			return fmt.Errorf("count: %d %s", r.code, r.body)
		}
		got = r.body
		return nil
	})
	return got
}

// TestFullServiceRefusesBeforeDecode: with its one worker busy and its
// queue of one full, a service answers 450 without reading or decoding the
// body: its pre_process hook does not run.
func TestFullServiceRefusesBeforeDecode(t *testing.T) {
	const refused = 5
	st := teststack.Start(t, hookedEcho(t, "full", `{"sleep_ms":1500}`, `{"worker_threads":1,"max_queue_size":1,"keepalive":30000}`))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if r := do(t, "POST", st.URL+"/api/predict/full", []byte("x"), map[string]string{"Authorization": "T"}); r.code != http.StatusOK {
				t.Errorf("request admitted before the service was full: %d %s", r.code, r.body)
			}
		})
	}
	svc, _ := st.Manager.Get("full")
	live, _ := svc.Acquire()
	wait.Until(t, 30*time.Second, func() error {
		if d := live.Scheduler.QueueDepth(); d != 1 {
			return fmt.Errorf("queue depth %d, want 1", d)
		}
		return nil
	})
	live.Release()
	for i := range refused {
		if r := do(t, "POST", st.URL+"/api/predict/full", []byte("x"), map[string]string{"Authorization": "T"}); r.code != 450 {
			t.Errorf("request %d to a full service: %d %s, want 450", i, r.code, r.body)
		}
	}
	wg.Wait()
	// Two requests filled it, the third asks: the refused ones never ran the hook.
	if got := decodes(t, st.URL, "full"); got != "3" {
		t.Errorf("pre_process ran %s times, want 3 (the %d refused requests must not be decoded)", got, refused)
	}
}

// TestRateLimitRefusesBeforeDecode: over rpc.rate_limit, a service answers
// 429 on every door without decoding the request.
func TestRateLimitRefusesBeforeDecode(t *testing.T) {
	const refused = 5
	t.Run("eas", func(t *testing.T) {
		st := teststack.Start(t, hookedEcho(t, "limited", `{}`, `{"rate_limit":1}`))
		// The one token of a rate of 1/s goes to the first request.
		if r := do(t, "POST", st.URL+"/api/predict/limited", []byte("x"), map[string]string{"Authorization": "T"}); r.code != http.StatusOK {
			t.Fatalf("first request: %d %s", r.code, r.body)
		}
		for i := range refused {
			if r := do(t, "POST", st.URL+"/api/predict/limited", []byte("x"), map[string]string{"Authorization": "T"}); r.code != http.StatusTooManyRequests ||
				!strings.Contains(r.body, "metadata.rpc.rate_limit") {
				t.Errorf("request %d over the rate limit: %d %s, want 429 naming metadata.rpc.rate_limit", i, r.code, r.body)
			}
		}
		if got := decodes(t, st.URL, "limited"); got != "2" {
			t.Errorf("pre_process ran %s times, want 2 (the %d refused requests must not be decoded)", got, refused)
		}
	})

	// The tensor doors: a request whose tensors would fail to decode (an
	// unknown input, 400) answers 429, so they were not decoded.
	model, err := filepath.Abs("../../engines/trees/testdata/xgboost/binary.json")
	if err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`{"name":"trees","processor":"xgboost","model_path":%q,"token":"T","metadata":{"instance":1,"rpc":{"rate_limit":1}}}`, model)
	good := `{"inputs":[{"name":"input","shape":[1,30],"datatype":"FP32","data":[` + strings.TrimSuffix(strings.Repeat("0,", 30), ",") + `]}]}`
	bad := `{"inputs":[{"name":"nosuch","shape":[1],"datatype":"FP32","data":[1]}]}`
	t.Run("kserve", func(t *testing.T) {
		st := teststack.Start(t, spec)
		if r := do(t, "POST", st.URL+"/v2/models/trees/infer", []byte(good), map[string]string{"Authorization": "T"}); r.code != http.StatusOK {
			t.Fatalf("first request: %d %s", r.code, r.body)
		}
		for i := range refused {
			if r := do(t, "POST", st.URL+"/v2/models/trees/infer", []byte(bad), map[string]string{"Authorization": "T"}); r.code != http.StatusTooManyRequests {
				t.Errorf("request %d over the rate limit: %d %s, want 429", i, r.code, r.body)
			}
		}
	})
	t.Run("grpc", func(t *testing.T) {
		st := teststack.Start(t, spec)
		client := st.GRPC(t)
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "T")
		infer := func(input string, shape []int64, data []float32) error {
			_, err := client.ModelInfer(ctx, &kservegrpc.ModelInferRequest{ModelName: "trees",
				Inputs: []*kservegrpc.ModelInferRequest_InferInputTensor{{Name: input, Datatype: "FP32", Shape: shape,
					Contents: &kservegrpc.InferTensorContents{Fp32Contents: data}}}})
			return err
		}
		if err := infer("input", []int64{1, 30}, make([]float32, 30)); err != nil {
			t.Fatalf("first request: %v", err)
		}
		for i := range refused {
			if err := infer("nosuch", []int64{1}, []float32{1}); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("request %d over the rate limit: %v, want ResourceExhausted", i, err)
			}
		}
	})
}
