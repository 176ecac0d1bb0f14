// Package onnx serves ONNX models through ONNX Runtime for the pytorch_* and
// onnx_* processor codes, and TorchScript models through libtorch (package
// torchscript) for the pytorch_cpu_* codes.
//
// The pytorch_* codes speak the EAS Torch protobuf
// (pytorch.eas.PredictRequest) and the onnx_* codes the HIE DataProto. A
// pytorch_cpu_* model file is served by its content: a TorchScript archive
// (torch.jit.save) runs on libtorch, anything else must be ONNX. Both run
// behind the same Model, so the codecs, the KServe v2 routes (through
// processors.TensorModel), metadata and dynamic batching are shared.
//
// TorchScript declares input names (forward's parameters) but no dtypes or
// shapes: any dtype libtorch takes and any shape is accepted, and metadata
// reports datatype "" and shape [-1]. Outputs (output__0, ... or a returned
// dict's keys) are known only after a run: metadata lists those of the last
// run, a Torch protobuf output_filter indexes forward's results, and a KServe
// output name is checked against them after the run. TorchScript models are
// batched along dim 0. metadata.cpu (or model_config.intra_op_threads) sets
// libtorch's intra-op threads, which are process-wide.
//
// The ONNX Runtime shared library is loaded lazily, on the first ONNX model
// load, from SetLibraryPath, $ONNXRUNTIME_LIB or the project-local copy that
// scripts/fetch-onnxruntime.sh installs; when it is missing only ONNX services
// fail to deploy.
//
// model_config (optional, a JSON object or a string holding one) tunes the
// session: {"intra_op_threads": 4, "inter_op_threads": 1,
// "allow_spinning": true, "graph_optimization": "all", "device_id": 0}.
// intra_op_threads defaults to metadata.cpu, else the CPUs the process may use.
// GPU codes also take the CUDA provider's "gpu_mem_limit",
// "arena_extend_strategy" and "cudnn_conv_algo_search" (cuda.go).
package onnx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/sniff"
	"github.com/eas-server/eas-server/tensor"
)

// protocol is the /api/predict wire format a code speaks.
type protocol int

const (
	protoTorch protocol = iota // pytorch.eas.PredictRequest / PredictResponse
	protoHIE                   // hie.processor.DataProto
)

// codeInfo describes one registered processor code.
type codeInfo struct {
	proto protocol
	gpu   bool
	cpu   string // the CPU code to suggest for a GPU code
}

var codes = map[string]codeInfo{
	"onnx_cpu":   {proto: protoHIE},
	"onnx_cu100": {proto: protoHIE, gpu: true, cpu: "onnx_cpu"},
}

func init() {
	for _, v := range []string{"1.6", "1.7", "1.9", "1.10"} {
		codes["pytorch_cpu_"+v] = codeInfo{proto: protoTorch}
		codes["pytorch_gpu_"+v] = codeInfo{proto: protoTorch, gpu: true, cpu: "pytorch_cpu_" + v}
	}
	for code, ci := range codes {
		desc := "ONNX model on ONNX Runtime " + LibraryVersion
		switch {
		case ci.proto == protoTorch && ci.gpu:
			desc = "PyTorch model: TorchScript on libtorch with CUDA (a shim built against a CUDA libtorch) or exported to ONNX on the CUDA execution provider, EAS Torch protobuf"
		case ci.proto == protoTorch:
			desc = "PyTorch model: TorchScript on libtorch or exported to ONNX (torch.onnx.export), CPU, EAS Torch protobuf"
		case ci.gpu:
			desc += ", CUDA execution provider, HIE DataProto"
		default:
			desc += ", CPU, HIE DataProto"
		}
		processors.Register(code, desc, func() *processors.Engine {
			return processors.Adapt[*Payload, *processors.TensorResult](New(code))
		})
	}
}

