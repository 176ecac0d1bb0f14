package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/wait"
)

// double is a run function that doubles int payloads and records batch sizes.
type double struct {
	mu      sync.Mutex
	sizes   []int
	delay   time.Duration
	release chan struct{} // when non-nil, each run waits for a value
}

func (d *double) run(ctx context.Context, batch []any) ([]any, error) {
	d.mu.Lock()
	d.sizes = append(d.sizes, len(batch))
	d.mu.Unlock()
	if d.release != nil {
		select {
		case <-d.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if d.delay > 0 {
		time.Sleep(d.delay) // the model's work time, not synchronisation
	}
	out := make([]any, len(batch))
	for i, p := range batch {
		v, ok := p.(int)
		if !ok {
			return nil, fmt.Errorf("payload %d is %T", i, p)
		}
		if v < 0 {
			panic("negative payload")
		}
		out[i] = v * 2
	}
	return out, nil
}

func (d *double) batchSizes() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.sizes...)
}

func sameKey(any) (string, bool) { return "k", true }

func TestDoReturnsResult(t *testing.T) {
	d := &double{}
	s := New(Config{}, d.run, nil, Observer{}, nil)
	defer s.Stop(context.Background())
	got, err := s.Do(t.Context(), 21)
	if err != nil || got != 42 {
		t.Fatalf("Do(21) = %v, %v; want 42, nil", got, err)
	}
}

func TestQueueFullRejectsExcessAtOnce(t *testing.T) {
	const workers, queue = 2, 3
	d := &double{release: make(chan struct{})}
	s := New(Config{Workers: workers, QueueSize: queue, Timeout: time.Minute}, d.run, nil, Observer{}, nil)

	var wg sync.WaitGroup
	errs := make(chan error, workers+queue)
	for i := range workers + queue {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Do(context.Background(), i)
			errs <- err
		}()
	}
	wait.Until(t, 5*time.Second, inflightIs(s, workers+queue))

	start := time.Now()
	if _, err := s.Do(t.Context(), 99); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("request beyond workers+queue: err = %v, want ErrQueueFull", err)
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("queue-full answer took %v, want immediate", el)
	}
	close(d.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("admitted request failed: %v", err)
		}
	}
	s.Stop(context.Background())
}

func TestDeadlineInQueueAndInRun(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int32
	run := func(_ context.Context, batch []any) ([]any, error) {
		runs.Add(1)
		<-release // ignores its context: the caller must get 408 anyway
		return batch, nil
	}
	s := New(Config{Workers: 1, Timeout: 50 * time.Millisecond}, run, nil, Observer{}, nil)
	defer s.Stop(context.Background())

	var wg sync.WaitGroup
	results := make([]error, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = s.Do(context.Background(), i)
		}()
	}
	wg.Wait()
	for i, err := range results {
		if !errors.Is(err, ErrDeadline) {
			t.Errorf("request %d: err = %v, want ErrDeadline", i, err)
		}
	}
	close(release)
	wait.Until(t, 5*time.Second, both(inflightIs(s, 0), depthIs(s, 0)))
	if n := runs.Load(); n != 1 {
		t.Errorf("runs started = %d, want 1 (the queued requests expired and were dropped)", n)
	}
}

func TestCancelledRequestIsDropped(t *testing.T) {
	d := &double{release: make(chan struct{})}
	s := New(Config{Workers: 1, Timeout: time.Minute}, d.run, nil, Observer{}, nil)
	defer s.Stop(context.Background())

	go s.Do(context.Background(), 1) // occupies the only worker
	wait.Until(t, 5*time.Second, batchesAre(d, 1))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := s.Do(ctx, 2)
		done <- err
	}()
	wait.Until(t, 5*time.Second, depthIs(s, 1))
	cancel()
	if err := <-done; !errors.Is(err, ErrCanceled) {
		t.Fatalf("cancelled request: err = %v, want ErrCanceled", err)
	}
	if q := s.QueueDepth(); q != 0 {
		t.Fatalf("queue depth after cancel = %d, want 0", q)
	}
	close(d.release)
	wait.Until(t, 5*time.Second, inflightIs(s, 0))
	if n := len(d.batchSizes()); n != 1 {
		t.Errorf("runs = %d, want 1 (the cancelled request never ran)", n)
	}
}

