// Package torchscript runs PyTorch TorchScript modules (torch.jit.save files)
// on the CPU through libtorch. libtorch is reached through a small C shim,
// libeas_torchshim.so (torchscript/shim, built by scripts/build-torchshim.sh),
// that this package opens with dlopen on the first Load: the server binary
// does not link libtorch or the shim, so everything but TorchScript works on a
// machine without them, and a missing library is an error of the Load only.
//
// libtorch's intra-op thread pool is process-wide: the threads argument of
// Load sets it for every module in the process (the last setting wins).
package torchscript

/*
#cgo LDFLAGS: -ldl
#include "trampoline.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/eas-server/eas-server/internal/nativelib"
)

// LibraryFile is the shim's file name; scripts/build-torchshim.sh installs it
// in third_party/torchshim/.
const LibraryFile = "libeas_torchshim.so"

// EnvLibraryPath names the environment variable that overrides where the shim
// is found (a file, or the directory holding it).
const EnvLibraryPath = "EAS_TORCHSHIM_LIB"

// ErrLibrary marks a failure to find or open the shim (or libtorch under it).
var ErrLibrary = errors.New("TorchScript needs libtorch: run scripts/build-torchshim.sh (make build does), or set " + EnvLibraryPath)

// shim holds the dlsym'd entry points of an opened libeas_torchshim.so.
type shim struct {
	path                                               string
	torchVersion                                       string
	maxFileVersion, cudaDevices                        int
	setNumThreads, load, numArgs, argName, argType     unsafe.Pointer
	forward, freeOutputs, freeString, free, abiVersion unsafe.Pointer
	returnType, getNumThreads                          unsafe.Pointer
}

var (
	libMu     sync.Mutex
	libLoaded *shim // nil until the first successful open; a failure is retried
)

// librarySearch says where the shim is looked for: $EAS_TORCHSHIM_LIB alone
// when set (the file or its directory), else third_party/torchshim/ beside
// or above the executable and the working directory.
func librarySearch() nativelib.Search {
	return nativelib.Search{Explicit: os.Getenv(EnvLibraryPath), Dir: "torchshim", File: LibraryFile}
}

// openShim opens the shim once per process. A failure is not remembered, so
// building the shim fixes the next Load without a restart.
func openShim() (*shim, error) {
	libMu.Lock()
	defer libMu.Unlock()
	if libLoaded != nil {
		return libLoaded, nil
	}
	path, cands, explicit := librarySearch().Find()
	if path == "" {
		if explicit {
			return nil, fmt.Errorf("%w (%s=%s does not exist)", ErrLibrary, EnvLibraryPath, cands[0])
		}
		return nil, fmt.Errorf("%w (%s not found in %s)", ErrLibrary, LibraryFile, strings.Join(cands, ", "))
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	h := C.open_lib(cpath, &cerr)
	if h == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return nil, fmt.Errorf("%w (dlopen %s: %s)", ErrLibrary, path, msg)
	}
	s := &shim{path: path}
	// A failed lookup keeps the handle open: dlclose of libtorch is unsafe
	// (static destructors, thread pools), and it happens once per process.
	for _, sym := range []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"eas_ts_abi_version", &s.abiVersion},
		{"eas_ts_torch_version", nil},
		{"eas_ts_max_file_version", nil},
		{"eas_ts_cuda_device_count", nil},
		{"eas_ts_return_type", &s.returnType},
		{"eas_ts_get_num_threads", &s.getNumThreads},
		{"eas_ts_set_num_threads", &s.setNumThreads},
		{"eas_ts_load", &s.load},
		{"eas_ts_num_args", &s.numArgs},
		{"eas_ts_arg_name", &s.argName},
		{"eas_ts_arg_type", &s.argType},
		{"eas_ts_forward", &s.forward},
		{"eas_ts_free_outputs", &s.freeOutputs},
		{"eas_ts_free_string", &s.freeString},
		{"eas_ts_free", &s.free},
	} {
		cname := C.CString(sym.name)
		p := C.lookup(h, cname)
		C.free(unsafe.Pointer(cname))
		if p == nil {
			return nil, fmt.Errorf("%w (%s has no symbol %s: rebuild it with scripts/build-torchshim.sh)", ErrLibrary, path, sym.name)
		}
		switch {
		case sym.dst != nil:
			*sym.dst = p
		case sym.name == "eas_ts_torch_version":
			s.torchVersion = C.GoString(C.call_torch_version(p))
		case sym.name == "eas_ts_max_file_version":
			s.maxFileVersion = int(C.call_int(p))
		case sym.name == "eas_ts_cuda_device_count":
			s.cudaDevices = int(C.call_int(p))
		}
		if sym.name == "eas_ts_abi_version" {
			// Checked first: an older shim lacks the newer symbols.
			if v := int(C.call_abi_version(p)); v != C.EAS_TS_ABI_VERSION {
				return nil, fmt.Errorf("%w (%s has ABI version %d, this binary needs %d: rebuild it with scripts/build-torchshim.sh)",
					ErrLibrary, path, v, C.EAS_TS_ABI_VERSION)
			}
		}
	}
	libLoaded = s
	return s, nil
}

// Runtime describes the libtorch behind the shim.
type Runtime struct {
	Library        string // the shim's path
	TorchVersion   string // the libtorch it was built against, e.g. "1.13.1"
	MaxFileVersion int    // the newest TorchScript file format version it reads
	// CUDADevices is the number of GPUs libtorch sees: -1 when it was
	// built without CUDA (Debian's libtorch), 0 when it sees none.
	CUDADevices int
}

// OpenRuntime opens the shim (once per process) and describes it. A missing
// shim is an error wrapping ErrLibrary.
func OpenRuntime() (Runtime, error) {
	s, err := openShim()
	if err != nil {
		return Runtime{}, err
	}
	return Runtime{Library: s.path, TorchVersion: s.torchVersion, MaxFileVersion: s.maxFileVersion, CUDADevices: s.cudaDevices}, nil
}

// Threads is libtorch's intra-op thread count now: process-wide, the last
// Options.Threads set by any Load. 0 before the shim is opened.
func Threads() int {
	libMu.Lock()
	s := libLoaded
	libMu.Unlock()
	if s == nil {
		return 0
	}
	return int(C.call_int(s.getNumThreads))
}

// LoadedLibrary returns the path of the shim in use and the libtorch version
// it was built against, or "", "" before the first successful Load.
func LoadedLibrary() (path, torchVersion string) {
	libMu.Lock()
	defer libMu.Unlock()
	if libLoaded == nil {
		return "", ""
	}
	return libLoaded.path, libLoaded.torchVersion
}

// takeError converts and releases a shim error string.
func (s *shim) takeError(cerr *C.char) string {
	if cerr == nil {
		return "unknown error"
	}
	msg := C.GoString(cerr)
	C.call_free_string(s.freeString, cerr)
	return msg
}
