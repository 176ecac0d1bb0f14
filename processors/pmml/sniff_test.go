package pmml_test

import (
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	_ "github.com/eas-server/eas-server/processors/onnx" // registers the codes the message names
	"github.com/eas-server/eas-server/servicejson"
)

// TestWrongModelFormat: an ONNX file given to pmml fails to deploy with
// what it is and the codes that serve it, not the XML parser's error.
func TestWrongModelFormat(t *testing.T) {
	spec, err := servicejson.Parse([]byte(`{"name":"wrong","processor":"pmml","model_path":"../onnx/testdata/mlp.onnx","metadata":{"instance":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	mgr := service.NewManager(service.Options{StateDir: t.TempDir()})
	defer mgr.Shutdown(t.Context())
	_, err = mgr.Deploy(t.Context(), spec)
	want := "model_path: mlp.onnx is an ONNX model, not PMML: deploy it with processor onnx_cpu or pytorch_cpu_1.10"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("deploy: %v, want %q", err, want)
	}
	if strings.Contains(strings.ToLower(err.Error()), "xml") {
		t.Errorf("the XML parser's error leaks: %v", err)
	}
}
