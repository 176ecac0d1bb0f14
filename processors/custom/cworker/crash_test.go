package cworker

import (
	"runtime"
	"strings"
	"testing"
)

// TestGoFaultsStillPanic: with the crash handler installed, a nil
// dereference in Go code (outside a call into the library, with the pc in
// the program) still reaches the Go runtime and becomes a panic that can
// be recovered, instead of a crash report and the process's end.
func TestGoFaultsStillPanic(t *testing.T) {
	if err := installCrashHandler(); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the handler stays in place after forwarding
		var got any
		func() {
			defer func() { got = recover() }()
			var p *struct{ x int }
			_ = p.x
		}()
		err, ok := got.(runtime.Error)
		if !ok || !strings.Contains(err.Error(), "nil pointer dereference") {
			t.Fatalf("recovered %v, want the runtime's nil pointer dereference panic", got)
		}
	}
}
