package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aliyun/aliyun-oss-go-sdk/oss"
)

// OSSEndpointEnv is the variable read when a service has no oss_endpoint.
const OSSEndpointEnv = "OSS_ENDPOINT"

// ParseOSSURL splits oss://bucket/key. The key may be empty (the whole
// bucket) or end in "/" (a prefix: every object under it).
func ParseOSSURL(rawURL string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(rawURL, "oss://")
	if !ok {
		return "", "", fmt.Errorf("want oss://bucket/key, got %q", Redact(rawURL))
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("bucket %q: want 3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit", bucket)
	}
	if strings.ContainsAny(key, "?#") {
		return "", "", errors.New("oss:// URLs take no query string or fragment; credentials come from the environment or the credentials file")
	}
	return bucket, key, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 || b[0] == '-' || b[len(b)-1] == '-' {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// OSSEndpoint resolves an endpoint: the given one, else $OSS_ENDPOINT. A
// bare host means https; an http:// URL reaches a local OSS-compatible server.
func OSSEndpoint(given string) (string, error) {
	return ossEndpoint(given, sideServer)
}

// side says whose settings an OSS error is about: the server fetches models
// with its own environment, the CLI uploads with the shell's. A user who
// exported credentials in the CLI's shell must be told the server does not
// see them.
type side int

const (
	sideServer side = iota
	sideUpload
)

func ossEndpoint(given string, who side) (string, error) {
	ep := strings.TrimSpace(given)
	if ep == "" {
		ep = strings.TrimSpace(os.Getenv(OSSEndpointEnv))
	}
	if ep == "" {
		const example = "e.g. oss-cn-hangzhou.aliyuncs.com (oss-cn-hangzhou-internal.aliyuncs.com inside Alibaba Cloud)"
		if who == sideUpload {
			return "", fmt.Errorf("no OSS endpoint to upload to: pass --endpoint or set %s, %s", OSSEndpointEnv, example)
		}
		return "", fmt.Errorf("no OSS endpoint for the server to fetch from: set oss_endpoint in service.json, or %s in the environment of the eas-server serve process (the CLI's shell does not pass it on), %s", OSSEndpointEnv, example)
	}
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("OSS endpoint %q: want a host such as oss-cn-hangzhou.aliyuncs.com or an http(s):// URL", ep)
	}
	return u.Scheme + "://" + u.Host, nil
}

// ossTarget is a resolved oss:// URL with a client for it.
type ossTarget struct {
	bucket   *oss.Bucket
	name     string // bucket name
	key      string
	endpoint string
	red      string
	creds    Credentials
	op       string // "fetch" or "upload", for messages
}

func newOSSTarget(rawURL, endpoint string, creds *Credentials, client *http.Client, who side) (*ossTarget, error) {
	red := Redact(rawURL)
	op := "fetch"
	if who == sideUpload {
		op = "upload"
	}
	name, key, err := ParseOSSURL(rawURL)
	if err != nil {
		return nil, &FetchError{URL: red, Err: err, Op: op}
	}
	ep, err := ossEndpoint(endpoint, who)
	if err != nil {
		return nil, &FetchError{URL: red, Err: err, Op: op}
	}
	var c Credentials
	if creds != nil {
		c = *creds
	} else if c, err = LoadCredentials(); err != nil {
		if who == sideServer {
			err = fmt.Errorf("the server: %w; they must be in the environment (or credentials file) of the eas-server serve process, which then needs a restart: credentials exported in the CLI's shell do not reach it", err)
		} else {
			err = fmt.Errorf("this shell: %w", err)
		}
		return nil, &FetchError{URL: red, Err: err, Op: op}
	}
	opts := []oss.ClientOption{oss.HTTPClient(client)}
	if c.SecurityToken != "" {
		opts = append(opts, oss.SecurityToken(c.SecurityToken))
	}
	cl, err := oss.New(ep, c.AccessKeyID, c.AccessKeySecret, opts...)
	if err != nil {
		return nil, &FetchError{URL: red, Err: fmt.Errorf("OSS client for %s: %w", ep, err)}
	}
	b, err := cl.Bucket(name)
	if err != nil {
		return nil, &FetchError{URL: red, Err: err}
	}
	return &ossTarget{bucket: b, name: name, key: key, endpoint: ep, red: red, creds: c, op: op}, nil
}

// ossError turns an SDK error into one a user can act on.
func (t *ossTarget) ossError(err error) error {
	e := t.classify(err)
	var fe *FetchError
	if errors.As(e, &fe) && fe.Op == "" {
		fe.Op = t.op
	}
	return e
}

func (t *ossTarget) classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) {
		return err // classified by the caller, which knows the cache
	}
	if errors.Is(err, ErrTooLarge) {
		return &FetchError{URL: t.red, Err: err}
	}
	var se oss.ServiceError
	if !errors.As(err, &se) {
		var pse *oss.ServiceError
		if errors.As(err, &pse) {
			se = *pse
		} else {
			fe := netError(err, t.red)
			if errors.Is(fe, ErrUnreachable) {
				fe.Err = fmt.Errorf("%w: cannot reach OSS endpoint %s: %v; check oss_endpoint or %s and the network (inside Alibaba Cloud use the -internal endpoint of the bucket's region)", ErrUnreachable, t.endpoint, err, OSSEndpointEnv)
			}
			return fe
		}
	}
	switch {
	case se.Code == "NoSuchBucket":
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: bucket %q does not exist at %s; check the bucket name and that oss_endpoint is the bucket's region", ErrNotFound, t.name, t.endpoint)}
	case se.Code == "NoSuchKey" || se.StatusCode == http.StatusNotFound:
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: no object %q in bucket %q; check the key (eas-server upload prints it), or end the URL with / for a folder", ErrNotFound, t.key, t.name)}
	case se.Code == "InvalidAccessKeyId":
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: OSS does not know the access key id from %s; check it (OSS_ACCESS_KEY_ID or the credentials file)", ErrAccessDenied, t.creds.Source)}
	case se.Code == "SignatureDoesNotMatch":
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: OSS rejected the signature; the access key secret from %s is wrong", ErrAccessDenied, t.creds.Source)}
	case se.Code == "SecurityTokenExpired" || se.Code == "InvalidSecurityToken":
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: the security token from %s is expired or invalid; get a fresh STS token", ErrAccessDenied, t.creds.Source)}
	case se.StatusCode == http.StatusForbidden && t.op == "upload":
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: OSS answered 403 %s for the key from %s; grant it oss:PutObject on bucket %q (RAM policy), or use the bucket owner's key", ErrAccessDenied, se.Code, t.creds.Source, t.name)}
	case se.StatusCode == http.StatusForbidden:
		return &FetchError{URL: t.red, Err: fmt.Errorf("%w: OSS answered 403 %s for the key from %s; grant it oss:GetObject and oss:ListObjects on bucket %q (RAM policy), or use the bucket owner's key", ErrAccessDenied, se.Code, t.creds.Source, t.name)}
	case se.StatusCode >= 500 || se.StatusCode == http.StatusTooManyRequests:
		return &FetchError{URL: t.red, Retryable: true, Err: fmt.Errorf("OSS answered %d %s; try again later", se.StatusCode, se.Code)}
	default:
		return &FetchError{URL: t.red, Err: fmt.Errorf("OSS answered %d %s: %s", se.StatusCode, se.Code, se.Message)}
	}
}

