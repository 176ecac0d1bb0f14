// Command queuebench measures an asynchronous service: producers put
// requests into its input queue for a duration (closed loop: each waits
// for its put's answer before the next), while one watcher takes the
// answers from the sink (websocket, auto commit) and matches them to their
// puts by request id. It prints JSON: puts per second and the put latency,
// and the end-to-end latency from put to answer received. With -puts-only
// it only puts, into the queue -url names; with -fill N it puts N entries
// there and stops. With -read each producer takes its own answer as the
// README says, GET <sink>?requestId=<id>&_timeout_=30s, instead of one
// watcher taking them all, and -watchers N first opens N websocket
// watchers on the sink whose tag filter matches nothing.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eas-server/eas-server/queue"
)

func main() {
	url := flag.String("url", "", "the service: http://host:port/api/predict/<name>")
	token := flag.String("token", "", "the service token")
	producers := flag.Int("producers", 64, "concurrent producers")
	dur := flag.Duration("d", 10*time.Second, "how long to put")
	size := flag.Int("size", 64, "bytes per request")
	putsOnly := flag.Bool("puts-only", false, "put into the queue at -url itself and watch nothing (the queue's put capacity)")
	fillN := flag.Int("fill", 0, "put this many entries into the queue at -url, then stop")
	read := flag.Bool("read", false, "each producer reads its answer: GET <sink>?requestId=<id>&_timeout_=30s")
	watchers := flag.Int("watchers", 0, "with -read: websocket watchers on the sink whose filter matches nothing")
	flag.Parse()
	var err error
	switch {
	case *fillN > 0:
		err = fill(*url, *token, *producers, *fillN, *size)
	case *read:
		err = runRead(*url, *token, *producers, *dur, *size, *watchers)
	default:
		err = run(*url, *token, *producers, *dur, *size, *putsOnly)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
}

func run(url, token string, producers int, dur time.Duration, size int, putsOnly bool) error {
	ctx := context.Background()
	in := &queue.Client{URL: url, Token: token}
	sink := &queue.Client{URL: url + "/sink", Token: token}
	var mu sync.Mutex
	// An answer may arrive before its put's caller has noted the id, so
	// both sides are noted and joined at the end.
	sent := map[string]time.Time{}
	recv := map[string]time.Time{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ch <-chan queue.Frame
	if putsOnly {
		none := make(chan queue.Frame)
		close(none)
		ch = none
	} else {
		var err error
		if ch, err = sink.Watch(wctx, 0, 1000, false, true, false); err != nil {
			return err
		}
	}
	got := make(chan struct{})
	answers := 0
	go func() {
		defer close(got)
		for f := range ch {
			now := time.Now()
			mu.Lock()
			recv[f.Tags[queue.RequestIDTag]] = now
			answers++
			mu.Unlock()
		}
	}()
	body := make([]byte, size)
	var putLat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(dur)
	puts := 0
	var putErr error
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for time.Now().Before(end) {
				t := time.Now()
				_, id, err := in.Put(ctx, body, nil, 0)
				if err != nil {
					mu.Lock()
					putErr = err
					mu.Unlock()
					return
				}
				d := time.Since(t)
				lat = append(lat, d)
				mu.Lock()
				sent[id] = t
				mu.Unlock()
			}
			mu.Lock()
			putLat = append(putLat, lat...)
			puts += len(lat)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if putErr != nil {
		return putErr
	}
	// Wait for the answers still on their way.
	deadline := time.Now().Add(60 * time.Second)
	for !putsOnly && time.Now().Before(deadline) {
		mu.Lock()
		done := answers >= puts
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-got
	var e2e []time.Duration
	for id, t := range sent {
		if r, ok := recv[id]; ok {
			e2e = append(e2e, r.Sub(t))
		}
	}
	pct := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	out := map[string]any{
		"producers": producers, "puts": puts, "puts_per_second": float64(puts) / elapsed.Seconds(),
		"put_p50_ms": pct(putLat, .5), "put_p99_ms": pct(putLat, .99),
		"answers": len(e2e), "e2e_p50_ms": pct(e2e, .5), "e2e_p99_ms": pct(e2e, .99),
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// fill puts n entries of size bytes into the queue at url.
func fill(url, token string, producers, n, size int) error {
	ctx := context.Background()
	q := &queue.Client{URL: url, Token: token}
	body := make([]byte, size)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	start := time.Now()
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, _, err := q.Put(ctx, body, map[string]string{"bench": "fill"}, 0); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"filled": n, "seconds": time.Since(start).Seconds()})
}

// runRead measures round trips: put a request, then read its answer by
// request id, waiting up to 30 s, as the README's clients do.
func runRead(url, token string, producers int, dur time.Duration, size, watchers int) error {
	ctx := context.Background()
	in := &queue.Client{URL: url, Token: token}
	sink := &queue.Client{URL: url + "/sink", Token: token}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stray atomic.Int64
	for i := range watchers {
		ch, err := sink.WatchMatching(wctx, map[string]string{"bench": fmt.Sprintf("none-%d", i)}, 0, 1, false, false, false)
		if err != nil {
			return fmt.Errorf("watcher %d: %w", i, err)
		}
		go func() {
			for range ch {
				stray.Add(1)
			}
		}()
	}
	body := make([]byte, size)
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(dur)
	for range producers {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) {
				t := time.Now()
				_, id, err := in.Put(ctx, body, nil, 0)
				var fs []queue.Frame
				if err == nil {
					fs, err = sink.Get(ctx, 0, 1, 30*time.Second, false, map[string]string{queue.RequestIDTag: id})
				}
				if err == nil && len(fs) != 1 {
					err = fmt.Errorf("no answer for %s within 30s", id)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"producers": producers, "watchers": watchers, "round_trips": len(lat), "round_trips_per_second": float64(len(lat)) / elapsed.Seconds(),
		"p50_ms": pct(.5), "p99_ms": pct(.99), "watcher_frames": stray.Load(),
	})
}
