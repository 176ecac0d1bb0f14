package libtf

/*
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"
)

// MaxOpLibraries bounds the op libraries one service may name.
const MaxOpLibraries = 64

// opLibraryDirs are the folders, beyond the TensorFlow installation's own,
// that op libraries may be loaded from: serve's --tensorflow-op-library-dir.
var opLibraryDirs atomic.Pointer[[]string]

// SetOpLibraryDirs sets the folders whose libraries a service may name by
// absolute path (the server's --tensorflow-op-library-dir). An op library
// runs in the server process with the server's rights, so a service may not
// load one from anywhere else (its own model files in particular).
func SetOpLibraryDirs(dirs []string) {
	d := slices.Clone(dirs)
	opLibraryDirs.Store(&d)
}

// InstallRoot is the folder relative op library paths are resolved in: the
// one above the opened library's folder (a wheel's site-packages, beside
// tensorflow/ and packages such as tensorflow_text/).
func InstallRoot() (string, error) {
	a, err := open()
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(a.path)), nil
}

// ResolveOpLibraries turns a service's op library entries into files: an
// entry is a path, or a glob pattern, relative to InstallRoot (such as
// "tensorflow_text/python/ops/_*.so"), or an absolute one inside a folder
// SetOpLibraryDirs allowed. Each entry must match at least one file, and
// every file must lie, links resolved, inside the folder it was found from.
func ResolveOpLibraries(entries []string) ([]string, error) {
	if len(entries) > MaxOpLibraries {
		return nil, fmt.Errorf("%d op libraries named, over the %d allowed", len(entries), MaxOpLibraries)
	}
	root, err := InstallRoot()
	if err != nil {
		return nil, err
	}
	var allowed []string
	if d := opLibraryDirs.Load(); d != nil {
		allowed = *d
	}
	var out []string
	for _, e := range entries {
		if strings.TrimSpace(e) == "" {
			return nil, fmt.Errorf("an op library entry is empty")
		}
		base := root
		pattern := filepath.Join(root, e)
		if filepath.IsAbs(e) {
			pattern = filepath.Clean(e)
			base = ""
			for _, d := range allowed {
				if within(pattern, filepath.Clean(d)) {
					base = filepath.Clean(d)
					break
				}
			}
			if base == "" {
				return nil, fmt.Errorf("op library %s is outside the folders op libraries may be loaded from (the TensorFlow installation %s, and the server's --tensorflow-op-library-dir: %s); name it relative to the installation, or have the operator allow its folder",
					e, root, orNone(allowed))
			}
		}
		files, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("op library %q: %v", e, err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("op library %q matches no file (looked for %s)", e, pattern)
		}
		realBase, err := filepath.EvalSymlinks(base)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			real, err := filepath.EvalSymlinks(f)
			if err != nil {
				return nil, err
			}
			if !within(real, realBase) {
				return nil, fmt.Errorf("op library %s resolves to %s, outside %s", f, real, base)
			}
			if !slices.Contains(out, real) {
				out = append(out, real)
			}
		}
	}
	if len(out) > MaxOpLibraries {
		return nil, fmt.Errorf("the op library entries match %d files, over the %d allowed", len(out), MaxOpLibraries)
	}
	return out, nil
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func orNone(dirs []string) string {
	if len(dirs) == 0 {
		return "none"
	}
	return strings.Join(dirs, ", ")
}

// LoadOpLibrary loads a custom op library (a shared library built against
// TensorFlow, such as TensorFlow Text's python/ops/_*.so) into the process
// with TF_LoadLibrary: its ops and kernels are registered for every session
// loaded after it, in every service. Libraries are never unloaded (TensorFlow
// keeps their registrations); loading one again does nothing.
func LoadOpLibrary(path string) error {
	a, err := open()
	if err != nil {
		return err
	}
	libMu.Lock()
	defer libMu.Unlock()
	if a.opLibs[path] {
		return nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg *C.char
	if code := C.eas_tf_load_library(a.c, cpath, &msg); code != 0 {
		m := C.GoString(msg)
		C.free(unsafe.Pointer(msg))
		return fmt.Errorf("libtensorflow %s: loading the op library %s: %s", a.version, path, m)
	}
	if a.opLibs == nil {
		a.opLibs = map[string]bool{}
	}
	a.opLibs[path] = true
	return nil
}

// LoadedOpLibraries lists the op libraries loaded so far, sorted.
func LoadedOpLibraries() []string {
	libMu.Lock()
	defer libMu.Unlock()
	if libAPI == nil {
		return nil
	}
	var out []string
	for p := range libAPI.opLibs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
