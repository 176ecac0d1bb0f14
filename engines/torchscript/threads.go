package torchscript

import (
	"runtime"
	"sync"
)

// libtorch's OpenMP backend (libgomp) keeps a team of worker threads per
// OS thread that starts a parallel region, and once it manages more threads
// than there are CPUs it stops spinning at barriers and sleeps instead.
// Go runs a cgo call on whatever OS thread the goroutine is on, so forward
// calls from a server's goroutines made a team per Go thread and every
// barrier a sleep: ResNet-18 ran at 73% of python3-torch's speed with the
// same libtorch (23.7 against 32.4 images/s, batch 8, 2 threads on 2
// cores), and at parity (32.8) from one locked thread. So Load and Forward
// run on a few OS threads locked for the purpose: as many as leave one
// team's intra-op threads a core each (GOMAXPROCS / threads, at least one),
// fixed by the first call.

// torchCall is one function to run on a torch thread.
type torchCall struct {
	fn   func()
	done chan struct{}
}

var (
	torchCalls   = make(chan torchCall)
	torchThreads sync.Once
)

// torchThreadCount is how many locked threads run libtorch calls when each
// uses intraOp threads (0: libtorch's default, one per core).
func torchThreadCount(intraOp int) int {
	if intraOp <= 0 {
		return 1
	}
	return max(1, runtime.GOMAXPROCS(0)/intraOp)
}

// onTorchThread runs fn on one of the torch threads and waits for it. As
// many calls as there are threads run at once; the others wait their
// turn, as they would for the cores.
func onTorchThread(intraOp int, fn func()) {
	torchThreads.Do(func() {
		for range torchThreadCount(intraOp) {
			go torchThread()
		}
	})
	c := torchCall{fn: fn, done: make(chan struct{})}
	torchCalls <- c
	<-c.done
}

func torchThread() {
	runtime.LockOSThread() // never unlocked: the thread exists for this
	for c := range torchCalls {
		c.fn()
		close(c.done)
	}
}
