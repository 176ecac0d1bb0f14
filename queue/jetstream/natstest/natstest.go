// Package natstest starts a real nats-server with JetStream for tests.
package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/wait"
)

// Start runs nats-server -js on a free loopback port for the test and
// returns its URL; the server stops when the test ends. Without
// nats-server the test skips, unless EAS_REQUIRE_NATS=1 (make test sets
// it; scripts/install-test-deps.sh installs Debian's nats-server): see
// package require.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/nats-server"); e == nil {
			bin, err = "/usr/sbin/nats-server", nil
		}
	}
	if err != nil {
		require.Missing(t, require.NATS, "nats-server is not installed: apt-get install nats-server (scripts/install-test-deps.sh does); the JetStream backend is not tested")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	wait.Until(t, 10*time.Second, func() error {
		nc, err := nats.Connect(url)
		if err != nil {
			return fmt.Errorf("nats-server did not start: %w", err)
		}
		nc.Close()
		return nil
	})
	return url
}
