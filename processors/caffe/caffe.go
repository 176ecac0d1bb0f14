// Package caffe serves Caffe networks for the caffe_cpu and caffe_gpu codes
// without Caffe: at load the network definition (deploy.prototxt) and its
// weights (.caffemodel) are translated to ONNX (package caffe) and run by
// the ONNX processor's runtime, with a dynamic batch dimension so requests
// batch. Requests speak the EAS Caffe protobuf (caffe.eas.PredictRequest)
// and KServe v2.
//
// The answer holds the network's outputs (blobs no layer consumes) unless
// output_filter names others; any blob may be named. Intermediate blobs come
// from a second translation that returns every blob, made and loaded on the
// first request that asks for one, so serving the outputs keeps ONNX
// Runtime's fused, memory-planned graph.
package caffe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/eas-server/eas-server/engines/caffe"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/humanize"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/caffepb"
)

// Codes served, and the CPU code a failed GPU deploy suggests.
const (
	CodeCPU = "caffe_cpu"
	CodeGPU = "caffe_gpu"
)

func init() {
	processors.Register(CodeCPU, "Caffe deploy.prototxt + .caffemodel translated to ONNX, ONNX Runtime on CPU, EAS Caffe protobuf", func() *processors.Engine {
		return processors.Adapt[*request, *result](New(CodeCPU))
	})
	processors.Register(CodeGPU, "Caffe deploy.prototxt + .caffemodel translated to ONNX, ONNX Runtime CUDA execution provider, EAS Caffe protobuf", func() *processors.Engine {
		return processors.Adapt[*request, *result](New(CodeGPU))
	})
}

// Config is model_config: the two files, by name inside model_path, and
// the ONNX Runtime options the onnx processor takes.
type Config struct {
	// Model is the network definition (text NetParameter).
	Model string `json:"model"`
	// Weight is the trained weights (binary NetParameter).
	Weight string `json:"weight"`
	onnx.Config
}

const accepts = `{"model": "deploy.prototxt", "weight": "<name>.caffemodel", "intra_op_threads", "inter_op_threads", "allow_spinning", "graph_optimization", "device_id", "gpu_mem_limit", "arena_extend_strategy", "cudnn_conv_algo_search"}`

// Model is one Caffe service. Decode, FromTensors, Run, Encode and
// ToTensors are safe for concurrent use after Load.
type Model struct {
	code string
	spec processors.Spec
	cfg  Config

	definition, weights string // the files Load read, kept for the every-blob model
	main                *session
	inputs              []string        // input blob names, in model order
	blobs               map[string]bool // every blob output_filter may name

	allOnce sync.Once
	all     *session
	allErr  error
	closed  bool
	mu      sync.Mutex // guards closed and all against Close
}

// session is one translation running on ONNX Runtime.
type session struct {
	model *caffe.Model
	rt    *onnx.Model
}

// New returns an unconfigured model for code.
func New(code string) *Model { return &Model{code: code} }

func (m *Model) gpu() bool { return m.code == CodeGPU }

// Platform names the runtime for KServe model metadata.
func (m *Model) Platform() string { return "caffe" }

// Configure checks spec without any I/O.
func (m *Model) Configure(spec processors.Spec) error {
	if spec.Code == CodeCPU || spec.Code == CodeGPU {
		m.code = spec.Code
	}
	m.spec = spec
	if spec.ModelSource == "" {
		return fmt.Errorf("model_path: required for processor %q; point it at an archive (.zip, .tar.gz) or a folder holding the network definition (deploy.prototxt) and its weights (.caffemodel)", m.code)
	}
	if spec.ModelEntry != "" {
		return fmt.Errorf("model_entry: not used by %q; name the files in model_config: %s", m.code, accepts)
	}
	var cfg Config
	if err := spec.DecodeConfig(&cfg, accepts); err != nil {
		return err
	}
	for key, name := range map[string]string{"model": cfg.Model, "weight": cfg.Weight} {
		if name != "" && !filepath.IsLocal(name) {
			return fmt.Errorf("model_config.%s: %q must be a relative path inside model_path without ..", key, name)
		}
	}
	m.cfg = cfg
	_, err := m.runtime()
	return err
}

