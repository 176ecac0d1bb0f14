package cli

import (
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
)

// TestCLICreatePrintsWarnings: create prints the server's warnings about
// keys that have no effect, and still succeeds.
func TestCLICreatePrintsWarnings(t *testing.T) {
	t.Setenv("EAS_ADMIN_TOKEN", "")
	t.Setenv("EAS_ENDPOINT", "")
	url := startServer(t)
	f := teststack.WriteFile(t, t.TempDir(), "w.json", `{"name":"w","processor":"echo","autoscaler":{"min":1,"max":2},"metadata":{"instance":1}}`)
	out, errOut, code := ctl(t, url, "create", f)
	if code != 0 || !strings.Contains(out, "[OK] Service w is running") ||
		!strings.Contains(errOut, "[WARNING] autoscaler: accepted for EAS compatibility; this server does not autoscale") {
		t.Fatalf("create: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n := strings.Count(errOut, "autoscaler: accepted"); n != 1 {
		t.Errorf("the warning is printed %d times, want once:\n%s", n, errOut)
	}
}
