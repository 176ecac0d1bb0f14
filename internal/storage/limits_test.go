package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Regression tests for downloads that a hostile or broken server never
// lets end (issue 14). Each fetch runs under a generous safety deadline
// so that, on code without the bounds, the test fails instead of hanging;
// the assertions are on the outcome (the error, the requests made, the
// bytes written), never on the time taken.

// safetyNet is the deadline a fetch that should end by itself never reaches.
func safetyNet(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// partials lists what is left under the cache's partial directory.
func partials(t *testing.T, cache string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(cache, "partial"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// noSidecar answers 404 to "<url>.sha256" and passes the rest to h.
func noSidecar(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".sha256") {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	})
}

// counter counts a server's requests.
type counter struct{ n atomic.Int64 }

func (c *counter) get() int { return int(c.n.Load()) }

// serve starts a server that runs h (and has no checksum sidecar) and
// counts its requests.
func serve(t *testing.T, h http.HandlerFunc) (url string, gets *counter) {
	gets = &counter{}
	srv := httptest.NewServer(noSidecar(func(w http.ResponseWriter, r *http.Request) {
		gets.n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, gets
}

// checkEnded checks that a failed fetch made want requests and left no
// partial download.
func checkEnded(t *testing.T, cache string, gets *counter, want int) {
	t.Helper()
	if gets.get() != want {
		t.Errorf("%d requests; want %d", gets.get(), want)
	}
	if left := partials(t, cache); len(left) != 0 {
		t.Errorf("partial files left behind: %q", left)
	}
}

// maxProgress records the most bytes a fetch reported written.
type maxProgress struct {
	mu  sync.Mutex
	max int64
}

func (m *maxProgress) fn(done, _ int64) {
	m.mu.Lock()
	m.max = max(m.max, done)
	m.mu.Unlock()
}

func (m *maxProgress) get() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

// A close-delimited body (no Content-Length) is cut off at the size
// limit while it is read: the cache never holds more than the limit, the
// partial file is removed and the error says how to raise the limit.
func TestHTTPCloseDelimitedBodyStopsAtLimit(t *testing.T) {
	url, gets := serve(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
		chunk := make([]byte, 64<<10)
		// 64 MiB stands for "endless": on code without the limit the
		// fetch succeeds, and the test fails, without filling the disk.
		for range 1024 {
			if _, err := buf.Write(chunk); err != nil {
				return
			}
		}
		buf.Flush()
	})
	cache := t.TempDir()
	f := testFetcher(cache)
	f.MaxModelBytes = 1 << 20
	var prog maxProgress
	_, err := f.Fetch(safetyNet(t), url+"/endless.bin", FetchOptions{Progress: prog.fn})
	var fe *FetchError
	if !errors.As(err, &fe) || !errors.Is(err, ErrTooLarge) || fe.Retryable ||
		!strings.Contains(err.Error(), "1048576") || !strings.Contains(err.Error(), "--max-model-size") {
		t.Fatalf("Fetch = %v; want a final ErrTooLarge naming the limit and --max-model-size", err)
	}
	if got := prog.get(); got > f.MaxModelBytes {
		t.Errorf("%d bytes written to the cache; want at most the %d-byte limit", got, f.MaxModelBytes)
	}
	checkEnded(t, cache, gets, 1) // a body over the limit is not fetched again
}

// A declared size over the limit fails before a byte is written.
func TestHTTPDeclaredSizeOverLimit(t *testing.T) {
	url, gets := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(4<<20))
		w.Header().Set("ETag", `"big"`)
		w.WriteHeader(http.StatusOK)
		w.Write(make([]byte, 4<<20))
	})
	cache := t.TempDir()
	f := testFetcher(cache)
	f.MaxModelBytes = 1 << 20
	var prog maxProgress
	_, err := f.Fetch(safetyNet(t), url+"/big.bin", FetchOptions{Progress: prog.fn})
	var fe *FetchError
	if !errors.As(err, &fe) || !errors.Is(err, ErrTooLarge) || fe.Retryable || !strings.Contains(err.Error(), "4194304") {
		t.Fatalf("Fetch = %v; want a final ErrTooLarge naming the declared 4194304 bytes", err)
	}
	if got := prog.get(); got != 0 {
		t.Errorf("%d bytes written; want none", got)
	}
	checkEnded(t, cache, gets, 1)
}

