// Package tensorflow serves TensorFlow SavedModels for the tensorflow_cpu_*
// and tensorflow_gpu_* processor codes. By default (model_config.runtime
// "onnx") without libtensorflow: at load each serving signature is
// translated to ONNX (package tf2onnx) and run by the ONNX processor's
// runtime. With runtime "libtensorflow" the SavedModel is loaded by
// TensorFlow itself, through its C API in a library opened at run time
// (engines/libtf); "auto" translates and falls back to libtensorflow where
// the translator refuses (runtime.go). Requests speak the EAS TensorFlow
// protobuf (PredictRequest / PredictResponse) and KServe v2.
//
// A signature that cannot be translated is not served; when it is the
// default signature (serving_default, or the only one) the deploy fails with
// the message naming every op it would need. A .onnx file inside the model
// directory (a tf2onnx export) is served directly as serving_default;
// model_entry picks one of several.
package tensorflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/libtf"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// codeInfo describes one registered code.
type codeInfo struct {
	gpu bool
	cpu string // the CPU code a failed GPU deploy suggests
}

var codes = map[string]codeInfo{}

func init() {
	for _, v := range []string{"1.12", "1.14", "1.15", "2.3", "2.4", "2.7"} {
		codes["tensorflow_cpu_"+v] = codeInfo{}
	}
	for _, v := range []string{"1.12", "1.14", "1.15", "2.4", "2.7"} {
		codes["tensorflow_gpu_"+v] = codeInfo{gpu: true, cpu: "tensorflow_cpu_" + v}
	}
	for code, ci := range codes {
		desc := "TensorFlow SavedModel translated to ONNX, ONNX Runtime on CPU (or TensorFlow's own library: model_config.runtime), EAS TF protobuf"
		if ci.gpu {
			desc = "TensorFlow SavedModel translated to ONNX, ONNX Runtime CUDA execution provider, EAS TF protobuf"
		}
		processors.Register(code, desc, func() *processors.Engine {
			return processors.Adapt[*request, *result](New(code))
		})
	}
}

// signature is one served signature.
type signature struct {
	name      string
	method    string
	inputs    []tf2onnx.Port
	outputs   []tf2onnx.Port
	batchable bool
	host      *tf2onnx.HostProgram // string ops run in Go before the model
	rt        *onnx.Model          // the ONNX runtime's session, or
	sess      *libtf.Session       // the libtensorflow session (shared by every signature)
}

// Model is a SavedModel whose signatures run on ONNX Runtime. Run, Decode,
// FromTensors, Encode, ToTensors and BatchKey are safe for concurrent use
// after Load.
type Model struct {
	code string
	info codeInfo
	spec processors.Spec

	sigs       map[string]*signature
	refused    map[string]error // signatures that could not be translated
	defaultSig string
	source     string // "savedmodel" or the .onnx file served directly

	rc      runtimeConfig  // model_config.runtime and what libtensorflow reads
	session *libtf.Session // the libtensorflow session, when it serves
	runtime string         // what serves: "onnx", or "libtensorflow <version>"
}

// New returns an unconfigured model for code.
func New(code string) *Model { return &Model{code: code, info: codes[code]} }

// Platform names the runtime for KServe model metadata.
func (m *Model) Platform() string { return "tensorflow_savedmodel" }

// Configure checks spec without any I/O.
func (m *Model) Configure(spec processors.Spec) error {
	if ci, ok := codes[spec.Code]; ok {
		m.code, m.info = spec.Code, ci
	}
	m.spec = spec
	rc, err := parseRuntime(spec.ModelConfig)
	if err != nil {
		return err
	}
	if rc.runtime == RuntimeLibTF && m.info.gpu {
		return fmt.Errorf("model_config: runtime %q runs on the CPU only; use %s for it, or runtime %q for ONNX Runtime's CUDA provider", RuntimeLibTF, m.info.cpu, RuntimeONNX)
	}
	m.rc = rc
	if spec.ModelSource == "" {
		return fmt.Errorf("model_path: required for processor %q; point it at the SavedModel directory (the one holding saved_model.pb, or its parent holding version directories)", m.code)
	}
	// model_entry can only pick the tf2onnx export to serve among several
	// .onnx files; a SavedModel is always the directory.
	if e := spec.ModelEntry; e != "" && (!filepath.IsLocal(e) || !isONNXName(e)) {
		return fmt.Errorf("model_entry: %q: for processor %q it names the .onnx file (a tf2onnx export) inside model_path to serve; leave it empty to serve the SavedModel", e, m.code)
	}
	// The runtime's options (threads, graph optimisation, device) come from
	// the same model_config the onnx processor reads; check it now.
	probe := onnx.NewRuntime(m.code, m.info.gpu, m.info.cpu)
	probeSpec := spec
	probeSpec.ModelSource = "model.onnx"
	probeSpec.ModelEntry = ""
	probeSpec.ModelConfig = rc.onnxOnlyConfig
	return probe.Configure(probeSpec)
}