// notFound explains a 404 on an object: a missing bucket, a folder named
// without its trailing slash, or a missing key.
func (t *ossTarget) notFound(ctx context.Context, headErr error) error {
	res, err := t.bucket.ListObjectsV2(oss.Prefix(t.key+"/"), oss.MaxKeys(1), oss.WithContext(ctx))
	if err != nil {
		return t.ossError(err)
	}
	if len(res.Objects) == 0 {
		return headErr
	}
	return &FetchError{URL: t.red, Err: fmt.Errorf("%w: %q is a folder, not an object; use oss://%s/%s/ (with the trailing slash) to fetch everything in it", ErrNotFound, t.key, t.name, t.key)}
}

// retry runs op until it succeeds, fails for good or runs out of retries
// without progress; progressed reports whether the last attempt moved on.
// onRetry, when not nil, hears of each retry (FetchOptions.Retry).
func (f *Fetcher) retry(ctx context.Context, log *slog.Logger, onRetry func(n, max int, err error), red string, op func() (progressed bool, err error)) error {
	failures := 0
	for {
		progressed, err := op()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if progressed {
			failures = 0
		}
		if failures >= f.Retries {
			return err
		}
		log.Warn("download failed, retrying", "url", red, "err", err, "retry", failures+1)
		if onRetry != nil {
			onRetry(failures+1, f.Retries, err)
		}
		if err := f.backoff(ctx, failures); err != nil {
			return err
		}
		failures++
	}
}

type ossListener struct{ fn func(done, total int64) }

func (l ossListener) ProgressChanged(e *oss.ProgressEvent) { l.fn(e.ConsumedBytes, e.TotalBytes) }

