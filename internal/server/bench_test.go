package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	_ "github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// BenchmarkRequestPath drives whole requests through the router (auth,
// decode, scheduler, run, encode) without a network, so that allocs/op and
// B/op are the server's own cost per request: the measure of the hot path.
// onnx is the 16->32->8 test MLP, one row per request; batch64 sends 64
// requests at once so they merge into batches.
//
//	go test -run '^$' -bench RequestPath -benchmem ./internal/server/
func BenchmarkRequestPath(b *testing.B) {
	mlp, err := filepath.Abs("../../processors/onnx/testdata/mlp.onnx")
	if err != nil {
		b.Fatal(err)
	}
	mgr := service.NewManager(service.Options{StateDir: b.TempDir()})
	b.Cleanup(func() { mgr.Shutdown(context.Background()) })
	for _, js := range []string{
		`{"name":"echo","processor":"echo","token":"t","metadata":{"instance":1,"rpc":{"worker_threads":4}}}`,
		fmt.Sprintf(`{"name":"mlp","processor":"pytorch_cpu_1.10","model_path":%q,"token":"t",
			"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"max_batch_size":64,"max_batch_timeout":2,"worker_threads":1,"max_queue_size":1024}}}`, mlp),
	} {
		spec, err := servicejson.Parse([]byte(js))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mgr.Deploy(b.Context(), spec); err != nil {
			b.Fatalf("deploy: %v", err)
		}
	}
	h := server.New(server.Options{Manager: mgr}).Handler()
	row := make([]float32, 16)
	for i := range row {
		row[i] = float32(i) / 16
	}
	torch, err := torchpb.EncodeRequest([]tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, row)}, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	do := func(b *testing.B, path string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "t")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Errorf("%s: %d %s", path, w.Code, w.Body)
		}
	}
	for _, bc := range []struct {
		name, path string
		body       []byte
		clients    int
	}{
		{"echo", "/api/predict/echo", []byte(`[{"x":1}]`), 1},
		{"onnx", "/api/predict/mlp", torch, 1},
		{"onnx/batch64", "/api/predict/mlp", torch, 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			if bc.clients == 1 {
				for b.Loop() {
					do(b, bc.path, bc.body)
				}
				return
			}
			// clients goroutines share b.N requests, so allocs/op stays
			// per request.
			var wg sync.WaitGroup
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			b.ResetTimer()
			for range bc.clients {
				wg.Go(func() {
					for range work {
						do(b, bc.path, bc.body)
					}
				})
			}
			wg.Wait()
		})
	}
}
