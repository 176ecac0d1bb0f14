package torchscript

/*
#include "trampoline.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/eas-server/eas-server/tensor"
)

// Arg is one argument of a module's forward method (self excluded).
type Arg struct {
	Name string // the Python parameter name
	Type string // its TorchScript type: "Tensor", "Optional[Tensor]", "int", ...
}

// Outputs are forward's results in order: one tensor per element of a
// returned tuple or list (named output__0, output__1, ...), the one returned
// tensor (output__0), or the entries of a returned Dict[str, Tensor] (named by
// their keys, in the dict's order). An int, float or bool result becomes a
// 0-d INT64, FP64 or BOOL tensor.
type Outputs []tensor.Tensor

// ErrClosed is returned by Forward after Close.
var ErrClosed = errors.New("torchscript: module is closed")

// Module is a loaded TorchScript module. Forward may be called from many
// goroutines at once; Close waits for running calls to finish.
type Module struct {
	lib     *shim
	mu      sync.RWMutex // Forward holds it shared, Close exclusively
	ptr     *C.eas_ts_module
	inputs  []Arg
	returns string
	device  string
	threads int // Options.Threads: sizes the torch threads at the first call
}

// Options are Load's settings.
type Options struct {
	// Threads > 0 sets libtorch's intra-op thread count, which is
	// process-wide: it applies to every module (the last setting wins); 0
	// leaves it alone.
	Threads int
	// Device is "cpu" (or "") or "cuda:N". A CUDA device needs a shim built
	// against a CUDA-enabled libtorch (TORCH_DIR=... build-torchshim.sh).
	Device string
	// Optimize is one of Optimizations: "" or "none" runs the module as
	// saved (PyTorch's exact numerics); "freeze" is torch.jit.freeze;
	// "inference" adds torch.jit.optimize_for_inference (conv-BatchNorm
	// folding, fusions): several times faster on convolutional networks,
	// with float results that differ from the saved module's in the last
	// digits.
	Optimize string
}

// Optimizations are the values of Options.Optimize.
var Optimizations = []string{"none", "freeze", "inference"}

// CheckOptimize says whether v is a value of Options.Optimize ("" is none),
// for config parsers to refuse a bad one before any load.
func CheckOptimize(v string) error {
	if _, ok := optimizeCodes[v]; !ok {
		return fmt.Errorf("must be one of %s, got %q", strings.Join(Optimizations, ", "), v)
	}
	return nil
}

var optimizeCodes = map[string]C.int{
	"": C.EAS_TS_OPT_NONE, "none": C.EAS_TS_OPT_NONE,
	"freeze": C.EAS_TS_OPT_FREEZE, "inference": C.EAS_TS_OPT_INFERENCE,
}

// Load reads the TorchScript file at path onto opts.Device in eval mode. A
// missing shim fails with an error wrapping ErrLibrary. A file libtorch
// cannot load fails naming the file's format version and the runtime's.
func Load(path string, opts Options) (*Module, error) {
	lib, err := openShim()
	if err != nil {
		return nil, err
	}
	if opts.Threads > 0 {
		C.call_set_num_threads(lib.setNumThreads, C.int(opts.Threads))
	}
	device := opts.Device
	if device == "" {
		device = "cpu"
	}
	if err := CheckOptimize(opts.Optimize); err != nil {
		return nil, fmt.Errorf("torchscript: optimize: %w", err)
	}
	opt := optimizeCodes[opts.Optimize]
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	cdev := C.CString(device)
	defer C.free(unsafe.Pointer(cdev))
	var cerr *C.char
	var ptr *C.eas_ts_module
	onTorchThread(opts.Threads, func() { ptr = C.call_load(lib.load, cpath, cdev, opt, &cerr) })
	if ptr == nil {
		msg := lib.takeError(cerr)
		if v, ok := FileFormatVersion(path); ok {
			msg += fmt.Sprintf("; the file has TorchScript format version %d, this libtorch %s reads up to %d", v, lib.torchVersion, lib.maxFileVersion)
			if v > lib.maxFileVersion {
				msg += ": re-save it with PyTorch " + lib.torchVersion + " or build the shim against a newer libtorch (TORCH_DIR=... scripts/build-torchshim.sh)"
			}
		}
		return nil, errors.New("torchscript: " + msg)
	}
	m := &Module{lib: lib, ptr: ptr, device: device, threads: opts.Threads}
	m.returns = C.GoString(C.call_mod_str(lib.returnType, ptr))
	n := int(C.call_num_args(lib.numArgs, ptr))
	for i := range n {
		m.inputs = append(m.inputs, Arg{
			Name: C.GoString(C.call_arg_str(lib.argName, ptr, C.int(i))),
			Type: C.GoString(C.call_arg_str(lib.argType, ptr, C.int(i))),
		})
	}
	return m, nil
}

// Inputs describes forward's arguments, self excluded, in order.
func (m *Module) Inputs() []Arg {
	return append([]Arg(nil), m.inputs...)
}

// Device is the device the module runs on ("cpu", "cuda:0", ...).
func (m *Module) Device() string { return m.device }

// Returns is forward's declared return type in TorchScript spelling, e.g.
// "Tensor", "Tuple[Tensor, Tensor]" or "Dict[str, Tensor]".
func (m *Module) Returns() string { return m.returns }

// OutputNames are the names Forward will give its outputs, when the return
// type fixes them: output__0 for a Tensor (or int, float, bool), output__0 ...
// output__{n-1} for a tuple of n. A list or a Dict has names known only from
// a run: ok is false.
func (m *Module) OutputNames() (names []string, ok bool) {
	r := m.returns
	if scalarReturn(r) {
		return []string{"output__0"}, true
	}
	inner, isTuple := strings.CutPrefix(r, "Tuple[")
	if !isTuple || !strings.HasSuffix(inner, "]") {
		return nil, false
	}
	elems := strings.Split(strings.TrimSuffix(inner, "]"), ", ")
	for i, e := range elems {
		if !scalarReturn(e) {
			return nil, false // a nested container: refused at run time
		}
		names = append(names, fmt.Sprintf("output__%d", i))
	}
	return names, true
}

func scalarReturn(t string) bool {
	switch t {
	case "Tensor", "int", "float", "bool":
		return true
	}
	return false
}

var dtypeCodes = map[tensor.DType]C.int{
	tensor.Bool:     C.EAS_TS_BOOL,
	tensor.Uint8:    C.EAS_TS_UINT8,
	tensor.Int8:     C.EAS_TS_INT8,
	tensor.Int16:    C.EAS_TS_INT16,
	tensor.Int32:    C.EAS_TS_INT32,
	tensor.Int64:    C.EAS_TS_INT64,
	tensor.Float16:  C.EAS_TS_FLOAT16,
	tensor.BFloat16: C.EAS_TS_BFLOAT16,
	tensor.Float32:  C.EAS_TS_FLOAT32,
	tensor.Float64:  C.EAS_TS_FLOAT64,
}

func dtypeOf(code C.int) (tensor.DType, bool) {
	for d, c := range dtypeCodes {
		if c == code {
			return d, true
		}
	}
	return tensor.Invalid, false
}

// Forward runs forward on inputs, passed positionally in order (their names
// are not used). The inputs are copied in and not kept. Outputs are
// freshly allocated.
func (m *Module) Forward(inputs []tensor.Tensor) (Outputs, error) {
	// Validate before taking C memory.
	for i := range inputs {
		in := &inputs[i]
		if _, ok := dtypeCodes[in.DType]; !ok {
			return nil, fmt.Errorf("torchscript: input %d (%s): dtype %s is not supported", i, in.Name, in.DType)
		}
		for _, d := range in.Shape {
			if d < 0 {
				return nil, fmt.Errorf("torchscript: input %d (%s): negative dimension in shape %v", i, in.Name, in.Shape)
			}
		}
		if want := in.NumElements() * int64(in.DType.Size()); int64(len(in.Data)) != want {
			return nil, fmt.Errorf("torchscript: input %d (%s): %d bytes of data, shape %v of %s needs %d",
				i, in.Name, len(in.Data), in.Shape, in.DType, want)
		}
	}

	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return nil, ErrClosed
	}

	// The input descriptors and shapes live in C memory; the data stays in
	// Go memory, pinned for the call, so it is copied only once (by the shim).
	n := len(inputs)
	var cin *C.eas_ts_input
	var shapes *C.int64_t
	totalDims := 0
	for i := range inputs {
		totalDims += len(inputs[i].Shape)
	}
	if n > 0 {
		cin = (*C.eas_ts_input)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.eas_ts_input{}))))
		defer C.free(unsafe.Pointer(cin))
	}
	if totalDims > 0 {
		shapes = (*C.int64_t)(C.calloc(C.size_t(totalDims), 8))
		defer C.free(unsafe.Pointer(shapes))
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	descs := unsafe.Slice(cin, n)
	dims := unsafe.Slice(shapes, totalDims)
	off := 0
	for i := range inputs {
		in := &inputs[i]
		d := &descs[i]
		d.dtype = dtypeCodes[in.DType]
		d.ndim = C.int(len(in.Shape))
		if len(in.Shape) > 0 {
			d.shape = &dims[off]
			for j, s := range in.Shape {
				dims[off+j] = C.int64_t(s)
			}
			off += len(in.Shape)
		}
		if len(in.Data) > 0 {
			pin.Pin(&in.Data[0])
			d.data = unsafe.Pointer(&in.Data[0])
			d.nbytes = C.size_t(len(in.Data))
		}
	}

	var out *C.eas_ts_output
	var nout C.int
	var cerr *C.char
	var rc C.int
	onTorchThread(m.threads, func() { rc = C.call_forward(m.lib.forward, m.ptr, cin, C.int(n), &out, &nout, &cerr) })
	if rc != 0 {
		return nil, newForwardError(m.lib.takeError(cerr))
	}
	defer C.call_free_outputs(m.lib.freeOutputs, out, nout)
	res := make(Outputs, int(nout))
	for i, o := range unsafe.Slice(out, int(nout)) {
		dt, ok := dtypeOf(o.dtype)
		if !ok {
			return nil, fmt.Errorf("torchscript: output %d has unknown dtype code %d", i, int(o.dtype))
		}
		t := tensor.Tensor{DType: dt, Shape: make([]int64, int(o.ndim))}
		if o.name != nil {
			t.Name = C.GoString(o.name)
		} else {
			t.Name = fmt.Sprintf("output__%d", i)
		}
		for j, s := range unsafe.Slice(o.shape, int(o.ndim)) {
			t.Shape[j] = int64(s)
		}
		t.Data = C.GoBytes(o.data, C.int(o.nbytes))
		if int64(len(t.Data)) != t.NumElements()*int64(dt.Size()) {
			return nil, fmt.Errorf("torchscript: output %d: %d bytes for shape %v of %s", i, len(t.Data), t.Shape, dt)
		}
		res[i] = t
	}
	return res, nil
}

// Close releases the module after running Forward calls return; later calls
// fail with ErrClosed. Closing twice is harmless.
func (m *Module) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr != nil {
		C.call_free(m.lib.free, m.ptr)
		m.ptr = nil
	}
	return nil
}

// ForwardError is forward raising. Its Error is the exception's own message
// only: libtorch's full text also carries the TorchScript tracebacks (the
// model's saved code and the exporter's source paths), which belong in a
// server log, not in an answer to a client. Detail has the full text.
type ForwardError struct {
	brief, detail string
}

func (e *ForwardError) Error() string { return "torchscript: " + e.brief }

// Detail is libtorch's whole message, tracebacks included.
func (e *ForwardError) Detail() string { return e.detail }

// exceptionLine matches the line that names the exception after a
// TorchScript traceback, e.g. "RuntimeError: mat1 and mat2 shapes ...".
var exceptionLine = regexp.MustCompile(`^(?:builtins\.)?[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)`)

func newForwardError(msg string) *ForwardError {
	e := &ForwardError{brief: msg, detail: msg}
	if !strings.Contains(msg, "Traceback of TorchScript") {
		return e
	}
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if exceptionLine.MatchString(lines[i]) {
			e.brief = "forward: " + strings.TrimSpace(strings.Join(lines[i:], "\n"))
			return e
		}
	}
	// No exception line: keep the message up to the traceback.
	head, _, _ := strings.Cut(msg, "Traceback of TorchScript")
	if head = strings.TrimSpace(head); head != "" {
		e.brief = head
	}
	return e
}
