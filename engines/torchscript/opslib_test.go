package torchscript

import (
	"errors"
	"strings"
	"testing"
)

// TestFindTorchVisionEnv: $EAS_TORCHVISION_LIB, when set, is the only
// place looked at.
func TestFindTorchVisionEnv(t *testing.T) {
	t.Setenv(EnvTorchVisionLib, "/elsewhere/_C.so")
	path, where := FindTorchVision()
	if path != "/elsewhere/_C.so" || len(where) != 1 || !strings.Contains(where[0], EnvTorchVisionLib) {
		t.Errorf("FindTorchVision = %q, %v", path, where)
	}
}

// TestLoadOpsLibraryMissing: a library that cannot be opened is an error
// naming it. (The shim is needed, as by every test here.)
func TestLoadOpsLibraryMissing(t *testing.T) {
	err := LoadOpsLibrary("/nonexistent/_C.so")
	if err == nil || errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), "load operator library /nonexistent/_C.so") {
		t.Errorf("LoadOpsLibrary(missing) = %v, want an error naming the library", err)
	}
}
