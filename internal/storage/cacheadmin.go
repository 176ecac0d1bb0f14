package storage

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// CacheEntry is one fetched model in the cache, as `eas-server cache ls`
// shows it. URL is redacted.
type CacheEntry struct {
	ID       string    `json:"id"` // the entry's directory name
	URL      string    `json:"url"`
	Version  string    `json:"version"`
	Bytes    int64     `json:"bytes"`
	LastUsed time.Time `json:"last_used"`
	// InUse: a loaded service holds it, or a fetch of its URL runs now, in
	// this process or another sharing the cache; prune and eviction leave
	// it alone.
	InUse bool `json:"in_use"`
}

// CacheUsage sums the cache: complete entries and partial downloads.
type CacheUsage struct {
	Entries      int   `json:"entries"`
	Bytes        int64 `json:"bytes"`
	InUseBytes   int64 `json:"in_use_bytes"`
	PartialBytes int64 `json:"partial_bytes"`
	MaxBytes     int64 `json:"max_bytes"` // --cache-size; 0 = unbounded
}

// CacheList lists the cache's entries, most recently used first, with the
// totals. A Fetcher without a cache directory lists nothing.
func (f *Fetcher) CacheList() ([]CacheEntry, CacheUsage) {
	f.init()
	use := CacheUsage{MaxBytes: f.MaxCacheBytes}
	if f.CacheDir == "" {
		return nil, use
	}
	f.actMu.Lock()
	defer f.actMu.Unlock()
	f.cache.mu.Lock()
	defer f.cache.mu.Unlock()
	var out []CacheEntry
	dirs, _ := filepath.Glob(filepath.Join(f.cache.entriesDir(), "*"))
	for _, d := range dirs {
		e, err := readEntry(d)
		if err != nil {
			continue
		}
		ce := CacheEntry{ID: filepath.Base(d), URL: e.meta.URL, Version: e.meta.Version, Bytes: e.meta.Size,
			LastUsed: e.used, InUse: f.inUseLocked(d)}
		out = append(out, ce)
		use.Entries++
		use.Bytes += ce.Bytes
		if ce.InUse {
			use.InUseBytes += ce.Bytes
		}
	}
	use.PartialBytes = dirSize(filepath.Join(f.CacheDir, "partial"))
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out, use
}

// inUseLocked reports whether an entry directory is pinned by a service or
// its URL is being fetched, here or in another process. The caller holds
// actMu and cache.mu.
func (f *Fetcher) inUseLocked(dir string) bool {
	if f.cache.pins[dir] > 0 {
		return true
	}
	key, _, _ := strings.Cut(filepath.Base(dir), "-")
	return f.callers[key] > 0 || f.cache.busyElsewhere(dir)
}

// PruneResult says what Prune removed.
type PruneResult struct {
	Removed      int   `json:"removed"`       // entries
	FreedBytes   int64 `json:"freed_bytes"`   // entries and partial downloads
	KeptInUse    int   `json:"kept_in_use"`   // entries a service holds
	PartialFiles int   `json:"partial_files"` // partial downloads removed
}

// Prune removes every cache entry no service holds and no fetch is using,
// and the partial downloads of URLs not being fetched: what `eas-server
// cache prune` runs. The next deploy of a pruned model downloads it again.
func (f *Fetcher) Prune() (PruneResult, error) {
	f.init()
	var res PruneResult
	if f.CacheDir == "" {
		return res, nil
	}
	f.actMu.Lock()
	defer f.actMu.Unlock()
	f.cache.mu.Lock()
	dirs, _ := filepath.Glob(filepath.Join(f.cache.entriesDir(), "*"))
	var firstErr error
	for _, d := range dirs {
		if f.inUseLocked(d) {
			res.KeptInUse++
			continue
		}
		n := dirSize(d)
		removed, err := f.cache.removeEntry(d)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !removed {
			res.KeptInUse++ // taken by another process meanwhile
			continue
		}
		res.Removed++
		res.FreedBytes += n
	}
	f.cache.mu.Unlock()
	dir := filepath.Join(f.CacheDir, "partial")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		key, _, _ := strings.Cut(e.Name(), "-")
		key, _, _ = strings.Cut(key, ".")
		if f.callers[key] > 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		n := dirSize(p)
		tried, err := f.removePartial(p)
		if !tried {
			continue // another process is fetching it
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		res.PartialFiles++
		res.FreedBytes += n
	}
	f.cache.dropLocks("")
	return res, firstErr
}
