package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/wait"
)

// modelServer serves files like a static web server (ETag, conditional and
// ranged requests via http.ServeContent) and counts what it answered.
type modelServer struct {
	mu       sync.Mutex
	files    map[string][]byte
	drop     map[string]bool // next unranged GET of the path dies halfway
	status   map[string]int  // path -> status to answer instead
	gate     chan struct{}   // when set, GETs of files wait for it to close
	answered map[string][]int
	ranges   []string
}

func newModelServer(t *testing.T) (*modelServer, *httptest.Server) {
	ms := &modelServer{files: map[string][]byte{}, drop: map[string]bool{}, status: map[string]int{}, answered: map[string][]int{}}
	srv := httptest.NewServer(ms)
	t.Cleanup(srv.Close)
	return ms, srv
}

func (ms *modelServer) put(path string, data []byte) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.files[path] = data
}

func (ms *modelServer) count(path string, code int) int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	n := 0
	for _, c := range ms.answered[path] {
		if c == code {
			n++
		}
	}
	return n
}

// codeRecorder records the status when the header goes out, before the
// client can see the response.
type codeRecorder struct {
	http.ResponseWriter
	ms   *modelServer
	path string
}

func (c *codeRecorder) WriteHeader(code int) {
	c.ms.mu.Lock()
	c.ms.answered[c.path] = append(c.ms.answered[c.path], code)
	c.ms.mu.Unlock()
	c.ResponseWriter.WriteHeader(code)
}

func (ms *modelServer) requests(path string) int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return len(ms.answered[path])
}

