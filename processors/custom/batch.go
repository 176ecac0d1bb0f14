package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/custom/frame"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// A python processor whose entry imports batch_inference (Microsoft's
// batch-inference: a model class with predict_batch, decorated with
// @batching) is a tensor service: its worker is allspark's batchhost, the
// server's scheduler forms each batch, and one Batch frame carries the
// batch's tensors to the worker, which applies the class's own batcher
// around one predict_batch (see allspark/batchhost.py).

// batchInfo is what a batchhost worker says about its model class when it
// is ready.
type batchInfo struct {
	Class string `json:"class"`
	// Inputs are predict_batch's argument names, in order; nil when it
	// takes *args (any number of inputs, by position).
	Inputs       []string `json:"inputs"`
	MaxBatchSize int      `json:"max_batch_size"`
	WaitMS       float64  `json:"wait_ms"`
	Batcher      string   `json:"batcher"`
	Tensor       string   `json:"tensor"`          // np or pt
	Package      string   `json:"batch_inference"` // which batch_inference the worker imported
}

// importsBatchInference matches an import of batch_inference at the start
// of a line: `import batch_inference`, `from batch_inference import ...`,
// `from batch_inference.batcher import ...`.
var importsBatchInference = regexp.MustCompile(`(?m)^[ \t]*(import[ \t]+batch_inference\b|from[ \t]+batch_inference\b)`)

// isBatchInference reports whether the python entry imports batch_inference.
func isBatchInference(entry string) (bool, error) {
	src, err := os.ReadFile(entry)
	if err != nil {
		return false, fmt.Errorf("processor_entry: %w", err)
	}
	return importsBatchInference.Match(src), nil
}

// pyPayload is a python processor's payload: the body, or for a
// batch-inference class the inputs in predict_batch's order and the outputs
// asked for (nil: all).
type pyPayload struct {
	body    []byte
	inputs  []tensor.Tensor
	outputs []string
}

// pyResult is one payload's outcome: the user's status and body, or the
// output tensors.
type pyResult struct {
	Result
	outputs []tensor.Tensor
}

// pythonProcessor is a python processor: an allspark processor (bytes in,
// bytes out) or a batch-inference model class (tensors), which Load tells
// apart.
type pythonProcessor struct {
	*Processor
}

func newPython() *processors.Engine {
	return processors.Adapt[*pyPayload, pyResult](&pythonProcessor{&Processor{kind: "python", tensors: true}})
}

// batchState returns the class's description and the pool; bi is nil for
// an allspark processor.
func (p *pythonProcessor) batchState() (*batchInfo, *pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batch, p.pool
}

// Metadata names predict_batch's arguments for a batch-inference class.
func (p *pythonProcessor) Metadata() processors.Metadata {
	bi, _ := p.batchState()
	if bi == nil {
		return p.Processor.Metadata()
	}
	md := p.Processor.Metadata()
	md.Processor += " (batch-inference " + bi.Class + ")"
	md.Inputs, md.Outputs = nil, nil
	for _, in := range bi.Inputs {
		md.Inputs = append(md.Inputs, processors.IOSpec{Name: in})
	}
	md.Extra = map[string]any{"class": bi.Class, "batcher": bi.Batcher, "max_batch_size": bi.MaxBatchSize,
		"tensor": bi.Tensor, "batch_inference": bi.Package}
	return md
}

// TensorsServed: the KServe v2 and GraphPipe doors are open to a
// batch-inference class only; an allspark processor takes bodies.
func (p *pythonProcessor) TensorsServed() bool {
	bi, _ := p.batchState()
	return bi != nil
}

// Platform names the runtime for KServe metadata.
func (p *pythonProcessor) Platform() string { return "python_batch_inference" }

// BatchSize is the class's @batching max_batch_size (model_config's
// max_batch_size when set) and ModelHost's wait: the service's scheduler
// batches with them unless metadata.rpc.batching is on.
func (p *pythonProcessor) BatchSize() (int, time.Duration, bool) {
	bi, _ := p.batchState()
	if bi == nil {
		return 0, 0, false
	}
	return bi.MaxBatchSize, time.Duration(bi.WaitMS * float64(time.Millisecond)), true
}

