package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// clientScript is one of the Python drivers of an official client
// (testdata/<dir>/<file>.py), run as `python SCRIPT GROUP CONFIG.json` on
// the client's virtual environment: the acceptance tests' one way of
// running them.
type clientScript struct {
	python, script, config string
	client                 string // the client's name, for failures
}

// newClientScript writes cfg where the script reads it.
func newClientScript(t *testing.T, client, python, script string, cfg any) clientScript {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return clientScript{python: python, script: abs, config: path, client: client}
}

// run runs one group of the script's cases with env added, and fails the
// test with the script's output when any case disagrees.
func (c clientScript) run(t *testing.T, group string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.python, c.script, group, c.config)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s disagrees with the server (%v):\n%s", c.client, err, out)
	}
	t.Logf("%s", out)
}
