// Package loadtest holds the helpers of the model-loading tests: hostile
// model files (sparse, FIFO) and a guard that fails a load allocating or
// blocking without bound before it takes the test machine down.
package loadtest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Sparse creates dir/name holding head and then a hole up to size bytes:
// it reads as size bytes but takes no disk.
func Sparse(t testing.TB, dir, name string, size int64, head []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	return p
}

// FIFO creates the named pipe dir/name; opening it for reading blocks
// until a writer comes, and none ever does.
func FIFO(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := mkfifo(p); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return p
}

// CancelAfter returns a context whose Err reports nil for the first n
// calls and context.Canceled from then on (its Done closes then too): a
// cancellation that lands in the middle of a read, deterministically.
func CancelAfter(parent context.Context, n int) context.Context {
	ctx, cancel := context.WithCancel(parent)
	c := &countdown{Context: ctx, cancel: cancel}
	c.left.Store(int64(n))
	return c
}

type countdown struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int64
}

func (c *countdown) Err() error {
	if c.left.Add(-1) < 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// MaxAlloc is the allocation a refused or cancelled load may make: far
// below any stream it must not read.
const MaxAlloc = 64 << 20

// Bounded runs load and returns its error, failing t when load allocated
// MaxAlloc bytes or more. See BoundedBy.
func Bounded(t testing.TB, load func() error) error {
	t.Helper()
	return BoundedBy(t, MaxAlloc, load)
}

// BoundedBy runs load and returns its error, failing t when load allocated
// max bytes or more (runtime.MemStats.TotalAlloc). A load that runs away
// (allocates max+1 GiB, or has not returned after a minute) panics the
// test binary rather than exhaust the machine: a load that ignores its
// context cannot be stopped from outside.
func BoundedBy(t testing.TB, max uint64, load func() error) error {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	done := make(chan error, 1)
	go func() { done <- load() }()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			runtime.ReadMemStats(&ms)
			if d := ms.TotalAlloc - before; d >= max {
				t.Errorf("the load allocated %d MiB; want under %d MiB", d>>20, max>>20)
			}
			return err
		case <-tick.C:
			runtime.ReadMemStats(&ms)
			if d := ms.TotalAlloc - before; d >= max+1<<30 {
				panic("loadtest: the load has allocated " + strconv.FormatUint(d>>20, 10) + " MiB and is still reading: it is unbounded")
			}
			if time.Now().After(deadline) {
				panic("loadtest: the load has not returned after a minute: it blocks")
			}
		}
	}
}
