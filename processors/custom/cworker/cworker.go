// Package cworker is the worker process of a processor_type "cpp" service:
// it opens the user's shared library, calls its initialize once and its
// process once per request, and speaks package frame with the server over
// the socket it inherits as file descriptor 3.
//
// The library exports EAS's C ABI:
//
//	void *initialize(const char *model_entry, const char *model_config, int *state);
//	int process(void *model, const void *input, int input_size, void **output, int *output_size);
//
// initialize sets *state to 0 on success. process returns the HTTP status (0
// means 200) and sets *output to a buffer it allocated with malloc, which
// this worker frees with free after copying it; input belongs to the worker
// and is valid only during the call. process is called from several threads
// at once (up to metadata.rpc.worker_threads), as EAS does, so it must be
// thread-safe.
//
// An *output_size below 0 or past the end of the buffer (as
// malloc_usable_size tells) answers 500 saying so.
//
// The worker is a separate process so that a crash in user code costs only
// the requests in flight: the server sees the process end, fails those
// requests and starts a new worker. A fatal signal in user code (SIGSEGV,
// SIGABRT, ...) is reported as one line on stderr (CrashMarker), with the
// fault address and where the pc was, before the process dies by it.
package cworker

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>

typedef void *(*eas_initialize_fn)(const char *, const char *, int *);
typedef int (*eas_process_fn)(void *, const void *, int, void **, int *);

// Set while a thread runs user code, for the crash handler (crash.go).
extern __thread int eas_in_user;

static void *eas_call_initialize(void *fn, const char *entry, const char *config, int *state) {
	eas_in_user = 1;
	void *m = ((eas_initialize_fn)fn)(entry, config, state);
	eas_in_user = 0;
	return m;
}

static int eas_call_process(void *fn, void *model, const void *in, int in_size, void **out, int *out_size) {
	eas_in_user = 1;
	int status = ((eas_process_fn)fn)(model, in, in_size, out, out_size);
	eas_in_user = 0;
	return status;
}

static size_t eas_usable_size(void *p) { return malloc_usable_size(p); }

static void *eas_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *eas_dlerror(void) { return dlerror(); }
*/
import "C"

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"unsafe"

	"github.com/eas-server/eas-server/processors/custom/frame"
)

// EnvMode is the environment variable that makes the eas-server binary (or
// a test binary's TestMain) run as a C worker: the server sets it to "cpp".
const EnvMode = "EAS_SERVER_WORKER"

// SocketFD is the descriptor the worker inherits its socket as.
const SocketFD = 3

// maxRequest bounds one request frame: the server's own body limit is far
// below it; this only keeps a corrupt stream from allocating without bound.
const maxRequest = 1 << 30

// Main runs the worker until the server closes the socket, and returns the
// process's exit code.
func Main() int {
	if err := installCrashHandler(); err != nil {
		fmt.Fprintln(os.Stderr, "eas-server cpp worker:", err)
		return 2
	}
	f := os.NewFile(SocketFD, "eas-worker-socket")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eas-server cpp worker: descriptor 3 is not the server's socket:", err)
		return 2
	}
	if err := serve(conn); err != nil {
		fmt.Fprintln(os.Stderr, "eas-server cpp worker:", err)
		return 1
	}
	return 0
}

type library struct {
	model   unsafe.Pointer
	process unsafe.Pointer
}

func serve(conn net.Conn) error {
	defer conn.Close()
	w := frame.NewWriter(conn)
	r := bufio.NewReaderSize(conn, 64<<10)
	hello, _ := json.Marshal(frame.HelloInfo{PID: os.Getpid(), Runtime: "cpp", Processes: 1})
	if err := w.Send(frame.Hello, 0, hello); err != nil {
		return err
	}
	f, err := frame.Read(r, maxRequest)
	if err != nil {
		return fmt.Errorf("reading init: %w", err)
	}
	if f.Kind != frame.Init {
		return fmt.Errorf("expected an init frame, got %q", f.Kind)
	}
	var info frame.InitInfo
	if err := json.Unmarshal(f.Payload, &info); err != nil {
		return fmt.Errorf("init frame: %w", err)
	}
	lib, err := open(info)
	if err != nil {
		return w.Send(frame.Fail, 0, []byte(err.Error()))
	}
	if err := w.Send(frame.Ready, 0); err != nil {
		return err
	}
	threads := max(info.Threads, 1)
	sem := make(chan struct{}, threads)
	for {
		f, err := frame.Read(r, maxRequest)
		if err != nil {
			return nil // the server closed the socket: stop
		}
		if f.Kind != frame.Request {
			return fmt.Errorf("expected a request frame, got %q", f.Kind)
		}
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			status, body := lib.call(f.Payload)
			var st [4]byte
			st[0], st[1], st[2], st[3] = byte(status>>24), byte(status>>16), byte(status>>8), byte(status)
			w.Send(frame.Answer, f.ID, st[:], body) //nolint:errcheck // a broken socket ends the read loop
		}()
	}
}

