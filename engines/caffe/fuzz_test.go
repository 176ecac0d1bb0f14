package caffe_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/caffe"
	"github.com/eas-server/eas-server/engines/caffe/caffetest"
)

// FuzzLoad feeds definitions and weights to the reader and the translator:
// bad input must fail with an error, never a panic, and nothing may
// allocate beyond what the bytes hold or the translator's bounds allow.
func FuzzLoad(f *testing.F) {
	small := []byte(input + `layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 2 kernel_size: 3 pad: 1 } }
layer { name: "p" type: "Pooling" bottom: "c" top: "p" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "ip" type: "InnerProduct" bottom: "p" top: "ip" inner_product_param { num_output: 3 } }`)
	w, err := caffetest.Weights(small, 1, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small, w)
	legacy, err := caffetest.Weights(small, 1, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small, legacy)
	f.Add([]byte(`layers { name: "x" type: POOLING bottom: "d" top: "y" } input: "d" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4`), []byte{})
	nets, _ := filepath.Glob(filepath.Join(caffetest.NetsDir(), "*.prototxt"))
	for _, n := range nets {
		if def, err := os.ReadFile(n); err == nil {
			f.Add(def, []byte{})
		}
	}
	f.Fuzz(func(t *testing.T, def, weights []byte) {
		net, err := caffe.Load(def, weights)
		if err != nil {
			return
		}
		m, err := caffe.Convert(net, caffe.Options{})
		if err != nil {
			return
		}
		if len(m.ONNX) == 0 || len(m.Inputs) == 0 || len(m.Outputs) == 0 {
			t.Fatalf("translated to an empty model: %+v", m)
		}
	})
}
