package onnx

import (
	"context"
	"fmt"
	"os"

	"github.com/eas-server/eas-server/processors"
)

// NewRuntime returns an unconfigured model that serves under code, a code of
// another processor family whose models are translated to ONNX (the
// tensorflow_* codes). It shares this package's session options, library
// lookup and GPU rules: gpu selects the CUDA execution provider with no CPU
// fallback, and cpuCode is the code a failed GPU deploy suggests. Load it
// with the .onnx file, or LoadBytes with a translation in memory; Decode and Encode speak this package's wire formats,
// so such callers make payloads with FromTensors, Run them and do their own
// codec.
func NewRuntime(code string, gpu bool, cpuCode string) *Model {
	return &Model{code: code, info: codeInfo{proto: protoHIE, gpu: gpu, cpu: cpuCode}}
}

// LoadBytes loads a model held in memory (a translation) on a configured
// runtime: the session is made from a temporary file, removed once the
// session holds the model.
func (m *Model) LoadBytes(ctx context.Context, model []byte) error {
	f, err := os.CreateTemp("", "eas-translated-*.onnx")
	if err != nil {
		return fmt.Errorf("write translated model: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(model); err != nil {
		f.Close()
		return fmt.Errorf("write translated model: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write translated model: %w", err)
	}
	return m.Load(ctx, processors.Files{ModelPath: f.Name()})
}