// downloadObject fetches one object into dst with parallel ranges and a
// checkpoint file beside it, so an interrupted download resumes where it
// stopped, in this process or the next.
func (f *Fetcher) downloadObject(ctx context.Context, opts FetchOptions, t *ossTarget, key, dst string, size int64, progress func(done int64)) error {
	routines := 1
	if size > f.PartSize {
		routines = f.Parallel
	}
	var last atomic.Int64
	op := func() (bool, error) {
		before := last.Load()
		err := t.bucket.DownloadFile(key, dst, f.PartSize,
			oss.Routines(routines),
			oss.Checkpoint(true, dst+".cp"),
			oss.Progress(ossListener{func(done, _ int64) { last.Store(done); progress(done) }}),
			oss.WithContext(ctx))
		return last.Load() > before, t.ossError(err)
	}
	return f.retry(ctx, opts.Logger, opts.Retry, t.red, op)
}

func (f *Fetcher) fetchOSS(ctx context.Context, rawURL string, opts FetchOptions, c *cacheRef) (string, error) {
	t, err := newOSSTarget(rawURL, opts.OSSEndpoint, f.Credentials, f.client, sideServer)
	if err != nil {
		return "", err
	}
	if t.key == "" || strings.HasSuffix(t.key, "/") {
		return f.fetchOSSPrefix(ctx, t, opts, c)
	}
	var meta http.Header
	err = f.retry(ctx, opts.Logger, opts.Retry, t.red, func() (bool, error) {
		var err error
		meta, err = t.bucket.GetObjectDetailedMeta(t.key, oss.WithContext(ctx))
		return false, t.ossError(err)
	})
	if errors.Is(err, ErrNotFound) {
		err = t.notFound(ctx, err)
	}
	if errors.Is(err, ErrUnreachable) {
		if prev, ok := c.latest(); ok {
			opts.Logger.Warn("cannot revalidate the cached model; using the cached copy", "url", t.red, "err", err)
			c.touch(prev)
			return prev.path(), nil
		}
	}
	if err != nil {
		return "", err
	}
	etag := meta.Get("ETag")
	size, _ := strconv.ParseInt(meta.Get("Content-Length"), 10, 64)
	version := "etag:" + etag
	if e, ok := c.find(func(m entryMeta) bool {
		return m.Version == version && (opts.SHA256 == "" || m.SHA256 == opts.SHA256)
	}); ok {
		opts.Logger.Info("model found in cache", "url", t.red, "etag", etag)
		return e.path(), nil
	}
	if f.overLimit(size) {
		return "", &FetchError{URL: t.red, Err: tooLarge(size, f.MaxModelBytes, true)}
	}
	base := fileBase(t.key, "model")
	part, err := c.partial("-" + base)
	if err != nil {
		return "", err
	}
	if err := checkRoom(filepath.Dir(part), size); err != nil {
		return "", &FetchError{URL: t.red, Err: err}
	}
	opts.Logger.Info("model download started", "url", t.red, "bytes", size)
	start := time.Now()
	opts.Progress(0, size)
	if err := f.downloadObject(ctx, opts, t, t.key, part, size, func(done int64) { opts.Progress(done, size) }); err != nil {
		if ctx.Err() == nil && !retryable(err) {
			// Failed for good: the checkpoint would resume nothing useful.
			removeWithPrefix(filepath.Dir(part), filepath.Base(part))
		}
		return "", err
	}
	if st, err := os.Stat(part); err == nil && f.overLimit(st.Size()) {
		os.Remove(part)
		return "", &FetchError{URL: t.red, Err: tooLarge(st.Size(), f.MaxModelBytes, true)}
	}
	sum, err := verifyFile(part, opts.SHA256)
	if err != nil {
		os.Remove(part)
		return "", &FetchError{URL: t.red, Err: err}
	}
	p, err := c.commitMeta(entryMeta{Version: version, ETag: etag, LastModified: meta.Get("Last-Modified"), SHA256: sum}, func(dst string) (string, error) {
		if IsArchive(base) {
			return f.unpack(part, dst)
		}
		out := filepath.Join(dst, base)
		return out, os.Rename(part, out)
	})
	if err != nil {
		return "", err
	}
	os.Remove(part)
	opts.Logger.Info("model downloaded", "url", t.red, "bytes", size, "seconds", time.Since(start).Seconds())
	return p, nil
}

type ossObject struct {
	Key  string
	ETag string
	Size int64
	rel  string
}