// runtime returns an unloaded ONNX runtime configured with the ONNX
// options of model_config; Configure uses it to check them.
func (m *Model) runtime() (*onnx.Model, error) {
	rt := onnx.NewRuntime(m.code, m.gpu(), CodeCPU)
	spec := m.spec
	spec.ModelSource, spec.ModelEntry = "model.onnx", ""
	raw, err := json.Marshal(m.cfg.Config)
	if err != nil {
		return nil, err
	}
	spec.ModelConfig = raw
	if err := rt.Configure(spec); err != nil {
		return nil, err
	}
	return rt, nil
}

var (
	definitionFile = fileKind{key: "model", kind: "network definition", ext: ".prototxt"}
	weightsFile    = fileKind{key: "weight", kind: "weights", ext: ".caffemodel"}
)

// fileKind is one of the two files a Caffe model is made of.
type fileKind struct{ key, kind, ext string }

// find resolves name (model_config's) inside dir, also below a top folder
// an archive may have; with no name, the one file with the kind's
// extension.
func (f fileKind) find(dir, name string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("model_path: %s is a file; a Caffe model is two files (deploy.prototxt and the .caffemodel): point model_path at an archive or folder holding both", filepath.Base(dir))
	}
	var found, all []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		all = append(all, rel)
		switch {
		case name != "" && (rel == filepath.Clean(name) || filepath.Base(rel) == filepath.Base(name) && !strings.Contains(name, "/")):
			found = append(found, p)
		case name == "" && strings.EqualFold(filepath.Ext(p), f.ext):
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("model_path: %w", err)
	}
	if name != "" {
		// An exact path wins over a base name found deeper.
		if p := filepath.Join(dir, filepath.Clean(name)); slices.Contains(found, p) {
			found = []string{p}
		}
	}
	listing := strings.Join(humanize.FirstN(all, 10), ", ")
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && name != "":
		return "", fmt.Errorf("model_config.%s: %q is not in model_path; it holds %s", f.key, name, listing)
	case len(found) == 0:
		return "", fmt.Errorf("model_path: no %s file (%s) in the model; it holds %s. Put it there, or name it in model_config.%s", f.kind, f.ext, listing, f.key)
	case name != "":
		return "", fmt.Errorf("model_config.%s: %q matches %d files (%s); give its path inside model_path", f.key, name, len(found), strings.Join(humanize.FirstN(rel(dir, found), 5), ", "))
	}
	return "", fmt.Errorf("model_path: %d %s files (%s); name the one to serve in model_config.%s", len(found), f.ext, strings.Join(humanize.FirstN(rel(dir, found), 5), ", "), f.key)
}

func rel(dir string, ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i], _ = filepath.Rel(dir, p)
	}
	return out
}

// Load finds and parses the two files, translates the network and starts
// its ONNX Runtime session.
func (m *Model) Load(ctx context.Context, files processors.Files) error {
	var err error
	if m.definition, err = definitionFile.find(files.ModelPath, m.cfg.Model); err != nil {
		return err
	}
	if m.weights, err = weightsFile.find(files.ModelPath, m.cfg.Weight); err != nil {
		return err
	}
	net, err := m.readNet(ctx)
	if err != nil {
		return err
	}
	tm, err := caffe.Convert(net, caffe.Options{})
	if err != nil {
		return err
	}
	net = nil // the weights now live in the ONNX model
	if m.main, err = m.start(ctx, tm); err != nil {
		return err
	}
	m.inputs = make([]string, len(tm.Inputs))
	for i, p := range tm.Inputs {
		m.inputs[i] = p.Name
	}
	m.blobs = map[string]bool{}
	for _, b := range tm.Blobs {
		m.blobs[b] = true
	}
	if m.spec.Logger != nil {
		m.spec.Logger.Info("caffe network loaded", "definition", filepath.Base(m.definition), "weights", filepath.Base(m.weights),
			"outputs", len(tm.Outputs), "batchable", tm.Batchable)
	}
	return nil
}

