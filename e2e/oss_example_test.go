package e2e

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/tensor"
)

// TestOSSExample follows the README's upload-then-deploy flow against an
// OSS-compatible server on loopback: upload the example model with the
// upload code, then deploy examples/service-json/oss_mlp.json unchanged and
// call it.
func TestOSSExample(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("my-models"); err != nil {
		t.Fatal(err)
	}
	oss := httptest.NewServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer oss.Close()
	t.Setenv("OSS_ENDPOINT", oss.URL)
	t.Setenv("OSS_ACCESS_KEY_ID", "LTAItest")
	t.Setenv("OSS_ACCESS_KEY_SECRET", "secret")

	got, err := storage.Upload(t.Context(), "../examples/models/mlp.onnx", "oss://my-models/mlp/", storage.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != "oss://my-models/mlp/mlp.onnx" {
		t.Fatalf("upload printed %q", got)
	}
	spec, err := os.ReadFile(filepath.Join("..", "examples", "service-json", "oss_mlp.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, string(spec))
	req := &stack{url: s.url, token: "example-token"}
	in := []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, make([]float32, 16))}
	if _, err := req.inferTo(t, "oss_mlp", in, []string{"output"}); err != nil {
		t.Fatal(err)
	}
}
