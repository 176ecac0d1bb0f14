package sniff

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
)

// nop is a processor that does nothing: the stand-in registered under the
// codes WrongFormat offers.
type nop struct{}

func (nop) Configure(processors.Spec) error                          { return nil }
func (nop) Load(context.Context, processors.Files) error             { return nil }
func (nop) Metadata() processors.Metadata                            { return processors.Metadata{} }
func (nop) Decode(context.Context, *processors.Request) (int, error) { return 0, nil }
func (nop) Run(context.Context, []int) ([]string, error)             { return nil, nil }
func (nop) Encode(context.Context, int, string) (*processors.Response, error) {
	return nil, nil
}

func newNop() *processors.Engine { return processors.Adapt[int, string](nop{}) }

// writeZip writes a zip holding names (empty files) to path.
func writeZip(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, n := range names {
		if _, err := zw.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFile recognises the repository's real models by content, whatever
// their names, and makes up no format for text or noise.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saved := filepath.Join(dir, "savedmodel")
	if err := os.MkdirAll(saved, 0o755); err != nil {
		t.Fatal(err)
	}
	write("savedmodel/saved_model.pb", []byte("\x08\x01\x12\x00"))
	ckpt := filepath.Join(dir, "ckpt.bin")
	writeZip(t, ckpt, "archive/data.pkl", "archive/data/0", "archive/version")
	other := filepath.Join(dir, "other.bin")
	writeZip(t, other, "a.txt")

	tests := []struct {
		path, family, name string
	}{
		{"../onnx/testdata/mlp.onnx", "onnx", "ONNX"},
		{"../onnx/testdata/strings.onnx", "onnx", "ONNX"},
		{"../../examples/models/torchscript_mlp.pt", "torchscript", "TorchScript"},
		{"../../examples/models/rf.pmml", "pmml", "PMML"},
		{"../../engines/trees/testdata/xgboost/binary.json", "trees", "XGBoost JSON"},
		{"../../engines/trees/testdata/xgboost/binary.ubj", "trees", "XGBoost UBJSON"},
		{"../../engines/trees/testdata/xgboost/binary.bin", "trees", "XGBoost binary"},
		{"../../engines/trees/testdata/lightgbm/handmade_v4.txt", "trees", "LightGBM text"},
		{"../../engines/trees/testdata/lightgbm/handmade_v4.json", "trees", "LightGBM JSON"},
		{saved, "tensorflow", "SavedModel"},
		{filepath.Join(saved, "saved_model.pb"), "tensorflow", "SavedModel"},
		{ckpt, "pytorch-checkpoint", "torch.save"},
		{other, "archive", "zip"},
		{write("net.prototxt", []byte("name: \"LeNet\"\nlayer {\n  name: \"data\"\n  type: \"Input\"\n}\n")), "caffe", "Caffe"},
		{write("net.caffemodel", []byte("\x0a\x05LeNet\xa2\x06\x10\x0a\x04data")), "caffe", "Caffe"},
		{write("model.pkl", []byte("\x80\x04\x95\x10\x00\x00")), "pickle", "pickle"},
		{write("page.xml", []byte("<?xml version=\"1.0\"?><html/>")), "xml", "not PMML"},
		{write("m.tgz", []byte("\x1f\x8b\x08\x00\x00\x00")), "archive", "gzip"},
	}
	for _, tc := range tests {
		f, ok := File(tc.path)
		if !ok || f.Family != tc.family || !strings.Contains(f.Name, tc.name) {
			t.Errorf("File(%s) = %+v, %v; want family %s, a name with %q", tc.path, f, ok, tc.family, tc.name)
		}
	}
	for _, data := range []string{`{"a": 1}`, "hello\n", "\x00\x01\x02\x03", "\x08\x01\x12\x05hello"} {
		if f, ok := File(write("unknown", []byte(data))); ok {
			t.Errorf("File(%q) = %+v, want no format", data, f)
		}
	}
}

// TestWrongFormat names the real format and the registered codes that
// serve it, and stays quiet for the processor's own family.
func TestWrongFormat(t *testing.T) {
	for _, code := range []string{"onnx_cpu", "pytorch_cpu_1.10", "pmml"} {
		if _, ok := processors.Lookup(code); !ok {
			processors.Register(code, "a test stand-in", newNop)
		}
	}
	onnx := "../onnx/testdata/mlp.onnx"
	err := WrongFormat(onnx, "pmml", "PMML")
	want := "model_path: mlp.onnx is an ONNX model, not PMML: deploy it with processor onnx_cpu or pytorch_cpu_1.10"
	if err == nil || err.Error() != want {
		t.Errorf("WrongFormat = %v, want %q", err, want)
	}
	if err := WrongFormat(onnx, "onnx", "an ONNX model"); err != nil {
		t.Errorf("own family: %v", err)
	}
	err = WrongFormat("../../examples/models/rf.pmml", "onnx", "an ONNX model")
	if err == nil || !strings.Contains(err.Error(), "rf.pmml is a PMML model, not an ONNX model: deploy it with processor pmml") {
		t.Errorf("pmml given to onnx: %v", err)
	}
	// xgboost is not registered in this test binary: no code is offered
	// that this build cannot serve.
	err = WrongFormat("../../engines/trees/testdata/xgboost/binary.json", "pmml", "PMML")
	if err == nil || strings.Contains(err.Error(), "deploy it with") || !strings.Contains(err.Error(), "XGBoost JSON model, not PMML") {
		t.Errorf("xgboost given to pmml: %v", err)
	}
}