// Config is the processor's model_config. Every field is optional.
type Config struct {
	// IntraOpThreads is the thread count ONNX Runtime uses inside one
	// operator; it overrides metadata.cpu.
	IntraOpThreads int `json:"intra_op_threads"`
	// InterOpThreads is the thread count for running independent operators
	// in parallel; 0 keeps ONNX Runtime's default.
	InterOpThreads int `json:"inter_op_threads"`
	// AllowSpinning lets idle intra-op threads spin for the next run. The
	// default is false, unlike ONNX Runtime's: spinning threads compete with
	// the HTTP stack and other services for the same cores, and under that
	// contention a 2-thread session measured 2x slower than a non-spinning
	// one. Set true for a dedicated host where the last microseconds count.
	AllowSpinning *bool `json:"allow_spinning"`
	// GraphOptimization is one of all (default), extended, basic, disable.
	GraphOptimization string `json:"graph_optimization"`
	// DeviceID is the CUDA device for GPU codes.
	DeviceID int `json:"device_id"`
	// GPUMemLimit bounds the CUDA provider's memory arena, in bytes; 0
	// (the default) leaves it unbounded. GPU codes only.
	GPUMemLimit int64 `json:"gpu_mem_limit"`
	// ArenaExtendStrategy is how the CUDA arena grows: kNextPowerOfTwo
	// (ONNX Runtime's default) or kSameAsRequested. GPU codes only.
	ArenaExtendStrategy string `json:"arena_extend_strategy"`
	// CudnnConvAlgoSearch is how cuDNN picks convolution algorithms:
	// EXHAUSTIVE (ONNX Runtime's default: benchmarks them on the first run
	// of each shape), HEURISTIC or DEFAULT. GPU codes only.
	CudnnConvAlgoSearch string `json:"cudnn_conv_algo_search"`
	// TorchScriptOptimize applies to TorchScript files: none (default,
	// PyTorch's exact numerics), freeze, or inference (freeze plus
	// optimize_for_inference: BatchNorm folded into convolutions, fusions;
	// several times faster on convolutional networks, results equal to the
	// last float digits). See torchscript.Options.Optimize.
	TorchScriptOptimize string `json:"torchscript_optimize"`
}

// ioInfo is one model input or output as the session reports it.
type ioInfo struct {
	Name  string
	DType tensor.DType
	Shape []int64 // -1 for a dynamic dimension
	ort   ort.TensorElementDataType
}

// Model is an ONNX model behind one ONNX Runtime session. It is created by
// the registry, configured and loaded once by the service loader, then used
// concurrently: Run, Decode, Encode and BatchKey are safe from any goroutine.
type Model struct {
	code string
	info codeInfo
	spec processors.Spec
	cfg  Config

	threads   int
	file      string                   // the model file in use
	provider  string                   // "CPUExecutionProvider", "CUDAExecutionProvider" or "libtorch:<device>"
	engine    engine                   // nil until Load and after Close
	torch     bool                     // the file is TorchScript, run by libtorch
	lastOut   atomic.Pointer[[]ioInfo] // TorchScript: the outputs of the last run
	inputs    []ioInfo
	outputs   []ioInfo
	inIndex   map[string]int
	outIndex  map[string]int
	batchable bool         // every input and output has a dynamic first dim
	noBatch   atomic.Bool  // a run showed an output that does not follow the batch
	runs      atomic.Int64 // session runs so far (a merged batch is one)
}

// New returns an unconfigured model for one of the registered codes.
func New(code string) *Model {
	return &Model{code: code, info: codes[code]}
}

// Platform names the runtime for KServe model metadata.
func (m *Model) Platform() string {
	if m.torch {
		return "pytorch_libtorch"
	}
	return "onnxruntime_onnx"
}

// onnxRecipe is how to get an ONNX file from a PyTorch model.
const onnxRecipe = `torch.onnx.export(model, example_inputs, "model.onnx", input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})`

// torchScriptHelp says why this code cannot serve a TorchScript file, or ""
// when it can (pytorch_cpu_* on the CPU, pytorch_gpu_* on CUDA).
func (m *Model) torchScriptHelp() string {
	if m.info.proto == protoHIE {
		return fmt.Sprintf("processor %q serves ONNX only; deploy TorchScript with a pytorch_cpu_* or pytorch_gpu_* processor, or export to ONNX: %s", m.code, onnxRecipe)
	}
	return ""
}

