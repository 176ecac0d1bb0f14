package libtf

/*
#include "capi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

// Options are Load's settings.
type Options struct {
	// Tags pick the MetaGraph; nil means {"serve"}.
	Tags []string
	// IntraOpThreads and InterOpThreads size TensorFlow's thread pools for
	// this session (ConfigProto's intra_op/inter_op_parallelism_threads);
	// 0 leaves TensorFlow's default (every core).
	IntraOpThreads, InterOpThreads int
}

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("libtf: session is closed")

// Session is a SavedModel loaded into a TensorFlow session. Run may be
// called from many goroutines at once (TF_SessionRun is thread-safe);
// Close waits for running calls.
type Session struct {
	lib   *api
	mu    sync.RWMutex
	sess  *C.TF_Session
	graph *C.TF_Graph
}

// Load opens the library when needed and loads the SavedModel in dir.
func Load(dir string, o Options) (*Session, error) {
	a, err := open()
	if err != nil {
		return nil, err
	}
	tags := o.Tags
	if tags == nil {
		tags = []string{"serve"}
	}
	ctags := make([]*C.char, len(tags))
	for i, t := range tags {
		ctags[i] = C.CString(t)
	}
	defer func() {
		for _, p := range ctags {
			C.free(unsafe.Pointer(p))
		}
	}()
	ctagv := (**C.char)(C.malloc(C.size_t(len(ctags)+1) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(ctagv))
	copy(unsafe.Slice(ctagv, len(ctags)+1), ctags)
	var cfg []byte
	if o.IntraOpThreads > 0 {
		cfg = protowire.AppendTag(cfg, 2, protowire.VarintType)
		cfg = protowire.AppendVarint(cfg, uint64(o.IntraOpThreads))
	}
	if o.InterOpThreads > 0 {
		cfg = protowire.AppendTag(cfg, 5, protowire.VarintType)
		cfg = protowire.AppendVarint(cfg, uint64(o.InterOpThreads))
	}
	var ccfg unsafe.Pointer
	if len(cfg) > 0 {
		ccfg = C.CBytes(cfg)
		defer C.free(ccfg)
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	g := C.eas_tf_new_graph(a.c)
	var msg *C.char
	s := C.eas_tf_load(a.c, ccfg, C.size_t(len(cfg)), cdir, ctagv, C.int(len(tags)), g, &msg)
	if s == nil {
		C.eas_tf_delete_graph(a.c, g)
		m := C.GoString(msg)
		C.free(unsafe.Pointer(msg))
		return nil, fmt.Errorf("libtensorflow %s: loading the SavedModel %s: %s", a.version, dir, m)
	}
	return &Session{lib: a, sess: s, graph: g}, nil
}

// Close closes the session and frees the graph.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		C.eas_tf_close(s.lib.c, s.sess, s.graph)
		s.sess, s.graph = nil, nil
	}
	return nil
}

// Feed is one input: a graph tensor name ("serving_default_x:0") and the
// value to feed it.
type Feed struct {
	Name  string
	Value tensor.Tensor
}

// output resolves "op:index" (":0" when absent) in the graph.
func (s *Session) output(name string) (C.TF_Output, error) {
	op, idx := name, 0
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		n, err := strconv.Atoi(name[i+1:])
		if err != nil {
			return C.TF_Output{}, fmt.Errorf("tensor name %q: bad output index", name)
		}
		op, idx = name[:i], n
	}
	cop := C.CString(op)
	defer C.free(unsafe.Pointer(cop))
	o := C.eas_tf_op(s.lib.c, s.graph, cop)
	if o == nil {
		return C.TF_Output{}, fmt.Errorf("the graph has no operation %q", op)
	}
	if n := int(C.eas_tf_op_outputs(s.lib.c, o)); idx < 0 || idx >= n {
		return C.TF_Output{}, fmt.Errorf("operation %q has %d outputs, not %d", op, n, idx+1)
	}
	return C.TF_Output{oper: o, index: C.int(idx)}, nil
}

// Check says whether every name is a tensor of the loaded graph.
func (s *Session) Check(names ...string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.sess == nil {
		return ErrClosed
	}
	for _, n := range names {
		if _, err := s.output(n); err != nil {
			return err
		}
	}
	return nil
}

// Run feeds inputs and fetches the tensors named by fetches ("op:index"),
// returned in that order, each named as fetched.
func (s *Session) Run(inputs []Feed, fetches []string) ([]tensor.Tensor, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.sess == nil {
		return nil, ErrClosed
	}
	a := s.lib.c
	nin, nout := len(inputs), len(fetches)
	// The TF_Output and TF_Tensor* arrays live in C memory: they hold C
	// pointers and are passed to C whole.
	ptrSize := C.size_t(unsafe.Sizeof(uintptr(0)))
	outSize := C.size_t(unsafe.Sizeof(C.TF_Output{}))
	cin := (*C.TF_Output)(C.calloc(C.size_t(max(nin, 1)), outSize))
	defer C.free(unsafe.Pointer(cin))
	cinv := (**C.TF_Tensor)(C.calloc(C.size_t(max(nin, 1)), ptrSize))
	defer C.free(unsafe.Pointer(cinv))
	cout := (*C.TF_Output)(C.calloc(C.size_t(max(nout, 1)), outSize))
	defer C.free(unsafe.Pointer(cout))
	coutv := (**C.TF_Tensor)(C.calloc(C.size_t(max(nout, 1)), ptrSize))
	defer C.free(unsafe.Pointer(coutv))
	ins, invs := unsafe.Slice(cin, max(nin, 1)), unsafe.Slice(cinv, max(nin, 1))
	outs, outvs := unsafe.Slice(cout, max(nout, 1)), unsafe.Slice(coutv, max(nout, 1))
	defer func() {
		for i := range nin {
			C.eas_tf_delete_tensor(a, invs[i])
		}
		for i := range nout {
			C.eas_tf_delete_tensor(a, outvs[i])
		}
	}()
	for i, f := range inputs {
		o, err := s.output(f.Name)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", f.Name, err)
		}
		ins[i] = o
		t, err := s.lib.newTensor(f.Value)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", f.Name, err)
		}
		invs[i] = t
	}
	for i, name := range fetches {
		o, err := s.output(name)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		outs[i] = o
	}
	var msg *C.char
	code := C.eas_tf_run(a, s.sess, cin, cinv, C.int(nin), cout, coutv, C.int(nout), &msg)
	runtime.KeepAlive(inputs)
	if code != 0 {
		m := C.GoString(msg)
		C.free(unsafe.Pointer(msg))
		return nil, &RunError{Code: int(code), Msg: m}
	}
	res := make([]tensor.Tensor, nout)
	for i, name := range fetches {
		t, err := s.lib.toTensor(name, outvs[i])
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		res[i] = t
	}
	return res, nil
}

// RunError is TF_SessionRun's failure: TensorFlow's status code (3 =
// INVALID_ARGUMENT, ...) and message.
type RunError struct {
	Code int
	Msg  string
}

func (e *RunError) Error() string { return "libtensorflow: " + e.Msg }

// InvalidArgument says whether TensorFlow blamed the inputs
// (INVALID_ARGUMENT, OUT_OF_RANGE, FAILED_PRECONDITION on a feed).
func (e *RunError) InvalidArgument() bool { return e.Code == 3 || e.Code == 11 }

// newTensor copies t into a new TF_Tensor.
func (a *api) newTensor(t tensor.Tensor) (*C.TF_Tensor, error) {
	dt, ok := savedmodel.TFDType(t.DType)
	if !ok {
		return nil, fmt.Errorf("dtype %s has no TensorFlow type", t.DType)
	}
	n := t.NumElements()
	dims := make([]C.int64_t, max(len(t.Shape), 1))
	for i, d := range t.Shape {
		dims[i] = C.int64_t(d)
	}
	var size C.size_t
	if t.DType == tensor.String {
		if int64(len(t.Strings)) != n {
			return nil, fmt.Errorf("%d strings for shape %v", len(t.Strings), t.Shape)
		}
		size = C.size_t(n) * C.size_t(unsafe.Sizeof(C.TF_TString{}))
	} else {
		if int64(len(t.Data)) != n*int64(t.DType.Size()) {
			return nil, fmt.Errorf("%d bytes for %d %s elements", len(t.Data), n, t.DType)
		}
		size = C.size_t(len(t.Data))
	}
	ct := C.eas_tf_alloc(a.c, C.int(dt), &dims[0], C.int(len(t.Shape)), size)
	if ct == nil {
		return nil, errors.New("TF_AllocateTensor failed")
	}
	data := C.eas_tf_data(a.c, ct)
	if t.DType == tensor.String {
		for i, s := range t.Strings {
			var p *C.char
			if len(s) > 0 {
				p = (*C.char)(unsafe.Pointer(&s[0]))
			}
			C.eas_tf_set_string(a.c, data, C.int64_t(i), p, C.size_t(len(s)))
		}
	} else if size > 0 {
		copy(unsafe.Slice((*byte)(data), int(size)), t.Data)
	}
	return ct, nil
}

// toTensor copies a TF_Tensor out.
func (a *api) toTensor(name string, ct *C.TF_Tensor) (tensor.Tensor, error) {
	if ct == nil {
		return tensor.Tensor{}, errors.New("TensorFlow returned no tensor")
	}
	dt, ok := savedmodel.DTypeOf(typespb.DataType(C.eas_tf_type(a.c, ct)))
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("TensorFlow dtype %d is not supported", int(C.eas_tf_type(a.c, ct)))
	}
	nd := int(C.eas_tf_num_dims(a.c, ct))
	shape := make([]int64, nd)
	n := int64(1)
	for i := range shape {
		shape[i] = int64(C.eas_tf_dim(a.c, ct, C.int(i)))
		n *= shape[i]
	}
	data := C.eas_tf_data(a.c, ct)
	t := tensor.Tensor{Name: name, DType: dt, Shape: shape}
	if dt == tensor.String {
		t.Strings = make([][]byte, n)
		for i := range n {
			var l C.size_t
			p := C.eas_tf_get_string(a.c, data, C.int64_t(i), &l)
			t.Strings[i] = C.GoBytes(unsafe.Pointer(p), C.int(l))
		}
		return t, nil
	}
	size := int(C.eas_tf_byte_size(a.c, ct))
	if int64(size) != n*int64(dt.Size()) {
		return tensor.Tensor{}, fmt.Errorf("TensorFlow returned %d bytes for %d %s elements", size, n, dt)
	}
	t.Data = C.GoBytes(data, C.int(size))
	return t, nil
}
