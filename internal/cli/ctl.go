package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/controlapi"
)

func createCmd() *cobra.Command {
	var f clientFlags
	var defines []string
	cmd := &cobra.Command{
		Use:   "create FILE",
		Short: "Create a service from a service.json and wait until it runs",
		Long: "Create a service from a service.json, show its progress until it is Running or\n" +
			"Failed, then print its endpoint and token. Exits 1 when it fails, with the reason.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			body, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read service.json: %w", err)
			}
			if body, err = applyDefines(body, defines); err != nil {
				return err
			}
			var ans controlapi.ChangeAnswer
			if err := c.call(cmd.Context(), http.MethodPost, "/api/v2/services", body, &ans); err != nil {
				return err
			}
			obj := ans.ServiceObject
			fmt.Fprintf(cmd.ErrOrStderr(), "[OK] Service %s is now %s\n", obj.ServiceName, obj.Status)
			printWarnings(cmd.ErrOrStderr(), ans.Warnings)
			return waitAndReport(cmd, c, &f, obj, 1, nil)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringArrayVarP(&defines, "define", "D", nil, defineUsage)
	return cmd
}

func modifyCmd() *cobra.Command {
	var f clientFlags
	var file string
	var defines []string
	cmd := &cobra.Command{
		Use:   "modify NAME (-s FILE | -D KEY=VALUE ...)",
		Short: "Update a service to a new version without dropping requests",
		Long: "Store FILE (with -D's keys set in it), or the current service.json with -D's keys\n" +
			"changed (as eascmd's in-place modify), as the service's next version and switch\n" +
			"to it: the new version loads beside the serving one and takes traffic once ready.\n" +
			"A version that fails to load leaves the old one serving; the command then exits 1\n" +
			"with the reason.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				return fmt.Errorf("modify takes the service.json with -s: eas-server modify %s -s %s", args[0], args[1])
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var body []byte
			switch {
			case file != "":
				if body, err = os.ReadFile(file); err != nil {
					return fmt.Errorf("read service.json: %w", err)
				}
			case len(defines) > 0:
				// In place: the serving version's service.json as given.
				var obj controlapi.ServiceObject
				if err := c.call(cmd.Context(), http.MethodGet, c.servicePath(args[0], ""), nil, &obj); err != nil {
					return err
				}
				body = []byte(obj.ServiceConfig)
			default:
				return fmt.Errorf("modify: give the new service.json with -s FILE, or the keys to change with -D KEY=VALUE")
			}
			if body, err = applyDefines(body, defines); err != nil {
				return err
			}
			seen := seenEvents(cmd.Context(), c, args[0])
			var ans controlapi.ChangeAnswer
			if err := c.call(cmd.Context(), http.MethodPut, c.servicePath(args[0], ""), body, &ans); err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), ans.Warnings)
			return waitAndReport(cmd, c, &f, ans.ServiceObject, targetOf(ans.ServiceObject), seen)
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVarP(&file, "service", "s", "", "the new service.json")
	cmd.Flags().StringArrayVarP(&defines, "define", "D", nil, defineUsage)
	return cmd
}

func versionCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "version NAME N",
		Short: "Switch a service to a stored version (roll back or forward)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("version switches a service's version: eas-server version NAME N (see 'versions NAME'); this binary's own version is 'eas-server --version'")
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return fmt.Errorf("version: N must be a version number >= 1 (see 'versions %s'), got %q", args[0], args[1])
			}
			body, _ := json.Marshal(controlapi.VersionRequest{Version: n})
			seen := seenEvents(cmd.Context(), c, args[0])
			var obj controlapi.ServiceObject
			if err := c.call(cmd.Context(), http.MethodPut, c.servicePath(args[0], "version"), body, &obj); err != nil {
				return err
			}
			return waitAndReport(cmd, c, &f, obj, n, seen)
		},
	}
	f.add(cmd, true)
	return cmd
}

func startCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "start NAME",
		Short: "Start a stopped service and wait until it runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			seen := seenEvents(cmd.Context(), c, args[0])
			var obj controlapi.ServiceObject
			if err := c.call(cmd.Context(), http.MethodPut, c.servicePath(args[0], "start"), []byte("{}"), &obj); err != nil {
				return err
			}
			return waitAndReport(cmd, c, &f, obj, targetOf(obj), seen)
		},
	}
	f.add(cmd, true)
	return cmd
}

func stopCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a service: drain its requests and release its model",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var obj controlapi.ServiceObject
			if err := c.call(cmd.Context(), http.MethodPut, c.servicePath(args[0], "stop"), []byte("{}"), &obj); err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), obj)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "[OK] Service %s is %s\n", obj.ServiceName, obj.Status)
			return nil
		},
	}
	f.add(cmd, false)
	return cmd
}

func deleteCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a service, its versions and its model cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var out struct{ Message string }
			if err := c.call(cmd.Context(), http.MethodDelete, c.servicePath(args[0], ""), nil, &out); err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "[OK] Service %s deleted\n", args[0])
			return nil
		},
	}
	f.add(cmd, false)
	return cmd
}

// readCmd builds a read-only verb: GET the path made from the arguments and
// print the answer as JSON (-o json) or with human.
func readCmd[T any](use, short string, args cobra.PositionalArgs, path func(c *apiClient, args []string) string,
	human func(w io.Writer, v *T) error) *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var v T
			if err := c.call(cmd.Context(), http.MethodGet, path(c, args), nil, &v); err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return human(cmd.OutOrStdout(), &v)
		},
	}
	f.add(cmd, false)
	return cmd
}

// servicePath is a readCmd path: the named service's sub-resource.
func servicePath(sub string) func(c *apiClient, args []string) string {
	return func(c *apiClient, args []string) string { return c.servicePath(args[0], sub) }
}

func descCmd() *cobra.Command {
	return readCmd("desc NAME", "Describe a service", cobra.ExactArgs(1), servicePath(""),
		func(w io.Writer, obj *controlapi.ServiceObject) error {
			cfg := obj.ServiceConfig
			var buf bytes.Buffer
			if json.Compact(&buf, []byte(cfg)) == nil {
				cfg = buf.String()
			}
			rows := [][2]string{
				{"ServiceName", obj.ServiceName},
				{"Region", obj.Region},
				{"Status", obj.Status},
				{"Message", obj.Message},
				{"Reason", obj.Reason},
				{"CurrentVersion", strconv.Itoa(obj.CurrentVersion)},
				{"LatestVersion", strconv.Itoa(obj.LatestVersion)},
				{"RunningInstance", strconv.Itoa(obj.RunningInstance)},
				{"TotalInstance", strconv.Itoa(obj.TotalInstance)},
				{"CreateTime", formatTime(obj.CreateTime)},
				{"UpdateTime", formatTime(obj.UpdateTime)},
				{"IntranetEndpoint", obj.IntranetEndpoint},
				{"AccessToken", obj.AccessToken},
				{"ServiceConfig", cfg},
			}
			if obj.PendingVersion != 0 {
				rows = append(rows[:8], append([][2]string{{"PendingVersion", strconv.Itoa(obj.PendingVersion)}}, rows[8:]...)...)
			}
			for _, q := range obj.Queues {
				if q.Error != "" {
					rows = append(rows, [2]string{"Queue " + q.Queue, "not read: " + q.Error})
					continue
				}
				row := fmt.Sprintf("length %d/%d, in flight %d, consumers %d, oldest %.1fs, redeliveries %d, dead-lettered %d",
					q.Length, q.MaxLength, q.InFlight, q.Consumers, q.OldestAgeSec, q.Redeliveries, q.DeadLettered)
				if q.AckErrors > 0 {
					row += fmt.Sprintf(", failed acks %d", q.AckErrors)
				}
				rows = append(rows, [2]string{"Queue " + q.Queue, row})
			}
			box(w, rows)
			return nil
		})
}

func lsCmd() *cobra.Command {
	return readCmd("ls", "List the services", cobra.NoArgs,
		func(*apiClient, []string) string { return "/api/v2/services" },
		func(out io.Writer, list *controlapi.ServiceList) error {
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSTATUS\tVERSION\tINSTANCES\tUPDATED\tENDPOINT")
			for _, s := range list.Services {
				fmt.Fprintf(w, "%s\t%s\t%d/%d\t%d/%d\t%s\t%s\n", s.ServiceName, s.Status, s.CurrentVersion, s.LatestVersion,
					s.RunningInstance, s.TotalInstance, formatTime(s.UpdateTime), s.IntranetEndpoint)
			}
			return w.Flush()
		})
}

func eventsCmd() *cobra.Command {
	return readCmd("events NAME", "Show a service's recent events", cobra.ExactArgs(1), servicePath("events"),
		func(out io.Writer, list *controlapi.EventList) error {
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TIME\tTYPE\tREASON\tMESSAGE")
			for _, e := range list.Events {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", formatTime(e.Time), e.Type, e.Reason, oneLine(e.Message))
			}
			return w.Flush()
		})
}

func instancesCmd() *cobra.Command {
	return readCmd("instances NAME", "List a service's instances", cobra.ExactArgs(1), servicePath("instances"),
		func(out io.Writer, list *controlapi.InstanceList) error {
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "INSTANCE\tSTATUS\tVERSION\tSTARTED\tQUEUE")
			for _, in := range list.Instances {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\n", in.InstanceName, in.Status, in.Version, formatTime(in.StartTime), in.QueueDepth)
			}
			return w.Flush()
		})
}

