package onnx

import (
	"context"
	"fmt"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/torchpb"
)

func (m *Model) inputNames() []string {
	names := make([]string, len(m.inputs))
	for i, io := range m.inputs {
		names[i] = io.Name
	}
	return names
}

// outputNames are the declared outputs; for TorchScript, those of the last
// run (none before the first).
func (m *Model) outputNames() []string {
	outs := m.outputInfo()
	names := make([]string, len(outs))
	for i, io := range outs {
		names[i] = io.Name
	}
	return names
}

// Decode reads an /api/predict body in the code's wire format: the EAS Torch
// PredictRequest for pytorch_* codes, the HIE DataProto for onnx_* codes. The
// payload is checked against the model here, once, so a bad request is
// answered 400 before it queues; its inputs come back in the model's order.
func (m *Model) Decode(_ context.Context, req *processors.Request) (*Payload, error) {
	if m.engine == nil {
		return nil, ErrNotLoaded
	}
	tp := processors.TensorPayload{}
	var outIndex []int
	switch m.info.proto {
	case protoTorch:
		r, err := torchpb.DecodeRequest(req.Body, m.inputNames())
		if err != nil {
			return nil, err
		}
		tp.Inputs = r.Inputs
		if m.torch {
			// Indexes into forward's results, checked after the run.
			for _, idx := range r.OutputFilter {
				outIndex = append(outIndex, int(idx))
			}
			break
		}
		outs, err := torchpb.OutputNames(r.OutputFilter, m.outputNames())
		if err != nil {
			return nil, err
		}
		tp.Outputs = outs
	case protoHIE:
		ts, err := hiepb.DecodeDataProto(req.Body)
		if err != nil {
			return nil, err
		}
		tp.Inputs = ts
	}
	p, err := m.check(&tp)
	if err != nil {
		return nil, err
	}
	p.outIndex = outIndex
	return p, nil
}

// FromTensors checks KServe tensors as Decode checks a body.
func (m *Model) FromTensors(_ context.Context, tp *processors.TensorPayload) (*Payload, error) {
	if m.engine == nil {
		return nil, ErrNotLoaded
	}
	return m.check(tp)
}

// ToTensors returns the result as it is: it is already tensors.
func (m *Model) ToTensors(_ context.Context, _ *Payload, r *processors.TensorResult) (*processors.TensorResult, error) {
	return r, nil
}

// Encode writes a result in the code's wire format: PredictResponse.outputs
// in output order (or output_filter order) for pytorch_* codes, a DataProto
// of named tensors for onnx_* codes.
func (m *Model) Encode(_ context.Context, _ *Payload, r *processors.TensorResult) (*processors.Response, error) {
	var (
		body []byte
		err  error
	)
	switch m.info.proto {
	case protoTorch:
		body, err = torchpb.EncodeResponse(r.Outputs)
	case protoHIE:
		body, err = hiepb.EncodeDataProto(r.Outputs)
	}
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: body, ContentType: "application/octet-stream"}, nil
}

// Warmup replays the requests of the warm_up_data_path file through Decode
// and Run, so ONNX Runtime's lazy allocations happen before the first client.
func (m *Model) Warmup(ctx context.Context, path string) error {
	bodies, err := processors.ReadWarmup(ctx, path)
	if err != nil {
		return err
	}
	for i, body := range bodies {
		p, err := m.Decode(ctx, &processors.Request{Body: body})
		if err == nil {
			_, err = m.Run(ctx, []*Payload{p})
		}
		if err != nil {
			return fmt.Errorf("warm_up_data_path: request %d of %d: %w", i+1, len(bodies), err)
		}
	}
	if m.spec.Logger != nil {
		m.spec.Logger.Info("onnx warm-up done", "requests", len(bodies))
	}
	return nil
}
