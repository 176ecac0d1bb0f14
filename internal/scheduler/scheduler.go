// Package scheduler admits, queues, batches and runs the requests of one
// service version. It knows payloads and a run function, not HTTP.
//
// Semantics (the keys are metadata.rpc's, docs/service-json.md; the status
// codes, docs/protocol.md):
//   - Admission: a full instance answers ErrQueueFull at once; over the rate
//     limit, ErrRateLimited. An instance is full when every worker is busy with
//     a full batch and MaxQueueSize requests wait (with batching off a "full
//     batch" is one request, so the bound is Workers+QueueSize). Admit asks
//     both questions before a payload exists, without admitting or taking a
//     token; Do still enforces both bounds.
//   - Deadline: Timeout (rpc.keepalive) counts from arrival; past it the call
//     returns ErrDeadline wherever the request is, and a queued request is
//     dropped. A caller whose context is cancelled gets ErrCanceled and its
//     queued request is dropped too.
//   - Workers: at most Workers runs at once.
//   - Batching: a batch leaves as soon as a worker is free and it is full, or
//     its oldest request has waited MaxBatchTimeout since arrival, or waiting
//     cannot help: no other run is in progress and no more requests were in
//     flight recently (the peak over the last two windows of
//     2*max(MaxBatchTimeout, 10ms)) than the batch holds. So no latency is
//     added at low load; after a burst, requests may wait up to
//     MaxBatchTimeout for at most two windows. Only payloads with equal batch keys share a batch;
//     others wait for their own. With preferred batch sizes, a batch of
//     the largest preferred size the queue can fill leaves at once.
//   - Hand-off: a request that would leave alone at once (it cannot share a
//     run, or by the rule above nothing is likely to join it) and finds
//     nothing queued and a worker idle goes straight to that worker, batching
//     on or off; the dispatcher goroutine forms batches only from the queue,
//     and holds an idle worker only while requests wait. So at concurrency 1
//     batching costs no extra goroutine wake-up.
//   - A panic in the run function fails only the requests of that batch.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors returned by Do. Callers map them to HTTP status codes
// (in the comments). The messages name the service.json keys behind each
// limit: they are what the service's owner can change.
var (
	// ErrQueueFull: 450.
	ErrQueueFull = errors.New("the service queue is full: every worker is busy and metadata.rpc.max_queue_size requests wait; " +
		"retry later, or raise metadata.rpc.max_queue_size, worker_threads or metadata.instance")
	// ErrRateLimited: 429.
	ErrRateLimited = errors.New("the service rate limit is reached (metadata.rpc.rate_limit requests a second); retry later")
	// ErrDeadline: 408.
	ErrDeadline = errors.New("the request exceeded its deadline (metadata.rpc.keepalive from its arrival)")
	// ErrCanceled: 499.
	ErrCanceled = errors.New("the client closed the request")
	// ErrStopped: 503.
	ErrStopped = errors.New("the service is stopping")
)

// PanicError is returned to every request of a batch whose run panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("processor panic: %v", e.Value) }

// RunFunc runs one batch and returns one result per payload, in order. An
// error fails every request of the batch; a result that is a Failed fails
// only its own request.
type RunFunc func(ctx context.Context, batch []any) ([]any, error)

// Failed is the result of a payload that failed alone in a batch whose
// other payloads have results: its request gets Err.
type Failed struct{ Err error }

// KeyFunc returns a payload's batch key; payloads with equal keys may share a
// batch. ok=false means the payload always runs alone.
type KeyFunc func(payload any) (key string, ok bool)

// Observer receives measurements; any field may be nil. Calls happen on the
// scheduler's goroutines and must be cheap.
type Observer struct {
	Batch     func(size int, compute time.Duration)
	QueueWait func(wait time.Duration)
}

// Config sets the limits of one scheduler. Zero values take the defaults of
// docs/service-json.md (5 workers, queue 64, keepalive 5 s, batch 16, 50 ms).
type Config struct {
	Workers         int           // concurrent runs (rpc.worker_threads)
	QueueSize       int           // waiting requests beyond the running ones (rpc.max_queue_size)
	Timeout         time.Duration // per-request deadline from arrival (rpc.keepalive); <0 = none
	RateLimit       float64       // admitted requests per second; 0 = unlimited (rpc.rate_limit)
	Batching        bool          // rpc.batching
	MaxBatchSize    int           // rpc.max_batch_size
	MaxBatchTimeout time.Duration // rpc.max_batch_timeout
	// PreferredBatchSizes (rpc.preferred_batch_sizes): when the queue holds
	// enough requests for one of these sizes, the largest such batch leaves
	// at once; otherwise the usual rules apply and any size may leave.
	PreferredBatchSizes []int
}

