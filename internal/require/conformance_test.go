package require

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestConformanceRoot(t *testing.T) {
	t.Setenv("EAS_CONFORMANCE_DIR", "")
	want, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ConformanceRoot(); filepath.Clean(got) != want {
		t.Errorf("ConformanceRoot() = %s, want %s (beside the repository root)", got, want)
	}
	t.Setenv("EAS_CONFORMANCE_DIR", "/elsewhere/corpora")
	if got := ConformanceRoot(); got != "/elsewhere/corpora" {
		t.Errorf("with EAS_CONFORMANCE_DIR: %s, want it", got)
	}
}

func TestConformanceDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lightgbm"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EAS_CONFORMANCE_DIR", dir)
	if got := ConformanceDir(t, "lightgbm"); got != filepath.Join(dir, "lightgbm") {
		t.Errorf("ConformanceDir = %s, want %s", got, filepath.Join(dir, "lightgbm"))
	}
	for _, required := range []string{"", "1"} {
		t.Setenv(Conformance.Variable(), required)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			ConformanceDir(r, "pmml")
		}()
		<-done
		if required == "1" && (r.fatal == "" || r.skip != "") || required == "" && (r.skip == "" || r.fatal != "") {
			t.Errorf("%s=%q, absent corpus: skip %q, fatal %q; want a failure only when required", Conformance.Variable(), required, r.skip, r.fatal)
		}
		if msg := r.skip + r.fatal; !strings.Contains(msg, filepath.Join(dir, "pmml")) {
			t.Errorf("the message %q does not name the path looked at", msg)
		}
	}
}

// recorder is a testing.TB whose Skipf and Fatalf record the message and
// end the goroutine, as testing's do, without ending the test.
type recorder struct {
	testing.TB
	skip, fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestDeclares(t *testing.T) {
	for _, c := range []struct {
		gomod string
		want  bool
	}{
		{"module github.com/eas-server/eas-server\n\ngo 1.26.0\n", true},
		{"// comment\nmodule  github.com/eas-server/eas-server \n", true},
		{"module github.com/eas-server/eas-server/engines/trees/bench\n", false},
		{"go 1.26.0\n", false},
	} {
		if got := declares([]byte(c.gomod), modulePath); got != c.want {
			t.Errorf("declares(%q) = %v, want %v", c.gomod, got, c.want)
		}
	}
}
