package main

import (
	"fmt"

	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "eas-server",
		Short:         "A self-hosted model server that speaks the PAI-EAS interface",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), validateCmd(), processorsCmd(), benchCmd(), uploadCmd())
	root.AddCommand(clientCmds()...)
	return root
}

func validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check service.json files and print every problem (no network I/O)",
		Long: "Check service.json files: keys, values, processor codes, device rules and the processor's own\n" +
			"checks of model_config and model_path (what its Configure step does before any download).\n" +
			"Prints every problem of every file; exits 1 when any file has one, 0 when all are valid.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, path := range args {
				svc, err := servicejson.ParseFile(path)
				if err == nil {
					if err = checkProcessor(svc); err != nil {
						err = fmt.Errorf("%s: %w", path, err)
					}
				}
				if err != nil {
					bad++
					fmt.Fprintf(cmd.ErrOrStderr(), "%v\n", err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (service %q, processor %s)\n", path, svc.Name, svc.Processor)
			}
			if bad > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d files invalid\n", bad, len(args))
				return exitError{1}
			}
			return nil
		},
	}
}

// checkProcessor runs the processor's own Configure on svc, without I/O:
// a code this build cannot serve, or a model_config the processor refuses,
// is found here rather than after a model download.
func checkProcessor(svc *servicejson.Service) error {
	if svc.Processor == "" {
		return nil
	}
	if _, ok := processors.Lookup(svc.Processor); !ok {
		_, err := processors.New(svc.Processor)
		return fmt.Errorf("processor: %q is an EAS code this server does not serve: %v", svc.Processor, err)
	}
	ps, _, err := service.ProcessorSpec(svc, 0, nil)
	if err == nil {
		_, err = service.Configure(svc, ps)
	}
	return err
}

func processorsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "processors",
		Short: "List the processor codes this server serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CODE\tSERVES")
			for _, code := range processors.Codes() {
				info, _ := processors.Lookup(code)
				fmt.Fprintf(w, "%s\t%s\n", code, info.Description)
			}
			return w.Flush()
		},
	}
}
