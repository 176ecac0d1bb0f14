// Package require decides what a test does when something it needs from the
// machine is missing: it skips, visibly and saying how to provide it, unless
// EAS_REQUIRE_<KIND>=1 says the thing must be there, in which case the test
// fails. make test sets every EAS_REQUIRE_* variable, so a suite cannot pass
// there by skipping itself.
package require

import (
	"fmt"
	"os"
	"testing"
)

// Kind names one thing tests may need; EAS_REQUIRE_<Kind>=1 makes its
// absence a failure.
type Kind string

// The kinds tests check. Each has its own variable so a developer without,
// say, a Kubernetes build can still require everything else.
const (
	// Conformance: the external test data in ../shared/conformance (or
	// $EAS_CONFORMANCE_DIR).
	Conformance Kind = "CONFORMANCE"
	// Python: Debian's python3 packages the test-model generators need, and
	// the client virtual environments of scripts/python-venv.sh.
	Python Kind = "PYTHON"
	// NATS: nats-server, for the JetStream queue backend.
	NATS Kind = "NATS"
	// OpenCV: Debian's python3-opencv, the Caffe tests' reference.
	OpenCV Kind = "OPENCV"
	// K8s: the Kubernetes control plane and helm of scripts/build-k8s-tools.sh.
	K8s Kind = "K8S"
	// Chromium: Debian's chromium, for the console's browser tests.
	Chromium Kind = "CHROMIUM"
)

// Variable is the environment variable that makes k required.
func (k Kind) Variable() string { return "EAS_REQUIRE_" + string(k) }

// Required says whether EAS_REQUIRE_<k>=1 is set.
func Required(k Kind) bool { return os.Getenv(k.Variable()) == "1" }

// Missing ends t because k is missing: a failure when k is required, a skip
// otherwise. The message says what is missing and how to provide it.
func Missing(t testing.TB, k Kind, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required(k) {
		t.Fatalf("%s (%s=1: failing instead of skipping)", msg, k.Variable())
	}
	t.Skipf("%s (%s=1 makes this a failure)", msg, k.Variable())
}
