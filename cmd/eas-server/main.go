// Command eas-server is the one binary of eas-server: `serve` runs the
// server; the other verbs are its client and tools.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/eas-server/eas-server/internal/cli"
	_ "github.com/eas-server/eas-server/processors/all" // register every processor
	"github.com/eas-server/eas-server/processors/custom/cworker"
)

func main() {
	if os.Getenv(cworker.EnvMode) == "cpp" { // a cpp custom processor's worker process
		os.Exit(cworker.Main())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := cli.Run(ctx, rootCmd(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