func TestPanicFailsOnlyItsBatch(t *testing.T) {
	d := &double{}
	s := New(Config{Workers: 2}, d.run, nil, Observer{}, nil)
	defer s.Stop(context.Background())
	_, err := s.Do(t.Context(), -1)
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("panicking run: err = %v, want *PanicError", err)
	}
	if got, err := s.Do(t.Context(), 4); err != nil || got != 8 {
		t.Fatalf("after panic: Do(4) = %v, %v; want 8, nil", got, err)
	}
}

func TestRunErrorReachesCaller(t *testing.T) {
	d := &double{}
	s := New(Config{}, d.run, nil, Observer{}, nil)
	defer s.Stop(context.Background())
	if _, err := s.Do(t.Context(), "not an int"); err == nil || err.Error() != "payload 0 is string" {
		t.Fatalf("err = %v, want the run's error", err)
	}
}

func TestRateLimit(t *testing.T) {
	d := &double{}
	s := New(Config{RateLimit: 2}, d.run, nil, Observer{}, nil)
	defer s.Stop(context.Background())
	var limited int
	for i := range 10 {
		if _, err := s.Do(t.Context(), i); errors.Is(err, ErrRateLimited) {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited < 7 {
		t.Errorf("rate limit 2/s let %d of 10 back-to-back requests through", 10-limited)
	}
}

func TestNoBatchingAtIdle(t *testing.T) {
	d := &double{}
	s := New(Config{Batching: true, MaxBatchSize: 8, MaxBatchTimeout: time.Second}, d.run, sameKey, Observer{}, nil)
	defer s.Stop(context.Background())
	for i := range 5 {
		start := time.Now()
		if _, err := s.Do(t.Context(), i); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > 200*time.Millisecond {
			t.Fatalf("sequential request %d took %v: idle dispatch must not wait for the batch timeout", i, el)
		}
	}
	for _, n := range d.batchSizes() {
		if n != 1 {
			t.Fatalf("batch sizes at idle = %v, want all 1", d.batchSizes())
		}
	}
}

func TestBatchesFormUnderLoad(t *testing.T) {
	d := &double{release: make(chan struct{})}
	s := New(Config{Workers: 1, QueueSize: 64, Batching: true, MaxBatchSize: 8, MaxBatchTimeout: time.Second, Timeout: time.Minute},
		d.run, sameKey, Observer{}, nil)
	defer s.Stop(context.Background())

	go s.Do(context.Background(), 0) // occupies the worker
	wait.Until(t, 5*time.Second, batchesAre(d, 1))

	var wg sync.WaitGroup
	results := make([]any, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Do(context.Background(), i+1)
			if err != nil {
				t.Error(err)
			}
			results[i] = v
		}()
	}
	wait.Until(t, 5*time.Second, depthIs(s, 20))
	close(d.release)
	wg.Wait()
	for i, v := range results {
		if v != (i+1)*2 {
			t.Errorf("result %d = %v, want %d", i, v, (i+1)*2)
		}
	}
	sizes := d.batchSizes()
	want := []int{1, 8, 8, 4}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("batch sizes = %v, want %v", sizes, want)
	}
}

func TestDifferentKeysNeverShareABatch(t *testing.T) {
	d := &double{release: make(chan struct{})}
	key := func(p any) (string, bool) { return fmt.Sprint(p.(int) % 2), true }
	var mixed atomic.Bool
	run := func(ctx context.Context, batch []any) ([]any, error) {
		for _, p := range batch[1:] {
			if p.(int)%2 != batch[0].(int)%2 {
				mixed.Store(true)
			}
		}
		return d.run(ctx, batch)
	}
	s := New(Config{Workers: 1, Batching: true, MaxBatchSize: 16, Timeout: time.Minute}, run, key, Observer{}, nil)
	defer s.Stop(context.Background())
	go s.Do(context.Background(), 100)
	wait.Until(t, 5*time.Second, batchesAre(d, 1))
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); s.Do(context.Background(), i) }()
	}
	wait.Until(t, 5*time.Second, depthIs(s, 10))
	close(d.release)
	wg.Wait()
	if mixed.Load() {
		t.Fatal("payloads with different keys shared a batch")
	}
	if got := fmt.Sprint(d.batchSizes()); got != "[1 5 5]" {
		t.Errorf("batch sizes = %s, want [1 5 5]", got)
	}
}

