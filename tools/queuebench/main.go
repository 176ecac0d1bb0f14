// Command queuebench measures an asynchronous service: producers put
// requests into its input queue for a duration (closed loop: each waits
// for its put's answer before the next), while one watcher takes the
// answers from the sink (websocket, auto commit) and matches them to their
// puts by request id. It prints JSON: puts per second and the put latency,
// and the end-to-end latency from put to answer received. With -puts-only
// it only puts, into the queue -url names.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
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
	flag.Parse()
	if err := run(*url, *token, *producers, *dur, *size, *putsOnly); err != nil {
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