func (c *Config) normalise() {
	if c.Workers <= 0 {
		c.Workers = 5
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 64
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.MaxBatchSize <= 0 {
		c.MaxBatchSize = 16
	}
	if !c.Batching {
		c.MaxBatchSize = 1
	}
	if c.MaxBatchTimeout < 0 {
		c.MaxBatchTimeout = 0
	}
}

// call is one admitted request. Calls are pooled: a call goes back to the
// pool only when no goroutine but its caller can still reach it. Fields
// after the first block are guarded by the scheduler's mutex.
type call struct {
	ctx       context.Context
	payload   any
	key       string
	batchable bool
	arrived   time.Time
	deadline  time.Time   // zero = none
	done      chan result // buffered 1; written once per use
	timer     *time.Timer // the caller's deadline timer, reused

	queued bool // still in the queue
	run    *run // the run it joined, once taken off the queue
}

// run is one model run's context. Its callers share it; when every one of
// them has given up (deadline or cancellation), the run is cancelled, so a
// model that honours its context frees the worker. No timer is involved: the
// callers' own deadline timers drive it.
type run struct {
	ctx     context.Context
	cancel  context.CancelFunc
	waiting int     // callers still waiting; guarded by the scheduler's mutex
	batch   []*call // the calls that share it
}

// newRunLocked makes the run of a batch just taken off the queue. A single
// request's run ends with its caller's context as well.
func newRunLocked(batch []*call) *run {
	base := context.Background()
	if len(batch) == 1 {
		base = batch[0].ctx
	}
	ctx, cancel := context.WithCancel(base)
	r := &run{ctx: ctx, cancel: cancel, waiting: len(batch), batch: batch}
	for _, c := range batch {
		c.run = r
	}
	return r
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan result, 1)} }}

// expired reports whether c's caller has given up or its deadline passed.
func (c *call) expired(now time.Time) bool {
	return c.ctx.Err() != nil || (!c.deadline.IsZero() && !now.Before(c.deadline))
}

// err is the error for an expired call.
func (c *call) err() error {
	if c.ctx.Err() != nil {
		return ctxError(c.ctx)
	}
	return ErrDeadline
}

type result struct {
	value any
	err   error
}

// Scheduler is safe for concurrent use. The zero value is not usable; use New.
type Scheduler struct {
	cfg      Config
	run      RunFunc
	key      KeyFunc
	obs      Observer
	log      *slog.Logger
	capacity int64
	limiter  *limiter

	inflight atomic.Int64 // admitted and not yet answered by a run or a drop
	direct   atomic.Int64 // callers that may be handing a call straight to a worker
	stopping atomic.Bool

	mu     sync.Mutex
	queue  []*call
	arrive chan struct{} // cap 1: "the queue changed"
	free   chan struct{} // worker tokens: cap Workers
	quit   chan struct{} // closed by Stop once the queue is drained
	exited chan struct{} // closed when the dispatcher returns

	// peak is the most requests in flight seen at an arrival in the current
	// window, peakPrev in the window before; windows last peakWindow. They
	// tell a free worker whether the callers of the last run are about to
	// send again. Guarded by mu.
	peak, peakPrev float64
	peakStart      time.Time
	cost           costModel      // guarded by mu
	work           chan []*call   // batches handed to the persistent workers
	runs           sync.WaitGroup // the workers
}

// New starts a scheduler's dispatcher. key may be nil (nothing batches).
func New(cfg Config, run RunFunc, key KeyFunc, obs Observer, log *slog.Logger) *Scheduler {
	cfg.normalise()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{
		cfg:      cfg,
		run:      run,
		key:      key,
		obs:      obs,
		log:      log,
		capacity: int64(cfg.Workers*cfg.MaxBatchSize + cfg.QueueSize),
		arrive:   make(chan struct{}, 1),
		free:     make(chan struct{}, cfg.Workers),
		quit:     make(chan struct{}),
		exited:   make(chan struct{}),
		work:     make(chan []*call),
	}
	if cfg.RateLimit > 0 {
		s.limiter = newLimiter(cfg.RateLimit)
	}
	for range cfg.Workers {
		s.free <- struct{}{}
		s.runs.Add(1)
		go s.worker()
	}
	go s.dispatch()
	return s
}

