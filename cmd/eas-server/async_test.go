package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	"github.com/eas-server/eas-server/queue"
)

// TestAsyncKillRestartLosesNothing: kill -9 of the server with 1,000
// requests queued and 50 in flight; after the restart every request is
// answered in the sink exactly once, none lost (a request cut short is
// redelivered, its answer tagged with the delivery count).
func TestAsyncKillRestartLosesNothing(t *testing.T) {
	stateDir := t.TempDir()
	spec := teststack.WriteFile(t, t.TempDir(), "async.json", `{"name": "work", "processor": "echo", "token": "tok",
		"model_config": {"sleep_ms": 100},
		"metadata": {"instance": 2, "type": "Async", "rpc": {"worker_threads": 25, "keepalive": 60000}},
		"queue": {"source": {"max_length": 5000}, "sink": {"max_length": 5000}}}`)
	a := startChild(t, nil, "--state-dir", stateDir, "--deploy", spec)
	ctx := context.Background()
	in := &queue.Client{URL: a.url + "/api/predict/work", Token: "tok"}
	waitAttrs := func(c *queue.Client) {
		t.Helper()
		wait.Until(t, 30*time.Second, func() error {
			if _, err := c.Attributes(ctx); err != nil {
				return fmt.Errorf("the queue did not come up: %w", err)
			}
			return nil
		})
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
	// Kill once some are answered and 50 run (2 instances x window 25).
	inFlight := `eas_async_queue_in_flight{queue="input",service="work"} 50`
	wait.Until(t, 20*time.Second, func() error {
		attrs, err := (&queue.Client{URL: in.URL + "/sink", Token: "tok"}).Attributes(ctx)
		if err != nil || attrs["stream.length"] == "0" {
			return fmt.Errorf("no answer in the sink yet: %v %v", attrs["stream.length"], err)
		}
		metrics := scrape(t, a.url)
		if !strings.Contains(metrics, inFlight) {
			return fmt.Errorf("/metrics lacks %s:\n%s", inFlight, grepLines(metrics, "eas_async_queue_in_flight"))
		}
		return nil
	})
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

// scrape returns the server's /metrics.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
