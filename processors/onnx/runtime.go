package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/eas-server/eas-server/internal/nativelib"
	ort "github.com/yalue/onnxruntime_go"
)

// LibraryVersion is the ONNX Runtime release scripts/fetch-onnxruntime.sh
// installs and the binding (onnxruntime_go v1.27.0, C API 24) is built for.
const LibraryVersion = "1.29.0"

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
// at p (a file, or a directory holding libonnxruntime.so.1.29.0) instead of
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

// librarySearch says where the library is looked for: --onnxruntime-lib or
// $ONNXRUNTIME_LIB alone when set, else the project's third_party copy, then
// the system linker path.
func librarySearch() nativelib.Search {
	explicit := libOverride
	if explicit == "" {
		explicit = os.Getenv(EnvLibraryPath)
	}
	var system []string
	for _, dir := range []string{"/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu"} {
		system = append(system, filepath.Join(dir, libraryFile), filepath.Join(dir, "libonnxruntime.so"))
	}
	return nativelib.Search{Explicit: explicit, Dir: "onnxruntime/lib", File: libraryFile, System: system}
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
	path, cands, explicit := librarySearch().Find()
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
