package onnx

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

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
func (m *Model) Decode(req *processors.Request) (*Payload, error) {
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
func (m *Model) FromTensors(tp *processors.TensorPayload) (*Payload, error) {
	if m.engine == nil {
		return nil, ErrNotLoaded
	}
	return m.check(tp)
}

// ToTensors returns the result as it is: it is already tensors.
func (m *Model) ToTensors(_ *Payload, r *processors.TensorResult) (*processors.TensorResult, error) {
	return r, nil
}

// Encode writes a result in the code's wire format: PredictResponse.outputs
// in output order (or output_filter order) for pytorch_* codes, a DataProto
// of named tensors for onnx_* codes.
func (m *Model) Encode(_ *Payload, r *processors.TensorResult) (*processors.Response, error) {
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

// WarmupMagic starts a warm-up file that holds several requests.
//
// A warm_up_data_path file is either
//   - one request body in the service's wire format (what the EAS SDKs write
//     with req.to_string(); examples/requests/pytorch_mlp.pb is one), or
//   - WarmupMagic followed by records, each an unsigned varint byte length
//     and that many bytes of one request body (EncodeWarmup writes it).
//
// Every request is decoded and run once, in order, before the service
// reports ready; any failure fails the deploy with the request's index.
const WarmupMagic = "EAS-WARMUP-1\n"

// Limits on a warm-up file, so a wrong path (a model, a data set) fails fast.
const (
	maxWarmupFile     = 256 << 20
	maxWarmupRequests = 1000
)

// EncodeWarmup builds a multi-request warm-up file from request bodies.
func EncodeWarmup(bodies [][]byte) []byte {
	var b bytes.Buffer
	b.WriteString(WarmupMagic)
	for _, body := range bodies {
		b.Write(binary.AppendUvarint(nil, uint64(len(body))))
		b.Write(body)
	}
	return b.Bytes()
}

// ParseWarmup splits a warm-up file into request bodies (see WarmupMagic).
func ParseWarmup(data []byte) ([][]byte, error) {
	rest, ok := bytes.CutPrefix(data, []byte(WarmupMagic))
	if !ok {
		if len(data) == 0 {
			return nil, errors.New("empty warm-up file; put one request body in it, or several in the EAS-WARMUP-1 format")
		}
		return [][]byte{data}, nil
	}
	var bodies [][]byte
	for len(rest) > 0 {
		if len(bodies) == maxWarmupRequests {
			return nil, fmt.Errorf("more than %d warm-up requests; a few representative ones are enough", maxWarmupRequests)
		}
		n, k := binary.Uvarint(rest)
		if k <= 0 {
			return nil, fmt.Errorf("warm-up record %d: bad length prefix at byte %d", len(bodies), len(data)-len(rest))
		}
		rest = rest[k:]
		if n > uint64(len(rest)) {
			return nil, fmt.Errorf("warm-up record %d: length %d but only %d bytes left; the file is truncated", len(bodies), n, len(rest))
		}
		bodies = append(bodies, rest[:n:n])
		rest = rest[n:]
	}
	if len(bodies) == 0 {
		return nil, errors.New("warm-up file has the EAS-WARMUP-1 header but no requests")
	}
	return bodies, nil
}

// Warmup replays the requests of the warm_up_data_path file through Decode
// and Run, so ONNX Runtime's lazy allocations happen before the first client.
func (m *Model) Warmup(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("warm_up_data_path: %w", err)
	}
	if st.Size() > maxWarmupFile {
		return fmt.Errorf("warm_up_data_path: %s is %d bytes, over the %d limit; is it the right file?", path, st.Size(), maxWarmupFile)
	}
	data, err := processors.ReadModel(ctx, path, maxWarmupFile)
	if err != nil {
		return fmt.Errorf("warm_up_data_path: %w", err)
	}
	bodies, err := ParseWarmup(data)
	if err != nil {
		return fmt.Errorf("warm_up_data_path: %w", err)
	}
	for i, body := range bodies {
		p, err := m.Decode(&processors.Request{Body: body})
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
