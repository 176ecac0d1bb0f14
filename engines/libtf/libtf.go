// Package libtf runs TensorFlow SavedModels on TensorFlow itself, through
// TensorFlow's C API (TF_LoadSessionFromSavedModel, TF_SessionRun, ...) in
// a library found at run time: libtensorflow_cc.so.2 of a pip-installed
// TensorFlow (the tensorflow / tensorflow-cpu wheels export the C API from it
// and its libtensorflow_framework.so.2), or a libtensorflow build.
//
// Nothing links libtensorflow: the library is opened with dlopen on the first
// Open and each C API function is looked up with dlsym; their prototypes are
// declared in capi.h (the C API is a stable C ABI). The server binary keeps
// depending on libc alone (`ldd eas-server`), and a machine without
// TensorFlow fails only the services that ask for it. (Bindings such as
// github.com/wamuir/graft declare `#cgo LDFLAGS: -ltensorflow`, which links
// the library at build time and would make every binary need it.)
package libtf

/*
#cgo LDFLAGS: -ldl
#include "capi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/eas-server/eas-server/internal/nativelib"
)

// LibraryFile is the library opened: it holds the C API's session
// functions and loads libtensorflow_framework.so.2 beside it.
const LibraryFile = "libtensorflow_cc.so.2"

// EnvLibraryPath names the environment variable that says where the
// library is (the file, or the directory holding it, e.g. a wheel's
// site-packages/tensorflow); when set it is the only place looked at.
const EnvLibraryPath = "EAS_TENSORFLOW_LIB"

// ErrLibrary marks a failure to find or open libtensorflow.
var ErrLibrary = errors.New("the libtensorflow runtime needs TensorFlow's library, libtensorflow_cc.so.2 of the tensorflow-cpu wheel " +
	"(bash scripts/python-venv.sh tensorflow makes a venv with the pinned one, where it is looked for); or set " + EnvLibraryPath + " to the file")

// explicit is the path SetLibraryPath set.
var explicit atomic.Pointer[string]

// SetLibraryPath sets where the library is (the file, or the directory
// holding it): the server's --tensorflow-lib. It takes precedence over
// EnvLibraryPath and is the only place looked at; "" unsets it. It applies
// to opens after it, so set it before the first load.
func SetLibraryPath(path string) { explicit.Store(&path) }

var (
	libMu  sync.Mutex
	libAPI *api // nil until the first successful open; a failure is retried
)

type api struct {
	path, version string
	c             *C.eas_tf_api   // in C memory: cgo calls take it whole
	opLibs        map[string]bool // op libraries loaded (real paths), under libMu
}

// Search says where the library is looked for: SetLibraryPath's path, else
// $EAS_TENSORFLOW_LIB, alone when set; else third_party/tensorflow/
// beside or above the executable and the working directory, then the
// tensorflow package of the Python site-packages folders SitePackages lists.
func Search() nativelib.Search {
	path := ""
	if p := explicit.Load(); p != nil {
		path = *p
	}
	if path == "" {
		path = os.Getenv(EnvLibraryPath)
	}
	var sys []string
	for _, dir := range SitePackages() {
		sys = append(sys, filepath.Join(dir, "tensorflow", LibraryFile))
	}
	return nativelib.Search{Explicit: path, Dir: "tensorflow", File: LibraryFile, System: sys}
}

// SitePackages lists, in order, the Python package folders searched for a
// pip-installed TensorFlow: the active virtual environment ($VIRTUAL_ENV),
// the environment scripts/python-venv.sh tensorflow makes
// (${EAS_PYVENV_DIR:-~/.cache/eas-server/pyvenv}/tensorflow), the user's
// (~/.local), then the system's (/usr/local/lib, /usr/lib). Globbing the
// folders costs nothing; no Python is started.
func SitePackages() []string {
	var roots []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		roots = append(roots, filepath.Join(v, "lib"))
	}
	pyvenv := os.Getenv("EAS_PYVENV_DIR")
	home, _ := os.UserHomeDir()
	if pyvenv == "" && home != "" {
		pyvenv = filepath.Join(home, ".cache", "eas-server", "pyvenv")
	}
	if pyvenv != "" {
		roots = append(roots, filepath.Join(pyvenv, "tensorflow", "lib"))
	}
	if home != "" {
		roots = append(roots, filepath.Join(home, ".local", "lib"))
	}
	roots = append(roots, "/usr/local/lib", "/usr/lib")
	var dirs []string
	for _, r := range roots {
		for _, sub := range []string{"site-packages", "dist-packages"} {
			m, _ := filepath.Glob(filepath.Join(r, "python3*", sub))
			dirs = append(dirs, m...)
		}
	}
	return dirs
}

// open opens the library once per process. A failure is not remembered, so
// installing TensorFlow fixes the next load without a restart.
func open() (*api, error) {
	libMu.Lock()
	defer libMu.Unlock()
	if libAPI != nil {
		return libAPI, nil
	}
	path, cands, explicit := Search().Find()
	if path == "" {
		if explicit {
			return nil, fmt.Errorf("%w (%s does not exist)", ErrLibrary, cands[0])
		}
		return nil, fmt.Errorf("%w (%s not found in %s)", ErrLibrary, LibraryFile, strings.Join(cands, ", "))
	}
	// TensorFlow logs every load at INFO to stderr; keep its warnings and
	// errors unless the operator chose a level.
	if _, ok := os.LookupEnv("TF_CPP_MIN_LOG_LEVEL"); !ok {
		os.Setenv("TF_CPP_MIN_LOG_LEVEL", "1")
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	h := C.eas_tf_open(cpath, &cerr)
	if h == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return nil, fmt.Errorf("%w (dlopen %s: %s)", ErrLibrary, path, msg)
	}
	a := &api{path: path, c: (*C.eas_tf_api)(C.calloc(1, C.size_t(unsafe.Sizeof(C.eas_tf_api{}))))}
	// A failed lookup keeps the handle open: unloading TensorFlow is not
	// safe (static registries, thread pools), and it happens once.
	syms := []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"TF_Version", (*unsafe.Pointer)(unsafe.Pointer(&a.c.Version))},
		{"TF_NewStatus", (*unsafe.Pointer)(unsafe.Pointer(&a.c.NewStatus))},
		{"TF_DeleteStatus", (*unsafe.Pointer)(unsafe.Pointer(&a.c.DeleteStatus))},
		{"TF_GetCode", (*unsafe.Pointer)(unsafe.Pointer(&a.c.GetCode))},
		{"TF_Message", (*unsafe.Pointer)(unsafe.Pointer(&a.c.Message))},
		{"TF_NewGraph", (*unsafe.Pointer)(unsafe.Pointer(&a.c.NewGraph))},
		{"TF_DeleteGraph", (*unsafe.Pointer)(unsafe.Pointer(&a.c.DeleteGraph))},
		{"TF_NewSessionOptions", (*unsafe.Pointer)(unsafe.Pointer(&a.c.NewSessionOptions))},
		{"TF_DeleteSessionOptions", (*unsafe.Pointer)(unsafe.Pointer(&a.c.DeleteSessionOptions))},
		{"TF_SetConfig", (*unsafe.Pointer)(unsafe.Pointer(&a.c.SetConfig))},
		{"TF_LoadSessionFromSavedModel", (*unsafe.Pointer)(unsafe.Pointer(&a.c.LoadSessionFromSavedModel))},
		{"TF_CloseSession", (*unsafe.Pointer)(unsafe.Pointer(&a.c.CloseSession))},
		{"TF_DeleteSession", (*unsafe.Pointer)(unsafe.Pointer(&a.c.DeleteSession))},
		{"TF_GraphOperationByName", (*unsafe.Pointer)(unsafe.Pointer(&a.c.GraphOperationByName))},
		{"TF_OperationNumOutputs", (*unsafe.Pointer)(unsafe.Pointer(&a.c.OperationNumOutputs))},
		{"TF_SessionRun", (*unsafe.Pointer)(unsafe.Pointer(&a.c.SessionRun))},
		{"TF_AllocateTensor", (*unsafe.Pointer)(unsafe.Pointer(&a.c.AllocateTensor))},
		{"TF_DeleteTensor", (*unsafe.Pointer)(unsafe.Pointer(&a.c.DeleteTensor))},
		{"TF_TensorType", (*unsafe.Pointer)(unsafe.Pointer(&a.c.TensorType))},
		{"TF_NumDims", (*unsafe.Pointer)(unsafe.Pointer(&a.c.NumDims))},
		{"TF_Dim", (*unsafe.Pointer)(unsafe.Pointer(&a.c.Dim))},
		{"TF_TensorByteSize", (*unsafe.Pointer)(unsafe.Pointer(&a.c.TensorByteSize))},
		{"TF_TensorData", (*unsafe.Pointer)(unsafe.Pointer(&a.c.TensorData))},
		{"TF_StringInit", (*unsafe.Pointer)(unsafe.Pointer(&a.c.StringInit))},
		{"TF_StringCopy", (*unsafe.Pointer)(unsafe.Pointer(&a.c.StringCopy))},
		{"TF_StringGetDataPointer", (*unsafe.Pointer)(unsafe.Pointer(&a.c.StringGetDataPointer))},
		{"TF_StringGetSize", (*unsafe.Pointer)(unsafe.Pointer(&a.c.StringGetSize))},
		{"TF_StringDealloc", (*unsafe.Pointer)(unsafe.Pointer(&a.c.StringDealloc))},
		{"TF_LoadLibrary", (*unsafe.Pointer)(unsafe.Pointer(&a.c.LoadLibrary))},
	}
	for _, s := range syms {
		cname := C.CString(s.name)
		p := C.eas_tf_sym(h, cname)
		C.free(unsafe.Pointer(cname))
		if p == nil {
			return nil, fmt.Errorf("%w (%s has no C API function %s: it is not a TensorFlow 2.4 or newer library)", ErrLibrary, path, s.name)
		}
		*s.dst = p
	}
	a.version = C.GoString(C.eas_tf_version(a.c))
	libAPI = a
	return a, nil
}

// Runtime describes the opened library.
type Runtime struct {
	Library string // the path opened
	Version string // TF_Version(), e.g. "2.21.0"
}

// Open opens the library (once per process) and describes it. A missing
// library is an error wrapping ErrLibrary.
func Open() (Runtime, error) {
	a, err := open()
	if err != nil {
		return Runtime{}, err
	}
	return Runtime{Library: a.path, Version: a.version}, nil
}
