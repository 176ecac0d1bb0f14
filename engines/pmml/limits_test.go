package pmml

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestParseFileRefusesDevice: ParseFile reads regular files only; before,
// /dev/zero grew the process without bound (issue 14).
func TestParseFileRefusesDevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	if _, err := ParseFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("ParseFile(/dev/zero) = %v, want a not-a-regular-file error", err)
	}
}

// TestParseContextCancelled: a done ctx stops the parse with ctx's error.
func TestParseContextCancelled(t *testing.T) {
	f, err := os.Open("testdata/rf.pmml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ParseContext(ctx, f); err != context.Canceled {
		t.Fatalf("ParseContext(cancelled) = %v, want context.Canceled", err)
	}
}
