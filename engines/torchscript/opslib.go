package torchscript

/*
#include "trampoline.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"unsafe"
)

// EnvTorchVisionLib names the environment variable that says where
// torchvision's operator library is (the file, e.g. torchvision/_C.so).
const EnvTorchVisionLib = "EAS_TORCHVISION_LIB"

// torchVisionGlobs are where Debian's python3-torchvision (which
// scripts/install-test-deps.sh installs) and a system-wide torchvision keep
// torchvision's operator library.
var torchVisionGlobs = []string{
	"/usr/lib/python3/dist-packages/torchvision/_C*.so",
	"/usr/local/lib/python3*/dist-packages/torchvision/_C*.so",
	"/usr/local/lib/python3*/site-packages/torchvision/_C*.so",
}

// FindTorchVision returns the path of torchvision's operator library:
// $EAS_TORCHVISION_LIB when set, else the first of Debian's and pip's
// usual places that exists; "" when there is none. The searched places
// are returned for error messages.
func FindTorchVision() (string, []string) {
	if p := os.Getenv(EnvTorchVisionLib); p != "" {
		return p, []string{EnvTorchVisionLib + "=" + p}
	}
	for _, g := range torchVisionGlobs {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0], torchVisionGlobs
		}
	}
	return "", torchVisionGlobs
}

var opsLoaded = map[string]bool{}

// LoadOpsLibrary opens a shared library of custom TorchScript operators
// (torchvision's _C.so: torchvision::nms, roi_align, ...) into the process
// after libtorch, so that modules loaded afterwards which call them load
// and run. The library registers its operators with libtorch when it is
// opened; it must be built against the libtorch the shim uses (Debian's
// python3-torchvision is, for Debian's libtorch-dev). Opening one path
// twice is harmless; a library is never closed.
func LoadOpsLibrary(path string) error {
	if _, err := openShim(); err != nil {
		return err
	}
	libMu.Lock()
	defer libMu.Unlock()
	if opsLoaded[path] {
		return nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	if h := C.open_lib(cpath, &cerr); h == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return fmt.Errorf("torchscript: load operator library %s: %s", path, msg)
	}
	opsLoaded[path] = true
	return nil
}
