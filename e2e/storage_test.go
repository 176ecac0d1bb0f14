package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/tensor"
)

// TestModelFromHTTPWithChecksum deploys a model served over HTTP with
// model_sha256 in model_config: the right sum serves (and the processor
// never sees the key), a wrong one fails the deploy naming the checksum.
func TestModelFromHTTPWithChecksum(t *testing.T) {
	model, err := os.ReadFile(filepath.Join(onnxTestdata, "mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	var hits int
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path != "/models/mlp.onnx" {
			http.NotFound(w, r)
			return
		}
		w.Write(model)
	}))
	defer files.Close()
	sum := sha256.Sum256(model)
	good := hex.EncodeToString(sum[:])
	url := files.URL + "/models/mlp.onnx"
	s := newStack(t, fmt.Sprintf(`{"name":"torch","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T",
		"model_config":{"model_sha256":%q},"metadata":{"instance":1,"cpu":1}}`, url, good))
	in := []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, make([]float32, 16))}
	if _, err := s.infer(t, "torch", in, []string{"output"}); err != nil {
		t.Fatalf("model from http with the right sha256: %v", err)
	}
	if hits == 0 {
		t.Fatal("the model server was never asked")
	}

	mgr := service.NewManager(service.Options{StateDir: t.TempDir()})
	bad := strings.Repeat("0", 64)
	spec, err := servicejson.Parse([]byte(fmt.Sprintf(`{"name":"bad","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T",
		"model_config":{"model_sha256":%q},"metadata":{"instance":1,"cpu":1}}`, url, bad)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = mgr.Deploy(t.Context(), spec)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "sha256") {
		t.Fatalf("wrong model_sha256: err = %v, want a checksum failure", err)
	}
}
