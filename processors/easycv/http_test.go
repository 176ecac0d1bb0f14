package easycv

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
)

// TestHTTPBatching deploys the export through the real loader and router,
// once plain and once with rpc.batching, and sends a list request and many
// concurrent single requests: every answer equals the plain service's, and
// the batching service runs fewer forwards than it gets requests.
func TestHTTPBatching(t *testing.T) {
	r := loadRefs(t)
	dir := generated(t)
	model := filepath.Join(dir, "cls.pt")
	srv := teststack.Start(t,
		fmt.Sprintf(`{"name":"plain","processor":"easycv","model_path":%q,"model_config":{"type":"TorchClassifier","topk":2},"token":"T","metadata":{"instance":1,"cpu":1}}`, model),
		fmt.Sprintf(`{"name":"batched","processor":"easycv","model_path":%q,"model_config":"{\"type\":\"TorchClassifier\",\"topk\":2}","token":"T",
			"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"worker_threads":1,"max_batch_size":16,"max_batch_timeout":50,"max_queue_size":1000}}}`, model))
	post := func(svc string, body []byte) (int, []byte) {
		code, b, _ := teststack.Do(t, "POST", srv.URL+"/api/predict/"+svc, "T", body)
		return code, b
	}

	names := []string{"rgb_300x200.png", "rgb_150x400.png", "gray_640x480.png", "rgba_256x256.png", "palette_97x131.png", "photo_500x375.jpg"}
	bodies := make([][]byte, len(names))
	items := make([]string, len(names))
	for i, n := range names {
		bodies[i] = imageBody(t, filepath.Join(dir, n))
		items[i] = string(bodies[i])
	}
	code, out := post("plain", []byte("["+strings.Join(items, ",")+"]"))
	if code != 200 {
		t.Fatalf("list request: %d %s", code, out)
	}
	var list []answer
	if err := json.Unmarshal(out, &list); err != nil || len(list) != len(names) {
		t.Fatalf("list answer %s: %v", out, err)
	}
	for i, n := range names {
		want := r.Variants["default"].Images[n].ClsProb
		tol := pngTol
		if strings.HasSuffix(n, ".jpg") {
			tol = jpegTol
		}
		if len(list[i].Class) != 2 || list[i].Class[0] != argmax(want) {
			t.Errorf("list %s: %+v, want argmax %d", n, list[i], argmax(want))
		}
		if _, err := closeProbs(list[i], clsNames, want, tol); err != nil {
			t.Errorf("list %s: against PyTorch: %v", n, err)
		}
	}

	const rounds = 4
	before := forwards.Load()
	var wg sync.WaitGroup
	errs := make(chan string, rounds*len(names))
	for range rounds {
		for i := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, out := post("batched", bodies[i])
				var a answer
				if code != 200 || json.Unmarshal(out, &a) != nil {
					errs <- fmt.Sprintf("%s: %d %s", names[i], code, out)
					return
				}
				alone, err := probs(list[i], clsNames)
				if err == nil {
					// The same input in batches of other sizes.
					_, err = closeProbs(a, clsNames, alone, tensor.F32Accumulated)
				}
				if a.Class[0] != list[i].Class[0] || err != nil {
					errs <- fmt.Sprintf("%s: batched %+v, alone %+v: %v", names[i], a, list[i], err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	n := forwards.Load() - before
	t.Logf("%d concurrent requests ran in %d forwards", rounds*len(names), n)
	if n >= rounds*int64(len(names)) {
		t.Errorf("%d forwards for %d concurrent requests: batching merged nothing", n, rounds*len(names))
	}

	if code, out := post("batched", []byte(`{"image":"not base64!"}`)); code != 400 || !strings.Contains(string(out), "image: not valid base64") {
		t.Errorf("bad base64: %d %s", code, out)
	}
}
