package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/wait"
)

// BenchmarkLoneCaller measures what one request costs when it is the only
// one: a single caller sends, waits for its answer and sends again, with a
// no-op model, batching on and off, one worker and five. The difference
// between on and off is what batching adds at concurrency 1 (BENCHMARKS.md,
// issue 32); a request through the dispatcher instead of straight to a
// worker shows here as one more goroutine wake-up.
func BenchmarkLoneCaller(b *testing.B) {
	noop := func(_ context.Context, batch []any) ([]any, error) { return batch, nil }
	for _, workers := range []int{1, 5} {
		for _, batching := range []bool{false, true} {
			b.Run(fmt.Sprintf("workers=%d/batching=%t", workers, batching), func(b *testing.B) {
				s := New(Config{Workers: workers, QueueSize: 64, Batching: batching, MaxBatchSize: 64,
					MaxBatchTimeout: 20 * time.Millisecond, Timeout: time.Minute}, noop, sameKey, Observer{}, nil)
				defer s.Stop(context.Background())
				ctx := context.Background()
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := s.Do(ctx, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestLoneRequestsGoStraightToAWorker checks the hand-off of a lone
// request: with nothing queued, the dispatcher holds no worker, so every
// idle worker's token is free for the next caller to take directly, batching
// on or off, and sequential requests run one at a time without waiting.
func TestLoneRequestsGoStraightToAWorker(t *testing.T) {
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%t", batching), func(t *testing.T) {
			d := &double{}
			s := New(Config{Workers: 1, Batching: batching, MaxBatchSize: 8, MaxBatchTimeout: time.Second, Timeout: time.Minute},
				d.run, sameKey, Observer{}, nil)
			defer s.Stop(context.Background())
			for i := range 20 {
				start := time.Now()
				if v, err := s.Do(t.Context(), i); err != nil || v != 2*i {
					t.Fatalf("Do(%d) = %v, %v; want %d", i, v, err, 2*i)
				}
				if el := time.Since(start); el > 200*time.Millisecond {
					t.Fatalf("sequential request %d took %v: a lone request must not wait for the batch timeout", i, el)
				}
				wait.Until(t, 5*time.Second, func() error {
					if n := len(s.free); n != 1 {
						return fmt.Errorf("%d of 1 worker tokens free after request %d: the dispatcher holds one while nothing is queued", n, i)
					}
					return nil
				})
			}
			for _, n := range d.batchSizes() {
				if n != 1 {
					t.Fatalf("batch sizes = %v, want all 1", d.batchSizes())
				}
			}
		})
	}
}