// onnxExport finds a tf2onnx export under model_path (two directory levels
// deep at most, so a SavedModel's variables are not searched through);
// none means the SavedModel is translated.
var onnxExport = processors.ModelFile{Kind: ".onnx", Exts: []string{".onnx"}, MaxDepth: 2, Optional: true}

func isONNXName(name string) bool { return strings.EqualFold(filepath.Ext(name), ".onnx") }

// Load reads the SavedModel and serves it on the runtime model_config
// chose: translated, one ONNX Runtime session per served signature; on
// libtensorflow; or (auto) translated, falling back to libtensorflow when the
// translator refuses a signature.
func (m *Model) Load(ctx context.Context, files processors.Files) error {
	if m.rc.runtime != RuntimeLibTF {
		if f, err := onnxExport.Find(files.ModelPath, m.spec.ModelEntry); err != nil {
			return err
		} else if f != "" {
			return m.loadONNX(ctx, f)
		}
	}
	if err := checkSavedModel(files.ModelPath, m.spec.ModelLimit()); err != nil {
		return err
	}
	sm, err := savedmodel.Load(files.ModelPath)
	if err != nil {
		return err
	}
	if m.rc.runtime == RuntimeLibTF {
		return m.loadLibTF(ctx, sm)
	}
	err = m.loadTranslated(ctx, sm)
	var te *translationError
	if m.rc.runtime != RuntimeAuto || m.info.gpu || !(errors.As(err, &te) || err == nil && len(m.refused) > 0) {
		return err
	}
	// auto: the translator refused a signature; TensorFlow itself may
	// serve them all.
	why := err
	if why == nil {
		var msgs []string
		for _, name := range sm.SignatureNames() {
			if e := m.refused[name]; e != nil {
				msgs = append(msgs, e.Error())
			}
		}
		why = errors.New(strings.Join(msgs, "; "))
	}
	lerr := m.loadLibTF(ctx, sm)
	if lerr != nil {
		if err != nil {
			return fmt.Errorf("%w; runtime auto tried libtensorflow instead: %v", err, lerr)
		}
		m.spec.Report(true, "TensorFlowRuntime", fmt.Sprintf("the ONNX translator refused %d signatures (%v); libtensorflow could not serve them either (%v): they are not served", len(m.refused), why, lerr))
		return nil
	}
	msg := fmt.Sprintf("the ONNX translator refused it (%v); serving the SavedModel on %s (%s) instead", why, m.runtime, libtfLibrary())
	if m.spec.Logger != nil {
		m.spec.Logger.Warn("tensorflow runtime auto: falling back to libtensorflow", "reason", why)
	}
	m.spec.Report(false, "TensorFlowRuntime", msg)
	return nil
}

// loadTranslated translates every signature and starts their ONNX Runtime
// sessions.
func (m *Model) loadTranslated(ctx context.Context, sm *savedmodel.Model) error {
	m.source = "savedmodel"
	m.runtime = RuntimeONNX
	m.sigs, m.refused = map[string]*signature{}, map[string]error{}
	names := sm.SignatureNames()
	if len(names) == 0 {
		return errors.New("saved_model.pb: the serving MetaGraph has no signatures")
	}
	// With serving_default, it decides the deploy; without it, the first
	// signature that translates becomes the default, and the deploy fails
	// only when none does.
	m.defaultSig = ""
	hasDefault := slices.Contains(names, tfpb.DefaultSignature)
	if hasDefault {
		m.defaultSig = tfpb.DefaultSignature
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			m.Close()
			return err
		}
		ts, err := tf2onnx.Convert(sm, name)
		if err != nil {
			if name == m.defaultSig {
				m.Close()
				return &translationError{err}
			}
			m.refused[name] = err
			if m.spec.Logger != nil {
				m.spec.Logger.Warn("tensorflow signature not served", "signature", name, "error", err)
			}
			continue
		}
		rt, err := m.startRuntime(ctx, ts.Model)
		if err != nil {
			m.Close()
			return fmt.Errorf("signature %q: %w", name, err)
		}
		m.sigs[name] = &signature{name: name, method: ts.Method, inputs: ts.Inputs, outputs: ts.Outputs, batchable: ts.Batchable, host: ts.Host, rt: rt}
		if m.defaultSig == "" {
			m.defaultSig = name
		}
	}
	if len(m.sigs) == 0 {
		msgs := make([]string, 0, len(m.refused))
		for _, name := range names {
			msgs = append(msgs, m.refused[name].Error())
		}
		return &translationError{fmt.Errorf("no signature of the SavedModel can be served: %s", strings.Join(msgs, "; "))}
	}
	if m.spec.Logger != nil {
		m.spec.Logger.Info("tensorflow savedmodel loaded", "dir", sm.Dir, "signatures", len(m.sigs), "refused", len(m.refused))
	}
	return nil
}