// open loads the library and runs its initialize.
func open(info frame.InitInfo) (*library, error) {
	path := C.CString(info.Entry)
	defer C.free(unsafe.Pointer(path))
	h := C.eas_dlopen(path)
	if h == nil {
		return nil, fmt.Errorf("dlopen %s: %s", info.Entry, C.GoString(C.eas_dlerror()))
	}
	sym := func(name string) (unsafe.Pointer, error) {
		n := C.CString(name)
		defer C.free(unsafe.Pointer(n))
		p := C.dlsym(h, n)
		if p == nil {
			return nil, fmt.Errorf("%s does not export %s(); a cpp processor exports initialize() and process() with C linkage (extern \"C\" in C++)", info.Entry, name)
		}
		return p, nil
	}
	initFn, err := sym("initialize")
	if err != nil {
		return nil, err
	}
	procFn, err := sym("process")
	if err != nil {
		return nil, err
	}
	noteLibrary(initFn)
	entry, config := C.CString(info.ModelEntry), C.CString(info.ModelConfig)
	defer C.free(unsafe.Pointer(entry))
	defer C.free(unsafe.Pointer(config))
	var state C.int
	model := C.eas_call_initialize(initFn, entry, config, &state)
	if state != 0 {
		return nil, fmt.Errorf("initialize(%q, model_config) set state %d (0 means loaded); see the worker's log above for its own message", info.ModelEntry, int(state))
	}
	return &library{model: model, process: procFn}, nil
}

// call runs process on one input and returns the status and a Go copy of
// the output, which it frees.
func (l *library) call(in []byte) (int, []byte) {
	if len(in) > math.MaxInt32 {
		return 413, []byte("request body over 2 GiB: the C ABI takes an int size")
	}
	var out unsafe.Pointer
	var outSize C.int
	var inPtr unsafe.Pointer
	if len(in) > 0 {
		inPtr = unsafe.Pointer(&in[0])
	}
	status := int(C.eas_call_process(l.process, l.model, inPtr, C.int(len(in)), &out, &outSize))
	bad := badOutput(out, int(outSize))
	var body []byte
	if bad == "" && outSize > 0 {
		body = C.GoBytes(out, outSize)
	}
	if out != nil {
		C.free(out)
	}
	if bad != "" {
		return 500, []byte(bad)
	}
	switch {
	case status == 0:
		status = 200
	case status < 100 || status > 599:
		body = fmt.Appendf(nil, "process() returned %d, which is not an HTTP status; return 0 or 200 on success, or an HTTP error code", status)
		status = 500
	}
	return status, body
}

// badOutput says what is wrong with the output process() returned, or "":
// a size below 0, or past the buffer (a NULL one, or one shorter than the
// size, as malloc_usable_size tells: the ABI has process allocate it with
// malloc).
func badOutput(out unsafe.Pointer, size int) string {
	switch {
	case size < 0:
		return fmt.Sprintf("process() set *output_size to %d, which is not a length; set it to the number of bytes written at *output (0 for an empty answer)", size)
	case size > 0 && out == nil:
		return fmt.Sprintf("process() set *output_size to %d but left *output NULL; point *output at a buffer allocated with malloc, or set *output_size to 0", size)
	case size > 0:
		if n := int(C.eas_usable_size(out)); size > n {
			return fmt.Sprintf("process() set *output_size to %d, past the end of the %d-byte buffer *output points to; set it to the number of bytes written there (the buffer must come from malloc)", size, n)
		}
	}
	return ""
}