// Decode keeps the body, or for a batch-inference class reads the EAS
// TensorFlow protobuf.
func (p *pythonProcessor) Decode(ctx context.Context, req *processors.Request) (*pyPayload, error) {
	bi, _ := p.batchState()
	if bi == nil {
		return &pyPayload{body: req.Body}, nil
	}
	r, err := tfpb.DecodeRequest(req.Body)
	if err != nil {
		return nil, err
	}
	return bi.payload(r.Inputs, r.OutputFilter)
}

// errNotTensors answers the KServe doors for an allspark processor.
var errNotTensors = &processors.StatusError{Code: http.StatusBadRequest, Err: errors.New("this python processor is not a tensor model (its entry does not import batch_inference); call POST /api/predict/<service> instead")}

// FromTensors takes KServe tensors for a batch-inference class.
func (p *pythonProcessor) FromTensors(_ context.Context, tp *processors.TensorPayload) (*pyPayload, error) {
	bi, _ := p.batchState()
	if bi == nil {
		return nil, errNotTensors
	}
	return bi.payload(tp.Inputs, tp.Outputs)
}

// payload puts inputs in predict_batch's argument order: by name when
// every input is named after an argument, else by position.
func (bi *batchInfo) payload(in []tensor.Tensor, outputs []string) (*pyPayload, error) {
	for _, t := range in {
		if t.DType == tensor.String {
			return nil, badinput.Errorf("input %q is BYTES; %s.predict_batch takes numeric tensors", t.Name, bi.Class)
		}
		if len(t.Shape) == 0 {
			return nil, badinput.Errorf("input %q is a scalar; %s's batcher concatenates inputs along their first dimension, so each needs one (shape [1, ...] for one item)", t.Name, bi.Class)
		}
	}
	if bi.Inputs == nil {
		return &pyPayload{inputs: in, outputs: outputs}, nil
	}
	if len(in) != len(bi.Inputs) {
		return nil, badinput.Errorf("%s.predict_batch takes %d inputs (%s); the request has %d", bi.Class, len(bi.Inputs), strings.Join(bi.Inputs, ", "), len(in))
	}
	byName := make(map[string]tensor.Tensor, len(in))
	for _, t := range in {
		byName[t.Name] = t
	}
	ordered := make([]tensor.Tensor, 0, len(in))
	for _, name := range bi.Inputs {
		t, ok := byName[name]
		if !ok {
			return &pyPayload{inputs: in, outputs: outputs}, nil // by position
		}
		ordered = append(ordered, t)
	}
	return &pyPayload{inputs: ordered, outputs: outputs}, nil
}

// BatchKey lets any payloads share a run: a batch is several process
// calls at once, or one Batch frame for a batch-inference class (whose
// batcher decides what may be concatenated).
func (p *pythonProcessor) BatchKey(*pyPayload) (string, bool) { return "", true }

// Run sends an allspark processor's bodies as Processor.Run does; for a
// batch-inference class, each max_batch_size of payloads goes to a worker
// as one Batch frame.
func (p *pythonProcessor) Run(ctx context.Context, batch []*pyPayload) ([]pyResult, error) {
	bi, pl := p.batchState()
	out := make([]pyResult, len(batch))
	if bi == nil {
		bodies := make([][]byte, len(batch))
		for i, b := range batch {
			bodies[i] = b.body
		}
		rs, err := p.Processor.Run(ctx, bodies)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			out[i].Result = r
		}
		return out, nil
	}
	if pl == nil {
		return nil, &processors.StatusError{Code: http.StatusServiceUnavailable, Err: errors.New("the custom processor is closed")}
	}
	errs := make(processors.PayloadErrors, len(batch))
	chunk := max(bi.MaxBatchSize, 1)
	var wg sync.WaitGroup
	for start := 0; start < len(batch); start += chunk {
		end := min(start+chunk, len(batch))
		wg.Add(1)
		go func() {
			defer wg.Done()
			runBatch(ctx, pl, bi, batch[start:end], out[start:end], errs[start:end])
		}()
	}
	wg.Wait()
	return out, errs.Err()
}