func isTorchScriptName(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".pt", ".pth", ".torchscript", ".ptl":
		return true
	}
	return false
}

// Configure checks spec and model_config without any I/O.
func (m *Model) Configure(spec processors.Spec) error {
	if _, ok := codes[spec.Code]; ok {
		m.code, m.info = spec.Code, codes[spec.Code]
	}
	m.spec = spec
	if spec.ModelSource == "" {
		return fmt.Errorf("model_path: required for processor %q; point it at an .onnx file or a directory holding one", m.code)
	}
	if help := m.torchScriptHelp(); help != "" && isTorchScriptName(spec.ModelSource) {
		return fmt.Errorf("model_path: %s looks like a TorchScript file; %s", filepath.Base(spec.ModelSource), help)
	}
	if spec.ModelEntry != "" {
		if !filepath.IsLocal(spec.ModelEntry) {
			return fmt.Errorf("model_entry: %q must be a relative path inside model_path without ..", spec.ModelEntry)
		}
		if help := m.torchScriptHelp(); help != "" && isTorchScriptName(spec.ModelEntry) {
			return fmt.Errorf("model_entry: %s looks like a TorchScript file; %s", spec.ModelEntry, help)
		}
	}
	cfg, err := parseConfig(spec)
	if err != nil {
		return err
	}
	m.cfg = cfg
	m.threads = spec.IntraOpThreads(cfg.IntraOpThreads)
	return nil
}

