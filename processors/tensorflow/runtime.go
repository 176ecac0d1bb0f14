package tensorflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/eas-server/eas-server/engines/libtf"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// The values of model_config.runtime: which runtime runs the SavedModel.
const (
	// RuntimeONNX translates each signature to ONNX and runs it on ONNX
	// Runtime (no libtensorflow). The default: what every tensorflow_*
	// service did before libtensorflow was a runtime.
	RuntimeONNX = "onnx"
	// RuntimeLibTF loads the SavedModel with TensorFlow itself, through
	// the C API of a libtensorflow found at run time (engines/libtf).
	RuntimeLibTF = "libtensorflow"
	// RuntimeAuto translates, and where the translator refuses a
	// signature loads the whole SavedModel on libtensorflow instead,
	// saying so in the service's events.
	RuntimeAuto = "auto"
)

// Runtimes lists model_config.runtime's values.
var Runtimes = []string{RuntimeONNX, RuntimeLibTF, RuntimeAuto}

// runtimeConfig is the part of model_config this package reads itself; the
// rest goes to the ONNX runtime's configuration.
type runtimeConfig struct {
	runtime      string
	intra, inter int
	// opLibraries is model_config.op_libraries: custom op libraries
	// (libtf.ResolveOpLibraries' entries) loaded before the SavedModel on
	// libtensorflow.
	opLibraries    []string
	onnxOnlyConfig []byte // model_config without "runtime" and "op_libraries"
}

// parseRuntime reads model_config.runtime (and the thread counts
// libtensorflow shares with ONNX Runtime) and returns model_config without
// the runtime key, for the ONNX runtime's own parser.
func parseRuntime(raw []byte) (runtimeConfig, error) {
	rc := runtimeConfig{runtime: RuntimeONNX, onnxOnlyConfig: raw}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) || trimmed[0] != '{' {
		return rc, nil // the ONNX parser reports what is wrong with it
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return rc, nil
	}
	_, hasRuntime := obj["runtime"]
	_, hasLibs := obj["op_libraries"]
	if hasRuntime {
		if err := json.Unmarshal(obj["runtime"], &rc.runtime); err != nil || !slices.Contains(Runtimes, rc.runtime) {
			return rc, fmt.Errorf("model_config: runtime must be one of %q, got %s", Runtimes, obj["runtime"])
		}
	}
	if hasLibs {
		if err := json.Unmarshal(obj["op_libraries"], &rc.opLibraries); err != nil {
			return rc, fmt.Errorf(`model_config: op_libraries must be a list of paths, e.g. ["tensorflow_text/python/ops/_*.so"], got %s`, obj["op_libraries"])
		}
		if len(rc.opLibraries) > libtf.MaxOpLibraries {
			return rc, fmt.Errorf("model_config: op_libraries names %d entries, over the %d allowed", len(rc.opLibraries), libtf.MaxOpLibraries)
		}
		for _, e := range rc.opLibraries {
			if strings.TrimSpace(e) == "" {
				return rc, errors.New("model_config: op_libraries has an empty entry")
			}
		}
		if rc.runtime == RuntimeONNX {
			return rc, fmt.Errorf("model_config: op_libraries are loaded into libtensorflow; they need runtime %q or %q (runtime %q translates to ONNX, where a custom op is refused by name)", RuntimeLibTF, RuntimeAuto, RuntimeONNX)
		}
	}
	if hasRuntime || hasLibs {
		delete(obj, "runtime")
		delete(obj, "op_libraries")
		b, err := json.Marshal(obj)
		if err != nil {
			return rc, err
		}
		rc.onnxOnlyConfig = b
	}
	_ = json.Unmarshal(obj["intra_op_threads"], &rc.intra)
	_ = json.Unmarshal(obj["inter_op_threads"], &rc.inter)
	return rc, nil
}

// translationError marks a signature the ONNX translator refused: the
// error auto falls back on.
type translationError struct{ err error }

func (e *translationError) Error() string { return e.err.Error() }
func (e *translationError) Unwrap() error { return e.err }

// loadLibTF loads the SavedModel at path into one TensorFlow session and
// serves every signature of its serving MetaGraph from it.
func (m *Model) loadLibTF(ctx context.Context, sm *savedmodel.Model) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(m.rc.opLibraries) > 0 {
		libs, err := libtf.ResolveOpLibraries(m.rc.opLibraries)
		if err != nil {
			return fmt.Errorf("model_config.op_libraries: %w", err)
		}
		for _, l := range libs {
			if err := libtf.LoadOpLibrary(l); err != nil {
				return fmt.Errorf("model_config.op_libraries: %w", err)
			}
		}
	}
	sess, err := libtf.Load(sm.Dir, libtf.Options{
		IntraOpThreads: m.spec.IntraOpThreads(m.rc.intra),
		InterOpThreads: m.rc.inter,
	})
	if err != nil {
		if strings.Contains(err.Error(), "Op type not registered") {
			return fmt.Errorf("%w; the op comes from a custom op library: name it in model_config.op_libraries, relative to the TensorFlow installation (e.g. [\"tensorflow_text/python/ops/_*.so\"] for TensorFlow Text, pip-installed beside TensorFlow)", err)
		}
		return err
	}
	sigs := map[string]*signature{}
	refused := map[string]error{}
	names := sm.SignatureNames()
	for _, name := range names {
		s, err := libtfSignature(sm, name, sess)
		if err != nil {
			refused[name] = err
			continue
		}
		sigs[name] = s
	}
	if len(sigs) == 0 {
		sess.Close()
		msgs := make([]string, 0, len(refused))
		for _, name := range names {
			msgs = append(msgs, refused[name].Error())
		}
		return fmt.Errorf("no signature of the SavedModel can be served on libtensorflow: %s", strings.Join(msgs, "; "))
	}
	def := ""
	if sigs[tfpb.DefaultSignature] != nil {
		def = tfpb.DefaultSignature
	} else if refused[tfpb.DefaultSignature] != nil {
		sess.Close()
		return fmt.Errorf("signature %q: %w", tfpb.DefaultSignature, refused[tfpb.DefaultSignature])
	} else {
		served := make([]string, 0, len(sigs))
		for n := range sigs {
			served = append(served, n)
		}
		sort.Strings(served)
		def = served[0]
	}
	m.Close()
	rt, _ := libtf.Open()
	m.sigs, m.refused, m.defaultSig, m.source, m.session = sigs, refused, def, "savedmodel", sess
	m.runtime = RuntimeLibTF + " " + rt.Version
	if m.spec.Logger != nil {
		m.spec.Logger.Info("tensorflow savedmodel loaded on libtensorflow", "dir", sm.Dir, "library", rt.Library,
			"version", rt.Version, "signatures", len(sigs), "refused", len(refused))
	}
	return nil
}