func (ms *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ms.mu.Lock()
	data, ok := ms.files[r.URL.Path]
	status := ms.status[r.URL.Path]
	drop := ms.drop[r.URL.Path] && r.Header.Get("Range") == ""
	if drop {
		ms.drop[r.URL.Path] = false
	}
	if rg := r.Header.Get("Range"); rg != "" {
		ms.ranges = append(ms.ranges, rg)
	}
	gate := ms.gate
	ms.mu.Unlock()
	rec := &codeRecorder{ResponseWriter: w, ms: ms, path: r.URL.Path}
	if status != 0 {
		rec.WriteHeader(status)
		return
	}
	if !ok {
		http.NotFound(rec, r)
		return
	}
	if gate != nil {
		<-gate
	}
	sum := sha256.Sum256(data)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	if drop {
		// Send the headers and half the body, then cut the connection.
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		rec.WriteHeader(http.StatusOK)
		w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(rec, r, filepath.Base(r.URL.Path), time.Time{}, bytes.NewReader(data))
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func testFetcher(dir string) *Fetcher {
	return &Fetcher{CacheDir: dir, Retries: 3, RetryBackoff: time.Millisecond}
}

func TestHTTPResumeAfterDropVerifiesSidecar(t *testing.T) {
	ms, srv := newModelServer(t)
	blob := randomBytes(300_000, 1)
	ms.put("/models/m.onnx", blob)
	ms.put("/models/m.onnx.sha256", []byte(sha(blob)+"  m.onnx\n"))
	ms.drop["/models/m.onnx"] = true

	var last [2]int64
	f := testFetcher(t.TempDir())
	p, err := f.Fetch(t.Context(), srv.URL+"/models/m.onnx", FetchOptions{Progress: func(d, tot int64) { last = [2]int64{d, tot} }})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	got, _ := os.ReadFile(p)
	if !bytes.Equal(got, blob) || filepath.Base(p) != "m.onnx" {
		t.Fatalf("fetched %s with %d bytes; want m.onnx with the %d served", p, len(got), len(blob))
	}
	if want := fmt.Sprintf("bytes=%d-", len(blob)/2); len(ms.ranges) != 1 || ms.ranges[0] != want {
		t.Errorf("range requests %q; want one %q resuming after the drop", ms.ranges, want)
	}
	if n := ms.count("/models/m.onnx", http.StatusPartialContent); n != 1 {
		t.Errorf("%d partial answers; want 1", n)
	}
	if last != [2]int64{int64(len(blob)), int64(len(blob))} {
		t.Errorf("last progress %v; want done = total = %d", last, len(blob))
	}
}

func TestHTTPRestartDoesNotDownloadAgain(t *testing.T) {
	ms, srv := newModelServer(t)
	blob := randomBytes(50_000, 2)
	ms.put("/m.bin", blob)
	cache := t.TempDir()
	u := srv.URL + "/m.bin"

	first, err := testFetcher(cache).Fetch(t.Context(), u, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A new Fetcher on the same directory is a restarted server.
	second, err := testFetcher(cache).Fetch(t.Context(), u, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("restart fetched into %s, first into %s", second, first)
	}
	if full, nm := ms.count("/m.bin", 200), ms.count("/m.bin", 304); full != 1 || nm != 1 {
		t.Errorf("server sent the model %d times and 304 %d times; want 1 and 1", full, nm)
	}
	// With a checksum the cache answers without asking the server.
	before := ms.requests("/m.bin")
	third, err := testFetcher(cache).Fetch(t.Context(), u, FetchOptions{SHA256: sha(blob)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(third)
	if !bytes.Equal(got, blob) || ms.requests("/m.bin") != before {
		t.Errorf("checksum fetch: %d bytes, %d new requests; want the model and no request", len(got), ms.requests("/m.bin")-before)
	}
	// A new version on the server is downloaded.
	blob2 := randomBytes(50_000, 3)
	ms.put("/m.bin", blob2)
	fourth, err := testFetcher(cache).Fetch(t.Context(), u, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(fourth)
	if !bytes.Equal(got, blob2) || ms.count("/m.bin", 200) != 2 {
		t.Errorf("after a change: got the new bytes %v, %d downloads; want true, 2", bytes.Equal(got, blob2), ms.count("/m.bin", 200))
	}
	// The server going away does not stop a restart with a cached model.
	srv.Close()
	fifth, err := testFetcher(cache).Fetch(t.Context(), u, FetchOptions{})
	if err != nil || fifth != fourth {
		t.Errorf("offline restart = %s, %v; want the cached %s", fifth, err, fourth)
	}
}

func TestHTTPChecksumMismatch(t *testing.T) {
	ms, srv := newModelServer(t)
	blob := []byte("the model")
	ms.put("/a.bin", blob)
	ms.put("/b.bin", blob)
	ms.put("/b.bin.sha256", []byte(strings.Repeat("ab", 32)))
	ms.put("/c.bin", blob)
	ms.put("/c.bin.sha256", []byte("not a checksum"))
	tests := []struct {
		path, sum, want string
	}{
		{"/a.bin", strings.Repeat("0", 64), "sha256 mismatch: got " + sha(blob)},
		{"/b.bin", "", "sha256 mismatch"},
		{"/c.bin", "", "checksum sidecar: sha256"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, err := testFetcher(t.TempDir()).Fetch(t.Context(), srv.URL+tc.path, FetchOptions{SHA256: tc.sum})
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Retryable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch = %v; want a final FetchError with %q", err, tc.want)
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	ms, srv := newModelServer(t)
	ms.status["/private"] = http.StatusForbidden
	ms.status["/busy"] = http.StatusServiceUnavailable
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	tests := []struct {
		name, url string
		is        error
		retryable bool
		want      string
	}{
		{"missing", srv.URL + "/nope.onnx?Signature=s3cr3t", ErrNotFound, false, "404 Not Found; check model_path"},
		{"forbidden", srv.URL + "/private", ErrAccessDenied, false, "signed URL"},
		{"busy", srv.URL + "/busy", nil, true, "503 Service Unavailable"},
		{"unreachable", dead.URL + "/m.onnx?Signature=s3cr3t", ErrUnreachable, true, "check the host and port"},
		{"scheme", "ftp://host/m.onnx", ErrUnsupportedScheme, false, "use a local path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := testFetcher(t.TempDir()).Fetch(t.Context(), tc.url, FetchOptions{})
			var fe *FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("Fetch = %v; want a *FetchError", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) || fe.Retryable != tc.retryable || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Fetch = %v (retryable %v); want %v, retryable %v, %q", err, fe.Retryable, tc.is, tc.retryable, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error shows the URL's secret: %v", err)
			}
		})
	}
	if n := ms.count("/busy", http.StatusServiceUnavailable); n != 4 {
		t.Errorf("busy server asked %d times; want 1 + 3 retries", n)
	}
	if n := ms.count("/private", http.StatusForbidden); n != 1 {
		t.Errorf("forbidden asked %d times; a 403 must not be retried", n)
	}
}

func TestHTTPArchiveUnpacked(t *testing.T) {
	ms, srv := newModelServer(t)
	ms.put("/model.tar.gz", gz(t, makeTar(t, goodEntries)))
	ms.put("/evil.zip", makeZip(t, []ent{{name: "../../evil", body: "x", typ: 'f'}}))
	f := testFetcher(t.TempDir())
	dir, err := f.Fetch(t.Context(), srv.URL+"/model.tar.gz", FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "model", "weights.bin")); err != nil || string(b) != "weights v1" {
		t.Errorf("unpacked weights = %q, %v", b, err)
	}
	_, err = f.Fetch(t.Context(), srv.URL+"/evil.zip", FetchOptions{})
	if !errors.Is(err, ErrUnsafeArchive) {
		t.Errorf("evil zip: %v; want ErrUnsafeArchive", err)
	}
}

// waitersAre is a wait.Until condition: the running downloads of f have
// want callers waiting on them, in all.
func waitersAre(f *Fetcher, want int) func() error {
	return func() error {
		f.group.mu.Lock()
		defer f.group.mu.Unlock()
		got := 0
		for _, fl := range f.group.flights {
			fl.mu.Lock()
			got += fl.waiters
			fl.mu.Unlock()
		}
		if got != want {
			return fmt.Errorf("%d callers wait on %d downloads, want %d callers", got, len(f.group.flights), want)
		}
		return nil
	}
}

func TestConcurrentFetchesShareOneDownload(t *testing.T) {
	ms, srv := newModelServer(t)
	blob := randomBytes(100_000, 4)
	ms.put("/shared.bin", blob)
	ms.gate = make(chan struct{})
	f := testFetcher(t.TempDir())
	const n = 5
	paths := make([]string, n)
	errs := make([]error, n)
	var progressed [n]bool
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			paths[i], errs[i] = f.Fetch(t.Context(), srv.URL+"/shared.bin", FetchOptions{Progress: func(d, tot int64) {
				progressed[i] = d == tot
			}})
		})
	}
	wait.Until(t, 10*time.Second, waitersAre(f, n)) // every caller joined the one flight
	close(ms.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || paths[i] != paths[0] || !progressed[i] {
			t.Errorf("caller %d: %s, %v, final progress %v; want %s, nil, true", i, paths[i], errs[i], progressed[i], paths[0])
		}
	}
	if got := ms.count("/shared.bin", 200); got != 1 {
		t.Errorf("%d downloads for %d concurrent fetches; want 1", got, n)
	}
}

func TestWaiterLeavingDoesNotCancelOthers(t *testing.T) {
	ms, srv := newModelServer(t)
	ms.put("/m.bin", []byte("model"))
	ms.gate = make(chan struct{})
	f := testFetcher(t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	firstErr := make(chan error, 1)
	go func() {
		_, err := f.Fetch(ctx, srv.URL+"/m.bin", FetchOptions{})
		firstErr <- err
	}()
	wait.Until(t, 10*time.Second, waitersAre(f, 1)) // the first caller started the download
	second := make(chan error, 1)
	go func() {
		_, err := f.Fetch(t.Context(), srv.URL+"/m.bin", FetchOptions{})
		second <- err
	}()
	wait.Until(t, 10*time.Second, waitersAre(f, 2)) // the second joined it
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v; want context.Canceled", err)
	}
	close(ms.gate)
	if err := <-second; err != nil {
		t.Errorf("the caller that stayed: %v", err)
	}
}

func TestProgressThrottled(t *testing.T) {
	ms, srv := newModelServer(t)
	blob := randomBytes(2_000_000, 5)
	ms.put("/big.bin", blob)
	f := testFetcher(t.TempDir())
	f.ProgressInterval = time.Hour
	var calls [][2]int64
	_, err := f.Fetch(t.Context(), srv.URL+"/big.bin", FetchOptions{Progress: func(d, tot int64) { calls = append(calls, [2]int64{d, tot}) }})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(blob))
	if len(calls) != 2 || calls[0] != [2]int64{0, n} || calls[1] != [2]int64{n, n} {
		t.Errorf("progress calls %v; want only the start and the end", calls)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	ms, srv := newModelServer(t)
	a, b := randomBytes(60_000, 6), randomBytes(60_000, 7)
	ms.put("/a.bin", a)
	ms.put("/b.bin", b)
	f := testFetcher(t.TempDir())
	f.MaxCacheBytes = 100_000
	pa, err := f.Fetch(t.Context(), srv.URL+"/a.bin", FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// a's service stopped long ago.
	f.Release(pa)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(filepath.Join(f.cache.entryOf(pa), "meta.json"), old, old)
	pb, err := f.Fetch(t.Context(), srv.URL+"/b.bin", FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pa); !os.IsNotExist(err) {
		t.Errorf("least recently used entry still there (%v)", err)
	}
	if _, err := os.Stat(pb); err != nil {
		t.Errorf("new entry gone: %v", err)
	}
	// b is held (not released): even old, it stays while a comes back.
	os.Chtimes(filepath.Join(f.cache.entryOf(pb), "meta.json"), old, old)
	if _, err := f.Fetch(t.Context(), srv.URL+"/a.bin", FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pb); err != nil {
		t.Errorf("held entry evicted: %v", err)
	}
	if n := ms.count("/a.bin", 200); n != 2 {
		t.Errorf("a downloaded %d times; want 2 (evicted in between)", n)
	}
}

func TestLocalPaths(t *testing.T) {
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "m.onnx"), []byte("model"), 0o644)
	os.WriteFile(filepath.Join(base, "m.tgz"), gz(t, makeTar(t, goodEntries)), 0o644)
	f := testFetcher(t.TempDir())
	tests := []struct {
		url, want, err string
	}{
		{"m.onnx", filepath.Join(base, "m.onnx"), ""},
		{filepath.Join(base, "m.onnx"), filepath.Join(base, "m.onnx"), ""},
		{"file://" + filepath.Join(base, "m.onnx"), filepath.Join(base, "m.onnx"), ""},
		{"missing.onnx", "", "no file or directory at " + filepath.Join(base, "missing.onnx")},
	}
	for _, tc := range tests {
		p, err := f.Fetch(t.Context(), tc.url, FetchOptions{BaseDir: base})
		if tc.err != "" {
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Fetch(%s) = %v; want %q", tc.url, err, tc.err)
			}
			continue
		}
		if err != nil || p != tc.want {
			t.Errorf("Fetch(%s) = %s, %v; want %s", tc.url, p, err, tc.want)
		}
	}
	dir, err := f.Fetch(t.Context(), "m.tgz", FetchOptions{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model", "weights.bin")); string(b) != "weights v1" {
		t.Errorf("local archive not unpacked into %s", dir)
	}
	again, err := f.Fetch(t.Context(), "m.tgz", FetchOptions{BaseDir: base})
	if err != nil || again != dir {
		t.Errorf("second fetch of the archive = %s, %v; want the cached %s", again, err, dir)
	}
}

