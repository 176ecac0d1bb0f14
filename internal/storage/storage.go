// Package storage brings a service's model_path (and warm-up data) to a
// local path a processor can open, and puts models on OSS for the upload verb.
//
// A Fetcher reads local paths and file:// URLs in place, and downloads
// http(s):// and oss://bucket/key URLs into a cache under the state
// directory, so that a restart or a redeploy of the same model version costs
// one small revalidation request instead of a download. Archives (.zip, .tar,
// .tar.gz/.tgz, .tar.bz2) are unpacked into the cache, refusing entries and
// links that would land outside it and archives that expand past a limit.
//
// Every failure is a *FetchError that names the URL without secrets, says
// whether trying again may help, and suggests the fix.
//
// Every download is bounded, so that a broken or hostile server cannot fill
// the disk or keep a deploy waiting forever: a size limit
// (Fetcher.MaxModelBytes, checked against a declared size up front and
// enforced while the bytes come for a body of unknown size), an idle
// timeout (Fetcher.IdleTimeout: no byte for that long fails the attempt),
// an optional overall deadline (Fetcher.FetchTimeout), and a retry budget
// (Fetcher.Retries) that only an attempt adding bytes to a resumable
// download refills. A download the server cannot resume (no ETag or
// Last-Modified) starts over on each attempt, and each start counts.
//
// Partial downloads stay under the cache only while they can be resumed:
// a failed or cancelled download that cannot resume, or that failed for
// good, is removed; a resumable one is removed by Forget (when the service
// that wanted it is deleted) or once nobody has touched it for
// Fetcher.PartialMaxAge.
package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FetchError is a failed fetch. URL has its secrets (user info, query
// string) removed; Retryable says whether trying again later may help.
type FetchError struct {
	URL       string
	Retryable bool
	Err       error
	Op        string // "fetch" when empty; "upload" for Upload
}

// Error says what failed and how to fix it, naming the redacted URL.
func (e *FetchError) Error() string {
	op := e.Op
	if op == "" {
		op = "fetch"
	}
	return fmt.Sprintf("%s %s: %v", op, e.URL, e.Err)
}

// Unwrap returns the cause, for errors.Is with the sentinels below.
func (e *FetchError) Unwrap() error { return e.Err }

// Sentinel causes a FetchError wraps; test them with errors.Is.
var (
	// ErrUnsupportedScheme is returned for a URL scheme this build cannot fetch.
	ErrUnsupportedScheme = errors.New("unsupported scheme")
	// ErrNotFound means the file, object or bucket does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied means the server refused the credentials or has none.
	ErrAccessDenied = errors.New("access denied")
	// ErrUnreachable means the server could not be reached at all.
	ErrUnreachable = errors.New("endpoint unreachable")
	// ErrDiskFull means the cache's file system has no room left.
	ErrDiskFull = errors.New("disk full")
	// ErrChecksum means the downloaded bytes do not match the expected sha256.
	ErrChecksum = errors.New("sha256 mismatch")
	// ErrUnsafeArchive means an archive tried to escape its directory or
	// expands past a limit.
	ErrUnsafeArchive = errors.New("unsafe archive")
	// ErrTooLarge means the model is larger than Fetcher.MaxModelBytes.
	ErrTooLarge = errors.New("model too large")
	// ErrStalled means a download sent no byte for Fetcher.IdleTimeout.
	ErrStalled = errors.New("download stalled")
)

// DefaultMaxModelBytes is the size limit on one download where
// Fetcher.MaxModelBytes is 0: larger than the models this server is meant
// for, small enough that a body that never ends stops long before the disk
// is full.
const DefaultMaxModelBytes int64 = 20 << 30

// Defaults of the Fetcher fields that bound a download.
const (
	DefaultIdleTimeout   = time.Minute
	DefaultPartialMaxAge = 24 * time.Hour
)

// Fetcher downloads and caches models. Its zero value is not usable for
// remote URLs (CacheDir is required for them); set the fields before the first
// Fetch and do not change them afterwards. It is safe for concurrent use: two
// Fetch calls for one URL share one download. Several processes may share
// one CacheDir; file locks coordinate them (see lock.go).
type Fetcher struct {
	// CacheDir holds downloaded and unpacked models, one directory per URL
	// and version, and partial downloads that a later Fetch resumes.
	CacheDir string
	// MaxCacheBytes bounds the cache; after a download, the least recently
	// used entries that no service holds (see Release) are removed until the
	// cache fits. 0 means no bound.
	MaxCacheBytes int64
	// HTTPClient is used for http(s) and OSS; nil means a client with
	// connect and header timeouts but no overall timeout, since models are big.
	// Its transport is wrapped to enforce IdleTimeout and MaxModelBytes.
	HTTPClient *http.Client
	// Logger receives download starts, progress (at most once per
	// ProgressInterval) and results; FetchOptions.Logger overrides it.
	Logger *slog.Logger
	// Retries is how many times a retryable failure is retried without
	// progress before giving up; 0 means 5. A retry that made progress
	// resets the count.
	Retries int
	// RetryBackoff is the first wait between retries, doubled each time up
	// to 30 times its value; 0 means 500ms.
	RetryBackoff time.Duration
	// ProgressInterval is the least time between two progress callbacks;
	// 0 means one second.
	ProgressInterval time.Duration
	// PartSize is the size of the ranges a large OSS object is fetched in,
	// in parallel; 0 means 16 MiB. Objects smaller than this are fetched in
	// one request.
	PartSize int64
	// Parallel is how many ranges of one OSS object are fetched at once;
	// 0 means 4.
	Parallel int
	// Limits bounds what an archive may expand to; zero fields take the
	// defaults of DefaultLimits.
	Limits Limits
	// Credentials, when set, is used for OSS instead of the environment and
	// the credentials file (see LoadCredentials).
	Credentials *Credentials
	// MaxModelBytes bounds one download: an HTTP body, an OSS object, or
	// all objects of an OSS prefix together. A declared size (Content-Length,
	// Content-Range, the OSS object's or listing's size) over it fails
	// before a byte is written; a body of unknown size is cut off when it
	// passes it, and its partial file removed. The error wraps ErrTooLarge,
	// is final and says to raise the limit with --max-model-size, the flag
	// that sets this field. 0 means DefaultMaxModelBytes (20 GiB); a
	// negative value means no limit.
	MaxModelBytes int64
	// IdleTimeout fails an attempt whose response (headers or body) brings
	// no byte for this long, with a retryable error wrapping ErrStalled; the
	// attempt counts against Retries like any other failure. 0 means
	// DefaultIdleTimeout (one minute); negative means no idle timeout.
	IdleTimeout time.Duration
	// FetchTimeout bounds one download, all its attempts and waits
	// together, against a server that trickles bytes just often enough to
	// beat IdleTimeout. Its error is retryable: a later Fetch resumes a
	// download the server can resume. 0 means no overall deadline (a slow
	// link may need hours for a big model; IdleTimeout, MaxModelBytes and
	// Retries already end a stalled or endless download).
	FetchTimeout time.Duration
	// PartialMaxAge is how long a resumable partial download nobody
	// touches is kept for a later Fetch to resume; older ones are removed
	// when a Fetch starts (at most once an hour). 0 means
	// DefaultPartialMaxAge (a day); negative means never.
	PartialMaxAge time.Duration

	once   sync.Once
	cache  *cache
	group  flightGroup
	client *http.Client // HTTPClient behind guardTransport

	actMu     sync.Mutex
	callers   map[string]int // url key -> Fetch calls from their start to their pin
	lastSweep time.Time
}

// FetchOptions are the per-call settings of Fetch.
type FetchOptions struct {
	// OSSEndpoint is the service's oss_endpoint; "" falls back to the
	// OSS_ENDPOINT environment variable. A bare host means https.
	OSSEndpoint string
	// BaseDir resolves relative local paths; "" means the working directory.
	BaseDir string
	// SHA256 is the expected hex sha256 of the downloaded file (the archive,
	// for an archive). "" means: use the "<url>.sha256" sidecar when the
	// server has one, else no check. Ignored for OSS prefixes.
	SHA256 string
	// Progress, when set, is called with the bytes done and the total (-1
	// when unknown) at the start, at most once per ProgressInterval, and
	// at the end. It must not block.
	Progress func(done, total int64)
	// Retry, when set, is called before each retry of a failed http(s)
	// download, as the retry is logged: n counts the retries in a row (1 is
	// the first; it starts again from 1 once an attempt takes a resumable
	// download further), max is Fetcher.Retries and err the failure. It
	// must not block.
	Retry func(n, max int, err error)
	// Logger overrides Fetcher.Logger for this call, e.g. one carrying the
	// service name.
	Logger *slog.Logger
}

func (f *Fetcher) init() {
	f.once.Do(func() {
		if f.HTTPClient == nil {
			f.HTTPClient = defaultHTTPClient()
		}
		if f.Retries == 0 {
			f.Retries = 5
		}
		if f.RetryBackoff == 0 {
			f.RetryBackoff = 500 * time.Millisecond
		}
		if f.ProgressInterval == 0 {
			f.ProgressInterval = time.Second
		}
		if f.PartSize == 0 {
			f.PartSize = 16 << 20
		}
		if f.Parallel == 0 {
			f.Parallel = 4
		}
		if f.MaxModelBytes == 0 {
			f.MaxModelBytes = DefaultMaxModelBytes
		}
		if f.IdleTimeout == 0 {
			f.IdleTimeout = DefaultIdleTimeout
		}
		if f.PartialMaxAge == 0 {
			f.PartialMaxAge = DefaultPartialMaxAge
		}
		f.Limits = f.Limits.withDefaults()
		f.cache = &cache{dir: f.CacheDir, max: f.MaxCacheBytes, pins: map[string]int{}}
		f.group.interval = f.ProgressInterval
		f.callers = map[string]int{}
		c := *f.HTTPClient
		c.Transport = &guardTransport{base: c.Transport, idle: f.IdleTimeout, max: f.MaxModelBytes}
		f.client = &c
	})
}

// overLimit reports whether size passes the size limit.
func (f *Fetcher) overLimit(size int64) bool { return f.MaxModelBytes >= 0 && size > f.MaxModelBytes }

func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// Fetch makes rawURL available locally and returns the local path: the file
// itself for a plain file, the directory it was unpacked into for an archive,
// and the directory holding every object for an oss:// prefix (a key ending
// in "/"). Local paths (plain or file://) that are not archives are used in
// place; a relative path is resolved against opts.BaseDir.
//
// The returned path stays valid until Release is called with it; until then
// cache eviction leaves it alone.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, opts FetchOptions) (string, error) {
	f.init()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if opts.Logger == nil {
		opts.Logger = f.Logger
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SHA256 != "" {
		if err := checkSHA256Hex(opts.SHA256); err != nil {
			return "", &FetchError{URL: Redact(rawURL), Err: err}
		}
		opts.SHA256 = strings.ToLower(opts.SHA256)
	}
	if path, ok := LocalPath(rawURL); ok {
		return f.fetchLocal(ctx, rawURL, path, opts)
	}
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch strings.ToLower(scheme) {
	case "http", "https":
		return f.remote(ctx, rawURL, opts, f.fetchHTTP)
	case "oss":
		return f.remote(ctx, rawURL, opts, f.fetchOSS)
	default:
		return "", &FetchError{URL: Redact(rawURL), Err: fmt.Errorf("%w %q: use a local path, file://, http://, https:// or oss://bucket/key", ErrUnsupportedScheme, scheme)}
	}
}

// Release tells the cache that a path Fetch returned is no longer in use
// (its service stopped), so eviction may remove it. Paths outside the cache
// are ignored. A deleted service's cache entries and partial downloads are
// removed by Forget, after Release.
func (f *Fetcher) Release(localPath string) {
	f.init()
	f.cache.unpin(localPath)
}

// Held returns how many cache entries are held by Fetches not yet
// Released: what eviction must keep.
func (f *Fetcher) Held() int {
	f.init()
	f.cache.mu.Lock()
	defer f.cache.mu.Unlock()
	return len(f.cache.pins)
}

func (f *Fetcher) fetchLocal(ctx context.Context, rawURL, path string, opts FetchOptions) (string, error) {
	if !filepath.IsAbs(path) && opts.BaseDir != "" {
		path = filepath.Join(opts.BaseDir, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", &FetchError{URL: Redact(rawURL), Err: fmt.Errorf("%w: no file or directory at %s; check model_path (relative paths are resolved against %s)", ErrNotFound, path, baseDirName(opts.BaseDir))}
		}
		return "", &FetchError{URL: Redact(rawURL), Err: err}
	}
	if st.IsDir() || archiveKindOf(path) == archiveNone {
		if opts.SHA256 != "" && !st.IsDir() {
			if _, err := verifyFile(path, opts.SHA256); err != nil {
				return "", &FetchError{URL: Redact(rawURL), Err: err}
			}
		}
		return path, nil
	}
	// A local archive is unpacked into the cache, keyed by its path, size
	// and modification time.
	if f.CacheDir == "" {
		return "", &FetchError{URL: Redact(rawURL), Err: errors.New("unpacking an archive needs a cache directory; start the server with a state directory")}
	}
	abs, _ := filepath.Abs(path)
	return f.remote(ctx, "file://"+abs, opts, func(ctx context.Context, _ string, opts FetchOptions, c *cacheRef) (string, error) {
		version := fmt.Sprintf("size=%d mtime=%d", st.Size(), st.ModTime().UnixNano())
		if e, ok := c.lookup(version); ok {
			return e, nil
		}
		if opts.SHA256 != "" {
			if _, err := verifyFile(path, opts.SHA256); err != nil {
				return "", err
			}
		}
		return c.commit(version, func(dst string) (string, error) {
			return f.unpack(path, dst)
		})
	})
}

func baseDirName(dir string) string {
	if dir == "" {
		if wd, err := os.Getwd(); err == nil {
			return "the server's working directory, " + wd + "; give an absolute path"
		}
		return "the server's working directory; give an absolute path"
	}
	return dir
}

// LocalPath reports whether a model_path-style location names a file on
// this machine (a path, or a file:// URL) and returns that path.
func LocalPath(rawURL string) (string, bool) {
	scheme, _, hasScheme := strings.Cut(rawURL, "://")
	switch {
	case !hasScheme:
		return rawURL, true
	case strings.EqualFold(scheme, "file"):
		return rawURL[len(scheme)+len("://"):], true
	}
	return "", false
}

// remote runs one download of rawURL through the cache and the flight
// group, so concurrent callers share it, and wraps its failure.
func (f *Fetcher) remote(ctx context.Context, rawURL string, opts FetchOptions, do func(context.Context, string, FetchOptions, *cacheRef) (string, error)) (string, error) {
	red := Redact(rawURL)
	if f.CacheDir == "" {
		return "", &FetchError{URL: red, Err: errors.New("downloading needs a cache directory; start the server with a state directory")}
	}
	key := rawURL + "\x00" + opts.SHA256 + "\x00" + opts.OSSEndpoint
	f.sweepPartials(opts.Logger)
	// Counted until the path is pinned, so that Forget and the sweep leave
	// this URL's partial downloads and entries alone meanwhile.
	ukey := urlKey(rawURL)
	f.actMu.Lock()
	f.callers[ukey]++
	f.actMu.Unlock()
	defer func() {
		f.actMu.Lock()
		if f.callers[ukey]--; f.callers[ukey] <= 0 {
			delete(f.callers, ukey)
		}
		f.actMu.Unlock()
	}()
	log, user := opts.Logger, opts.Progress
	sub := func(done, total int64) {
		if user != nil {
			user(done, total)
		}
		log.Info("model download progress", "url", red, "done_bytes", done, "total_bytes", total)
	}
	flight := func(ctx context.Context, progress func(done, total int64), retry func(n, max int, err error)) (string, error) {
		o := opts
		o.Progress, o.Retry = progress, retry
		// Other processes sharing the cache fetch the same URL one at a
		// time; the wait does not count against FetchTimeout.
		ref := f.cache.ref(rawURL, key)
		var p string
		defer func() { ref.release(p) }()
		p, err := ref.acquire(ctx, opts.Logger)
		if err != nil || p != "" {
			return p, err
		}
		if f.FetchTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, f.FetchTimeout, errFetchDeadline)
			defer cancel()
		}
		p, err = do(ctx, rawURL, o, ref)
		if err != nil && errors.Is(context.Cause(ctx), errFetchDeadline) {
			err = &FetchError{URL: red, Retryable: true, Err: fmt.Errorf("the download did not finish within %s (the fetch deadline); fetching again resumes it where the server allows", f.FetchTimeout)}
		}
		return p, err
	}
	for tries := 1; ; tries++ {
		path, err := f.group.do(ctx, key, sub, opts.Retry, flight)
		if err != nil {
			var fe *FetchError
			if errors.As(err, &fe) {
				return "", err
			}
			return "", &FetchError{URL: red, Retryable: retryable(err), Err: classify(err, f.CacheDir)}
		}
		// Another process may have removed the entry between the fetch
		// and the pin: then fetch again.
		if f.cache.pin(path) {
			f.cache.evict(opts.Logger)
			return path, nil
		}
		if tries == 3 {
			return "", &FetchError{URL: red, Retryable: true, Err: errors.New("another process sharing the cache kept removing the model as it was fetched; try again")}
		}
	}
}