func TestBatchTimeoutMeasuredFromArrival(t *testing.T) {
	// Two workers: one is busy, so a partial batch waits for the timeout.
	block := make(chan struct{})
	var sizes []int
	var mu sync.Mutex
	run := func(ctx context.Context, batch []any) ([]any, error) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		mu.Unlock()
		if batch[0] == 0 {
			<-block
		}
		out := make([]any, len(batch))
		copy(out, batch)
		return out, nil
	}
	s := New(Config{Workers: 2, Batching: true, MaxBatchSize: 8, MaxBatchTimeout: 100 * time.Millisecond, Timeout: time.Minute},
		run, sameKey, Observer{}, nil)
	defer s.Stop(context.Background())
	defer close(block)
	go s.Do(context.Background(), 0)
	wait.Until(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(sizes) != 1 {
			return fmt.Errorf("batches run: %v, want the first one running", sizes)
		}
		return nil
	})

	start := time.Now()
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); s.Do(context.Background(), i) }()
	}
	wg.Wait()
	el := time.Since(start)
	if el < 90*time.Millisecond || el > 2*time.Second {
		t.Errorf("partial batch left after %v, want about the 100ms batch timeout", el)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sizes) != "[1 3]" {
		t.Errorf("batch sizes = %v, want [1 3]", sizes)
	}
}

func TestStopDrainsThenRefuses(t *testing.T) {
	d := &double{delay: 20 * time.Millisecond}
	s := New(Config{Workers: 1}, d.run, nil, Observer{}, nil)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Do(context.Background(), i); err != nil {
				t.Errorf("queued request during drain: %v", err)
			}
		}()
	}
	wait.Until(t, 5*time.Second, inflightIs(s, 5))
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := s.Do(t.Context(), 1); !errors.Is(err, ErrStopped) {
		t.Fatalf("after Stop: err = %v, want ErrStopped", err)
	}
}

func TestObserver(t *testing.T) {
	d := &double{}
	var batches, waits atomic.Int32
	obs := Observer{
		Batch:     func(size int, _ time.Duration) { batches.Add(int32(size)) },
		QueueWait: func(time.Duration) { waits.Add(1) },
	}
	s := New(Config{}, d.run, nil, obs, nil)
	for i := range 3 {
		s.Do(t.Context(), i)
	}
	s.Stop(context.Background())
	if batches.Load() != 3 || waits.Load() != 3 {
		t.Errorf("observed %d batch rows and %d waits, want 3 and 3", batches.Load(), waits.Load())
	}
}

// inflightIs is a wait.Until condition: the scheduler holds want calls
// (admitted, not yet answered).
func inflightIs(s *Scheduler, want int64) func() error {
	return func() error {
		if got := s.inflight.Load(); got != want {
			return fmt.Errorf("%d calls in flight, want %d", got, want)
		}
		return nil
	}
}

// depthIs is a wait.Until condition: want requests wait for a worker.
func depthIs(s *Scheduler, want int) func() error {
	return func() error {
		if got := s.QueueDepth(); got != want {
			return fmt.Errorf("queue depth %d, want %d", got, want)
		}
		return nil
	}
}

// both is a wait.Until condition that holds when a and b do.
func both(a, b func() error) func() error {
	return func() error {
		if err := a(); err != nil {
			return err
		}
		return b()
	}
}

// batchesAre is a wait.Until condition: d has started want batches.
func batchesAre(d *double, want int) func() error {
	return func() error {
		if got := d.batchSizes(); len(got) != want {
			return fmt.Errorf("batches started: %v, want %d", got, want)
		}
		return nil
	}
}