func TestSplitModelSHA256(t *testing.T) {
	sum := strings.Repeat("aB", 32)
	tests := []struct {
		config, want, rest, err string
	}{
		{``, "", ``, ""},
		{`{"threads": 2}`, "", `{"threads": 2}`, ""},
		{`{"model_sha256": "` + sum + `", "threads": 2}`, strings.ToLower(sum), `{"threads":2}`, ""},
		{`"{\"model_sha256\": \"` + sum + `\"}"`, strings.ToLower(sum), `"{}"`, ""},
		{`"free text"`, "", `"free text"`, ""},
		{`{"model_sha256": 12}`, "", "", "want a string of 64 hex digits"},
		{`{"model_sha256": "abc"}`, "", "", "want 64 hex digits, got 3"},
	}
	for _, tc := range tests {
		got, rest, err := SplitModelSHA256(json.RawMessage(tc.config))
		if got != tc.want || string(rest) != tc.rest || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("SplitModelSHA256(%s) = %q, %s, %v; want %q, %s, %q", tc.config, got, rest, err, tc.want, tc.rest, tc.err)
		}
		if only, _ := ModelSHA256(json.RawMessage(tc.config)); only != tc.want {
			t.Errorf("ModelSHA256(%s) = %q; want %q", tc.config, only, tc.want)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := map[string]string{
		"https://user:pw@host/m.onnx?OSSAccessKeyId=a&Signature=b": "https://redacted@host/m.onnx?redacted",
		"oss://bucket/key/m.onnx":                                  "oss://bucket/key/m.onnx",
		"/local/path":                                              "/local/path",
	}
	for in, want := range tests {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%s) = %s; want %s", in, got, want)
		}
	}
}

