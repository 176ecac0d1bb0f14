package main

import (
	"context"
	"os/signal"

	"github.com/eas-server/eas-server/processors/onnx"
)

// configureRuntimes hands native-library locations to the processors that
// need them. The library itself is opened at the first ONNX deploy, so a
// missing one fails those services only.
func configureRuntimes(f serveFlags) error {
	if f.onnxRuntime != "" {
		onnx.SetLibraryPath(f.onnxRuntime)
	}
	return nil
}

// signalStop restores default signal handling so that a second signal ends
// the process at once.
func signalStop(context.Context) { signal.Reset() }