// checkSavedModel checks the files savedmodel.Load reads, before it reads
// them: saved_model.pb and the variables bundle must be regular files (a
// device or FIFO there could be endless, or block) and together no larger
// than limit. A path savedmodel cannot resolve is left to its error.
func checkSavedModel(path string, limit int64) error {
	dir, err := savedmodel.FindDir(path)
	if err != nil {
		return nil
	}
	files := []string{filepath.Join(dir, "saved_model.pb")}
	vars, _ := filepath.Glob(filepath.Join(dir, "variables", "variables.*"))
	files = append(files, vars...)
	var total int64
	for _, f := range files {
		st, err := processors.StatModel(f, limit)
		if err != nil {
			return fmt.Errorf("model_path: %w", err)
		}
		if total += st.Size(); total > limit {
			return fmt.Errorf("model_path: the SavedModel in %s is over %d bytes, the limit on model files (%w); raise the server's --max-model-size if the model is right", dir, limit, processors.ErrModelTooLarge)
		}
	}
	return nil
}

// startRuntime loads a translated model through the ONNX processor.
func (m *Model) startRuntime(ctx context.Context, model []byte) (*onnx.Model, error) {
	rt := onnx.NewRuntime(m.code, m.info.gpu, m.info.cpu)
	spec := m.spec
	spec.ModelSource, spec.ModelEntry = "model.onnx", ""
	if m.rc.runtime != "" {
		spec.ModelConfig = m.rc.onnxOnlyConfig // without "runtime"
	}
	if err := rt.Configure(spec); err != nil {
		return nil, err
	}
	if err := rt.LoadBytes(ctx, model); err != nil {
		return nil, err
	}
	return rt, nil
}

// loadONNX serves a tf2onnx export as the serving_default signature.
func (m *Model) loadONNX(ctx context.Context, file string) error {
	data, err := processors.ReadModel(ctx, file, m.spec.ModelLimit())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("model_path: %w", err)
	}
	rt, err := m.startRuntime(ctx, data)
	if err != nil {
		return err
	}
	md := rt.Metadata()
	ports := func(ios []processors.IOSpec) []tf2onnx.Port {
		out := make([]tf2onnx.Port, len(ios))
		for i, io := range ios {
			dt, _ := tensor.ParseDType(io.DType)
			out[i] = tf2onnx.Port{Key: io.Name, Value: io.Name, DType: dt, Shape: io.Shape}
		}
		return out
	}
	sig := &signature{name: tfpb.DefaultSignature, method: "tensorflow/serving/predict", inputs: ports(md.Inputs), outputs: ports(md.Outputs), rt: rt}
	sig.batchable = true
	for _, p := range append(slices.Clone(sig.inputs), sig.outputs...) {
		if len(p.Shape) == 0 || p.Shape[0] != -1 {
			sig.batchable = false
		}
	}
	m.sigs = map[string]*signature{sig.name: sig}
	m.refused = map[string]error{}
	m.defaultSig = sig.name
	m.source = filepath.Base(file)
	m.runtime = RuntimeONNX
	return nil
}

// Close releases every session.
func (m *Model) Close() error {
	var errs []error
	for _, s := range m.sigs {
		if s.rt != nil {
			errs = append(errs, s.rt.Close())
		}
	}
	m.sigs = nil
	if m.session != nil {
		errs = append(errs, m.session.Close())
		m.session = nil
	}
	return errors.Join(errs...)
}

// errNotLoaded answers requests before Load or after Close.
var errNotLoaded = errors.New("tensorflow model is not loaded")