// readNet reads and parses the two files within the model size limit.
func (m *Model) readNet(ctx context.Context) (*caffe.Net, error) {
	limit := m.spec.ModelLimit()
	def, err := processors.ReadModel(ctx, m.definition, limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("model_path: %w", err)
	}
	w, err := processors.ReadModel(ctx, m.weights, limit-int64(len(def)))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("model_path: %w", err)
	}
	net, err := caffe.Load(def, w)
	if err != nil {
		return nil, fmt.Errorf("%s / %s: %w", filepath.Base(m.definition), filepath.Base(m.weights), err)
	}
	return net, nil
}

// start loads a translation on ONNX Runtime; the session holds the
// model, so its bytes are dropped.
func (m *Model) start(ctx context.Context, tm *caffe.Model) (*session, error) {
	rt, err := m.runtime()
	if err != nil {
		return nil, err
	}
	if err := rt.LoadBytes(ctx, tm.ONNX); err != nil {
		return nil, err
	}
	tm.ONNX = nil
	return &session{model: tm, rt: rt}, nil
}

// every returns the session that returns every blob, loading it once.
func (m *Model) every(ctx context.Context) (*session, error) {
	// The first asker's deadline must not fail the load for everyone after.
	ctx = context.WithoutCancel(ctx)
	m.allOnce.Do(func() {
		net, err := m.readNet(ctx)
		if err != nil {
			m.allErr = fmt.Errorf("caffe: reloading the network to return intermediate blobs: %w", err)
			return
		}
		var tm *caffe.Model
		tm, err = caffe.Convert(net, caffe.Options{Outputs: m.main.model.Blobs})
		if err != nil {
			m.allErr = fmt.Errorf("caffe: translating every blob: %w", err)
			return
		}
		s, err := m.start(ctx, tm)
		if err != nil {
			m.allErr = fmt.Errorf("caffe: loading every blob: %w", err)
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			s.rt.Close()
			m.allErr = errNotLoaded
			return
		}
		m.all = s
	})
	return m.all, m.allErr
}

// Close releases the sessions.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	var errs []error
	for _, s := range []*session{m.main, m.all} {
		if s != nil {
			errs = append(errs, s.rt.Close())
		}
	}
	m.main, m.all = nil, nil
	return errors.Join(errs...)
}

var errNotLoaded = errors.New("caffe model is not loaded")

// request is a checked request: the session that answers it and its payload.
type request struct {
	s       *session
	payload *onnx.Payload
}

// result is one request's blobs, in the order asked for.
type result struct {
	outputs []tensor.Tensor
}

// Decode parses the EAS Caffe protobuf.
func (m *Model) Decode(ctx context.Context, req *processors.Request) (*request, error) {
	if m.main == nil {
		return nil, errNotLoaded
	}
	r, err := caffepb.DecodeRequest(req.Body, m.inputs)
	if err != nil {
		return nil, err
	}
	return m.check(ctx, r.Inputs, r.OutputFilter)
}

// FromTensors checks a KServe payload.
func (m *Model) FromTensors(ctx context.Context, tp *processors.TensorPayload) (*request, error) {
	if m.main == nil {
		return nil, errNotLoaded
	}
	return m.check(ctx, tp.Inputs, tp.Outputs)
}

// check picks the session for the blobs asked for and checks the inputs
// against its model.
func (m *Model) check(ctx context.Context, inputs []tensor.Tensor, outputs []string) (*request, error) {
	s := m.main
	for _, name := range outputs {
		if slices.ContainsFunc(m.main.model.Outputs, func(p caffe.Port) bool { return p.Name == name }) {
			continue
		}
		if !m.blobs[name] {
			return nil, badinput.Errorf("output_filter: the network has no blob %q; its outputs are %s, and any blob a layer makes may be named", name, portNames(m.main.model.Outputs))
		}
		var err error
		if s, err = m.every(ctx); err != nil {
			return nil, err
		}
		break
	}
	p, err := s.rt.FromTensors(ctx, &processors.TensorPayload{Inputs: inputs, Outputs: outputs})
	if err != nil {
		return nil, err
	}
	return &request{s: s, payload: p}, nil
}

func portNames(ps []caffe.Port) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = fmt.Sprintf("%q", p.Name)
	}
	return strings.Join(names, ", ")
}