func (f *Fetcher) listPrefix(ctx context.Context, t *ossTarget, log *slog.Logger) ([]ossObject, error) {
	var out []ossObject
	token := ""
	for {
		var res oss.ListObjectsResultV2
		err := f.retry(ctx, log, nil, t.red, func() (bool, error) {
			var err error
			o := []oss.Option{oss.Prefix(t.key), oss.MaxKeys(1000), oss.WithContext(ctx)}
			if token != "" {
				o = append(o, oss.ContinuationToken(token))
			}
			res, err = t.bucket.ListObjectsV2(o...)
			return false, t.ossError(err)
		})
		if err != nil {
			return nil, err
		}
		for _, o := range res.Objects {
			if strings.HasSuffix(o.Key, "/") {
				continue // a folder marker
			}
			rel, err := cleanName(strings.TrimPrefix(o.Key, t.key))
			if err != nil || rel == "" {
				return nil, &FetchError{URL: t.red, Err: fmt.Errorf("object key %q cannot be a local file name: it would leave the model directory", o.Key)}
			}
			out = append(out, ossObject{Key: o.Key, ETag: o.ETag, Size: o.Size, rel: rel})
		}
		if !res.IsTruncated || res.NextContinuationToken == "" {
			break
		}
		token = res.NextContinuationToken
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// fetchOSSPrefix fetches every object under a prefix into one directory,
// keeping the key's path below the prefix. Objects finish into a partial
// directory that survives restarts, so a second attempt fetches only the
// objects still missing.
func (f *Fetcher) fetchOSSPrefix(ctx context.Context, t *ossTarget, opts FetchOptions, c *cacheRef) (string, error) {
	objs, err := f.listPrefix(ctx, t, opts.Logger)
	if errors.Is(err, ErrUnreachable) {
		if prev, ok := c.latest(); ok {
			opts.Logger.Warn("cannot revalidate the cached model; using the cached copy", "url", t.red, "err", err)
			c.touch(prev)
			return prev.path(), nil
		}
	}
	if err != nil {
		return "", err
	}
	if len(objs) == 0 {
		return "", &FetchError{URL: t.red, Err: fmt.Errorf("%w: no objects under prefix %q in bucket %q; check the path (eas-server upload prints it)", ErrNotFound, t.key, t.name)}
	}
	h := sha256.New()
	var total int64
	for _, o := range objs {
		fmt.Fprintf(h, "%s\x00%s\x00%d\n", o.Key, o.ETag, o.Size)
		total += o.Size
	}
	version := "listing:" + hex.EncodeToString(h.Sum(nil))
	if p, ok := c.lookup(version); ok {
		opts.Logger.Info("model found in cache", "url", t.red, "objects", len(objs))
		return p, nil
	}
	if f.overLimit(total) {
		return "", &FetchError{URL: t.red, Err: tooLarge(total, f.MaxModelBytes, true)}
	}
	dir, err := c.partial("-prefix")
	if err != nil {
		return "", err
	}
	donePath := dir + ".json"
	finished := map[string]string{} // key -> etag of objects complete in dir
	if b, err := os.ReadFile(donePath); err == nil {
		_ = json.Unmarshal(b, &finished)
	}
	if err := checkRoom(filepath.Dir(dir), total); err != nil {
		return "", &FetchError{URL: t.red, Err: err}
	}
	opts.Logger.Info("model download started", "url", t.red, "objects", len(objs), "bytes", total)
	start := time.Now()

	var mu sync.Mutex
	var doneBytes int64
	inflight := map[string]int64{}
	report := func() {
		n := doneBytes
		for _, v := range inflight {
			n += v
		}
		opts.Progress(n, total)
	}
	jobs := make(chan ossObject)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range min(f.Parallel, len(objs)) {
		wg.Go(func() {
			for o := range jobs {
				local := filepath.Join(dir, o.rel)
				if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
					errs <- err
					continue
				}
				err := f.downloadObject(ctx, opts, t, o.Key, local, o.Size, func(d int64) {
					mu.Lock()
					inflight[o.Key] = d
					report()
					mu.Unlock()
				})
				mu.Lock()
				delete(inflight, o.Key)
				if err == nil {
					doneBytes += o.Size
					finished[o.Key] = o.ETag
					b, _ := json.Marshal(finished)
					_ = os.WriteFile(donePath, b, 0o644)
				}
				report()
				mu.Unlock()
				if err != nil {
					errs <- err
				}
			}
		})
	}
	mu.Lock()
	report()
	mu.Unlock()
feed:
	for _, o := range objs {
		mu.Lock() // workers write finished as they complete objects
		done := finished[o.Key] == o.ETag
		mu.Unlock()
		if done {
			if st, err := os.Stat(filepath.Join(dir, o.rel)); err == nil && st.Size() == o.Size {
				mu.Lock()
				doneBytes += o.Size
				mu.Unlock()
				continue
			}
		}
		select {
		case jobs <- o:
		case err := <-errs:
			errs <- err
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if ctx.Err() == nil && !retryable(err) {
			os.RemoveAll(dir)
			os.Remove(donePath)
		}
		return "", err
	}
	p, err := c.commitMeta(entryMeta{Version: version}, func(dst string) (string, error) {
		// The partial directory becomes the entry's data.
		if err := os.Remove(dst); err != nil {
			return "", err
		}
		return dst, os.Rename(dir, dst)
	})
	if err != nil {
		return "", err
	}
	os.Remove(donePath)
	opts.Logger.Info("model downloaded", "url", t.red, "objects", len(objs), "bytes", total, "seconds", time.Since(start).Seconds())
	return p, nil
}

// UploadOptions configure Upload.
type UploadOptions struct {
	// Endpoint is the OSS endpoint; "" means $OSS_ENDPOINT.
	Endpoint string
	// Credentials, when nil, are found by LoadCredentials.
	Credentials *Credentials
	// HTTPClient; nil means one without an overall timeout.
	HTTPClient *http.Client
	// PartSize is the multipart part size; files larger than it go up in
	// parts, in parallel. 0 means 16 MiB.
	PartSize int64
	// Parallel is how many parts go up at once; 0 means 4.
	Parallel int
	// CheckpointDir keeps the state of an interrupted multipart upload, so
	// that running the same upload again sends only the missing parts.
	// "" means the user's cache directory.
	CheckpointDir string
	// Progress, when set, is called with the bytes sent and the file's size.
	Progress func(done, total int64)
	// RetryBackoff is the first wait before retrying a failed upload
	// (3 retries); 0 means 500ms.
	RetryBackoff time.Duration
}

// Upload puts the local file at src on OSS at dstURL (oss://bucket/key; a
// key ending in "/" or empty gets src's base name appended) and returns the
// resulting oss:// URL. Files larger than PartSize go up as a resumable
// multipart upload.
func Upload(ctx context.Context, src, dstURL string, opts UploadOptions) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", src, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("upload %s: is a directory; pack it first (tar czf model.tar.gz -C DIR .), the server unpacks archives", src)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = defaultHTTPClient()
	}
	if opts.PartSize <= 0 {
		opts.PartSize = 16 << 20
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.CheckpointDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			opts.CheckpointDir = filepath.Join(d, "eas-server", "upload")
		} else {
			opts.CheckpointDir = filepath.Join(os.TempDir(), "eas-server-upload")
		}
	}
	if strings.HasSuffix(dstURL, "/") || strings.Count(dstURL, "/") == 2 {
		dstURL = strings.TrimSuffix(dstURL, "/") + "/" + filepath.Base(src)
	}
	t, err := newOSSTarget(dstURL, opts.Endpoint, opts.Credentials, opts.HTTPClient, sideUpload)
	if err != nil {
		return "", err
	}
	size := st.Size()
	listener := oss.Progress(ossListener{func(done, _ int64) {
		if opts.Progress != nil {
			opts.Progress(done, size)
		}
	}})
	if opts.Progress != nil {
		opts.Progress(0, size)
	}
	if size > opts.PartSize {
		if err := os.MkdirAll(opts.CheckpointDir, 0o700); err != nil {
			return "", fmt.Errorf("upload checkpoint directory: %w", err)
		}
	}
	// A retry of a multipart upload resumes from its checkpoint: only the
	// parts not yet acknowledged go up again.
	f := &Fetcher{Retries: 3, RetryBackoff: opts.RetryBackoff}
	f.init()
	err = f.retry(ctx, slog.New(slog.DiscardHandler), nil, t.red, func() (bool, error) {
		if size <= opts.PartSize {
			return false, t.ossError(t.bucket.PutObjectFromFile(t.key, src, listener, oss.WithContext(ctx)))
		}
		return true, t.ossError(t.bucket.UploadFile(t.key, src, opts.PartSize, oss.Routines(opts.Parallel),
			oss.CheckpointDir(true, opts.CheckpointDir), listener, oss.WithContext(ctx)))
	})
	if err != nil {
		e := err
		var fe *FetchError
		if errors.As(e, &fe) && errors.Is(fe, ErrAccessDenied) {
			fe.Err = fmt.Errorf("%w (uploads need oss:PutObject)", fe.Err)
		}
		return "", fmt.Errorf("upload %s: %w", src, e)
	}
	return "oss://" + t.name + "/" + t.key, nil
}
