package main

import (
	"context"
	"os/signal"
)

// configureRuntimes hands native-library locations to the processors that
// need them.
func configureRuntimes(f serveFlags) error {
	_ = f.onnxRuntime // wired when the ONNX processor lands
	return nil
}

// signalStop restores default signal handling so that a second signal ends
// the process at once.
func signalStop(context.Context) { signal.Reset() }