// parseConfig reads model_config and checks its values.
func parseConfig(spec processors.Spec) (Config, error) {
	var cfg Config
	if err := spec.DecodeConfig(&cfg, "an object with intra_op_threads, inter_op_threads, allow_spinning, graph_optimization, device_id, gpu_mem_limit, arena_extend_strategy, cudnn_conv_algo_search, torchscript_optimize"); err != nil {
		return cfg, err
	}
	if err := torchscript.CheckOptimize(cfg.TorchScriptOptimize); err != nil {
		return cfg, fmt.Errorf("model_config.torchscript_optimize: %w", err)
	}
	if cfg.IntraOpThreads < 0 || cfg.IntraOpThreads > 1024 {
		return cfg, fmt.Errorf("model_config.intra_op_threads: must be between 0 and 1024, got %d", cfg.IntraOpThreads)
	}
	if cfg.InterOpThreads < 0 || cfg.InterOpThreads > 1024 {
		return cfg, fmt.Errorf("model_config.inter_op_threads: must be between 0 and 1024, got %d", cfg.InterOpThreads)
	}
	if _, ok := optLevels[cfg.GraphOptimization]; !ok {
		return cfg, fmt.Errorf("model_config.graph_optimization: must be one of all, extended, basic, disable, got %q", cfg.GraphOptimization)
	}
	if cfg.DeviceID < 0 {
		return cfg, fmt.Errorf("model_config.device_id: must be >= 0, got %d", cfg.DeviceID)
	}
	if err := checkCUDAConfig(&cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

var optLevels = map[string]ort.GraphOptimizationLevel{
	"":         ort.GraphOptimizationLevelEnableAll,
	"all":      ort.GraphOptimizationLevelEnableAll,
	"extended": ort.GraphOptimizationLevelEnableExtended,
	"basic":    ort.GraphOptimizationLevelEnableBasic,
	"disable":  ort.GraphOptimizationLevelDisableAll,
}

// Load resolves the model file and, for a TorchScript archive, loads it on
// libtorch; otherwise it initialises ONNX Runtime if needed and creates the
// one session every Run shares.
func (m *Model) Load(ctx context.Context, files processors.Files) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	file, err := m.finder().Find(files.ModelPath, m.spec.ModelEntry)
	if err != nil {
		return err
	}
	// The runtimes read the file themselves: check its kind and size first.
	if _, err := processors.StatModel(file, m.spec.ModelLimit()); err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	ts, err := torchscript.IsTorchScript(file)
	if err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	if ts {
		if help := m.torchScriptHelp(); help != "" {
			return fmt.Errorf("model_path: %s is a TorchScript archive; %s", filepath.Base(file), help)
		}
		return m.loadTorchScript(file)
	}
	if err := m.checkNotTorchScript(file); err != nil {
		return err
	}
	if err := ensureEnvironment(); err != nil {
		return err
	}
	m.file = file

	// Read the signature through a cheap session (no optimisation, one
	// thread): the binding has no accessor on a DynamicAdvancedSession.
	infoOpts, err := ort.NewSessionOptions()
	if err != nil {
		return fmt.Errorf("onnx session options: %w", err)
	}
	_ = infoOpts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll)
	_ = infoOpts.SetIntraOpNumThreads(1)
	ins, outs, err := ort.GetInputOutputInfoWithOptions(file, infoOpts)
	infoOpts.Destroy()
	if err != nil {
		if werr := sniff.WrongFormat(file, "onnx", "an ONNX model"); werr != nil {
			return werr // a PMML or XGBoost file, say: name it and its code
		}
		return fmt.Errorf("load %s: %w; is it a valid ONNX model (opset <= 23)?", filepath.Base(file), err)
	}
	if m.inputs, err = convertInfo("input", ins); err != nil {
		return err
	}
	if m.outputs, err = convertInfo("output", outs); err != nil {
		return err
	}
	m.inIndex, m.outIndex = indexOf(m.inputs), indexOf(m.outputs)
	m.batchable = len(m.inputs) > 0
	for _, io := range append(slices.Clone(m.inputs), m.outputs...) {
		if len(io.Shape) == 0 || io.Shape[0] >= 0 {
			m.batchable = false
		}
	}

	opts, err := m.sessionOptions()
	if err != nil {
		return err
	}
	defer opts.Destroy()
	names := func(ios []ioInfo) []string {
		s := make([]string, len(ios))
		for i, io := range ios {
			s[i] = io.Name
		}
		return s
	}
	sess, err := ort.NewDynamicAdvancedSession(file, names(m.inputs), names(m.outputs), opts)
	if err != nil {
		if m.info.gpu {
			return m.gpuError(err)
		}
		return fmt.Errorf("load %s: %w", filepath.Base(file), err)
	}
	m.engine = &ortEngine{session: sess, inputs: m.inputs, outputs: m.outputs}
	if m.spec.Logger != nil {
		m.spec.Logger.Info("onnx model loaded", "file", file, "provider", m.provider,
			"intra_op_threads", m.threads, "inputs", len(m.inputs), "outputs", len(m.outputs), "batchable", m.batchable)
	}
	return nil
}

// sessionOptions builds the options of the serving session.
func (m *Model) sessionOptions() (*ort.SessionOptions, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx session options: %w", err)
	}
	fail := func(what string, err error) (*ort.SessionOptions, error) {
		opts.Destroy()
		return nil, fmt.Errorf("onnx session options: %s: %w", what, err)
	}
	if err := opts.SetIntraOpNumThreads(m.threads); err != nil {
		return fail("intra_op_threads", err)
	}
	if m.cfg.InterOpThreads > 0 {
		if err := opts.SetInterOpNumThreads(m.cfg.InterOpThreads); err != nil {
			return fail("inter_op_threads", err)
		}
	}
	if err := opts.SetGraphOptimizationLevel(optLevels[m.cfg.GraphOptimization]); err != nil {
		return fail("graph_optimization", err)
	}
	spin := "0"
	if m.cfg.AllowSpinning != nil && *m.cfg.AllowSpinning {
		spin = "1"
	}
	if err := opts.AddSessionConfigEntry("session.intra_op.allow_spinning", spin); err != nil {
		return fail("allow_spinning", err)
	}
	m.provider = "CPUExecutionProvider"
	if m.info.gpu {
		// No silent CPU fallback: a GPU code either gets CUDA or fails here.
		if err := m.appendCUDA(opts); err != nil {
			opts.Destroy()
			return nil, err
		}
		m.provider = "CUDAExecutionProvider"
	}
	return opts, nil
}