// libtfSignature describes one signature from its SignatureDef, checking
// that its tensors are in the loaded graph and of types we carry.
func libtfSignature(sm *savedmodel.Model, name string, sess *libtf.Session) (*signature, error) {
	def := sm.MetaGraph.SignatureDef[name]
	s := &signature{name: name, method: def.GetMethodName(), sess: sess}
	ports := func(what string, infos map[string]*corepb.TensorInfo) ([]tf2onnx.Port, error) {
		keys := make([]string, 0, len(infos))
		for k := range infos {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []tf2onnx.Port
		for _, k := range keys {
			ti := infos[k]
			if ti.GetName() == "" {
				return nil, fmt.Errorf("signature %q %s %q is not a dense tensor (sparse and ragged tensors are not served)", name, what, k)
			}
			dt, ok := savedmodel.DTypeOf(ti.GetDtype())
			if !ok {
				return nil, fmt.Errorf("signature %q %s %q has dtype %s, which is not served", name, what, k, ti.GetDtype())
			}
			shape, err := savedmodel.ShapeOf(ti.GetTensorShape())
			if err != nil {
				return nil, fmt.Errorf("signature %q %s %q: %w", name, what, k, err)
			}
			if err := sess.Check(ti.GetName()); err != nil {
				return nil, fmt.Errorf("signature %q %s %q: %w", name, what, k, err)
			}
			out = append(out, tf2onnx.Port{Key: k, Value: ti.GetName(), DType: dt, Shape: shape})
		}
		return out, nil
	}
	var err error
	if s.inputs, err = ports("input", def.GetInputs()); err != nil {
		return nil, err
	}
	if s.outputs, err = ports("output", def.GetOutputs()); err != nil {
		return nil, err
	}
	if len(s.outputs) == 0 {
		return nil, fmt.Errorf("signature %q has no outputs", name)
	}
	return s, nil
}

// checkLibTF checks a request's inputs against the signature (keys, dtypes,
// shapes) and makes the feeds.
func (s *signature) checkLibTF(inputs []tensor.Tensor, outputs []string) ([]libtf.Feed, error) {
	byKey := make(map[string]tf2onnx.Port, len(s.inputs))
	for _, in := range s.inputs {
		byKey[in.Key] = in
	}
	feeds := make([]libtf.Feed, 0, len(inputs))
	seen := map[string]bool{}
	for _, t := range inputs {
		port, ok := byKey[t.Name]
		if !ok {
			return nil, badinput.Errorf("signature %q has no input %q; its inputs are %s", s.name, t.Name, describe(s.inputs))
		}
		if seen[t.Name] {
			return nil, badinput.Errorf("signature %q: input %q given twice", s.name, t.Name)
		}
		seen[t.Name] = true
		if t.DType != port.DType {
			return nil, badinput.Errorf("signature %q input %q: dtype %s, but the signature expects %s", s.name, t.Name, tfName(t.DType), tfName(port.DType))
		}
		if !shapeFits(port.Shape, t.Shape) {
			return nil, badinput.Errorf("signature %q input %q: shape %s, but the signature expects %s", s.name, t.Name, tensor.FormatShape(t.Shape), tensor.FormatShape(port.Shape))
		}
		feeds = append(feeds, libtf.Feed{Name: port.Value, Value: t})
	}
	if err := checkRequest(s.name, s.inputs, s.outputs, seen, outputs); err != nil {
		return nil, err
	}
	return feeds, nil
}

// shapeFits says whether shape matches want (nil: any rank; -1: any size).
func shapeFits(want, shape []int64) bool {
	if want == nil {
		return true
	}
	if len(want) != len(shape) {
		return false
	}
	for i, d := range want {
		if d >= 0 && d != shape[i] {
			return false
		}
	}
	return true
}

// runLibTF runs one request on the session.
func (s *signature) runLibTF(r *request) (*result, error) {
	want := r.outputs
	if len(want) == 0 {
		for _, o := range s.outputs {
			want = append(want, o.Key)
		}
	}
	fetches := make([]string, len(want))
	for i, k := range want {
		fetches[i] = s.outputs[slices.IndexFunc(s.outputs, func(p tf2onnx.Port) bool { return p.Key == k })].Value
	}
	outs, err := s.sess.Run(r.feeds, fetches)
	if err != nil {
		var re *libtf.RunError
		if errors.As(err, &re) && re.InvalidArgument() {
			return nil, badinput.Errorf("signature %q: %v", s.name, err)
		}
		return nil, err
	}
	for i := range outs {
		outs[i].Name = want[i]
	}
	return &result{outputs: outs}, nil
}

// libtfLibrary is the path of the libtensorflow in use.
func libtfLibrary() string {
	rt, _ := libtf.Open()
	return rt.Library
}