// BenchmarkScheduler measures the scheduler alone: a no-op model, 64
// concurrent callers, batching on.
func BenchmarkScheduler(b *testing.B) {
	noop := func(_ context.Context, batch []any) ([]any, error) { return batch, nil }
	s := New(Config{Workers: 5, QueueSize: 1024, Batching: true, MaxBatchSize: 64, MaxBatchTimeout: time.Millisecond},
		noop, sameKey, Observer{}, nil)
	defer s.Stop(context.Background())
	b.ReportAllocs()
	b.SetParallelism(64 / max(1, runtimeGOMAXPROCS()))
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := s.Do(ctx, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	// CPU time per request does not depend on what else the machine runs;
	// cores*1e9/cpu-ns is the rate an otherwise idle machine would reach.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is this process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func runtimeGOMAXPROCS() int { return runtime.GOMAXPROCS(0) }

func TestPreferredBatchSizes(t *testing.T) {
	d := &double{release: make(chan struct{})}
	s := New(Config{Workers: 1, Batching: true, MaxBatchSize: 16, PreferredBatchSizes: []int{4, 8}, MaxBatchTimeout: time.Second, Timeout: time.Minute},
		d.run, sameKey, Observer{}, nil)
	defer s.Stop(context.Background())
	go s.Do(context.Background(), 0)
	wait.Until(t, 5*time.Second, batchesAre(d, 1))
	var wg sync.WaitGroup
	for i := range 14 {
		wg.Add(1)
		go func() { defer wg.Done(); s.Do(context.Background(), i) }()
	}
	wait.Until(t, 5*time.Second, depthIs(s, 14))
	close(d.release)
	wg.Wait()
	// 14 queued: a preferred 8, then a preferred 4, then the last 2 at idle.
	if got := fmt.Sprint(d.batchSizes()); got != "[1 8 4 2]" {
		t.Errorf("batch sizes = %s, want [1 8 4 2]", got)
	}
}

func TestFailedResultFailsOnlyItsRequest(t *testing.T) {
	release := make(chan struct{})
	run := func(_ context.Context, batch []any) ([]any, error) {
		<-release
		out := make([]any, len(batch))
		for i, p := range batch {
			if p.(int) == 3 {
				out[i] = Failed{Err: errors.New("bad payload 3")}
			} else {
				out[i] = p
			}
		}
		return out, nil
	}
	s := New(Config{Workers: 1, Batching: true, MaxBatchSize: 8, Timeout: time.Minute}, run, sameKey, Observer{}, nil)
	defer s.Stop(context.Background())
	go s.Do(context.Background(), 0)
	wait.Until(t, 5*time.Second, both(inflightIs(s, 1), depthIs(s, 0)))
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := 1; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = s.Do(context.Background(), i) }()
	}
	wait.Until(t, 5*time.Second, depthIs(s, 4))
	close(release)
	wg.Wait()
	for i := 1; i < 5; i++ {
		if (errs[i] != nil) != (i == 3) {
			t.Errorf("request %d: err = %v; only request 3 should fail", i, errs[i])
		}
	}
}

// TestAdmitRefusesWithoutAdmitting: Admit answers what Do would at the
// bounds, and neither holds a place nor takes a rate-limit token.
func TestAdmitRefusesWithoutAdmitting(t *testing.T) {
	t.Run("queue", func(t *testing.T) {
		d := &double{release: make(chan struct{})}
		s := New(Config{Workers: 1, QueueSize: 1, Timeout: time.Minute}, d.run, nil, Observer{}, nil)
		defer s.Stop(context.Background())
		for range 5 {
			if err := s.Admit(); err != nil {
				t.Fatalf("Admit on an idle scheduler = %v, want nil", err)
			}
		}
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				if _, err := s.Do(context.Background(), i); err != nil {
					t.Errorf("admitted request failed: %v", err)
				}
			})
		}
		wait.Until(t, 5*time.Second, inflightIs(s, 2))
		if err := s.Admit(); !errors.Is(err, ErrQueueFull) {
			t.Errorf("Admit at capacity = %v, want ErrQueueFull", err)
		}
		if n := s.inflight.Load(); n != 2 {
			t.Errorf("Admit changed the requests in flight to %d, want 2", n)
		}
		close(d.release)
		wg.Wait()
		if err := s.Admit(); err != nil {
			t.Errorf("Admit after the queue drained = %v, want nil", err)
		}
	})
	t.Run("rate", func(t *testing.T) {
		d := &double{}
		s := New(Config{RateLimit: 1}, d.run, nil, Observer{}, nil)
		defer s.Stop(context.Background())
		for range 5 {
			if err := s.Admit(); err != nil {
				t.Fatalf("Admit with a token left = %v, want nil (it must not take the token)", err)
			}
		}
		if _, err := s.Do(t.Context(), 1); err != nil {
			t.Fatalf("Do after Admits = %v; Admit took the one token", err)
		}
		if err := s.Admit(); !errors.Is(err, ErrRateLimited) {
			t.Errorf("Admit with no token left = %v, want ErrRateLimited", err)
		}
		if _, err := s.Do(t.Context(), 2); !errors.Is(err, ErrRateLimited) {
			t.Errorf("Do with no token left = %v, want ErrRateLimited", err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		s := New(Config{}, (&double{}).run, nil, Observer{}, nil)
		s.Stop(context.Background())
		if err := s.Admit(); !errors.Is(err, ErrStopped) {
			t.Errorf("Admit after Stop = %v, want ErrStopped", err)
		}
	})
}