// An OSS object, or a prefix, over the limit fails on its listed size,
// before any GET.
func TestOSSOverLimit(t *testing.T) {
	fo := newFakeOSS(t)
	fo.put(t, "big/model.bin", make([]byte, 300_000))
	fo.put(t, "dir/a.bin", make([]byte, 60_000))
	fo.put(t, "dir/b.bin", make([]byte, 60_000))
	for _, u := range []string{"oss://" + testBucket + "/big/model.bin", "oss://" + testBucket + "/dir/"} {
		cache := t.TempDir()
		f := ossFetcher(cache)
		f.MaxModelBytes = 100_000
		_, err := f.Fetch(safetyNet(t), u, FetchOptions{OSSEndpoint: fo.endpoint})
		var fe *FetchError
		if !errors.As(err, &fe) || !errors.Is(err, ErrTooLarge) || fe.Retryable || !strings.Contains(err.Error(), "100000") {
			t.Errorf("Fetch(%s) = %v; want a final ErrTooLarge naming the 100000-byte limit", u, err)
		}
		if left := partials(t, cache); len(left) != 0 {
			t.Errorf("%s: partial files left behind: %q", u, left)
		}
	}
	if gets := fo.requests(func(r string) bool {
		return strings.HasPrefix(r, "GET /models/big/") || strings.HasPrefix(r, "GET /models/dir/")
	}); len(gets) != 0 {
		t.Errorf("objects over the limit were downloaded: %q", gets)
	}
}

// A body that sends 1000 bytes and then nothing fails on the idle
// timeout, after a bounded number of attempts, instead of hanging.
func TestHTTPStalledBodyFails(t *testing.T) {
	stop := make(chan struct{})
	url, gets := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // no Content-Length, no validator
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	defer close(stop) // before the server closes, which waits for handlers
	cache := t.TempDir()
	f := testFetcher(cache)
	f.Retries = 2
	f.IdleTimeout = 50 * time.Millisecond
	_, err := f.Fetch(safetyNet(t), url+"/stall.bin", FetchOptions{})
	var fe *FetchError
	if !errors.As(err, &fe) || !errors.Is(err, ErrStalled) || !fe.Retryable || !strings.Contains(err.Error(), "no bytes for 50ms") {
		t.Fatalf("Fetch = %v; want a retryable ErrStalled naming the idle timeout", err)
	}
	checkEnded(t, cache, gets, 1+2)
}

// A server that drops every connection and names no version (no ETag,
// no Last-Modified) cannot be resumed: every attempt starts over, and
// each counts against the retries, so the fetch ends.
func TestHTTPDroppedWithoutValidatorGivesUp(t *testing.T) {
	url, gets := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		w.Write(make([]byte, 10_000))
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	})
	cache := t.TempDir()
	_, err := testFetcher(cache).Fetch(safetyNet(t), url+"/m.bin", FetchOptions{})
	var fe *FetchError
	if !errors.As(err, &fe) || !fe.Retryable || !errors.Is(err, io.ErrUnexpectedEOF) ||
		!strings.Contains(err.Error(), "cannot resume") {
		t.Fatalf("Fetch = %v; want a retryable FetchError saying the download cannot resume", err)
	}
	checkEnded(t, cache, gets, 1+3)
}

// Answers that do not fit the request (416 to a request without a range,
// a 206 that starts elsewhere than asked) end the fetch instead of
// restarting it forever.
func TestHTTPOutOfLineRangeAnswersEnd(t *testing.T) {
	tests := []struct {
		name     string
		handler  func(w http.ResponseWriter, r *http.Request)
		requests int
		want     string
	}{
		{"416 to a plain GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes */10")
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		}, 1, "416"},
		{"206 elsewhere", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 5-9/10")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("56789"))
		}, 4, "bytes 5-9/10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, gets := serve(t, tc.handler)
			cache := t.TempDir()
			_, err := testFetcher(cache).Fetch(safetyNet(t), url+"/m.bin", FetchOptions{})
			var fe *FetchError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch = %v; want a FetchError naming %q", err, tc.want)
			}
			checkEnded(t, cache, gets, tc.requests)
		})
	}
}

