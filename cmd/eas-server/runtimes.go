package main

import (
	"context"
	"os/signal"

	"github.com/eas-server/eas-server/engines/libtf"
	"github.com/eas-server/eas-server/processors/onnx"
)

// configureRuntimes hands native-library locations to the processors that
// need them. Each library itself is opened at the first deploy that needs
// it (ONNX, or a tensorflow_* service on libtensorflow), so a missing one
// fails those services only.
func configureRuntimes(f serveFlags) error {
	if f.onnxRuntime != "" {
		onnx.SetLibraryPath(f.onnxRuntime)
	}
	if f.tensorflowLib != "" {
		libtf.SetLibraryPath(f.tensorflowLib)
	}
	libtf.SetOpLibraryDirs(f.tensorflowOpDirs)
	return nil
}

// signalStop restores default signal handling so that a second signal ends
// the process at once.
func signalStop(context.Context) { signal.Reset() }