// request is a PredictRequest (or KServe payload) checked against its
// signature: Decode and FromTensors make it once, with the inputs already
// prepared and checked for the signature's ONNX model; BatchKey and Run
// trust it.
type request struct {
	sig     *signature
	outputs []string      // output_filter as signature keys; nil = all
	payload *onnx.Payload // the ONNX runtime's payload, or
	feeds   []libtf.Feed  // libtensorflow's inputs
}

// result is one request's outputs, named and shaped as the signature
// declares them, in the order asked for.
type result struct {
	outputs []tensor.Tensor
}

// Decode parses the EAS TF protobuf and checks it against its signature.
func (m *Model) Decode(ctx context.Context, req *processors.Request) (*request, error) {
	if m.sigs == nil {
		return nil, errNotLoaded
	}
	r, err := tfpb.DecodeRequest(req.Body)
	if err != nil {
		return nil, err
	}
	return m.check(ctx, r.SignatureName, r.Inputs, r.OutputFilter)
}

// FromTensors checks a KServe payload against the default signature.
func (m *Model) FromTensors(ctx context.Context, tp *processors.TensorPayload) (*request, error) {
	if m.sigs == nil {
		return nil, errNotLoaded
	}
	return m.check(ctx, m.defaultSig, tp.Inputs, tp.Outputs)
}

// check makes the request for signature name: inputs and outputs are
// checked against the signature, then the prepared inputs against its ONNX
// model. Every refusal is a *badinput.Error.
func (m *Model) check(ctx context.Context, name string, inputs []tensor.Tensor, outputs []string) (*request, error) {
	s, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	if s.sess != nil {
		feeds, err := s.checkLibTF(inputs, outputs)
		if err != nil {
			return nil, err
		}
		return &request{sig: s, outputs: outputs, feeds: feeds}, nil
	}
	tp, err := s.prepare(inputs, outputs)
	if err != nil {
		return nil, err
	}
	tp.Outputs = s.onnxOutputs(outputs)
	p, err := s.rt.FromTensors(ctx, tp)
	if err != nil {
		return nil, err
	}
	return &request{sig: s, outputs: outputs, payload: p}, nil
}

// Encode writes a PredictResponse.
func (m *Model) Encode(_ context.Context, _ *request, r *result) (*processors.Response, error) {
	b, err := tfpb.EncodeResponse(r.outputs)
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: b}, nil
}

// ToTensors returns a result for the KServe doors.
func (m *Model) ToTensors(_ context.Context, _ *request, r *result) (*processors.TensorResult, error) {
	return &processors.TensorResult{Outputs: r.outputs}, nil
}

func (m *Model) lookup(name string) (*signature, error) {
	if s, ok := m.sigs[name]; ok {
		return s, nil
	}
	if name == tfpb.DefaultSignature {
		// An empty signature_name reaches the model's default signature
		// when the model has no serving_default.
		if s, ok := m.sigs[m.defaultSig]; ok && m.refused[name] == nil {
			return s, nil
		}
	}
	if err, ok := m.refused[name]; ok {
		return nil, badinput.Errorf("signature %q is not served: %v", name, err)
	}
	return nil, badinput.Errorf("unknown signature_name %q; the model serves %s", name, strings.Join(m.servedNames(), ", "))
}

