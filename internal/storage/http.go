package storage

import (
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
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// partialState is what a resumed http download must know of the bytes a
// previous attempt left: the validator they belong to.
type partialState struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

func (p partialState) validator() string {
	if p.ETag != "" && !strings.HasPrefix(p.ETag, "W/") {
		return p.ETag
	}
	return p.LastModified
}

// httpStatusError is a response we did not want, classified.
func httpStatusError(resp *http.Response, red string) error {
	status := resp.Status
	switch c := resp.StatusCode; {
	case c == http.StatusNotFound || c == http.StatusGone:
		return &FetchError{URL: red, Err: fmt.Errorf("%w: the server answered %s; check model_path for typos and that the file is published", ErrNotFound, status)}
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		return &FetchError{URL: red, Err: fmt.Errorf("%w: the server answered %s; the file is private: give a signed URL, make it public, or put it on OSS and use oss://", ErrAccessDenied, status)}
	case c == http.StatusRequestTimeout || c == http.StatusTooEarly || c == http.StatusTooManyRequests || c >= 500:
		return &FetchError{URL: red, Retryable: true, Err: fmt.Errorf("the server answered %s; it may be overloaded: try again later", status)}
	default:
		return &FetchError{URL: red, Err: fmt.Errorf("unexpected answer %s", status)}
	}
}

// netError classifies a failed round trip. The client's error names the
// URL with its query, which may be a signature: that is redacted.
func netError(err error, red string) *FetchError {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = Redact(ue.URL)
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return &FetchError{URL: red, Err: fmt.Errorf("%w: the host %q does not exist; check the host name", ErrUnreachable, dnsErr.Name)}
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &opErr) && opErr.Op == "dial":
		return &FetchError{URL: red, Retryable: true, Err: fmt.Errorf("%w: %v; check the host and port and that the server is up", ErrUnreachable, err)}
	default:
		return &FetchError{URL: red, Retryable: true, Err: fmt.Errorf("connection failed: %w", err)}
	}
}

func retryable(err error) bool {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe.Retryable
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrTooLarge) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, ErrStalled) {
		return true
	}
	var ue *url.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// backoff waits before retry number n (0-based), or until ctx ends.