func indexOf(ios []ioInfo) map[string]int {
	idx := make(map[string]int, len(ios))
	for i, io := range ios {
		idx[io.Name] = i
	}
	return idx
}

// halfTypes are accepted as inputs only: onnxruntime_go v1.27.0 copies one
// byte per element when it hands back an output of these types, so models
// with such outputs are refused at load rather than answered wrongly.
var halfTypes = map[ort.TensorElementDataType]tensor.DType{
	ort.TensorElementDataTypeFloat16:  tensor.Float16,
	ort.TensorElementDataTypeBFloat16: tensor.BFloat16,
}

// dtypes maps ONNX Runtime element types to ours.
var dtypes = map[ort.TensorElementDataType]tensor.DType{
	ort.TensorElementDataTypeFloat:  tensor.Float32,
	ort.TensorElementDataTypeDouble: tensor.Float64,
	ort.TensorElementDataTypeInt8:   tensor.Int8,
	ort.TensorElementDataTypeInt16:  tensor.Int16,
	ort.TensorElementDataTypeInt32:  tensor.Int32,
	ort.TensorElementDataTypeInt64:  tensor.Int64,
	ort.TensorElementDataTypeUint8:  tensor.Uint8,
	ort.TensorElementDataTypeUint16: tensor.Uint16,
	ort.TensorElementDataTypeUint32: tensor.Uint32,
	ort.TensorElementDataTypeUint64: tensor.Uint64,
	ort.TensorElementDataTypeBool:   tensor.Bool,
	ort.TensorElementDataTypeString: tensor.String,
}

func convertInfo(kind string, infos []ort.InputOutputInfo) ([]ioInfo, error) {
	out := make([]ioInfo, 0, len(infos))
	for _, in := range infos {
		if in.OrtValueType != ort.ONNXTypeTensor {
			return nil, fmt.Errorf("model %s %q is a %s; only tensor inputs and outputs are served (for a scikit-learn export, convert with options={'zipmap': False})",
				kind, in.Name, in.OrtValueType)
		}
		dt, ok := dtypes[in.DataType]
		if h, half := halfTypes[in.DataType]; half {
			if kind == "output" {
				return nil, fmt.Errorf("model output %q is %s, which the ONNX Runtime binding cannot return intact; add a Cast to float32 at the end of the model",
					in.Name, h)
			}
			dt, ok = h, true
		}
		if !ok {
			return nil, fmt.Errorf("model %s %q has element type %s, which this server does not serve; cast it to float32 (or another numeric type) in the model",
				kind, in.Name, in.DataType)
		}
		if len(in.Dimensions) == 0 {
			// onnxruntime_go v1.27.0 can neither build a scalar input nor
			// return a scalar output (it counts zero elements in shape []).
			return nil, fmt.Errorf("model %s %q is a scalar or has no shape information; give it rank >= 1 in the model (e.g. Unsqueeze to [1]) and re-export",
				kind, in.Name)
		}
		shape := make([]int64, len(in.Dimensions))
		for i, d := range in.Dimensions {
			if d <= 0 {
				d = -1 // symbolic or unknown
			}
			shape[i] = d
		}
		out = append(out, ioInfo{Name: in.Name, DType: dt, Shape: shape, ort: in.DataType})
	}
	return out, nil
}

// finder finds the model file under model_path: an .onnx file, or for
// pytorch_* codes also a TorchScript one (.pt, .pth, .torchscript,
// .ptl); a directory holding only TorchScript for another code gets the
// reason.
func (m *Model) finder() processors.ModelFile {
	help := m.torchScriptHelp()
	if help == "" {
		return processors.ModelFile{
			Kind: ".onnx or TorchScript (.pt)", Exts: []string{".onnx", ".pt", ".pth", ".torchscript", ".ptl"}, MaxDepth: 4,
		}
	}
	return processors.ModelFile{
		Kind: ".onnx", Exts: []string{".onnx"}, MaxDepth: 4,
		Hint: func(files []string) string {
			var torch []string
			for _, f := range files {
				if isTorchScriptName(f) {
					torch = append(torch, f)
				}
			}
			if len(torch) == 0 {
				return ""
			}
			return "only TorchScript (" + strings.Join(torch, ", ") + "); " + help
		},
	}
}

