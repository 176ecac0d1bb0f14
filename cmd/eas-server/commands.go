package main

import (
	"fmt"

	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/cli"
	"github.com/eas-server/eas-server/processors"
)

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "eas-server",
		Short:         "A self-hosted model server that speaks the PAI-EAS interface",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(serveCmd(), validateCmd(), processorsCmd(), benchCmd(), benchGenerationCmd(), uploadCmd())
	root.AddCommand(controllerCmd(), gatewayCmd(), k8sCmd())
	root.AddCommand(cli.Commands()...)
	return root
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
			fmt.Fprintln(w, "processor_type cpp\tcustom processor (processor_path): a shared library with EAS's C ABI, in worker processes")
			fmt.Fprintln(w, "processor_type python\tcustom processor (processor_path): an allspark Python processor, in worker processes")
			return w.Flush()
		},
	}
}