func (f *Fetcher) backoff(ctx context.Context, n int) error {
	d := f.RetryBackoff << min(n, 5)
	if limit := 30 * f.RetryBackoff; d > limit {
		d = limit
	}
	d += time.Duration(rand.Int64N(int64(d)/5 + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func fileBase(p, fallback string) string {
	b := path.Base(p)
	if b == "." || b == "/" || b == "" || b == ".." {
		return fallback
	}
	return b
}

func (f *Fetcher) fetchHTTP(ctx context.Context, rawURL string, opts FetchOptions, c *cacheRef) (string, error) {
	red := Redact(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", &FetchError{URL: red, Err: fmt.Errorf("bad URL: want http(s)://host/path")}
	}
	if opts.SHA256 != "" {
		// A checksum names the content: a cached copy with it needs no request.
		if e, ok := c.find(func(m entryMeta) bool { return m.SHA256 == opts.SHA256 }); ok {
			opts.Logger.Info("model found in cache", "url", red, "sha256", opts.SHA256)
			return e.path(), nil
		}
	}
	d := &httpDownload{f: f, opts: opts, rawURL: rawURL, red: red, total: -1}
	d.prev, d.hasPrev = c.latest()
	if opts.SHA256 != "" {
		d.hasPrev = false // its content is not the one asked for
	}
	base := fileBase(u.Path, "model")
	if d.partPath, err = c.partial("-" + base); err != nil {
		return "", err
	}
	d.statePath = strings.TrimSuffix(d.partPath, "-"+base) + ".json"
	if b, err := os.ReadFile(d.statePath); err == nil && json.Unmarshal(b, &d.state) == nil && d.state.validator() != "" {
		if st, err := os.Stat(d.partPath); err == nil {
			d.offset = st.Size()
		}
	}
	start := time.Now()
	useCached, err := d.run(ctx)
	if err != nil {
		return "", err
	}
	if useCached {
		c.touch(d.prev)
		return d.prev.path(), nil
	}
	p, err := d.keep(ctx, u, base, c)
	if err != nil {
		return "", err
	}
	opts.Logger.Info("model downloaded", "url", red, "bytes", d.offset, "seconds", time.Since(start).Seconds())
	return p, nil
}

// httpDownload is one fetch of an http(s) URL. Its partial file and the
// validator in the state file beside it outlive failed attempts and
// restarts of the process, so that every attempt resumes where the last one
// stopped instead of starting over.
type httpDownload struct {
	f           *Fetcher
	opts        FetchOptions
	rawURL, red string
	prev        entry // the cached copy to revalidate, when hasPrev
	hasPrev     bool
	partPath    string
	statePath   string
	state       partialState
	offset      int64 // bytes in the partial file
	total       int64 // the body's size, -1 when unknown
	started     bool  // the room was checked and the start logged
}

// resumable says whether the partial file can be resumed: it has bytes and
// a validator that a ranged request can name.
func (d *httpDownload) resumable() bool { return d.offset > 0 && d.state.validator() != "" }

// attemptOutcome is how one attempt ended.
type attemptOutcome int

const (
	attemptFailed      attemptOutcome = iota // err says why and whether to retry
	attemptNoAnswer                          // the request got no response: a cached copy can serve
	attemptInterrupted                       // the body stopped short: resume it, or start over without a validator
	attemptRestart                           // the answer did not fit the partial file, which was discarded
	attemptComplete                          // the partial file holds the whole body
	attemptUnchanged                         // the cached copy is current
)

// run makes attempts until one completes the download, the cached copy
// turns out current (useCached), or an error is final. f.Retries bounds
// the failures in a row. Only an attempt that takes a resumable download
// further than any before it resets the count, so a flaky link still
// finishes a big file, while a server that makes every attempt start over
// (no validator to resume with, a range answer that does not fit) runs out
// of retries. A failed download that cannot resume leaves no partial file.
func (d *httpDownload) run(ctx context.Context) (useCached bool, err error) {
	defer func() {
		if err != nil && !(d.resumable() && (retryable(err) || ctx.Err() != nil)) {
			d.discard()
			os.Remove(d.statePath)
		}
	}()
	failures := 0
	best := d.offset // the furthest a resumable download has come
	for {
		out, err := d.attempt(ctx)
		switch {
		case out == attemptComplete:
			return false, nil
		case out == attemptUnchanged:
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		}
		if d.resumable() && d.offset > best {
			best = d.offset
			failures = 0 // the connection dropped, not the server
		}
		if !retryable(err) || failures >= d.f.Retries {
			return d.giveUp(out, err, failures)
		}
		switch {
		case out == attemptInterrupted && d.resumable():
			d.opts.Logger.Warn("download interrupted, resuming", "url", d.red, "at_byte", d.offset, "err", err, "retry", failures+1)
		case out == attemptInterrupted:
			d.opts.Logger.Warn("download interrupted; the server names no version (ETag or Last-Modified) to resume, starting over", "url", d.red, "at_byte", d.offset, "err", err, "retry", failures+1)
			d.discard()
		default:
			d.opts.Logger.Warn("download failed, retrying", "url", d.red, "err", err, "retry", failures+1)
		}
		if d.opts.Retry != nil {
			d.opts.Retry(failures+1, d.f.Retries, err)
		}
		if err := d.f.backoff(ctx, failures); err != nil {
			return false, err
		}
		failures++
	}
}

// giveUp turns the last failure into run's answer. A server that cannot be
// reached does not stop a restart while a cached copy exists.
func (d *httpDownload) giveUp(out attemptOutcome, err error, failures int) (useCached bool, _ error) {
	var fe *FetchError
	switch {
	case out == attemptNoAnswer && d.hasPrev:
		d.opts.Logger.Warn("cannot revalidate the cached model; using the cached copy", "url", d.red, "err", err)
		return true, nil
	case out == attemptInterrupted && errors.As(err, &fe) && fe.Retryable:
		why := ""
		if !d.resumable() {
			why = " (the server sends no ETag or Last-Modified, so the download cannot resume and starts over on each attempt)"
		}
		of := fmt.Sprint(d.total)
		if d.total < 0 {
			of = "an unknown size"
		}
		return false, &FetchError{URL: d.red, Retryable: true, Err: fmt.Errorf("download interrupted at byte %d of %s after %d retries%s: %w", d.offset, of, failures, why, fe.Err)}
	}
	return false, err
}

// attempt makes one request, conditional on the cached copy and ranged
// from the end of the partial file when a validator allows, and appends
// the body to that file, never past the size limit. Its errors are
// classified (FetchError.Retryable) for run to decide on.
func (d *httpDownload) attempt(ctx context.Context) (out attemptOutcome, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.rawURL, nil)
	if err != nil {
		return attemptFailed, &FetchError{URL: d.red, Err: err}
	}
	if d.hasPrev {
		if d.prev.meta.ETag != "" {
			req.Header.Set("If-None-Match", d.prev.meta.ETag)
		} else if d.prev.meta.LastModified != "" {
			req.Header.Set("If-Modified-Since", d.prev.meta.LastModified)
		}
	}
	ranged := d.resumable()
	if ranged {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", d.offset))
		req.Header.Set("If-Range", d.state.validator())
	}
	resp, err := d.f.client.Do(req)
	if err != nil {
		return attemptNoAnswer, netError(err, d.red)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		if !d.hasPrev {
			return attemptFailed, &FetchError{URL: d.red, Err: errors.New("the server answered 304 Not Modified to an unconditional request")}
		}
		d.opts.Logger.Info("model unchanged since cached", "url", d.red, "cached", d.prev.meta.Version)
		return attemptUnchanged, nil
	case http.StatusOK:
		if et := resp.Header.Get("ETag"); d.hasPrev && et != "" && et == d.prev.meta.ETag {
			// The server ignores conditional requests but names the
			// same version: keep the copy.
			return attemptUnchanged, nil
		}
		d.offset = 0
		d.state = partialState{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}
		d.total = resp.ContentLength
	case http.StatusPartialContent:
		cr := resp.Header.Get("Content-Range")
		first, size, ok := parseContentRange(cr)
		if !ok || first != d.offset {
			// Not the range asked for: start over, and count it, so that a
			// server that always answers this way is given up on.
			asked := d.offset
			d.discard()
			return attemptRestart, &FetchError{URL: d.red, Retryable: true, Err: fmt.Errorf("the server answered %s with Content-Range %q to a request from byte %d; starting over", resp.Status, cr, asked)}
		}
		d.total = size
	case http.StatusRequestedRangeNotSatisfiable:
		if !ranged {
			return attemptFailed, httpStatusError(resp, d.red) // there was no range to refuse
		}
		asked := d.offset
		d.discard()
		return attemptRestart, &FetchError{URL: d.red, Retryable: true, Err: fmt.Errorf("the server answered %s to a resume from byte %d; starting over", resp.Status, asked)}
	default:
		return attemptFailed, httpStatusError(resp, d.red)
	}
	if !d.started {
		if err := checkRoom(filepath.Dir(d.partPath), d.total-d.offset); err != nil {
			return attemptFailed, &FetchError{URL: d.red, Err: err}
		}
	}
	// After the room check, which names a disk too small for the model
	// even when the model is also over the limit.
	if d.total >= 0 && d.f.overLimit(d.total) {
		return attemptFailed, &FetchError{URL: d.red, Err: tooLarge(d.total, d.f.MaxModelBytes, true)}
	}
	if !d.started {
		d.opts.Logger.Info("model download started", "url", d.red, "bytes", d.total, "resume_at", d.offset)
		d.started = true
	}
	if b, err := json.Marshal(d.state); err == nil {
		_ = os.WriteFile(d.statePath, b, 0o644)
	}
	n, err := appendBody(d.partPath, d.offset, d.f.MaxModelBytes, resp.Body, func(n int64) { d.opts.Progress(n, d.total) })
	d.offset += n
	if err == nil && d.total >= 0 && d.offset < d.total {
		err = io.ErrUnexpectedEOF
	}
	switch {
	case err == nil:
		return attemptComplete, nil
	case errors.Is(err, syscall.ENOSPC):
		return attemptFailed, &FetchError{URL: d.red, Err: classify(err, d.f.CacheDir)}
	case errors.Is(err, ErrTooLarge):
		return attemptFailed, &FetchError{URL: d.red, Err: err}
	case errors.Is(err, errPartialGone):
		asked := d.offset
		d.discard()
		return attemptRestart, &FetchError{URL: d.red, Retryable: true, Err: fmt.Errorf("the partial download was removed while resuming it from byte %d; starting over", asked)}
	default:
		// Whatever stopped the body, the bytes so far are kept: resume
		// when a validator allows it.
		return attemptInterrupted, &FetchError{URL: d.red, Retryable: true, Err: err}
	}
}

// discard drops the partial file and its validator: the next attempt
// starts from byte 0.
func (d *httpDownload) discard() {
	d.offset, d.state = 0, partialState{}
	os.Remove(d.partPath)
}

// keep verifies the downloaded file against the checksum asked for or
// published beside it, and makes it (unpacked, if an archive) a cache entry
// named after its validator.
func (d *httpDownload) keep(ctx context.Context, u *url.URL, base string, c *cacheRef) (string, error) {
	want := d.opts.SHA256
	if want == "" {
		var err error
		if want, err = d.f.sidecar(ctx, u, d.red); err != nil {
			return "", err
		}
	}
	got, err := verifyFile(d.partPath, want)
	if err != nil {
		os.Remove(d.partPath)
		os.Remove(d.statePath)
		return "", &FetchError{URL: d.red, Err: err}
	}
	m := entryMeta{ETag: d.state.ETag, LastModified: d.state.LastModified, SHA256: got}
	switch {
	case d.state.ETag != "":
		m.Version = "etag:" + d.state.ETag
	case d.state.LastModified != "":
		m.Version = "last-modified:" + d.state.LastModified
	case want != "":
		m.Version = "sha256:" + want
	default:
		// Nothing names this version: every fetch downloads again.
		m.Version = "fetched:" + time.Now().UTC().Format(time.RFC3339Nano)
	}
	p, err := c.commitMeta(m, func(dst string) (string, error) {
		if IsArchive(base) {
			return d.f.unpack(d.partPath, dst)
		}
		out := filepath.Join(dst, base)
		return out, os.Rename(d.partPath, out)
	})
	if err != nil {
		return "", err
	}
	os.Remove(d.partPath)
	os.Remove(d.statePath)
	return p, nil
}

// errPartialGone means the partial file to resume is missing or short.
var errPartialGone = errors.New("partial download gone")

// appendBody writes body to the file at path from offset on, reporting the
// bytes there after each write, and returns how many it wrote. The file
// never grows past limit bytes (negative: no limit): a body that would
// take it further fails with ErrTooLarge before the bytes past it are
// written. A resume (offset > 0) fails with errPartialGone when the file
// no longer holds offset bytes, rather than fill the hole with zeros.
func appendBody(p string, offset, limit int64, body io.Reader, progress func(int64)) (int64, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if offset > 0 {
		flag = os.O_WRONLY
	}
	fl, err := os.OpenFile(p, flag, 0o644)
	if errors.Is(err, os.ErrNotExist) && offset > 0 {
		return 0, errPartialGone
	}
	if err != nil {
		return 0, err
	}
	if st, err := fl.Stat(); err == nil && st.Size() < offset {
		fl.Close()
		return 0, errPartialGone
	}
	if _, err := fl.Seek(offset, io.SeekStart); err != nil {
		fl.Close()
		return 0, err
	}
	if err := fl.Truncate(offset); err != nil {
		fl.Close()
		return 0, err
	}
	progress(offset)
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, rerr := body.Read(buf)
		if limit >= 0 && offset+n+int64(k) > limit {
			fl.Close()
			return n, tooLarge(offset+n+int64(k), limit, false)
		}
		if k > 0 {
			if _, err := fl.Write(buf[:k]); err != nil {
				fl.Close()
				return n, err
			}
			n += int64(k)
			progress(offset + n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			fl.Close()
			return n, rerr
		}
	}
	return n, fl.Close()
}

// parseContentRange reads "bytes first-last/size"; size is -1 when "*".
func parseContentRange(s string) (first, size int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, sz, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	a, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 {
		return 0, 0, false
	}
	size = -1
	if sz != "*" {
		if size, err = strconv.ParseInt(sz, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return first, size, true
}

// sidecar reads the checksum published beside the file as "<url>.sha256"
// (sha256sum's format: the hex digest, optionally followed by the name).
// A missing sidecar means no checksum.
func (f *Fetcher) sidecar(ctx context.Context, u *url.URL, red string) (string, error) {
	su := *u
	su.Path += ".sha256"
	su.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, su.String(), nil)
	if err != nil {
		return "", nil
	}
	var resp *http.Response
	for n := 0; ; n++ {
		resp, err = f.client.Do(req)
		if err == nil && resp.StatusCode < 500 {
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if n >= f.Retries {
			return "", &FetchError{URL: red + ".sha256", Retryable: true, Err: fmt.Errorf("checksum sidecar: %v", errOrStatus(err, resp))}
		}
		if err := f.backoff(ctx, n); err != nil {
			return "", err
		}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil // no sidecar published
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", &FetchError{URL: red + ".sha256", Retryable: true, Err: err}
	}
	sum := ""
	if fields := strings.Fields(string(b)); len(fields) > 0 {
		sum = strings.ToLower(fields[0])
	}
	if err := checkSHA256Hex(sum); err != nil {
		return "", &FetchError{URL: red + ".sha256", Err: fmt.Errorf("checksum sidecar: %w; publish the output of sha256sum there, or remove it", err)}
	}
	return sum, nil
}

func errOrStatus(err error, resp *http.Response) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

func checkSHA256Hex(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("sha256 %q: want 64 hex digits, got %d characters", s, len(s))
	}
	if _, err := hex.DecodeString(s); err != nil {
		return fmt.Errorf("sha256 %q: not hex", s)
	}
	return nil
}

// verifyFile returns the sha256 of the file at p, and an error when want
// is set and differs. The sum is kept with the cache entry, so that a later
// fetch naming the checksum needs no request.
func verifyFile(p, want string) (string, error) {
	fl, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer fl.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fl); err != nil {
		return "", err
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && got != strings.ToLower(want) {
		return got, fmt.Errorf("%w: got %s, want %s; the file changed or was corrupted: re-publish it or update model_sha256 (or the .sha256 sidecar)", ErrChecksum, got, want)
	}
	return got, nil
}
