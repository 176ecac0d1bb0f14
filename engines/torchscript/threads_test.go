package torchscript

import (
	"runtime"
	"testing"
)

// TestTorchThreadCount: enough locked threads to give each forward's
// intra-op threads a core, never none, one when libtorch picks its own count.
func TestTorchThreadCount(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for intraOp, want := range map[int]int{0: 1, 1: procs, procs: 1, 4 * procs: 1} {
		if got := torchThreadCount(intraOp); got != want {
			t.Errorf("torchThreadCount(%d) with GOMAXPROCS %d = %d, want %d", intraOp, procs, got, want)
		}
	}
}
