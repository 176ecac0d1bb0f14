package storage

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// guardTransport bounds every response the Fetcher reads: an attempt that
// brings no byte (headers or body) for idle is cancelled with an error
// wrapping ErrStalled, and a body that passes max bytes fails with one
// wrapping ErrTooLarge. It covers the OSS SDK's requests too, whose reads
// the Fetcher does not see.
type guardTransport struct {
	base http.RoundTripper // nil means http.DefaultTransport
	idle time.Duration     // <= 0: no idle timeout
	max  int64             // < 0: no size limit
}

func (g *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := g.base
	if base == nil {
		base = http.DefaultTransport
	}
	if g.idle <= 0 {
		resp, err := base.RoundTrip(req)
		if err == nil {
			resp.Body = &guardBody{rc: resp.Body, max: g.max}
		}
		return resp, err
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	stall := fmt.Errorf("%w: no bytes for %s; the server or the network is stuck", ErrStalled, g.idle)
	timer := time.AfterFunc(g.idle, func() { cancel(stall) })
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		if context.Cause(ctx) == stall {
			err = stall
		}
		cancel(nil)
		return nil, err
	}
	timer.Reset(g.idle)
	resp.Body = &guardBody{rc: resp.Body, max: g.max, idle: g.idle, timer: timer, ctx: ctx, cancel: cancel, stall: stall}
	return resp, nil
}

// guardBody is a response body under guardTransport.
type guardBody struct {
	rc   io.ReadCloser
	max  int64
	read int64

	idle   time.Duration
	timer  *time.Timer // nil without an idle timeout
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  error
}

func (b *guardBody) Read(p []byte) (int, error) {
	if b.max >= 0 && b.read+int64(len(p)) > b.max+1 {
		// Never take in more than one byte past the limit.
		p = p[:max(b.max+1-b.read, 0)]
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if b.timer != nil {
		if n > 0 {
			b.timer.Reset(b.idle)
		}
		if err != nil && err != io.EOF && context.Cause(b.ctx) == b.stall {
			err = b.stall
		}
	}
	if b.max >= 0 && b.read > b.max {
		return n - int(b.read-b.max), tooLarge(b.read, b.max, false)
	}
	return n, err
}

func (b *guardBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
		defer b.cancel(nil)
	}
	return b.rc.Close()
}

// urlKey names a URL's entries and partial downloads in the cache.
func urlKey(rawURL string) string { return hashHex(rawURL, 32) }

// Forget removes what the cache keeps for sources that nothing will fetch
// again: the service manager calls it when it deletes a service, with the
// service's model_path and warm_up_data_path (and any path Fetch returned
// for it), after the service's model is closed and its paths Released.
//
// A source is what was given to Fetch (a relative local path must be
// joined with FetchOptions.BaseDir first) or a path Fetch returned. For
// each, Forget removes its partial downloads, resumable or not, and its
// cache entries that no Fetch holds (see Release): an entry another
// service still holds stays, and is left to eviction. A source another
// Fetch is downloading right now is left alone entirely; a download whose
// callers have all gone (a cancelled deploy) is waited for, until ctx
// ends, so that it cannot write its partial file after Forget removed it.
// Local paths that are not archives have nothing in the cache and are
// ignored.
func (f *Fetcher) Forget(ctx context.Context, sources ...string) error {
	f.init()
	if f.CacheDir == "" {
		return nil
	}
	for _, src := range sources {
		key, ok := f.sourceKey(src)
		if !ok {
			continue
		}
		if err := f.forgetKey(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// sourceKey returns the url key of what Fetch caches for src.
func (f *Fetcher) sourceKey(src string) (string, bool) {
	if src == "" {
		return "", false
	}
	if d := f.cache.entryOf(src); d != "" {
		name := filepath.Base(d)
		if len(name) > 32 && name[32] == '-' {
			return name[:32], true
		}
		return "", false
	}
	scheme, rest, hasScheme := strings.Cut(src, "://")
	switch {
	case !hasScheme:
		rest = src
	case strings.EqualFold(scheme, "file"):
	case strings.EqualFold(scheme, "http"), strings.EqualFold(scheme, "https"), strings.EqualFold(scheme, "oss"):
		return urlKey(src), true
	default:
		return "", false
	}
	abs, err := filepath.Abs(rest)
	if err != nil || !IsArchive(abs) {
		return "", false
	}
	return urlKey("file://" + abs), true
}

func (f *Fetcher) forgetKey(ctx context.Context, key string) error {
	for {
		f.actMu.Lock()
		if f.callers[key] > 0 {
			f.actMu.Unlock()
			return nil // another Fetch wants it
		}
		// Without callers, a running download is a cancelled one, ending.
		dying := f.group.matching(func(url string) bool { return urlKey(url) == key })
		if len(dying) == 0 {
			f.removePartials(func(name string) bool { return strings.HasPrefix(name, key+"-") || strings.HasPrefix(name, key+".") })
			f.cache.removeUnheld(key)
			f.cache.dropLocks("fetch-" + key + "-")
			f.actMu.Unlock()
			return nil
		}
		f.actMu.Unlock()
		for _, done := range dying {
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// removePartials removes the entries of the partial directory that match,
// except those another process is fetching. The caller holds actMu.
func (f *Fetcher) removePartials(match func(name string) bool) {
	dir := filepath.Join(f.CacheDir, "partial")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if match(e.Name()) {
			f.removePartial(filepath.Join(dir, e.Name()))
		}
	}
}

// removePartial removes a partial download unless a fetch, in any
// process, holds its lock; it reports whether it tried.
func (f *Fetcher) removePartial(p string) (bool, error) {
	var err error
	remove := func() { err = os.RemoveAll(p) }
	if part, ok := partOf(filepath.Base(p)); ok {
		return f.cache.ifIdle(part, false, remove), err
	}
	remove()
	return true, err
}

// sweepEvery is the least time between two sweeps of stale partials.
const sweepEvery = time.Hour

// sweepPartials removes partial downloads untouched for PartialMaxAge,
// except those of URLs being fetched now. It runs at most once per
// sweepEvery.
func (f *Fetcher) sweepPartials(log *slog.Logger) {
	if f.PartialMaxAge < 0 {
		return
	}
	f.actMu.Lock()
	defer f.actMu.Unlock()
	now := time.Now()
	if !f.lastSweep.IsZero() && now.Sub(f.lastSweep) < sweepEvery {
		return
	}
	f.lastSweep = now
	active := map[string]bool{}
	for k := range f.callers {
		active[k] = true
	}
	for _, u := range f.group.urls() {
		active[urlKey(u)] = true
	}
	dir := filepath.Join(f.CacheDir, "partial")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if len(name) > 32 && active[name[:32]] {
			continue
		}
		p := filepath.Join(dir, name)
		if now.Sub(newestModTime(p)) < f.PartialMaxAge {
			continue
		}
		tried, err := f.removePartial(p)
		if err != nil {
			log.Warn("removing a stale partial download failed", "path", p, "err", err)
			continue
		}
		if !tried {
			continue // another process is fetching it
		}
		log.Info("stale partial download removed", "path", p, "max_age", f.PartialMaxAge.String())
	}
}

// newestModTime is the latest modification time of p or, for a directory,
// of anything under it.
func newestModTime(p string) time.Time {
	var t time.Time
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil && info.ModTime().After(t) {
			t = info.ModTime()
		}
		return nil
	})
	return t
}

// removeWithPrefix removes the files in dir whose names start with prefix:
// a partial download and what the OSS SDK keeps beside it (.cp, .temp).
func removeWithPrefix(dir, prefix string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