// Config returns the normalised configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// QueueDepth is the number of requests waiting for a worker.
func (s *Scheduler) QueueDepth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Admit reports whether a request arriving now would be refused at once,
// without admitting one: ErrStopped, ErrRateLimited when no rate-limit token
// is left, ErrQueueFull when the scheduler is at capacity, else nil. It takes
// no token and holds no place, so it cannot leak either: the front calls it
// before it reads and decodes a body, so that an overloaded service refuses
// at the cost of a few atomic loads and one lock. Do decides again; a
// request that passed Admit may still be refused there when others arrived
// meanwhile.
func (s *Scheduler) Admit() error {
	if s.stopping.Load() {
		return ErrStopped
	}
	if s.limiter != nil && !s.limiter.ready() {
		return ErrRateLimited
	}
	if s.inflight.Load() >= s.capacity {
		return ErrQueueFull
	}
	return nil
}

// Do admits payload, waits for its run and returns its result. The error is
// one of the sentinels above, a *PanicError, or the run function's error.
func (s *Scheduler) Do(ctx context.Context, payload any) (any, error) {
	if s.stopping.Load() {
		return nil, ErrStopped
	}
	if s.limiter != nil && !s.limiter.allow() {
		return nil, ErrRateLimited
	}
	inflight := s.inflight.Add(1)
	if inflight > s.capacity {
		s.inflight.Add(-1)
		return nil, ErrQueueFull
	}
	c := callPool.Get().(*call)
	c.ctx, c.payload, c.arrived = ctx, payload, time.Now()
	c.key, c.batchable = "", false
	if s.cfg.Batching && s.key != nil {
		c.key, c.batchable = s.key(payload)
	}
	// The deadline is a reused timer, not a context: a context per request
	// costs several allocations on the hot path.
	var expire <-chan time.Time
	if s.cfg.Timeout > 0 {
		c.deadline = c.arrived.Add(s.cfg.Timeout)
		if c.timer == nil {
			c.timer = time.NewTimer(s.cfg.Timeout)
		} else {
			c.timer.Reset(s.cfg.Timeout)
		}
		expire = c.timer.C
	} else {
		c.deadline = time.Time{}
	}

	// A request that would run alone at once goes straight to an idle
	// worker when nothing is queued ahead of it, batching on or off: a run
	// through the dispatcher costs one more goroutine wake-up, a large part
	// of the cost of a cheap model. (Before issue 32 only an unbatchable
	// request could, and never with one worker, whose token the idle
	// dispatcher held; BENCHMARKS.md.) Stop waits for such sends (s.direct)
	// before it closes the workers' channel.
	s.direct.Add(1)
	s.mu.Lock()
	s.notePeakLocked(c.arrived, float64(inflight))
	s.cost.noteArrival(c.arrived)
	direct := len(s.queue) == 0 && !s.stopping.Load() && s.leavesAloneLocked(c) && s.takeFreeLocked()
	if direct {
		newRunLocked([]*call{c})
	} else {
		c.queued = true
		s.queue = append(s.queue, c)
	}
	s.mu.Unlock()
	if direct {
		s.work <- c.run.batch
	} else {
		s.signal()
	}
	s.direct.Add(-1)

	var err error
	select {
	case r := <-c.done:
		if c.timer != nil {
			c.timer.Stop()
		}
		c.ctx, c.payload, c.run = nil, nil, nil
		callPool.Put(c)
		return r.value, r.err
	case <-ctx.Done():
		err = ctxError(ctx)
	case <-expire:
		err = ErrDeadline
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	s.mu.Lock()
	reusable := c.queued
	if c.queued {
		s.removeLocked(c)
		s.inflight.Add(-1)
	} else if r := c.run; r != nil {
		if r.waiting--; r.waiting == 0 {
			r.cancel() // nobody waits for this run any more
		}
	}
	s.mu.Unlock()
	if reusable { // nobody else holds it
		c.ctx, c.payload, c.run = nil, nil, nil
		callPool.Put(c)
	}
	return nil, err
}

// ctxError maps a finished context to ErrDeadline or ErrCanceled.
func ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrDeadline
	}
	return ErrCanceled
}

func (s *Scheduler) signal() {
	select {
	case s.arrive <- struct{}{}:
	default:
	}
}

func (s *Scheduler) removeLocked(c *call) {
	for i, q := range s.queue {
		if q == c {
			copy(s.queue[i:], s.queue[i+1:])
			s.queue[len(s.queue)-1] = nil
			s.queue = s.queue[:len(s.queue)-1]
			c.queued = false
			return
		}
	}
}

// takeFreeLocked takes a worker token without waiting; false when every
// worker is busy (or the dispatcher holds the last one).
func (s *Scheduler) takeFreeLocked() bool {
	select {
	case <-s.free:
		return true
	default:
		return false
	}
}

