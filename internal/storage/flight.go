package storage

import (
	"context"
	"strings"
	"sync"
	"time"
)

// flightGroup lets concurrent fetches of one URL share one download: the
// first caller starts it, later callers wait for its result and receive its
// progress. The download runs on a context of its own that ends only when
// every caller has gone, so one impatient deploy does not fail the others.
type flightGroup struct {
	interval time.Duration // least time between two progress reports

	mu      sync.Mutex
	flights map[string]*flight
}

type flight struct {
	done   chan struct{}
	path   string
	err    error
	cancel context.CancelFunc

	mu       sync.Mutex
	subs     map[int]func(done, total int64)
	retries  map[int]func(n, max int, err error)
	next     int
	waiters  int
	lastSent time.Time
	sentOnce bool
	cur      [2]int64 // latest done, total
	sent     [2]int64 // latest delivered done, total
}

// do runs fn once for key among concurrent callers. progress, when not nil,
// receives this caller's share of the reports; fn's report may be called as
// often as bytes arrive: do throttles it. retry, when not nil, receives
// every retry fn reports through retried, unthrottled.
func (g *flightGroup) do(ctx context.Context, key string, progress func(done, total int64), retry func(n, max int, err error),
	fn func(ctx context.Context, report func(done, total int64), retried func(n, max int, err error)) (string, error)) (string, error) {
	g.mu.Lock()
	if g.flights == nil {
		g.flights = map[string]*flight{}
	}
	fl, running := g.flights[key]
	var start func()
	if !running {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		fl = &flight{done: make(chan struct{}), cancel: cancel, subs: map[int]func(int64, int64){}, retries: map[int]func(int, int, error){}}
		g.flights[key] = fl
		start = func() {
			go func() {
				defer cancel()
				path, err := fn(fctx, func(done, total int64) { fl.report(g.interval, done, total, false) }, fl.retried)
				if err == nil {
					fl.mu.Lock()
					cur := fl.cur
					fl.mu.Unlock()
					fl.report(g.interval, cur[0], cur[1], true)
				}
				g.mu.Lock()
				delete(g.flights, key)
				g.mu.Unlock()
				fl.path, fl.err = path, err
				close(fl.done)
			}()
		}
	}
	fl.mu.Lock()
	id := fl.next
	fl.next++
	if progress != nil {
		fl.subs[id] = progress
	}
	if retry != nil {
		fl.retries[id] = retry
	}
	fl.waiters++
	fl.mu.Unlock()
	g.mu.Unlock()
	if start != nil {
		start()
	}
	return fl.wait(ctx, id)
}

func (fl *flight) wait(ctx context.Context, id int) (string, error) {
	select {
	case <-fl.done:
		return fl.path, fl.err
	case <-ctx.Done():
		fl.mu.Lock()
		delete(fl.subs, id)
		delete(fl.retries, id)
		fl.waiters--
		last := fl.waiters == 0
		fl.mu.Unlock()
		if last {
			fl.cancel()
		}
		return "", ctx.Err()
	}
}

// report records progress and passes it on when the interval has passed
// since the last delivery, on the first report, and when final.
func (fl *flight) report(interval time.Duration, done, total int64, final bool) {
	fl.mu.Lock()
	fl.cur = [2]int64{done, total}
	now := time.Now()
	if fl.sentOnce && !final && now.Sub(fl.lastSent) < interval {
		fl.mu.Unlock()
		return
	}
	if final && (!fl.sentOnce || fl.sent == fl.cur) {
		fl.mu.Unlock()
		return
	}
	fl.sentOnce, fl.lastSent, fl.sent = true, now, fl.cur
	subs := make([]func(int64, int64), 0, len(fl.subs))
	for _, s := range fl.subs {
		subs = append(subs, s)
	}
	fl.mu.Unlock()
	for _, s := range subs {
		s(done, total)
	}
}

// retried passes a retry on to every caller that asked for them.
func (fl *flight) retried(n, max int, err error) {
	fl.mu.Lock()
	subs := make([]func(int, int, error), 0, len(fl.retries))
	for _, s := range fl.retries {
		subs = append(subs, s)
	}
	fl.mu.Unlock()
	for _, s := range subs {
		s(n, max, err)
	}
}

// flightURL is the URL a flight key starts with.
func flightURL(key string) string {
	u, _, _ := strings.Cut(key, "\x00")
	return u
}

// matching returns the done channels of the running flights whose URL
// match accepts.
func (g *flightGroup) matching(match func(url string) bool) []chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []chan struct{}
	for k, fl := range g.flights {
		if match(flightURL(k)) {
			out = append(out, fl.done)
		}
	}
	return out
}

// urls returns the URLs of the running flights.
func (g *flightGroup) urls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.flights))
	for k := range g.flights {
		out = append(out, flightURL(k))
	}
	return out
}
