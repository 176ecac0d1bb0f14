package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eas-server/eas-server/queue"
)

// TestAsyncKillRestartLosesNothing: kill -9 of the server with 1,000
// requests queued and 50 in flight; after the restart every request is
// answered in the sink exactly once, none lost (a request cut short is
// redelivered, its answer tagged with the delivery count).
func TestAsyncKillRestartLosesNothing(t *testing.T) {
	stateDir := t.TempDir()
	spec := writeFile(t, t.TempDir(), "async.json", `{"name": "work", "processor": "echo", "token": "tok",
		"model_config": {"sleep_ms": 100},
		"metadata": {"instance": 2, "type": "Async", "rpc": {"worker_threads": 25, "keepalive": 60000}},
		"queue": {"source": {"max_length": 5000}, "sink": {"max_length": 5000}}}`)
	a := startChild(t, nil, "--state-dir", stateDir, "--deploy", spec)
	ctx := context.Background()
	in := &queue.Client{URL: a.url + "/api/predict/work", Token: "tok"}
	waitAttrs := func(c *queue.Client) map[string]string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			attrs, err := c.Attributes(ctx)
			if err == nil {
				return attrs
			}
			if time.Now().After(deadline) {
				t.Fatalf("the queue did not come up: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitAttrs(in)
	const n = 1000
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				_, id, err := in.Put(ctx, fmt.Appendf(nil, "req-%d", i), nil, 0)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Wait for 50 in flight (2 instances x window 25), then kill.
	deadline := time.Now().Add(20 * time.Second)
	for {
		attrs, err := in.Attributes(ctx)
		if err == nil && attrs["consumers.status.total"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instances did not start: %v %v", attrs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond) // some answered, 50 running
	a.kill(t)

	b := startChild(t, nil, "--state-dir", stateDir)
	in.URL = b.url + "/api/predict/work"
	sink := &queue.Client{URL: in.URL + "/sink", Token: "tok"}
	waitAttrs(sink)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ch, err := sink.Watch(wctx, 0, 100, false, true, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, id := range ids {
		want[id] = fmt.Sprintf("req-%d", i)
	}
	got := map[string]int{}
	redelivered := 0
	for f := range ch {
		id := f.Tags[queue.RequestIDTag]
		got[id]++
		if body, ok := want[id]; !ok || string(f.Data) != body || f.Tags["status"] != "200" {
			t.Errorf("answer %q for %q: %q status %s", f.Data, id, body, f.Tags["status"])
		}
		if f.Tags["deliveries"] != "" {
			redelivered++
		}
		if len(got) == n {
			break
		}
	}
	for id, c := range got {
		if c != 1 {
			t.Errorf("request %s answered %d times", id, c)
		}
	}
	if len(got) != n {
		t.Fatalf("%d of %d requests answered after the restart", len(got), n)
	}
	if redelivered == 0 {
		t.Errorf("no answer says it was redelivered; the kill should have cut some requests short")
	}
	t.Logf("%d requests answered once each, %d of them redelivered after the kill", n, redelivered)
}