// othersBusy is the number of runs in progress, not counting the worker
// token the dispatcher holds while it forms a batch.
func (s *Scheduler) othersBusy() int { return s.cfg.Workers - len(s.free) - 1 }

// leavesAloneLocked reports whether c, arriving at an empty queue, would
// leave at once as a batch of one by formLocked's rule: it cannot share a
// run, or no run is in progress and no more requests were in flight
// recently than c alone (so nothing is likely to join it), or the model's
// cost says waiting does not pay. A token the dispatcher holds counts as a
// run in progress here, which errs towards the queue.
func (s *Scheduler) leavesAloneLocked(c *call) bool {
	if !c.batchable || s.cfg.MaxBatchSize == 1 || s.preferredAtMost(1) == 1 {
		return true
	}
	busy := s.cfg.Workers - len(s.free)
	return !((busy > 0 || 1 < 0.9*min(s.recentPeakLocked(), float64(s.cfg.MaxBatchSize))) && s.cost.waitPays(1))
}

// dispatch forms batches and starts runs until Stop.
func (s *Scheduler) dispatch() {
	defer close(s.exited)
	defer close(s.work)
	for {
		batch := s.nextBatch()
		if batch == nil {
			return
		}
		s.work <- batch // a worker is free: we hold its token
	}
}

// worker runs the batches the dispatcher hands it. Workers live as long as
// the scheduler, so their stacks stay grown.
func (s *Scheduler) worker() {
	defer s.runs.Done()
	for b := range s.work {
		s.execute(b)
	}
}

// nextBatch blocks until a batch may leave and returns it with a worker
// token taken for it; nil means the scheduler quit. The dispatcher holds a
// token only while requests wait: with an empty queue every idle worker's
// token stays in s.free, where a lone request can take it directly (Do).
func (s *Scheduler) nextBatch() []*call {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	held := false
	for {
		s.mu.Lock()
		if len(s.queue) > 0 && !held {
			held = s.takeFreeLocked()
			if !held {
				s.mu.Unlock()
				// Every worker is busy: arrivals change nothing until a run
				// ends, so they do not wake the dispatcher meanwhile.
				select {
				case <-s.free:
					held = true
				case <-s.quit:
					return nil
				}
				continue
			}
		}
		if len(s.queue) == 0 && held {
			// The requests waiting gave up: the worker is idle again.
			s.free <- struct{}{}
			held = false
		}
		if len(s.queue) > 0 {
			batch, wait := s.formLocked()
			if batch != nil {
				s.mu.Unlock()
				return batch
			}
			s.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-s.arrive:
			case <-timer.C:
			case <-s.quit:
				return nil
			}
			continue
		}
		s.mu.Unlock()
		select {
		case <-s.arrive:
		case <-s.quit:
			return nil
		}
	}
}

// formLocked takes a batch off the queue when one may leave now; otherwise
// it returns how long to wait before the oldest request's batch timeout.
func (s *Scheduler) formLocked() ([]*call, time.Duration) {
	head := s.queue[0]
	if !head.batchable || s.cfg.MaxBatchSize == 1 {
		s.takeLocked(0)
		batch := []*call{head}
		newRunLocked(batch)
		return batch, 0
	}
	n := 0
	for _, c := range s.queue {
		if c.batchable && c.key == head.key {
			n++
			if n == s.cfg.MaxBatchSize {
				break
			}
		}
	}
	if p := s.preferredAtMost(n); p > 0 {
		// A preferred size can be formed: it leaves now, the rest waits.
		n = p
	} else if n < s.cfg.MaxBatchSize && (s.othersBusy() > 0 || float64(n) < 0.9*min(s.recentPeakLocked(), float64(s.cfg.MaxBatchSize))) && s.cost.waitPays(n) {
		// More requests are likely to come: other runs are in progress (their
		// callers will send again), or recently more requests were in flight
		// than this batch holds (the callers of the last run are sending
		// again); and the model's cost says a fuller batch runs more rows
		// per second than this one would (see costModel). Wait for the batch
		// to fill, up to the oldest request's timeout. At low load only this
		// batch's requests were in flight, so nothing waits.
		if wait := time.Until(head.arrived.Add(s.cfg.MaxBatchTimeout)); wait > 0 {
			return nil, wait
		}
	}
	batch := make([]*call, 0, n)
	kept := s.queue[:0]
	for _, c := range s.queue {
		if len(batch) < n && c.batchable && c.key == head.key {
			c.queued = false
			batch = append(batch, c)
		} else {
			kept = append(kept, c)
		}
	}
	clear(s.queue[len(kept):])
	s.queue = kept
	newRunLocked(batch)
	return batch, 0
}

