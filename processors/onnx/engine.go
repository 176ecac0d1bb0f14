package onnx

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
)

// engine runs a loaded model once: inputs arranged in the model's input
// order in, outputs out. Model holds one; runSession and Close go through it,
// so the codecs, KServe doors, metadata and batching are shared by ONNX
// Runtime sessions and TorchScript modules.
type engine interface {
	run(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error)
	close() error
}

// ortEngine is one ONNX Runtime session with the model's declared inputs
// and outputs.
type ortEngine struct {
	session         *ort.DynamicAdvancedSession
	inputs, outputs []ioInfo
}

func (e *ortEngine) close() error { return e.session.Destroy() }

// run runs the session; a cancelled ctx terminates the run inside ONNX
// Runtime.
func (e *ortEngine) run(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	values := make([]ort.Value, len(inputs))
	defer destroyAll(values)
	for i := range inputs {
		v, err := toValue(&inputs[i], e.inputs[i].ort)
		if err != nil {
			return nil, fmt.Errorf("onnx: input %q: %w", inputs[i].Name, err)
		}
		values[i] = v
	}
	outputs := make([]ort.Value, len(e.outputs))
	defer destroyAll(outputs)

	var runOpts *ort.RunOptions
	if ctx.Done() != nil {
		ro, err := ort.NewRunOptions()
		if err != nil {
			return nil, fmt.Errorf("onnx run options: %w", err)
		}
		defer ro.Destroy()
		stop := context.AfterFunc(ctx, func() { _ = ro.Terminate() })
		defer stop()
		runOpts = ro
	}
	if err := e.session.RunWithOptions(values, outputs, runOpts); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, runFailure(err)
	}
	res := make([]tensor.Tensor, len(outputs))
	for i, v := range outputs {
		t, err := fromValue(e.outputs[i].Name, v)
		if err != nil {
			return nil, fmt.Errorf("onnx: output %q: %w", e.outputs[i].Name, err)
		}
		res[i] = t
	}
	return res, nil
}

// tsEngine is a TorchScript module. libtorch cannot interrupt forward, so a
// cancelled ctx is only honoured before the run starts.
type tsEngine struct {
	mod *torchscript.Module
}

func (e *tsEngine) close() error { return e.mod.Close() }

func (e *tsEngine) run(ctx context.Context, inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	outs, err := e.mod.Forward(inputs)
	if err != nil {
		if errors.Is(err, torchscript.ErrClosed) {
			return nil, ErrNotLoaded
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, runFailure(err)
	}
	return outs, nil
}

// runFailure classifies a failed run of inputs that passed the model's
// signature (dtype, shape, data size). What is left is mostly the model
// raising on these values (an index out of range, a reshape that does not
// fit), which is the client's to fix and which EAS answers 400; Run runs
// each payload of a failed merged run alone, so that error is this
// request's. The exceptions are the engine's own failures, which no request
// can fix and which answer 500: memory it could not allocate, a CUDA or
// cuDNN error. Neither runtime gives a code that tells them apart (the Go
// binding keeps only ONNX Runtime's message; libtorch throws
// c10::Error), so the message is read.
func runFailure(err error) error {
	msg := strings.ToLower(err.Error())
	for _, s := range engineFaults {
		if strings.Contains(msg, s) {
			return fmt.Errorf("model run failed: %w", err)
		}
	}
	return badinput.Errorf("model run failed on this input: %v", err)
}

// engineFaults are lowercased fragments of ONNX Runtime's and libtorch's
// messages for failures of the engine rather than of the input.
var engineFaults = []string{
	"out of memory",              // CUDA (both), libtorch's OutOfMemoryError
	"failed to allocate memory",  // ONNX Runtime's arenas and allocators
	"available memory of",        // ONNX Runtime's BFC arena: "Available memory of N is smaller than requested bytes of M"
	"can't allocate memory",      // libtorch's DefaultCPUAllocator
	"bad_alloc",                  // std::bad_alloc from either
	"cuda failure", "cuda error", // ONNX Runtime's CUDA_CALL; libtorch's C10_CUDA_CHECK
	"cudnn failure", "cudnn_status", "cublas failure", "cublas_status",
}

// tsDTypes are the element types a TorchScript module takes (what the shim
// converts); the others are refused as bad input before the run.
var tsDTypes = map[tensor.DType]bool{
	tensor.Bool: true, tensor.Uint8: true, tensor.Int8: true, tensor.Int16: true,
	tensor.Int32: true, tensor.Int64: true, tensor.Float16: true, tensor.BFloat16: true,
	tensor.Float32: true, tensor.Float64: true,
}