func (m *Model) servedNames() []string {
	names := make([]string, 0, len(m.sigs))
	for n := range m.sigs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// prepare checks a request's inputs and output filter against the
// signature and returns the inputs the ONNX model takes.
func (s *signature) prepare(inputs []tensor.Tensor, outputs []string) (*processors.TensorPayload, error) {
	p := &processors.TensorPayload{}
	byKey := make(map[string]tf2onnx.Port, len(s.inputs))
	for _, in := range s.inputs {
		byKey[in.Key] = in
	}
	seen := map[string]bool{}
	// leaves are what the host string stage reads: the inputs as sent,
	// and the features parsed from tf.Example inputs.
	var leaves map[string]tensor.Tensor
	if s.host != nil {
		leaves = map[string]tensor.Tensor{}
	}
	for _, t := range inputs {
		port, ok := byKey[t.Name]
		if !ok {
			return nil, badinput.Errorf("signature %q has no input %q; its inputs are %s", s.name, t.Name, describe(s.inputs))
		}
		seen[t.Name] = true
		if t.DType != port.DType && port.Kind != tf2onnx.Examples {
			return nil, badinput.Errorf("signature %q input %q: dtype %s, but the signature expects %s", s.name, t.Name, tfName(t.DType), tfName(port.DType))
		}
		if leaves != nil {
			leaf := t
			if port.Kind == tf2onnx.Scalar {
				leaf.Shape = []int64{} // [1] is accepted for a scalar
			}
			leaves[t.Name] = leaf
		}
		switch port.Kind {
		case tf2onnx.Plain:
			p.Inputs = append(p.Inputs, t)
		case tf2onnx.Scalar:
			if t.NumElements() != 1 || len(t.Shape) > 1 {
				return nil, badinput.Errorf("signature %q input %q is a scalar; got shape %s", s.name, t.Name, tensor.FormatShape(t.Shape))
			}
			t.Shape = []int64{1}
			p.Inputs = append(p.Inputs, t)
		case tf2onnx.AnyRank:
			shape := slices.Clone(t.Shape)
			t.Shape = []int64{t.NumElements()}
			p.Inputs = append(p.Inputs, t, int64Vector(t.Name+tf2onnx.ShapeSuffix, shape))
		case tf2onnx.Examples:
			// The parsed features reach the model through the host
			// stage, which feeds those the model reads.
			feats, err := parseExamples(port, t)
			if err != nil {
				return nil, err
			}
			for _, f := range feats {
				if leaves != nil {
					leaves[f.Name] = f
				}
			}
		}
	}
	if err := checkRequest(s.name, s.inputs, s.outputs, seen, outputs); err != nil {
		return nil, err
	}
	// String ops ONNX has no operator for (hashing, joining, splitting,
	// parsing numbers) run here, on the request's strings; the model
	// takes their results.
	host, err := s.host.Run(leaves)
	if err != nil {
		return nil, badinput.Errorf("signature %q: %v", s.name, err)
	}
	p.Inputs = append(p.Inputs, host...)
	return p, nil
}

// finish turns ONNX outputs back into the signature's tensors, in the order
// asked for (all outputs by key when no filter was given).
func (s *signature) finish(outputs []string, outs []tensor.Tensor) (*result, error) {
	byName := make(map[string]tensor.Tensor, len(outs))
	for _, o := range outs {
		byName[o.Name] = o
	}
	want := outputs
	if len(want) == 0 {
		for _, o := range s.outputs {
			want = append(want, o.Key)
		}
	}
	res := &result{}
	for _, name := range want {
		i := slices.IndexFunc(s.outputs, func(p tf2onnx.Port) bool { return p.Key == name })
		port := s.outputs[i]
		t, ok := byName[port.Value]
		if !ok {
			return nil, fmt.Errorf("tensorflow: runtime returned no output %q", port.Value)
		}
		t.Name = port.Key
		if port.AsFloat32 {
			var err error
			if t, err = narrow(t, port.DType); err != nil {
				return nil, err
			}
		}
		switch port.Kind {
		case tf2onnx.Scalar:
			t.Shape = []int64{}
		case tf2onnx.AnyRank:
			st, ok := byName[port.Value+tf2onnx.ShapeSuffix]
			if !ok || st.DType != tensor.Int64 {
				return nil, fmt.Errorf("tensorflow: runtime returned no shape for output %q", name)
			}
			shape := make([]int64, st.NumElements())
			for j := range shape {
				shape[j] = int64(binary.LittleEndian.Uint64(st.Data[8*j:]))
			}
			t.Shape = shape
		}
		res.outputs = append(res.outputs, t)
	}
	return res, nil
}

// onnxOutputs lists the ONNX outputs an output filter needs.
func (s *signature) onnxOutputs(outputs []string) []string {
	if len(outputs) == 0 {
		return nil
	}
	var out []string
	for _, name := range outputs {
		i := slices.IndexFunc(s.outputs, func(p tf2onnx.Port) bool { return p.Key == name })
		out = append(out, s.outputs[i].Value)
		if s.outputs[i].Kind == tf2onnx.AnyRank {
			out = append(out, s.outputs[i].Value+tf2onnx.ShapeSuffix)
		}
	}
	return out
}

// narrow converts a float32 output back to the half type the signature
// declares.
func narrow(t tensor.Tensor, dt tensor.DType) (tensor.Tensor, error) {
	f, err := t.AsFloat32()
	if err != nil {
		return t, fmt.Errorf("tensorflow: output %q: %w", t.Name, err)
	}
	bits := make([]uint16, len(f))
	for i, v := range f {
		if dt == tensor.BFloat16 {
			bits[i] = tensor.Float32ToBFloat16(v)
		} else {
			bits[i] = tensor.Float32ToFloat16(v)
		}
	}
	if dt == tensor.BFloat16 {
		return tensor.FromBFloat16Bits(t.Name, t.Shape, bits), nil
	}
	return tensor.FromFloat16Bits(t.Name, t.Shape, bits), nil
}

func int64Vector(name string, v []int64) tensor.Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return tensor.Tensor{Name: name, DType: tensor.Int64, Shape: []int64{int64(len(v))}, Data: b}
}

