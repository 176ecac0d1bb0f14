package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
)

// TestDrainSequenceUnderLoad sends SIGTERM to a server under load and checks
// what a load balancer sees, in order: /readyz turns 503 at once while
// predictions are still answered (with Connection: close, so clients
// reconnect); after --shutdown-delay new connections are refused; requests
// in flight finish; no accepted request fails.
func TestDrainSequenceUnderLoad(t *testing.T) {
	dir := t.TempDir()
	svc := teststack.WriteFile(t, dir, "slow.json", `{"name":"slow","processor":"echo","token":"T","model_config":{"sleep_ms":150},"metadata":{"instance":2}}`)
	const delay = 1500 * time.Millisecond
	c := startChild(t, []string{"EAS_ADMIN_TOKEN=admin"}, "--state-dir", t.TempDir(), "--deploy", svc,
		"--shutdown-delay", delay.String(), "--shutdown-grace", "10s")
	waitReady(t, c.url)

	// Load: keep-alive clients sending predictions until refused.
	var (
		ok, refused, closeHdr atomic.Int64
		mu                    sync.Mutex
		failures              []string
		wg                    sync.WaitGroup
		stop                  atomic.Bool
		afterDelay            atomic.Bool // set once the delay has passed
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				req, _ := http.NewRequest("POST", c.url+"/api/predict/slow", bytes.NewReader([]byte("x")))
				req.Header.Set("Authorization", "T")
				var reused bool
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
				}))
				resp, err := client.Do(req)
				if err != nil {
					// A new connection the kernel queued as the listener
					// closed is reset or cut (EOF), not refused: the same
					// answer to a client that came too late.
					lateNew := !reused && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)) && afterDelay.Load()
					if errors.Is(err, syscall.ECONNREFUSED) || lateNew {
						refused.Add(1)
						time.Sleep(20 * time.Millisecond) // pacing: a refused client retries, not in a busy loop
						continue
					}
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%v (reused connection: %v)", err, reused))
					mu.Unlock()
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != "x" {
					mu.Lock()
					failures = append(failures, resp.Status+" "+string(b))
					mu.Unlock()
					continue
				}
				ok.Add(1)
				if resp.Close {
					closeHdr.Add(1)
				}
			}
		}()
	}
	wait.Until(t, 20*time.Second, func() error {
		if n := ok.Load(); n < 8 {
			return fmt.Errorf("%d requests answered before the signal, want 8 (one per client)", n)
		}
		return nil
	})
	before := ok.Load()

	sigAt := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(delay-20*time.Millisecond, func() { afterDelay.Store(true) })
	// 1. Not ready at once, from a fresh connection.
	// fresh sends one request on a new keep-alive connection.
	fresh := func(method, path string) (*http.Response, string, error) {
		req, _ := http.NewRequest(method, c.url+path, strings.NewReader("x"))
		req.Header.Set("Authorization", "T")
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	var notReadyAt time.Time
	wait.Until(t, delay/2-time.Since(sigAt), func() error {
		resp, body, err := fresh("GET", "/readyz")
		if err != nil {
			t.Fatalf("/readyz refused %v after SIGTERM, inside the %v delay: %v", time.Since(sigAt), delay, err)
		}
		if resp.StatusCode != 503 || !strings.Contains(body, "shutting down") {
			return fmt.Errorf("/readyz still answers %s %q %v after SIGTERM, want 503 shutting down", resp.Status, body, time.Since(sigAt))
		}
		notReadyAt = time.Now()
		return nil
	})
	// 2. Still serving, closing connections.
	resp, body, err := fresh("POST", "/api/predict/slow")
	if err != nil || resp.StatusCode != 200 || body != "x" || !resp.Close {
		t.Fatalf("a prediction while draining: %v %v %q", err, resp, body)
	}
	// 3. Refused after the delay, not before.
	var refusedAt time.Time
	wait.Until(t, delay+5*time.Second-time.Since(sigAt), func() error {
		_, _, err := fresh("GET", "/healthz")
		if err == nil {
			return fmt.Errorf("the listener still accepts %v after SIGTERM", time.Since(sigAt))
		}
		// Refused, or (queued by the kernel as the listener closed)
		// reset or cut before an answer.
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Fatalf("after the delay: %v, want connection refused", err)
		}
		refusedAt = time.Now()
		return nil
	})
	if d := refusedAt.Sub(sigAt); d < delay-100*time.Millisecond {
		t.Fatalf("connections refused %v after SIGTERM, before the %v delay", d, delay)
	}
	stop.Store(true)
	wg.Wait()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("server exit: %v\n%s", err, c.stderr())
	}
	<-c.done
	if len(failures) > 0 {
		t.Fatalf("%d requests failed during the drain (want 0), e.g. %q", len(failures), failures[0])
	}
	if ok.Load() == before || closeHdr.Load() == 0 {
		t.Fatalf("requests served during the delay: %d (with Connection: close: %d)", ok.Load()-before, closeHdr.Load())
	}
	logs := c.stderr()
	i, j, k := strings.Index(logs, "draining"), strings.Index(logs, "shutting down"), strings.Index(logs, "msg=stopped")
	if i < 0 || j < i || k < j {
		t.Fatalf("the log does not show draining, then shutting down, then stopped:\n%s", logs)
	}
	t.Logf("served %d before, %d during the drain (%d with Connection: close); refused %d; not-ready after %v, refused after %v",
		before, ok.Load()-before, closeHdr.Load(), refused.Load(), notReadyAt.Sub(sigAt), refusedAt.Sub(sigAt))
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, url string) {
	t.Helper()
	wait.Until(t, 20*time.Second, func() error {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return fmt.Errorf("the server is not ready: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("the server is not ready: /readyz answers %s", resp.Status)
		}
		return nil
	})
}
