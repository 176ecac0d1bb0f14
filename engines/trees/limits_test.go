package trees

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestLoadRefusesDevice: Load reads regular files only; before, /dev/zero
// (size 0 to stat) was read without bound (issue 14).
func TestLoadRefusesDevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	if _, err := Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Load(/dev/zero) = %v, want a not-a-regular-file error", err)
	}
}

// TestParseContextCancelled: a done ctx stops the parse with ctx's error,
// for every format.
func TestParseContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, f := range []string{"testdata/xgboost/binary.json", "testdata/xgboost/binary.ubj", "testdata/xgboost/binary.bin",
		"testdata/lightgbm/handmade_v4.txt", "testdata/lightgbm/handmade_v4.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseContext(ctx, data); err != context.Canceled {
			t.Errorf("ParseContext(%s, cancelled) = %v, want context.Canceled", f, err)
		}
		if _, err := ParseContext(context.Background(), data); err != nil {
			t.Errorf("ParseContext(%s) = %v", f, err)
		}
	}
}
