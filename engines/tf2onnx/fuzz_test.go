package tf2onnx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/internal/require"
)

// conformanceModels lists the saved_model.pb files of the conformance
// fixtures beside the repository (none when absent).
func conformanceModels() []string {
	base := filepath.Join(require.ConformanceRoot(), "tensorflow")
	dirs, _ := filepath.Glob(filepath.Join(base, "*", "saved_model.pb"))
	more, _ := filepath.Glob(filepath.Join(base, "*", "*", "saved_model.pb"))
	return append(dirs, more...)
}

// TestConformanceModelsWellFormed checks the structure of every signature
// of the conformance fixtures that translates, variables included.
func TestConformanceModelsWellFormed(t *testing.T) {
	require.ConformanceDir(t, "tensorflow")
	paths := conformanceModels()
	if len(paths) == 0 {
		t.Fatalf("no saved_model.pb in the conformance folder %s", filepath.Join(require.ConformanceRoot(), "tensorflow"))
	}
	converted := 0
	for _, p := range paths {
		m, err := savedmodel.Load(filepath.Dir(p))
		if err != nil {
			continue // fixtures savedmodel refuses are tested there
		}
		for _, name := range m.SignatureNames() {
			ts, err := Convert(m, name)
			if err != nil {
				continue
			}
			converted++
			if err := checkSignature(ts); err != nil {
				t.Errorf("%s signature %q: %v", filepath.Dir(p), name, err)
			}
		}
	}
	if converted == 0 {
		t.Error("no fixture signature translated")
	}
	t.Logf("%d signatures of %d fixtures checked", converted, len(paths))
}

// FuzzConvert translates every signature of arbitrary saved_model.pb bytes:
// it must fail cleanly or produce a well-formed ONNX model (checkSignature),
// never panic or loop. Inputs
// are whole protobufs, so run it with -fuzzminimizetime=2s: minimising
// each new interesting input takes long otherwise.
func FuzzConvert(f *testing.F) {
	for _, p := range conformanceModels() {
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
			if err != nil {
				continue
			}
			if len(ts.Model) == 0 {
				t.Fatalf("signature %q: no error and no model", name)
			}
			if err := checkSignature(ts); err != nil {
				t.Fatalf("signature %q: %v", name, err)
			}
		}
	})
}