// A body that trickles in, each byte inside the idle timeout, ends at the
// overall deadline.
func TestHTTPFetchTimeout(t *testing.T) {
	url, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				w.Write([]byte{'x'})
				w.(http.Flusher).Flush()
			}
		}
	})
	cache := t.TempDir()
	f := testFetcher(cache)
	f.IdleTimeout = 10 * time.Second
	f.FetchTimeout = 200 * time.Millisecond
	_, err := f.Fetch(safetyNet(t), url+"/drip.bin", FetchOptions{})
	var fe *FetchError
	if !errors.As(err, &fe) || !fe.Retryable || !strings.Contains(err.Error(), "did not finish within 200ms") {
		t.Fatalf("Fetch = %v; want a retryable FetchError naming the 200ms deadline", err)
	}
	if left := partials(t, cache); len(left) != 0 {
		t.Errorf("a partial download that cannot resume was left behind: %q", left)
	}
}

// Forget removes what a deleted service left in the cache: its resumable
// partial download and its entries, unless another holder still uses one.
func TestForgetRemovesPartialsAndEntries(t *testing.T) {
	blob := randomBytes(40_000, 20)
	var broken atomic.Bool
	broken.Store(true)
	srv := httptest.NewServer(noSidecar(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken.bin" && broken.Load() {
			if r.Header.Get("Range") != "" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			// Half the body with a validator, then the connection dies:
			// a resumable partial download.
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Length", fmt.Sprint(len(blob)))
			w.WriteHeader(http.StatusOK)
			w.Write(blob[:len(blob)/2])
			w.(http.Flusher).Flush()
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "m.bin", time.Time{}, strings.NewReader(string(blob)))
	}))
	defer srv.Close()
	cache := t.TempDir()
	f := testFetcher(cache)
	f.Retries = 1

	brokenURL := srv.URL + "/broken.bin"
	if _, err := f.Fetch(safetyNet(t), brokenURL, FetchOptions{}); err == nil {
		t.Fatal("Fetch of the broken URL succeeded")
	}
	if left := partials(t, cache); len(left) == 0 {
		t.Fatal("no resumable partial download after the interruption")
	}
	// Two services hold the same model; a third URL is another's model.
	shared := srv.URL + "/shared.bin"
	p1, err := f.Fetch(safetyNet(t), shared, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(safetyNet(t), shared, FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	other := srv.URL + "/other.bin"
	p3, err := f.Fetch(safetyNet(t), other, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.Release(p1)

	if err := f.Forget(safetyNet(t), brokenURL, shared); err != nil {
		t.Fatal(err)
	}
	if left := partials(t, cache); len(left) != 0 {
		t.Errorf("Forget left partial downloads: %q", left)
	}
	if _, err := os.Stat(p1); err != nil {
		t.Errorf("Forget removed an entry another holder still uses: %v", err)
	}
	f.Release(p1) // the second service goes too
	if err := f.Forget(safetyNet(t), shared); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(p1)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("entry of a forgotten, released model still there: %v", err)
	}
	if _, err := os.Stat(p3); err != nil {
		t.Errorf("Forget removed another URL's entry: %v", err)
	}
}

// Partial downloads nobody resumed for PartialMaxAge are removed.
func TestStalePartialsSwept(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "partial")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(dir, "stale-m.bin"), filepath.Join(dir, "fresh-m.bin")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("part"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	ms, srv := newModelServer(t)
	ms.put("/m.bin", []byte("model"))
	f := testFetcher(cache)
	f.PartialMaxAge = 24 * time.Hour
	if _, err := f.Fetch(safetyNet(t), srv.URL+"/m.bin", FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale partial still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh partial removed: %v", err)
	}
}

// A cancelled download that cannot resume leaves no partial file behind.
func TestCancelledFetchLeavesNoPartial(t *testing.T) {
	stop := make(chan struct{})
	url, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // no validator: nothing to resume with
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	defer close(stop)
	cache := t.TempDir()
	f := testFetcher(cache)
	f.ProgressInterval = time.Nanosecond // report the 1000 bytes at once
	ctx, cancel := context.WithCancel(safetyNet(t))
	defer cancel()
	_, err := f.Fetch(ctx, url+"/m.bin", FetchOptions{Progress: func(done, _ int64) {
		if done >= 1000 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch = %v; want context.Canceled", err)
	}
	// The download runs on after its last caller left, until it notices.
	for _, done := range f.group.matching(func(string) bool { return true }) {
		<-done
	}
	if left := partials(t, cache); len(left) != 0 {
		t.Errorf("a cancelled download that cannot resume left %q", left)
	}
}
