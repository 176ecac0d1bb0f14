package onnx

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// eas_probe_library dlopens name as ONNX Runtime's CUDA provider does and
// closes it again; it returns NULL when the library loads, else dlerror's
// message.
static const char *eas_probe_library(const char *name) {
	dlerror();
	void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		const char *err = dlerror();
		return err != NULL ? err : "dlopen failed";
	}
	dlclose(h);
	return NULL;
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// dlopenProbe loads lib by name and unloads it: "" when it loads, else the
// loader's message (which names the file that is missing).
func dlopenProbe(lib string) string {
	name := C.CString(lib)
	defer C.free(unsafe.Pointer(name))
	// dlerror's buffer is per thread: read it on the thread that failed.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if msg := C.eas_probe_library(name); msg != nil {
		return C.GoString(msg)
	}
	return ""
}