// peakWindow is how long one window of the in-flight peak lasts: long
// enough to span a batch cycle, short enough that a lone request after a
// burst waits for its batch timeout only briefly.
func (s *Scheduler) peakWindow() time.Duration {
	return 2 * max(s.cfg.MaxBatchTimeout, 10*time.Millisecond)
}

// notePeakLocked records the requests in flight at an arrival.
func (s *Scheduler) notePeakLocked(now time.Time, inflight float64) {
	switch el := now.Sub(s.peakStart); {
	case el > 2*s.peakWindow(): // quiet for two windows: forget the past
		s.peak, s.peakPrev, s.peakStart = 0, 0, now
	case el > s.peakWindow():
		s.peakPrev, s.peak, s.peakStart = s.peak, 0, now
	}
	s.peak = max(s.peak, inflight)
}

// recentPeakLocked is the most requests in flight over the last two windows.
func (s *Scheduler) recentPeakLocked() float64 { return max(s.peak, s.peakPrev) }

// preferredAtMost returns the largest preferred batch size <= n, or 0.
func (s *Scheduler) preferredAtMost(n int) int {
	best := 0
	for _, p := range s.cfg.PreferredBatchSizes {
		if p <= n && p > best {
			best = p
		}
	}
	return best
}

func (s *Scheduler) takeLocked(i int) {
	c := s.queue[i]
	c.queued = false
	copy(s.queue[i:], s.queue[i+1:])
	s.queue[len(s.queue)-1] = nil
	s.queue = s.queue[:len(s.queue)-1]
}

// execute runs one batch on a worker token and answers its calls.
func (s *Scheduler) execute(batch []*call) {
	defer func() {
		s.free <- struct{}{}
		s.signal() // a partial batch waiting on busy workers may now leave
	}()

	// Drop requests that expired or were cancelled between take and run.
	now := time.Now()
	live := batch[:0]
	for _, c := range batch {
		if c.expired(now) {
			s.answer(c, result{err: c.err()})
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	start := now
	if s.obs.QueueWait != nil {
		for _, c := range live {
			s.obs.QueueWait(start.Sub(c.arrived))
		}
	}
	payloads := make([]any, len(live))
	for i, c := range live {
		payloads[i] = c.payload
	}
	r := batch[0].run
	defer r.cancel()
	ctx := r.ctx
	out, err := s.safeRun(ctx, payloads)
	took := time.Since(start)
	if s.cfg.Batching && err == nil {
		s.mu.Lock()
		s.cost.noteRun(len(live), took)
		s.mu.Unlock()
	}
	if s.obs.Batch != nil {
		s.obs.Batch(len(live), took)
	}
	if err == nil && len(out) != len(live) {
		err = fmt.Errorf("processor returned %d results for a batch of %d", len(out), len(live))
	}
	for i, c := range live {
		if err != nil {
			s.answer(c, result{err: err})
		} else if f, failed := out[i].(Failed); failed {
			s.answer(c, result{err: f.Err}) // a per-request failure inside the batch
		} else {
			s.answer(c, result{value: out[i]})
		}
	}
}

// answer hands a run's call its result. The call leaves the in-flight
// count first: a caller that sends again the moment it has its answer must
// not find its finished request still counted, or the recent-peak rule of
// formLocked takes it for a second client and holds the new request for
// the whole batch timeout.
func (s *Scheduler) answer(c *call, r result) {
	s.inflight.Add(-1)
	c.done <- r
}

func (s *Scheduler) safeRun(ctx context.Context, payloads []any) (out []any, err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			s.log.Error("processor panic recovered", "panic", fmt.Sprint(v), "batch_size", len(payloads), "stack", string(pe.Stack))
			out, err = nil, pe
		}
	}()
	return s.run(ctx, payloads)
}

// Stop refuses new requests, lets queued and running ones finish, and
// returns when all are answered. When ctx ends first, the requests still
// queued get ErrStopped and Stop returns ctx's error after the running ones.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	var err error
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
			s.mu.Lock()
			for _, c := range s.queue {
				c.queued = false
				c.done <- result{err: ErrStopped}
				s.inflight.Add(-1)
			}
			s.queue = nil
			s.mu.Unlock()
			break wait
		case <-tick.C:
		}
	}
	for s.direct.Load() > 0 { // a caller handing its call to a worker
		<-tick.C
	}
	close(s.quit)
	<-s.exited
	s.runs.Wait()

	// Requests that raced past the stopping check are answered too.
	s.mu.Lock()
	for _, c := range s.queue {
		c.queued = false
		c.done <- result{err: ErrStopped}
		s.inflight.Add(-1)
	}
	s.queue = nil
	s.mu.Unlock()
	return err
}