func TestDiskFull(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4611686018427387904") // 4 EiB
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	_, err := testFetcher(t.TempDir()).Fetch(t.Context(), srv.URL+"/huge.bin", FetchOptions{})
	var fe *FetchError
	if !errors.As(err, &fe) || !errors.Is(err, ErrDiskFull) || fe.Retryable || !strings.Contains(err.Error(), "needs 4611686018427387904 bytes but only") {
		t.Fatalf("Fetch = %v; want a final ErrDiskFull naming the sizes", err)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "/cache/x", Err: syscall.ENOSPC}, false},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{fmt.Errorf("get: %w", context.Canceled), false},
		{&FetchError{Retryable: true, Err: errors.New("x")}, true},
		{errors.New("sha256 mismatch"), false},
	}
	for _, tc := range tests {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
	if err := classify(&os.PathError{Op: "write", Path: "/c/x", Err: syscall.ENOSPC}, "/c"); !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "no space left under /c") {
		t.Errorf("classify(ENOSPC) = %v", err)
	}
}

// flakyServer serves /m.bin with an ETag and ranges, but answers 503 to
// the first busy GETs and cuts every body after cut bytes (0: never).
type flakyServer struct {
	data   []byte
	cut    int
	mu     sync.Mutex
	busy   int
	gets   int
	ranges []string
}

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/m.bin" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.gets++
	busy := s.busy > 0
	if busy {
		s.busy--
	}
	if rg := r.Header.Get("Range"); rg != "" {
		s.ranges = append(s.ranges, rg)
	}
	s.mu.Unlock()
	if busy {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	sum := sha256.Sum256(s.data)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	if s.cut > 0 {
		w = &cutWriter{ResponseWriter: w, left: s.cut}
	}
	http.ServeContent(w, r, "m.bin", time.Time{}, bytes.NewReader(s.data))
}

// cutWriter sends left bytes of the body, then closes the connection.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if w.left <= 0 {
		return 0, errors.New("cut")
	}
	n, _ := w.ResponseWriter.Write(p[:min(len(p), w.left)])
	if w.left -= n; w.left > 0 {
		return n, nil
	}
	w.ResponseWriter.(http.Flusher).Flush()
	if conn, _, err := w.ResponseWriter.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
	return n, errors.New("cut")
}

// fetch fetches /m.bin from s with f, checks the bytes and closes the
// server, so that gets and ranges can be read.
func (s *flakyServer) fetch(t *testing.T, f *Fetcher) {
	t.Helper()
	srv := httptest.NewServer(s)
	p, err := f.Fetch(t.Context(), srv.URL+"/m.bin", FetchOptions{})
	srv.Close() // waits for the handlers
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, s.data) {
		t.Errorf("fetched %d bytes; want the %d served", len(got), len(s.data))
	}
}

func TestHTTPRetriesBusyServer(t *testing.T) {
	fs := &flakyServer{data: randomBytes(20_000, 4), busy: 2}
	fs.fetch(t, testFetcher(t.TempDir()))
	if fs.gets != 3 {
		t.Errorf("%d requests; want 2 busy + 1 download", fs.gets)
	}
}

// A link that drops every few kilobytes still finishes a file: each
// attempt that brings bytes resets the retry count.
func TestHTTPResumesWhileBytesCome(t *testing.T) {
	fs := &flakyServer{data: randomBytes(50_000, 5), cut: 10_000}
	f := testFetcher(t.TempDir())
	f.Retries = 1
	fs.fetch(t, f)
	want := []string{"bytes=10000-", "bytes=20000-", "bytes=30000-", "bytes=40000-"}
	if fmt.Sprint(fs.ranges) != fmt.Sprint(want) {
		t.Errorf("range requests %q; want %q", fs.ranges, want)
	}
}

// A body that dies before its first byte, every time, is given up after
// the retries.
func TestHTTPInterruptedWithoutProgressGivesUp(t *testing.T) {
	var mu sync.Mutex
	gets := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gets++
		mu.Unlock()
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	_, err := testFetcher(t.TempDir()).Fetch(t.Context(), srv.URL+"/m.bin", FetchOptions{})
	var fe *FetchError
	if !errors.As(err, &fe) || !fe.Retryable || !errors.Is(err, io.ErrUnexpectedEOF) ||
		!strings.Contains(err.Error(), "download interrupted at byte 0 of 1000 after 3 retries") {
		t.Fatalf("Fetch = %v; want a retryable FetchError saying the download was interrupted after 3 retries", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if gets != 4 {
		t.Errorf("%d requests; want 1 + 3 retries", gets)
	}
}