// BatchKey lets requests to one session with the same sample shapes share
// a run.
func (m *Model) BatchKey(r *request) (string, bool) {
	if !r.s.model.Batchable {
		return "", false
	}
	key, ok := r.s.rt.BatchKey(r.payload)
	if !ok {
		return "", false
	}
	if r.s != m.main {
		key = "every\x00" + key
	}
	return key, true
}

// Run executes a batch; the ONNX runtime merges what shares a session. A
// request that fails there fails alone (processors.PayloadErrors).
func (m *Model) Run(ctx context.Context, batch []*request) ([]*result, error) {
	if m.main == nil {
		return nil, errNotLoaded
	}
	results := make([]*result, len(batch))
	errs := make(processors.PayloadErrors, len(batch))
	for _, s := range []*session{m.main, m.all} {
		var idx []int
		var payloads []*onnx.Payload
		for i, r := range batch {
			if r.s == s {
				idx = append(idx, i)
				payloads = append(payloads, r.payload)
			}
		}
		if len(payloads) == 0 {
			continue
		}
		outs, err := s.rt.Run(ctx, payloads)
		var failed processors.PayloadErrors
		if err != nil && !errors.As(err, &failed) {
			if len(idx) == 1 && ctx.Err() == nil {
				errs[idx[0]] = err // a batch of one fails as a whole; here it is one request of several
				continue
			}
			return nil, err
		}
		for j, i := range idx {
			if failed != nil && failed[j] != nil {
				errs[i] = failed[j]
			} else {
				results[i] = &result{outputs: outs[j].Outputs}
			}
		}
	}
	return results, errs.Err()
}

// Encode writes a caffe.eas.PredictResponse.
func (m *Model) Encode(_ context.Context, _ *request, r *result) (*processors.Response, error) {
	b, err := caffepb.EncodeResponse(r.outputs)
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: b}, nil
}

// ToTensors returns a result for the KServe doors.
func (m *Model) ToTensors(_ context.Context, _ *request, r *result) (*processors.TensorResult, error) {
	return &processors.TensorResult{Outputs: r.outputs}, nil
}

// Metadata describes the inputs and outputs (FP32, -1 = the batch); Extra
// lists every blob output_filter may name.
func (m *Model) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: m.code, Inputs: []processors.IOSpec{}, Outputs: []processors.IOSpec{}}
	if m.main == nil {
		return md
	}
	spec := func(ps []caffe.Port) []processors.IOSpec {
		out := make([]processors.IOSpec, len(ps))
		for i, p := range ps {
			out[i] = processors.IOSpec{Name: p.Name, DType: tensor.Float32.String(), Shape: slices.Clone(p.Shape)}
		}
		return out
	}
	md.Inputs, md.Outputs = spec(m.main.model.Inputs), spec(m.main.model.Outputs)
	md.Extra = map[string]any{
		"platform":   m.Platform(),
		"definition": filepath.Base(m.definition),
		"weights":    filepath.Base(m.weights),
		"blobs":      m.main.model.Blobs,
	}
	return md
}

// Warmup replays warm_up_data_path before the service reports ready: one
// caffe.eas.PredictRequest, or several in the format of
// processors.ReadWarmup, each run once so ONNX Runtime's lazy allocations
// happen before the first client.
func (m *Model) Warmup(ctx context.Context, path string) error {
	bodies, err := processors.ReadWarmup(ctx, path)
	if err != nil {
		return err
	}
	for i, body := range bodies {
		p, err := m.Decode(ctx, &processors.Request{Body: body})
		if err == nil {
			_, err = m.Run(ctx, []*request{p})
		}
		if err != nil {
			return fmt.Errorf("warm_up_data_path: request %d of %d: %w", i+1, len(bodies), err)
		}
	}
	return nil
}

var (
	_ processors.Warmer                     = (*Model)(nil)
	_ processors.Typed[*request, *result]   = (*Model)(nil)
	_ processors.Tensors[*request, *result] = (*Model)(nil)
	_ processors.Batcher[*request]          = (*Model)(nil)
	_ processors.Closer                     = (*Model)(nil)
)