// notTorchScriptHelp explains a zip or .pt file that is not TorchScript.
const notTorchScriptHelp = "save the model with torch.jit.save(torch.jit.script(model) or torch.jit.trace(model, example), path) " +
	"(a torch.save checkpoint holds weights without code), or export it to ONNX: " + onnxRecipe

// checkNotTorchScript refuses, with the reason, a file that is not ONNX but
// looks like PyTorch: a .pt name or a zip (what torch.save writes) that is
// not a TorchScript archive (those were recognised before), or a
// TorchScript-looking file for a code that does not serve TorchScript.
func (m *Model) checkNotTorchScript(file string) error {
	help := m.torchScriptHelp()
	if help == "" {
		help = notTorchScriptHelp
	}
	if isTorchScriptName(file) {
		return fmt.Errorf("model_path: %s is named like a TorchScript file but is not a TorchScript archive; %s", filepath.Base(file), help)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("model_path: %s is not an ONNX model (%d bytes)", filepath.Base(file), len(head))
	}
	if string(head) == "PK\x03\x04" {
		return fmt.Errorf("model_path: %s is a zip archive but neither an ONNX model nor a TorchScript archive; %s", filepath.Base(file), help)
	}
	return nil
}

// Metadata describes the model's inputs and outputs; -1 marks a dynamic dim.
func (m *Model) Metadata() processors.Metadata {
	spec := func(ios []ioInfo) []processors.IOSpec {
		out := make([]processors.IOSpec, len(ios))
		for i, io := range ios {
			out[i] = processors.IOSpec{Name: io.Name, DType: io.DType.String(), Shape: slices.Clone(io.Shape)}
			if io.DType == tensor.Invalid {
				out[i].DType = "" // TorchScript: any dtype
			}
			if io.Shape == nil {
				out[i].Shape = []int64{-1} // TorchScript: any shape
			}
		}
		return out
	}
	if m.torch {
		return processors.Metadata{
			Processor: m.code,
			Inputs:    spec(m.inputs),
			Outputs:   spec(m.outputInfo()),
			Extra: map[string]any{
				"platform":           m.Platform(),
				"execution_provider": m.provider,
				// libtorch's pool is process-wide: report what runs now,
				// which the last TorchScript deploy set.
				"intra_op_threads": torchscript.Threads(),
				"model_file":       filepath.Base(m.file),
				"batchable":        m.batchable && !m.noBatch.Load(),
				"outputs_known":    m.lastOut.Load() != nil,
				"optimize":         cmp.Or(m.cfg.TorchScriptOptimize, "none"),
			},
		}
	}
	md := processors.Metadata{
		Processor: m.code,
		Inputs:    spec(m.inputs),
		Outputs:   spec(m.outputs),
		Extra: map[string]any{
			"platform":           m.Platform(),
			"onnxruntime":        LibraryVersion,
			"execution_provider": m.provider,
			"intra_op_threads":   m.threads,
			"model_file":         filepath.Base(m.file),
			"batchable":          m.batchable && !m.noBatch.Load(),
		},
	}
	if m.provider == "CUDAExecutionProvider" {
		md.Extra["device_id"] = m.cfg.DeviceID
	}
	return md
}

// Close releases the session or module. The model must not be used
// afterwards.
func (m *Model) Close() error {
	if m.engine == nil {
		return nil
	}
	err := m.engine.close()
	m.engine = nil
	return err
}

var (
	_ processors.Typed[*Payload, *processors.TensorResult]   = (*Model)(nil)
	_ processors.Tensors[*Payload, *processors.TensorResult] = (*Model)(nil)
	_ processors.Batcher[*Payload]                           = (*Model)(nil)
	_ processors.Warmer                                      = (*Model)(nil)
	_ processors.Closer                                      = (*Model)(nil)
)