// checkRequest is what both runtimes check of a request once its inputs
// are read: every input of the signature was given (seen), and every
// output asked for exists.
func checkRequest(sig string, inputs, outs []tf2onnx.Port, seen map[string]bool, asked []string) error {
	for _, in := range inputs {
		if !seen[in.Key] {
			return badinput.Errorf("signature %q: missing input %q; its inputs are %s", sig, in.Key, describe(inputs))
		}
	}
	for _, o := range asked {
		if !slices.ContainsFunc(outs, func(p tf2onnx.Port) bool { return p.Key == o }) {
			return badinput.Errorf("signature %q has no output %q; its outputs are %s", sig, o, describe(outs))
		}
	}
	return nil
}

func describe(ps []tf2onnx.Port) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		shape := "unknown shape"
		if p.Shape != nil {
			shape = tensor.FormatShape(p.Shape)
		}
		parts[i] = fmt.Sprintf("%q %s %s", p.Key, tfName(p.DType), shape)
	}
	return strings.Join(parts, ", ")
}

// tfName names a dtype as TensorFlow does (DT_FLOAT).
func tfName(d tensor.DType) string {
	if dt, ok := savedmodel.TFDType(d); ok {
		return dt.String()
	}
	return d.String()
}

// BatchKey lets requests to one batchable signature share a run when they
// ask for the same outputs and their inputs agree after the first dimension.
func (m *Model) BatchKey(r *request) (string, bool) {
	if !r.sig.batchable {
		return "", false
	}
	if _, err := tensor.BatchSize(r.payload.Inputs); err != nil {
		return "", false
	}
	// The payload's inputs are in the ONNX model's order, so equal
	// requests give equal keys.
	return r.sig.name + "\x00" + strings.Join(r.outputs, ",") + "\x00" + tensor.TrailingKey(r.payload.Inputs), true
}

// Run executes a batch; requests to one batchable signature with the same
// output filter run merged. A request that fails fails alone
// (processors.PayloadErrors), as in the ONNX runtime it runs on.
func (m *Model) Run(ctx context.Context, batch []*request) ([]*result, error) {
	if m.sigs == nil {
		return nil, errNotLoaded
	}
	merge := len(batch) > 1
	for i := 1; i < len(batch) && merge; i++ {
		merge = batch[i].sig == batch[0].sig && batch[0].sig.batchable && slices.Equal(batch[i].outputs, batch[0].outputs)
	}
	var outs []*processors.TensorResult
	errs := make(processors.PayloadErrors, len(batch))
	if merge {
		payloads := make([]*onnx.Payload, len(batch))
		for i, r := range batch {
			payloads[i] = r.payload
		}
		var err error
		if outs, err = batch[0].sig.rt.Run(ctx, payloads); err != nil && !errors.As(err, &errs) {
			return nil, err
		}
	} else {
		outs = make([]*processors.TensorResult, len(batch))
		for i, r := range batch {
			if r.sig.sess != nil {
				continue
			}
			o, err := r.sig.rt.Run(ctx, []*onnx.Payload{r.payload})
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				errs[i] = err
				continue
			}
			outs[i] = o[0]
		}
	}
	results := make([]*result, len(batch))
	for i, o := range outs {
		if r := batch[i]; r.sig.sess != nil {
			if results[i], errs[i] = r.sig.runLibTF(r); errs[i] != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if errs[i] == nil {
			results[i], errs[i] = batch[i].sig.finish(batch[i].outputs, o.Outputs)
		}
	}
	return results, errs.Err()
}

var (
	_ processors.Typed[*request, *result]   = (*Model)(nil)
	_ processors.Tensors[*request, *result] = (*Model)(nil)
	_ processors.Batcher[*request]          = (*Model)(nil)
	_ processors.Warmer                     = (*Model)(nil)
	_ processors.Closer                     = (*Model)(nil)
	_ processors.MetadataJSONer             = (*Model)(nil)
)