// errFetchDeadline is the cause of a download's context when FetchTimeout
// ends it.
var errFetchDeadline = errors.New("fetch deadline")

// tooLarge is the error for a download over the size limit: declared says
// whether size is what the server announced, or what was read when the
// body passed the limit.
func tooLarge(size, limit int64, declared bool) error {
	if declared {
		return fmt.Errorf("%w: the model is %d bytes (%s), over the limit of %d bytes (%s) on one download; if it really is this big, raise the limit with --max-model-size", ErrTooLarge, size, humanBytes(size), limit, humanBytes(limit))
	}
	return fmt.Errorf("%w: the download passed the limit of %d bytes (%s) on one download and was stopped; if the model really is this big, raise the limit with --max-model-size", ErrTooLarge, limit, humanBytes(limit))
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// classify turns low-level failures users can act on into messages that
// say what to do.
func classify(err error, cacheDir string) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: no space left under %s: free disk space, lower the cache bound or move the state directory (%w)", ErrDiskFull, cacheDir, err)
	}
	return err
}

// checkRoom fails with ErrDiskFull before a download of need bytes that
// cannot fit, rather than after filling the disk.
func checkRoom(dir string, need int64) error {
	if need <= 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	free := freeBytes(dir)
	if free >= 0 && free < need {
		return fmt.Errorf("%w: the model needs %d bytes but only %d are free under %s: free disk space, lower the cache bound or move the state directory", ErrDiskFull, need, free, dir)
	}
	return nil
}