// loadTorchScript loads a TorchScript archive on libtorch. Inputs are
// forward's parameters, with any dtype and shape; outputs are learnt from
// the runs.
func (m *Model) loadTorchScript(file string) error {
	opts := torchscript.Options{Threads: m.threads, Device: "cpu", Optimize: m.cfg.TorchScriptOptimize}
	if m.info.gpu {
		opts.Device = "cuda:" + strconv.Itoa(m.cfg.DeviceID)
	}
	mod, err := torchscript.Load(file, opts)
	if err != nil {
		if m.info.gpu && !errors.Is(err, torchscript.ErrLibrary) {
			return fmt.Errorf("load %s: processor %q runs TorchScript on CUDA: %w; on a host with an NVIDIA GPU, build the shim against a CUDA-enabled libtorch (TORCH_DIR=<python site-packages>/torch scripts/build-torchshim.sh, e.g. a pip-installed PyTorch with CUDA), or deploy with processor %q",
				filepath.Base(file), m.code, err, m.info.cpu)
		}
		return fmt.Errorf("load %s: %w", filepath.Base(file), err)
	}
	var ins []ioInfo
	for _, a := range mod.Inputs() {
		if a.Type != "Tensor" && a.Type != "Optional[Tensor]" {
			mod.Close()
			return fmt.Errorf("load %s: forward's argument %q is %s; only Tensor arguments can be served (wrap the model in one whose forward takes tensors only)",
				filepath.Base(file), a.Name, a.Type)
		}
		ins = append(ins, ioInfo{Name: a.Name}) // DType Invalid, Shape nil: any
	}
	if len(ins) == 0 {
		mod.Close()
		return fmt.Errorf("load %s: forward takes no tensor arguments; there is nothing to send it", filepath.Base(file))
	}
	m.torch, m.file, m.provider = true, file, "libtorch:"+mod.Device()
	m.inputs, m.outputs = ins, nil
	if names, ok := mod.OutputNames(); ok {
		// Declared by forward's return type: known before any run, with
		// dtype and rank learnt from the first.
		info := make([]ioInfo, len(names))
		for i, n := range names {
			info[i] = ioInfo{Name: n}
		}
		m.lastOut.Store(&info)
	}
	m.inIndex, m.outIndex = indexOf(ins), map[string]int{}
	m.batchable = true // along dim 0; runMerged stops merging if outputs do not follow
	m.engine = &tsEngine{mod: mod}
	if m.spec.Logger != nil {
		path, version := torchscript.LoadedLibrary()
		m.spec.Logger.Info("torchscript model loaded", "file", file, "shim", path, "libtorch", version,
			"threads", m.threads, "inputs", len(m.inputs))
	}
	return nil
}

// noteOutputs remembers what a TorchScript run returned, for metadata and
// the Torch protobuf's output names: names, dtypes and ranks (every
// dimension dynamic).
func (m *Model) noteOutputs(outs []tensor.Tensor) {
	if prev := m.lastOut.Load(); prev != nil && sameOutputs(*prev, outs) {
		return
	}
	info := make([]ioInfo, len(outs))
	for i, o := range outs {
		shape := make([]int64, len(o.Shape))
		for j := range shape {
			shape[j] = -1
		}
		info[i] = ioInfo{Name: o.Name, DType: o.DType, Shape: shape}
	}
	m.lastOut.Store(&info)
}

func sameOutputs(info []ioInfo, outs []tensor.Tensor) bool {
	if len(info) != len(outs) {
		return false
	}
	for i, o := range outs {
		if info[i].Name != o.Name || info[i].DType != o.DType || len(info[i].Shape) != len(o.Shape) {
			return false
		}
	}
	return true
}

// outputInfo is the declared outputs, or for TorchScript those of the last
// run (none before the first).
func (m *Model) outputInfo() []ioInfo {
	if m.torch {
		if p := m.lastOut.Load(); p != nil {
			return *p
		}
		return nil
	}
	return m.outputs
}
