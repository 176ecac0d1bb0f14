package cli

import (
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/humanize"
	"github.com/eas-server/eas-server/internal/storage"
)

// cacheCmd groups the model cache's verbs: what the server keeps under
// <state-dir>/cache, and removing what no service uses.
func cacheCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Inspect and prune the server's model cache",
	}
	cmd.AddCommand(cacheLsCmd(), cachePruneCmd())
	return cmd
}

func cacheLsCmd() *cobra.Command {
	return readCmd("ls", "List the cached models: URL, version, size, last use, whether a service holds it", cobra.NoArgs,
		func(*apiClient, []string) string { return "/api/v2/cache" },
		func(out io.Writer, l *controlapi.CacheList) error {
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "URL\tVERSION\tSIZE\tLAST USED\tIN USE")
			for _, e := range l.Entries {
				inUse := "no"
				if e.InUse {
					inUse = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.URL, oneLine(e.Version), humanize.Bytes(e.Bytes), formatTime(e.LastUsed), inUse)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			u := l.Usage
			bound := "unbounded (--cache-size)"
			if u.MaxBytes > 0 {
				bound = "bound " + humanize.Bytes(u.MaxBytes)
			}
			_, err := fmt.Fprintf(out, "%d models, %s (%s in use), %s of partial downloads; %s\n",
				u.Entries, humanize.Bytes(u.Bytes), humanize.Bytes(u.InUseBytes), humanize.Bytes(u.PartialBytes), bound)
			return err
		})
}

func cachePruneCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove cached models no service holds, and partial downloads no fetch is using",
		Long: "Remove every cached model that no service holds (deleted, stopped or replaced\n" +
			"versions' models) and the partial downloads of URLs not being fetched. A model\n" +
			"pruned is downloaded again by the next deploy that needs it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var res storage.PruneResult
			if err := c.call(cmd.Context(), http.MethodPost, "/api/v2/cache/prune", nil, &res); err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed %d models and %d partial downloads, freed %s; kept %d in use\n",
				res.Removed, res.PartialFiles, humanize.Bytes(res.FreedBytes), res.KeptInUse)
			return err
		},
	}
	f.add(cmd, false)
	return cmd
}
