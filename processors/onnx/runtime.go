package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// LibraryVersion is the ONNX Runtime release scripts/fetch-onnxruntime.sh
// installs and the binding (onnxruntime_go v1.27.0, C API 24) is built for.
const LibraryVersion = "1.24.1"

// libraryFile is the file name the fetch script installs.
const libraryFile = "libonnxruntime.so." + LibraryVersion

// EnvLibraryPath names the environment variable that overrides where the
// ONNX Runtime shared library is found.
const EnvLibraryPath = "ONNXRUNTIME_LIB"

var (
	libMu       sync.Mutex
	libOverride string // set by SetLibraryPath
	libLoaded   string // the path the environment was initialised with
)

// SetLibraryPath makes the ONNX Runtime environment load the shared library
// at p (a file, or a directory holding libonnxruntime.so.1.24.1) instead of
// searching for it. The binary's --onnxruntime-lib flag calls
// it; it must run before the first ONNX model loads, and an empty p restores
// the search. It has no effect once the environment is initialised.
func SetLibraryPath(p string) {
	libMu.Lock()
	defer libMu.Unlock()
	libOverride = p
}

// LoadedLibrary returns the path of the ONNX Runtime library in use, or ""
// when no ONNX model has been loaded yet.
func LoadedLibrary() string {
	libMu.Lock()
	defer libMu.Unlock()
	return libLoaded
}

// libraryCandidates lists where the library is looked for, in order: the
// SetLibraryPath override, $ONNXRUNTIME_LIB, third_party/onnxruntime/lib
// beside or above the executable (an installed layout, bin/ next to
// third_party/), the same above the working directory (a checkout, tests),
// then the system linker path. An explicit setting is the only candidate, so a
// typo is reported instead of silently falling back.
func libraryCandidates() (cands []string, explicit bool) {
	if libOverride != "" {
		return []string{libOverride}, true
	}
	if p := os.Getenv(EnvLibraryPath); p != "" {
		return []string{p}, true
	}
	var roots []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		roots = append(roots, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd)
	}
	seen := map[string]bool{}
	for _, root := range roots {
		// Walk up a few levels: bin/eas-server, processors/onnx (tests).
		dir := root
		for range 5 {
			p := filepath.Join(dir, "third_party", "onnxruntime", "lib", libraryFile)
			if !seen[p] {
				seen[p] = true
				cands = append(cands, p)
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	for _, dir := range []string{"/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu"} {
		cands = append(cands, filepath.Join(dir, libraryFile), filepath.Join(dir, "libonnxruntime.so"))
	}
	return cands, false
}

// ErrLibrary marks a failure to find or initialise the ONNX Runtime library.
// Only ONNX services fail with it; other processors keep working.
var ErrLibrary = errors.New("onnx runtime library unavailable")

// ensureEnvironment initialises the process-wide ONNX Runtime environment on
// the first ONNX load. Unlike a sync.Once, a failure is not sticky: after
// fixing the library (fetch script, ONNXRUNTIME_LIB) the next deploy retries
// without restarting the server.
func ensureEnvironment() error {
	libMu.Lock()
	defer libMu.Unlock()
	if ort.IsInitialized() {
		return nil
	}
	cands, explicit := libraryCandidates()
	if explicit {
		// A directory names where the fetch script installed the library.
		if st, err := os.Stat(cands[0]); err == nil && st.IsDir() {
			cands[0] = filepath.Join(cands[0], libraryFile)
		}
	}
	path := ""
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			path = c
			break
		}
	}
	if path == "" {
		if explicit {
			return fmt.Errorf("%w: %s does not exist; set %s (or --onnxruntime-lib) to the path of libonnxruntime.so.%s, or unset it and run scripts/fetch-onnxruntime.sh",
				ErrLibrary, cands[0], EnvLibraryPath, LibraryVersion)
		}
		return fmt.Errorf("%w: %s not found (looked in %s); run scripts/fetch-onnxruntime.sh (make build does) or set %s to the library path",
			ErrLibrary, libraryFile, strings.Join(cands, ", "), EnvLibraryPath)
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("%w: initialise %s: %v; it must be ONNX Runtime %s (C API 24) for linux/%s: run scripts/fetch-onnxruntime.sh or set %s",
			ErrLibrary, path, err, LibraryVersion, runtime.GOARCH, EnvLibraryPath)
	}
	libLoaded = path
	return nil
}
