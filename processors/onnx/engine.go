package onnx

import (
	"context"
	"errors"
	"fmt"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/torchscript"
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
		// EAS answers 400 when the model raises on an input (an index out
		// of range, a reshape that does not fit); inputs were validated
		// against the signature, so what is left is data-dependent.
		return nil, badinput.Errorf("model run failed on this input: %v", err)
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
		// Inputs were checked (dtype, data size); what is left is the
		// model raising on this input, which EAS answers 400.
		return nil, badinput.Errorf("model run failed on this input: %v", err)
	}
	return outs, nil
}

// tsDTypes are the element types a TorchScript module takes (what the shim
// converts); the others are refused as bad input before the run.
var tsDTypes = map[tensor.DType]bool{
	tensor.Bool: true, tensor.Uint8: true, tensor.Int8: true, tensor.Int16: true,
	tensor.Int32: true, tensor.Int64: true, tensor.Float16: true, tensor.BFloat16: true,
	tensor.Float32: true, tensor.Float64: true,
}