// runBatch runs one Batch frame and fills its payloads' results or errors.
func runBatch(ctx context.Context, pl *pool, bi *batchInfo, batch []*pyPayload, out []pyResult, errs []error) {
	fail := func(err error) {
		for i := range errs {
			errs[i] = err
		}
	}
	reqs := make([][]tensor.Tensor, len(batch))
	for i, b := range batch {
		reqs[i] = b.inputs
	}
	body, err := frame.AppendBatch(nil, reqs)
	if err != nil {
		fail(badinput.Errorf("%v", err))
		return
	}
	r := pl.send(ctx, frame.Batch, body)
	switch {
	case r.Err != nil:
		fail(r.Err)
		return
	case r.Status != http.StatusOK:
		fail(&processors.StatusError{Code: r.Status, Err: errors.New(string(bytes.TrimSpace(r.Body)))})
		return
	}
	answers, err := frame.ParseBatch(r.Body)
	if err == nil && len(answers) != len(batch) {
		err = fmt.Errorf("%d answers for %d requests", len(answers), len(batch))
	}
	if err != nil {
		fail(fmt.Errorf("the batch-inference worker's answer: %w", err))
		return
	}
	for i, a := range answers {
		out[i].outputs = a
	}
}

// pick returns the outputs asked for (all when none were named).
func (r pyResult) pick(class string, want []string) ([]tensor.Tensor, error) {
	if want == nil {
		return r.outputs, nil
	}
	var out []tensor.Tensor
	for _, name := range want {
		found := false
		for _, t := range r.outputs {
			if t.Name == name {
				out, found = append(out, t), true
				break
			}
		}
		if !found {
			names := make([]string, len(r.outputs))
			for i, t := range r.outputs {
				names[i] = t.Name
			}
			return nil, badinput.Errorf("output %q: %s answers %s", name, class, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// Encode answers with the user's status and body, or the outputs as the
// EAS TensorFlow protobuf.
func (p *pythonProcessor) Encode(ctx context.Context, pp *pyPayload, r pyResult) (*processors.Response, error) {
	bi, _ := p.batchState()
	if bi == nil {
		return p.Processor.Encode(ctx, pp.body, r.Result)
	}
	outs, err := r.pick(bi.Class, pp.outputs)
	if err != nil {
		return nil, err
	}
	b, err := tfpb.EncodeResponse(outs)
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: b}, nil
}

// ToTensors returns the outputs for the KServe doors.
func (p *pythonProcessor) ToTensors(_ context.Context, pp *pyPayload, r pyResult) (*processors.TensorResult, error) {
	bi, _ := p.batchState()
	if bi == nil {
		return nil, errNotTensors
	}
	outs, err := r.pick(bi.Class, pp.outputs)
	if err != nil {
		return nil, err
	}
	return &processors.TensorResult{Outputs: outs}, nil
}

// parseBatchInfo reads a batchhost worker's Ready payload.
func parseBatchInfo(b []byte) (*batchInfo, error) {
	var bi batchInfo
	if err := json.Unmarshal(b, &bi); err != nil || bi.Class == "" {
		return nil, fmt.Errorf("the batch-inference worker's ready message %q: %v", b, err)
	}
	if bi.MaxBatchSize < 1 {
		return nil, fmt.Errorf("%s's max_batch_size is %d; it must be at least 1", bi.Class, bi.MaxBatchSize)
	}
	return &bi, nil
}

var (
	_ processors.Typed[*pyPayload, pyResult]   = (*pythonProcessor)(nil)
	_ processors.Tensors[*pyPayload, pyResult] = (*pythonProcessor)(nil)
	_ processors.Batcher[*pyPayload]           = (*pythonProcessor)(nil)
	_ processors.BatchSizer                    = (*pythonProcessor)(nil)
	_ processors.TensorGate                    = (*pythonProcessor)(nil)
	_ processors.Closer                        = (*pythonProcessor)(nil)
	_ processors.Healther                      = (*pythonProcessor)(nil)
)
