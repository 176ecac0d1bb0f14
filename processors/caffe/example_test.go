package caffe_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/engines/caffe/caffetest"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/caffepb"
)

// TestLeNetExample deploys examples/service-json/caffe_lenet.json as it is
// (its model path taken from the repository root), posts the committed
// request examples/requests/caffe_lenet.pb a few times at once (the service
// batches) and compares each answer with OpenCV's on the same files.
func TestLeNetExample(t *testing.T) {
	const root = "../.."
	raw, err := os.ReadFile(filepath.Join(root, "examples/service-json/caffe_lenet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	model, _ := filepath.Abs(filepath.Join(root, doc["model_path"].(string)))
	doc["model_path"] = model
	raw, _ = json.Marshal(doc)
	body, err := os.ReadFile(filepath.Join(root, "examples/requests/caffe_lenet.pb"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := caffepb.DecodeRequest(body, []string{"data"})
	if err != nil || len(req.Inputs) != 1 {
		t.Fatalf("examples/requests/caffe_lenet.pb: %v", err)
	}
	s := teststack.Start(t, string(raw))
	var wg sync.WaitGroup
	answers := make([][]byte, 4)
	for i := range answers {
		wg.Go(func() {
			code, b, _ := teststack.Do(t, http.MethodPost, s.URL+"/api/predict/caffe_lenet", doc["token"].(string), body)
			if code != http.StatusOK {
				t.Errorf("predict: %d %s", code, b)
			}
			answers[i] = b
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	caffetest.RequireOpenCV(t)
	cfg := doc["model_config"].(map[string]any)
	want := caffetest.OpenCV(t, filepath.Join(model, cfg["model"].(string)), filepath.Join(model, cfg["weight"].(string)), req.Inputs, []string{"prob"})
	for _, b := range answers {
		outs, err := caffepb.DecodeResponse(b)
		if err != nil || len(outs) != 1 || outs[0].Name != "prob" {
			t.Fatalf("answer %v: %v", outs, err)
		}
		if err := caffetest.Compare(outs[0], want[0], tensor.F32Reformulated); err != nil {
			t.Error(err)
		}
	}
}