func versionsCmd() *cobra.Command {
	return readCmd("versions NAME", "List a service's stored versions", cobra.ExactArgs(1), servicePath("versions"),
		func(out io.Writer, list *controlapi.VersionList) error {
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tCURRENT\tCREATED\tPROCESSOR")
			for _, v := range list.Versions {
				cur := ""
				if v.Current {
					cur = "*"
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", v.Version, cur, formatTime(v.CreateTime), v.Processor)
			}
			return w.Flush()
		})
}

// targetOf is the version an operation that answered obj is heading for.
func targetOf(obj controlapi.ServiceObject) int {
	if obj.PendingVersion != 0 {
		return obj.PendingVersion
	}
	return obj.CurrentVersion
}

// seenEvents returns the keys of the service's events so far, so that the
// progress shows only the new ones. Errors are left to the real call.
func seenEvents(ctx context.Context, c *apiClient, name string) map[string]bool {
	seen := map[string]bool{}
	var list controlapi.EventList
	if c.call(ctx, http.MethodGet, c.servicePath(name, "events"), nil, &list) == nil {
		for _, e := range list.Events {
			seen[eventKey(e)] = true
		}
	}
	return seen
}

func eventKey(e controlapi.EventObject) string {
	return e.Time.Format(time.RFC3339Nano) + "\x00" + e.Reason + "\x00" + e.Message
}

// waitAndReport polls the service until its operation ends, printing new
// events as progress on stderr, then prints the outcome: the endpoint and
// token on success; the reason, and exit status 1, on failure.
func waitAndReport(cmd *cobra.Command, c *apiClient, f *clientFlags, obj controlapi.ServiceObject, target int, seen map[string]bool) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	if seen == nil {
		seen = map[string]bool{}
	}
	progress := cmd.ErrOrStderr()
	view := newProgressView(progress)
	defer view.clear()
	name := obj.ServiceName
	for obj.PendingVersion != 0 || obj.Status == "Creating" || obj.Status == "Updating" {
		select {
		case <-ctx.Done():
			view.clear()
			return fmt.Errorf("gave up waiting for service %s after %s (status %s: %s); check with 'eas-server desc %s' or wait longer with --timeout", name, f.timeout, obj.Status, obj.Message, name)
		case <-time.After(f.poll):
		}
		var list controlapi.EventList
		if err := c.call(ctx, http.MethodGet, c.servicePath(name, "events"), nil, &list); err == nil {
			for _, e := range list.Events {
				// IgnoredKeys repeats the answer's Warnings, printed already.
				if k := eventKey(e); !seen[k] && e.Reason != "IgnoredKeys" {
					seen[k] = true
					view.clear()
					fmt.Fprintf(progress, "[%s] %s: %s\n", e.Time.Local().Format("15:04:05"), e.Reason, oneLine(e.Message))
				}
			}
		}
		obj.Progress = nil // an answer without one must not keep the last
		if err := c.call(ctx, http.MethodGet, c.servicePath(name, ""), nil, &obj); err != nil {
			view.clear()
			return err
		}
		view.show(obj.Progress)
	}
	view.clear()
	ok := obj.CurrentVersion == target && (obj.Status == "Running" || obj.Status == "Stopped")
	if f.output == "json" {
		if err := printJSON(cmd.OutOrStdout(), obj); err != nil {
			return err
		}
	}
	if !ok {
		reason := obj.Message
		if reason == "" {
			reason = "status " + obj.Status
		}
		fmt.Fprintf(progress, "[FAILED] Service %s: %s\n", name, oneLine(reason))
		return ExitError{1}
	}
	if f.output == "json" {
		return nil
	}
	out := cmd.OutOrStdout()
	if obj.Status == "Stopped" {
		fmt.Fprintf(out, "[OK] Service %s is stopped at version %d; it runs that version when started\n", name, obj.CurrentVersion)
		return nil
	}
	box(out, [][2]string{
		{"Intranet Endpoint", obj.IntranetEndpoint},
		{"Token", obj.AccessToken},
	})
	fmt.Fprintf(out, "[OK] Service %s is running at version %d\n", name, obj.CurrentVersion)
	return nil
}

// printWarnings prints the server's warnings about the service.json sent:
// keys it accepted that have no effect there.
func printWarnings(w io.Writer, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "[WARNING] %s\n", msg)
	}
}

// box prints rows as eascmd does: a bordered two-column table with the keys
// right-aligned.
func box(w io.Writer, rows [][2]string) {
	kw, vw := 0, 0
	for _, r := range rows {
		kw, vw = max(kw, len(r[0])), max(vw, len(r[1]))
	}
	line := "+" + strings.Repeat("-", kw+2) + "+" + strings.Repeat("-", vw+2) + "+\n"
	io.WriteString(w, line)
	for _, r := range rows {
		fmt.Fprintf(w, "| %*s | %-*s |\n", kw, r[0], vw, r[1])
	}
	io.WriteString(w, line)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }
