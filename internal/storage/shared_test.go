//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/wait"
)

// These tests run real processes on one cache directory: the test binary
// runs itself again as TestSharedCacheChild, which fetches one URL with a
// Fetcher of its own.

const childEnv = "EAS_SHARED_CACHE_CHILD"

// TestSharedCacheChild is the child process: it fetches $URL into $CACHE,
// prints "RESULT <path> <sha256 of the file>", and with HOLD=1 keeps the
// path in use until its stdin closes.
func TestSharedCacheChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("a child process of the shared cache tests")
	}
	f := &Fetcher{CacheDir: os.Getenv("CACHE"), RetryBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	p, err := f.Fetch(context.Background(), os.Getenv("URL"), FetchOptions{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("RESULT", p, fileSum(t, p))
	if os.Getenv("HOLD") == "1" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		f.Release(p)
		fmt.Println("RELEASED")
	}
}

func fileSum(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func dataSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // stdout and stderr, line by line; closed at EOF
	eof   chan struct{} // closed after lines

	mu  sync.Mutex
	out strings.Builder
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSharedCacheChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	c := &child{cmd: cmd, stdin: in, lines: make(chan string, 1000), eof: make(chan struct{})}
	go func() {
		defer close(c.eof)
		defer close(c.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// await returns the first line that contains s; it fails the test when
// the child ends or a minute passes first.
func (c *child) await(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended without printing %q:\n%s", s, c.output())
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-timeout:
			t.Fatalf("child did not print %q in a minute:\n%s", s, c.output())
		}
	}
}

// result parses a RESULT line.
func result(t *testing.T, line string) (path, sum string) {
	t.Helper()
	f := strings.Fields(line[strings.Index(line, "RESULT "):])
	if len(f) != 3 {
		t.Fatalf("bad result line %q", line)
	}
	return f[1], f[2]
}

// wait waits for the child to exit and its output to be read.
func (c *child) wait(t *testing.T) {
	t.Helper()
	err := c.cmd.Wait()
	<-c.eof
	if err != nil {
		t.Fatalf("child: %v\n%s", err, c.output())
	}
}

// resultIn finds the RESULT line in the child's whole output.
func (c *child) resultIn(t *testing.T) (path, sum string) {
	t.Helper()
	for _, l := range strings.Split(c.output(), "\n") {
		if strings.HasPrefix(l, "RESULT ") {
			return result(t, l)
		}
	}
	t.Fatalf("no result:\n%s", c.output())
	return "", ""
}

// Two processes fetch one URL at once: one downloads, the other waits for
// its lock and takes its entry.
func TestSharedCacheOneDownload(t *testing.T) {
	data := randomBytes(256<<10, 1)
	var gets atomic.Int32
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/model.bin" {
			http.NotFound(w, r)
			return
		}
		// No ETag nor Last-Modified: without the lock, the second process
		// would have nothing to revalidate and would download again.
		gets.Add(1)
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data[:1024])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write(data[1024:])
	}))
	t.Cleanup(srv.Close) // after the children are killed
	cache := t.TempDir()
	env := []string{"CACHE=" + cache, "URL=" + srv.URL + "/model.bin"}
	a, b := startChild(t, env...), startChild(t, env...)

	// The download stays open until one child says it waits for the
	// other: no timing assumption.
	waiting := make(chan struct{}, 2)
	for _, c := range []*child{a, b} {
		go func() {
			for l := range c.lines {
				if strings.Contains(l, "waiting for another process") {
					waiting <- struct{}{}
				}
			}
		}()
	}
	select {
	case <-waiting:
	case <-time.After(time.Minute):
		t.Fatalf("no child waited for the other:\n%s\n%s", a.output(), b.output())
	}
	releaseOnce.Do(func() { close(release) })
	a.wait(t)
	b.wait(t)
	pa, sa := a.resultIn(t)
	pb, sb := b.resultIn(t)
	if pa != pb || sa != sb || sa != dataSum(data) {
		t.Fatalf("results differ: %s %s / %s %s (want sum %s)", pa, sa, pb, sb, dataSum(data))
	}
	if n := gets.Load(); n != 1 {
		t.Fatalf("the model was requested %d times, want 1\n%s\n%s", n, a.output(), b.output())
	}
	if got, err := os.ReadFile(pa); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("entry: %v", err)
	}
}

// An entry one process holds survives eviction and prune by another; once
// released, prune removes it.
func TestSharedCacheInUseSurvivesEviction(t *testing.T) {
	ms, srv := newModelServer(t)
	a, b := randomBytes(64<<10, 2), randomBytes(64<<10, 3)
	ms.put("/a.bin", a)
	ms.put("/b.bin", b)
	cache := t.TempDir()
	holder := startChild(t, "CACHE="+cache, "URL="+srv.URL+"/a.bin", "HOLD=1")
	pa, sa := result(t, holder.await(t, "RESULT "))
	if sa != dataSum(a) {
		t.Fatalf("child read %s, want %s", sa, dataSum(a))
	}
	// Old enough for eviction: only the child's lock keeps it.
	old := time.Now().Add(-2 * time.Hour)
	meta := filepath.Join(filepath.Dir(pa), "..", "meta.json")
	if err := os.Chtimes(meta, old, old); err != nil {
		t.Fatal(err)
	}

	f := &Fetcher{CacheDir: cache, MaxCacheBytes: 1}
	pb, err := f.Fetch(context.Background(), srv.URL+"/b.bin", FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The fetch evicted down to the bound: both entries are in use.
	if fileSum(t, pa) != dataSum(a) || fileSum(t, pb) != dataSum(b) {
		t.Fatal("an entry in use was changed")
	}
	f.Release(pb)
	es, _ := f.CacheList()
	inUse := 0
	for _, e := range es {
		if e.InUse {
			inUse++
		}
	}
	if len(es) != 2 || inUse != 1 {
		t.Fatalf("cache ls: %+v, want 2 entries, 1 in use", es)
	}
	res, err := f.Prune()
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 || res.KeptInUse != 1 {
		t.Fatalf("prune: %+v, want 1 removed (b) and 1 kept (a, held by the child)", res)
	}
	if fileSum(t, pa) != dataSum(a) {
		t.Fatal("the held entry changed")
	}
	if _, err := os.Stat(pb); err == nil {
		t.Fatal("the released entry survived prune")
	}

	holder.stdin.Close()
	holder.await(t, "RELEASED")
	holder.wait(t)
	if res, err = f.Prune(); err != nil || res.Removed != 1 || res.KeptInUse != 0 {
		t.Fatalf("prune after the child released: %+v, %v", res, err)
	}
	if _, err := os.Stat(pa); err == nil {
		t.Fatal("the entry survived prune after its holder released it")
	}
	if locks, _ := os.ReadDir(filepath.Join(cache, "locks")); len(locks) != 0 {
		t.Fatalf("prune left %d lock files", len(locks))
	}
}

// A process killed mid-download leaves its lock to the kernel and its
// partial file to the next fetch, which resumes it.
func TestSharedCacheKilledMidDownload(t *testing.T) {
	data := randomBytes(256<<10, 4)
	var mu sync.Mutex
	var ranges []string
	first := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/model.bin" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		was := first
		first = false
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if was {
			// Half the body, then nothing until the client is gone.
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		http.ServeContent(w, r, "model.bin", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close) // after the children are killed
	cache := t.TempDir()
	c := startChild(t, "CACHE="+cache, "URL="+srv.URL+"/model.bin")
	// Kill it once half the body is on disk.
	wait.Until(t, time.Minute, func() error {
		ps, _ := filepath.Glob(filepath.Join(cache, "partial", "*-model.bin"))
		if len(ps) != 1 {
			return fmt.Errorf("partial downloads %q, want one\n%s", ps, c.output())
		}
		if st, err := os.Stat(ps[0]); err != nil || st.Size() != int64(len(data)/2) {
			return fmt.Errorf("the partial download is not half the body (%d bytes) yet: %v\n%s", len(data)/2, err, c.output())
		}
		return nil
	})
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()

	f := &Fetcher{CacheDir: cache, RetryBackoff: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := f.Fetch(ctx, srv.URL+"/model.bin", FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fileSum(t, p) != dataSum(data) {
		t.Fatal("wrong bytes after resuming the killed download")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ranges) != 2 || ranges[1] != fmt.Sprintf("bytes=%d-", len(data)/2) {
		t.Fatalf("requests' ranges: %q, want a resume from the killed process's partial file", ranges)
	}
	if ps, _ := os.ReadDir(filepath.Join(cache, "partial")); len(ps) != 0 {
		t.Fatalf("%d partial files left", len(ps))
	}
}
