package onnx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	ort "github.com/yalue/onnxruntime_go"

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

// EnsureEnvironment initialises the process-wide ONNX Runtime environment
// (the library lookup of SetLibraryPath, $ONNXRUNTIME_LIB and the project's
// copy) for a package that makes sessions of its own (processors/llm); a
// failure wraps ErrLibrary and is retried on the next call.
func EnsureEnvironment() error { return ensureEnvironment() }

// ParseConfig reads and checks a service's model_config as this package's
// codes do (intra_op_threads, graph_optimization, the CUDA options, ...),
// for a processor whose sessions take the same settings.
func ParseConfig(spec processors.Spec) (Config, error) { return parseConfig(spec) }

// Session is how another package's ONNX Runtime sessions are set up the
// way this package's are: the same session options (threads, spinning,
// graph optimisation) and GPU rules (the CUDA execution provider with no
// CPU fallback, and the same explanations when it cannot be had).
type Session struct {
	// Code is the processor code a GPU failure names; CPUCode the code it
	// suggests instead.
	Code, CPUCode string
	// GPU selects the CUDA execution provider.
	GPU bool
	// Config is the model_config (ParseConfig).
	Config Config
	// Threads is ONNX Runtime's intra-op thread count (Spec.IntraOpThreads).
	Threads int
}

func (s Session) model() *Model {
	return &Model{code: s.Code, info: codeInfo{gpu: s.GPU, cpu: s.CPUCode}, cfg: s.Config, threads: s.Threads}
}

// Options builds the session options, and names the execution provider
// they select ("CPUExecutionProvider" or "CUDAExecutionProvider"). The
// environment must be initialised (EnsureEnvironment). The caller destroys
// the options.
func (s Session) Options() (*ort.SessionOptions, string, error) {
	m := s.model()
	opts, err := m.sessionOptions()
	return opts, m.provider, err
}

// LoadError explains a failure to create a session on file: for a GPU
// session what keeps CUDA from running here, else the file and the error.
func (s Session) LoadError(file string, err error) error {
	if s.GPU {
		return s.model().gpuError(err)
	}
	return fmt.Errorf("load %s: %w", filepath.Base(file), err)
}

// RunFailure classifies a failed run as onnx's own runs are: the engine's
// faults (memory, CUDA) as errors, the rest as the input's (badinput).
func RunFailure(err error) error { return runFailure(err) }
