package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
)

// dashboardFile is the sample Grafana dashboard (docs/grafana).
const dashboardFile = "../../docs/grafana/eas-server.json"

// dashboardQueries returns every PromQL query of a Grafana dashboard: each
// "expr", and the template variables' definitions (label_values(...)).
func dashboardQueries(t *testing.T, raw []byte) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && (k == "expr" || k == "definition") && s != "" {
					out = append(out, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	return out
}

var (
	promString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMetric = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:$])((?:eas|go|process)_[A-Za-z0-9_:]*)`)
	typeLine   = regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
)

// queriedMetrics lists the metric names a PromQL query reads: identifiers
// starting with eas_, go_ or process_, outside string literals.
func queriedMetrics(expr string) []string {
	expr = promString.ReplaceAllString(expr, `""`)
	var out []string
	for _, m := range promMetric.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

// missingMetrics returns the names the queries read that the exposition
// (a /metrics body) does not export; a histogram's _bucket, _sum and
// _count count as its own.
func missingMetrics(queries []string, exposition string) []string {
	types := map[string]string{}
	for _, m := range typeLine.FindAllStringSubmatch(exposition, -1) {
		types[m[1]] = m[2]
	}
	exported := func(name string) bool {
		if _, ok := types[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if typ := types[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
					return true
				}
			}
		}
		return false
	}
	seen := map[string]bool{}
	var missing []string
	for _, q := range queries {
		for _, name := range queriedMetrics(q) {
			if !seen[name] && !exported(name) {
				missing = append(missing, name)
			}
			seen[name] = true
		}
	}
	sort.Strings(missing)
	return missing
}

// TestMissingMetricsCatchesTypos: the check fails a dashboard that reads a
// metric nobody exports, and reads names correctly.
func TestMissingMetricsCatchesTypos(t *testing.T) {
	expo := "# TYPE eas_request_duration_seconds histogram\n# TYPE eas_requests_total counter\n# TYPE go_goroutines gauge\n"
	got := missingMetrics([]string{
		`histogram_quantile(0.99, sum by (le) (rate(eas_request_duration_seconds_bucket{service=~"eas_not_a_metric"}[5m])))`,
		`sum(rate(eas_requests_total[$__rate_interval])) + go_goroutines`,
		`eas_requests_total_bucket + eas_nonexistent_total + eas_requests_total_sum`,
	}, expo)
	want := []string{"eas_nonexistent_total", "eas_requests_total_bucket", "eas_requests_total_sum"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("missing %v, want %v", got, want)
	}
}

// TestDashboardQueriesExportedMetrics starts the real server with a service
// that serves and one whose load fails, sends a few requests, and checks
// that every metric the sample dashboard queries is in /metrics.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	queries := dashboardQueries(t, raw)
	if len(queries) < 10 {
		t.Fatalf("only %d queries found in %s", len(queries), dashboardFile)
	}

	dir := t.TempDir()
	good := teststack.WriteFile(t, dir, "good.json", `{"name":"good","processor":"echo","token":"T","metadata":{"instance":1}}`)
	bad := teststack.WriteFile(t, dir, "bad.json", `{"name":"bad","processor":"echo","token":"T","model_config":{"sleep_ms":-5},"metadata":{"instance":1}}`)
	c := startChild(t, []string{"EAS_ADMIN_TOKEN=admin"}, "--state-dir", t.TempDir(), "--deploy", good, "--deploy", bad)
	waitReady(t, c.url)
	var body string
	// The failed load of "bad" is counted once its deploy has run.
	const failedLoad = `eas_model_load_failures_total{reason="config",service="bad"} 1`
	wait.Until(t, 20*time.Second, func() error {
		teststack.Do(t, "POST", c.url+"/api/predict/good", "T", []byte("x"))
		teststack.Do(t, "POST", c.url+"/api/predict/good", "wrong", []byte("x"))
		resp, err := http.Get(c.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if !strings.Contains(body, failedLoad) {
			return fmt.Errorf("/metrics lacks %s", failedLoad)
		}
		return nil
	})
	if missing := missingMetrics(queries, body); len(missing) > 0 {
		t.Fatalf("%s queries metrics /metrics does not export: %v\n/metrics:\n%s", dashboardFile, missing, body)
	}
}
