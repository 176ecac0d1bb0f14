// Command eas-server is the one binary of eas-server: `serve` runs the
// server; the other verbs are its client and tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/eas-server/eas-server/processors/custom/cworker"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/eas-server/eas-server/processors/all" // register every processor
)

// exitError carries a process exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	if os.Getenv(cworker.EnvMode) == "cpp" { // a cpp custom processor's worker process
		os.Exit(cworker.Main())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := rootCmd().ExecuteContext(ctx)
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "eas-server:", err)
		os.Exit(1)
	}
}
