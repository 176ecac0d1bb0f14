package caffe_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/caffe"
	"github.com/eas-server/eas-server/engines/caffe/caffetest"
)

// TestConformanceNetsTranslate translates published definitions with
// random weights and checks the inputs and outputs it declares. The large
// ones (CaffeNet, AlexNet, ResNet-50) are served and compared with OpenCV
// by processors/caffe's tests.
func TestConformanceNetsTranslate(t *testing.T) {
	dir := caffetest.ConformanceDir(t)
	want := map[string][]caffe.Port{
		"bvlc_googlenet":  {{Name: "prob", Shape: []int64{-1, 1000}}},
		"squeezenet_v1.1": {{Name: "prob", Shape: []int64{-1, 1000, 1, 1}}},
	}
	for name, outs := range want {
		t.Run(name, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join(dir, name, "*.prototxt"))
			if len(files) != 1 {
				t.Fatalf("%d prototxt files", len(files))
			}
			def, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			w, err := caffetest.Weights(def, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			net, err := caffe.Load(def, w)
			if err != nil {
				t.Fatal(err)
			}
			m, err := caffe.Convert(net, caffe.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Outputs) != len(outs) || m.Outputs[0].Name != outs[0].Name || len(m.Outputs[0].Shape) != len(outs[0].Shape) {
				t.Fatalf("outputs %+v, want %+v", m.Outputs, outs)
			}
			if !m.Batchable {
				t.Error("not batchable")
			}
			t.Logf("inputs %+v outputs %+v, %d blobs, %d bytes", m.Inputs, m.Outputs, len(m.Blobs), len(m.ONNX))
		})
	}
}
