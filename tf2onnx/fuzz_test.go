package tf2onnx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/savedmodel"
)

// FuzzConvert translates every signature of arbitrary saved_model.pb bytes:
// it must fail cleanly or produce a model, never panic or loop. Inputs
// are whole protobufs, so run it with -fuzzminimizetime=2s: minimising
// each new interesting input takes long otherwise.
func FuzzConvert(f *testing.F) {
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "shared", "conformance", "tensorflow", "*", "saved_model.pb"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "shared", "conformance", "tensorflow", "*", "*", "saved_model.pb"))
	for _, p := range append(dirs, more...) {
		// Small models only: the fuzzer minimises every interesting input,
		// which is slow for large ones.
		if b, err := os.ReadFile(p); err == nil && len(b) < 8<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mg, err := savedmodel.ParseMetaGraph(data, savedmodel.ServeTag)
		if err != nil {
			return
		}
		m := &savedmodel.Model{MetaGraph: mg}
		for name := range mg.SignatureDef {
			ts, err := Convert(m, name)
			if err == nil && len(ts.Model) == 0 {
				t.Fatalf("signature %q: no error and no model", name)
			}
		}
	})
}
