package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// The cache keeps one directory per URL and version:
//
//	CACHE/entries/<hash of url>-<hash of version>/meta.json
//	CACHE/entries/<hash of url>-<hash of version>/data/...   the file, the unpacked archive or the prefix
//	CACHE/partial/<hash of url>-<hash of options>*           downloads a later fetch resumes
//	CACHE/tmp/<part>-*                                       staging of a fetch
//	CACHE/locks/                                             file locks, see lock.go
//
// An entry appears by a rename of a complete, synced staging directory, so a
// crash never leaves a half-written entry behind. meta.json's modification
// time is the entry's last use, which least-recently-used eviction reads.

// recentGrace keeps an entry that was just used out of eviction, so that a
// path handed to a caller is not removed before the caller pins it.
const recentGrace = time.Minute

// entryMeta describes one cache entry. It never holds a secret: URL is
// redacted.
type entryMeta struct {
	URL          string `json:"url"`
	Version      string `json:"version"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	SHA256       string `json:"sha256,omitempty"`
	Result       string `json:"result"` // path of the fetched model, relative to the entry
	Size         int64  `json:"size"`
}

type cache struct {
	dir string
	max int64

	initOnce sync.Once
	mu       sync.Mutex
	pins     map[string]int       // entry dir -> holders
	held     map[string]*fileLock // entry dir -> its shared lock, while pinned
}

func hashHex(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

func (c *cache) entriesDir() string { return filepath.Join(c.dir, "entries") }

func (c *cache) setup() {
	c.initOnce.Do(func() {
		// Staging left by a process that died is garbage; that of a fetch
		// another process runs now is under its fetch lock.
		tmp := filepath.Join(c.dir, "tmp")
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			p := filepath.Join(tmp, e.Name())
			if part, ok := partOf(e.Name()); ok {
				c.ifIdle(part, false, func() { _ = os.RemoveAll(p) })
			} else {
				_ = os.RemoveAll(p)
			}
		}
	})
}

// cacheRef is the cache as seen by the fetch of one URL.
type cacheRef struct {
	c   *cache
	url string
	key string // hash of url: names its entries
	// part names its partial downloads: key and a hash of everything the
	// download depends on, so that two fetches of one URL that cannot
	// share a download (other checksum, other endpoint) never share a
	// file, and Forget finds all of a URL's.
	part string
	lock *fileLock // the fetch lock, between acquire and release
}

func (c *cache) ref(rawURL, flightKey string) *cacheRef {
	c.setup()
	key := urlKey(rawURL)
	return &cacheRef{c: c, url: rawURL, key: key, part: key + "-" + hashHex(flightKey, 16)}
}

// partial returns a stable path for a resumable download of this URL.
func (r *cacheRef) partial(suffix string) (string, error) {
	dir := filepath.Join(r.c.dir, "partial")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, r.part+suffix), nil
}

type entry struct {
	dir  string
	meta entryMeta
	used time.Time
}

func (e entry) path() string { return filepath.Join(e.dir, e.meta.Result) }

// entries lists this URL's complete entries, most recently used first.
func (r *cacheRef) entries() []entry {
	dirs, _ := filepath.Glob(filepath.Join(r.c.entriesDir(), r.key+"-*"))
	var out []entry
	for _, d := range dirs {
		if e, err := readEntry(d); err == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].used.After(out[j].used) })
	return out
}

func readEntry(dir string) (entry, error) {
	mp := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(mp)
	if err != nil {
		return entry{}, err
	}
	st, err := os.Stat(mp)
	if err != nil {
		return entry{}, err
	}
	var m entryMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return entry{}, err
	}
	if !filepath.IsLocal(m.Result) {
		return entry{}, fmt.Errorf("cache entry %s: bad result path %q", dir, m.Result)
	}
	return entry{dir: dir, meta: m, used: st.ModTime()}, nil
}

// find returns the most recently used entry that match accepts, marking it
// used now.
func (r *cacheRef) find(match func(entryMeta) bool) (entry, bool) {
	for _, e := range r.entries() {
		if match(e.meta) {
			if _, err := os.Stat(e.path()); err != nil {
				continue
			}
			r.touch(e)
			return e, true
		}
	}
	return entry{}, false
}

// lookup returns the path of the entry of this version.
func (r *cacheRef) lookup(version string) (string, bool) {
	e, ok := r.find(func(m entryMeta) bool { return m.Version == version })
	return e.path(), ok
}

// latest returns the most recently used entry of any version, without
// marking it used: a conditional request decides whether it still is.
func (r *cacheRef) latest() (entry, bool) {
	es := r.entries()
	if len(es) == 0 {
		return entry{}, false
	}
	return es[0], true
}

func (r *cacheRef) touch(e entry) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(e.dir, "meta.json"), now, now)
}

// commit makes a new entry: fill writes the model under dst (a fresh
// directory) and returns the path to hand out, which must lie under dst.
func (r *cacheRef) commit(version string, fill func(dst string) (string, error)) (string, error) {
	return r.commitMeta(entryMeta{Version: version}, fill)
}

func (r *cacheRef) commitMeta(m entryMeta, fill func(dst string) (string, error)) (string, error) {
	start := time.Now()
	tmp := filepath.Join(r.c.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.c.entriesDir(), 0o755); err != nil {
		return "", err
	}
	stage, err := os.MkdirTemp(tmp, r.part+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	// MkdirTemp's 0700 would become the entry's: custom processors'
	// workers running as a uid of their own read their models here.
	if err := os.Chmod(stage, 0o755); err != nil {
		return "", err
	}
	data := filepath.Join(stage, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return "", err
	}
	result, err := fill(data)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(stage, result)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("internal: fetched path %s is outside %s", result, stage)
	}
	m.URL = Redact(r.url)
	m.Result = rel
	m.Size = dirSize(stage)
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(stage, "meta.json"), append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	if err := syncTree(stage); err != nil {
		return "", err
	}
	final := filepath.Join(r.c.entriesDir(), r.key+"-"+hashHex(m.Version, 16))
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	_, statErr := os.Stat(final)
	if statErr == nil && r.c.pins[final] > 0 {
		// The same version was fetched again (its entry lost its data or
		// a checksum changed) while a service holds it: keep it.
		return filepath.Join(final, rel), nil
	}
	// The entry lock keeps another process from using the entry while it
	// is replaced, and two processes from renaming onto one name.
	var l *fileLock
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		l, err = lockFile(r.c.entryLock(final), true, false)
		if !errors.Is(err, errLocked) {
			break
		}
		if _, err := readEntry(final); err == nil {
			return filepath.Join(final, rel), nil // in use elsewhere: keep it
		}
		// Being removed or committed elsewhere: a short wait.
		if time.Since(start) > commitWait {
			return "", fmt.Errorf("cache entry %s: another process holds it", final)
		}
		time.Sleep(wait)
	}
	if err != nil {
		return "", err
	}
	defer l.unlock()
	if err := os.RemoveAll(final); err != nil {
		return "", err
	}
	if err := os.Rename(stage, final); err != nil {
		return "", err
	}
	_ = syncPath(r.c.entriesDir(), true)
	return filepath.Join(final, rel), nil
}

// commitWait bounds how long a commit waits for another process that
// removes or commits the same entry.
const commitWait = 30 * time.Second

// entryOf returns the entry directory holding path, or "" when path is not
// in the cache.
func (c *cache) entryOf(path string) string {
	rel, err := filepath.Rel(c.entriesDir(), path)
	if err != nil || !filepath.IsLocal(rel) {
		return ""
	}
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return filepath.Join(c.entriesDir(), first)
}

// pin marks path in use, here and, by a shared entry lock, for other
// processes. It reports false when the entry was removed by another
// process before the lock took hold: fetch again.
func (c *cache) pin(path string) bool {
	d := c.entryOf(path)
	if d == "" {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pins[d] == 0 {
		// Waits only for a removal or replacement elsewhere, never long.
		l, err := lockFile(c.entryLock(d), false, true)
		if _, serr := os.Stat(filepath.Join(d, "meta.json")); serr != nil {
			if err == nil {
				l.unlock()
			}
			return false
		}
		if err == nil {
			if c.held == nil {
				c.held = map[string]*fileLock{}
			}
			c.held[d] = l
		}
	}
	c.pins[d]++
	return true
}

func (c *cache) unpin(path string) {
	if d := c.entryOf(path); d != "" {
		c.mu.Lock()
		if c.pins[d] > 1 {
			c.pins[d]--
		} else {
			delete(c.pins, d)
			if l := c.held[d]; l != nil {
				l.unlock()
				delete(c.held, d)
			}
		}
		c.mu.Unlock()
	}
}

// removeUnheld removes the entries of the URL with this key that no Fetch
// holds.
func (c *cache) removeUnheld(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dirs, _ := os.ReadDir(c.entriesDir())
	for _, d := range dirs {
		p := filepath.Join(c.entriesDir(), d.Name())
		if strings.HasPrefix(d.Name(), key+"-") && c.pins[p] == 0 {
			_, _ = c.removeEntry(p)
		}
	}
}

// evict removes least recently used entries that nobody holds until the
// cache fits its bound.
func (c *cache) evict(log *slog.Logger) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dirs, _ := filepath.Glob(filepath.Join(c.entriesDir(), "*"))
	var es []entry
	var total int64
	for _, d := range dirs {
		e, err := readEntry(d)
		if err != nil {
			continue
		}
		es = append(es, e)
		total += e.meta.Size
	}
	sort.Slice(es, func(i, j int) bool { return es[i].used.Before(es[j].used) })
	now := time.Now()
	for _, e := range es {
		if total <= c.max {
			return
		}
		if c.pins[e.dir] > 0 || now.Sub(e.used) < recentGrace {
			continue
		}
		removed, err := c.removeEntry(e.dir)
		if err != nil {
			log.Warn("cache eviction failed", "entry", e.dir, "err", err)
			continue
		}
		if !removed {
			continue // another process holds it
		}
		total -= e.meta.Size
		log.Info("cache entry evicted", "url", e.meta.URL, "bytes", e.meta.Size)
	}
	if total > c.max {
		log.Warn("model cache is over its bound: every entry left is in use", "cache_bytes", total, "max_cache_bytes", c.max)
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
