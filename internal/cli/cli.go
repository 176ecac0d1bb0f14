// Package cli is the client half of the eas-server binary: the eascmd-style
// verbs (create, modify, desc, ls, delete, stop, start, events, versions,
// version, instances, predict) and the model cache's (cache ls, cache prune),
// all of them HTTP calls to a running server's control plane and data
// plane. It imports no server code: the wire types are internal/controlapi's.
// The binary's composition root (cmd/eas-server) adds these verbs to its own
// (serve, controller, gateway, validate, bench, upload).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Commands are the client verbs, to add to the binary's root command.
func Commands() []*cobra.Command {
	return []*cobra.Command{
		createCmd(), modifyCmd(), descCmd(), lsCmd(), deleteCmd(),
		stopCmd(), startCmd(), eventsCmd(), versionsCmd(), versionCmd(),
		instancesCmd(), predictCmd(), cacheCmd(),
	}
}

// ExitError carries a process exit code through cobra: a verb that has
// already said what went wrong returns it to exit non-zero without a
// second message.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Run executes root with args and returns the process's exit code: an
// ExitError's code, 1 (after printing the error to stderr) for any other
// error, else 0. main and the tests run every verb through it.
func Run(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ee ExitError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case err != nil:
		fmt.Fprintln(stderr, root.Name()+":", err)
		return 1
	}
	return 0
}