// Redact returns rawURL without user info or query string, so that it can be
// logged and shown in errors; signed URLs carry their credentials there.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if i := strings.IndexAny(rawURL, "?#@"); i >= 0 {
			return rawURL[:i] + "…"
		}
		return rawURL
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	u.Fragment = ""
	return u.String()
}

// ModelSHA256 returns model_config's "model_sha256" (lowercased), or "" when
// there is none. model_config may be a JSON object or a string holding one,
// as EAS allows; a string that is not JSON has no checksum.
func ModelSHA256(modelConfig json.RawMessage) (string, error) {
	sum, _, err := SplitModelSHA256(modelConfig)
	return sum, err
}

// SplitModelSHA256 takes "model_sha256" out of model_config: it returns the
// checksum (lowercased, "" when absent) and model_config without the key, in
// the form it came in (an object, or a string holding one), so that a
// processor that reads model_config strictly never sees a key meant for the
// loader. Without the key, rest is modelConfig unchanged.
func SplitModelSHA256(modelConfig json.RawMessage) (sum string, rest json.RawMessage, err error) {
	if len(modelConfig) == 0 {
		return "", modelConfig, nil
	}
	var obj map[string]json.RawMessage
	quoted := false
	if json.Unmarshal(modelConfig, &obj) != nil || obj == nil {
		var s string
		if json.Unmarshal(modelConfig, &s) != nil || json.Unmarshal([]byte(s), &obj) != nil || obj == nil {
			return "", modelConfig, nil
		}
		quoted = true
	}
	raw, ok := obj["model_sha256"]
	if !ok {
		return "", modelConfig, nil
	}
	if err := json.Unmarshal(raw, &sum); err != nil {
		return "", nil, fmt.Errorf("model_sha256: want a string of 64 hex digits, got %s", raw)
	}
	if err := checkSHA256Hex(sum); err != nil {
		return "", nil, fmt.Errorf("model_sha256: %w", err)
	}
	delete(obj, "model_sha256")
	b, err := json.Marshal(obj)
	if err != nil {
		return "", nil, err
	}
	if quoted {
		if b, err = json.Marshal(string(b)); err != nil {
			return "", nil, err
		}
	}
	return strings.ToLower(sum), b, nil
}
