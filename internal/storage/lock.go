package storage

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Several processes (pods mounting one volume) may share a cache
// directory. Besides their in-process mutexes and pins, they coordinate
// through advisory file locks (flock) under CACHE/locks, which the kernel
// releases when a holder dies:
//
//	fetch-<part>.lock   exclusive while a process fetches, verifies and
//	                    commits one URL (with one set of options); it also
//	                    records the last result, so that a process that
//	                    waited for it takes that result instead of
//	                    fetching again
//	entry-<entry>.lock  shared while a process holds (pins) the entry;
//	                    exclusive, tried without waiting, to remove or
//	                    replace it, so an entry in use anywhere is skipped
//
// Partial downloads and staging directories are named after their part,
// so that whoever holds its fetch lock owns them. Only an exclusive holder
// removes a lock file; lockFile retries when the file it locked was
// removed meanwhile.

// errLocked is what a lock that would wait returns when told not to.
var errLocked = errors.New("locked by another process")

// partLen is the length of a cacheRef.part: url key, '-', 16 hex digits.
const partLen = 32 + 1 + 16

type fileLock struct{ f *os.File }

// lockFile opens (creating) and locks path, shared or exclusive; without
// wait it fails with errLocked rather than wait.
func lockFile(path string, exclusive, wait bool) (*fileLock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
			}
		}
		if err != nil {
			return nil, err
		}
		if err := flock(f, exclusive, wait); err != nil {
			f.Close()
			return nil, err
		}
		// The file may have been removed (and another created) between
		// the open and the lock: a lock on it would guard nothing.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(path)
		if err1 != nil || err2 == nil && os.SameFile(fi, pi) || err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return &fileLock{f: f}, nil
		}
		f.Close()
	}
}

func (l *fileLock) unlock() { l.f.Close() }

// remove deletes the lock file and unlocks; only an exclusive holder may.
func (l *fileLock) remove() {
	os.Remove(l.f.Name())
	l.f.Close()
}

// lockBusy reports whether another holder (process, or file handle of
// this one) locks path. It creates nothing.
func lockBusy(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(flock(f, true, false), errLocked)
}

// A fetch lock's record: "<generation>\n<result relative to the cache>\n".
func readRecord(path string) (gen, rel string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	gen, rel, _ = strings.Cut(strings.TrimSuffix(string(b), "\n"), "\n")
	return gen, rel
}

func (l *fileLock) writeRecord(rel string) {
	gen := strconv.Itoa(os.Getpid()) + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	if l.f.Truncate(0) == nil {
		_, _ = l.f.WriteAt([]byte(gen+"\n"+rel+"\n"), 0)
	}
}

func (c *cache) locksDir() string { return filepath.Join(c.dir, "locks") }

func (c *cache) fetchLock(part string) string {
	return filepath.Join(c.locksDir(), "fetch-"+part+".lock")
}

func (c *cache) entryLock(dir string) string {
	return filepath.Join(c.locksDir(), "entry-"+filepath.Base(dir)+".lock")
}

// ifIdle runs fn under part's fetch lock unless a fetch (of any process)
// holds it, and reports whether it ran. drop removes the lock file too.
func (c *cache) ifIdle(part string, drop bool, fn func()) bool {
	l, err := lockFile(c.fetchLock(part), true, false)
	if err != nil {
		return false
	}
	fn()
	if drop {
		l.remove()
	} else {
		l.unlock()
	}
	return true
}

// partOf returns the part a partial download or staging name starts with.
func partOf(name string) (string, bool) {
	if len(name) > partLen && (name[partLen] == '-' || name[partLen] == '.') {
		return name[:partLen], true
	}
	return "", false
}

// removeEntry removes an entry directory unless a process holds it (its
// entry lock cannot be taken at once): then it reports false, nil.
func (c *cache) removeEntry(dir string) (bool, error) {
	l, err := lockFile(c.entryLock(dir), true, false)
	if errors.Is(err, errLocked) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.RemoveAll(dir); err != nil {
		l.unlock()
		return false, err
	}
	l.remove()
	return true, nil
}

// busyElsewhere reports whether another process holds the entry or is
// fetching its URL. The caller holds c.mu.
func (c *cache) busyElsewhere(dir string) bool {
	if c.held[dir] == nil && lockBusy(c.entryLock(dir)) {
		return true
	}
	key, _, _ := strings.Cut(filepath.Base(dir), "-")
	locks, _ := filepath.Glob(filepath.Join(c.locksDir(), "fetch-"+key+"-*.lock"))
	for _, p := range locks {
		if lockBusy(p) {
			return true
		}
	}
	return false
}

// dropLocks removes the lock files nobody holds whose names start with
// prefix ("fetch-<key>", "entry-", ...), except those of entries that
// exist.
func (c *cache) dropLocks(prefix string) {
	names, _ := filepath.Glob(filepath.Join(c.locksDir(), prefix+"*.lock"))
	for _, p := range names {
		name := strings.TrimSuffix(filepath.Base(p), ".lock")
		if e, ok := strings.CutPrefix(name, "entry-"); ok {
			if _, err := os.Stat(filepath.Join(c.entriesDir(), e)); err == nil {
				continue
			}
		}
		if l, err := lockFile(p, true, false); err == nil {
			l.remove()
		}
	}
}

// acquire takes the ref's fetch lock, waiting while ctx lasts for another
// process that holds it. When that process fetched the model meanwhile,
// acquire returns its result: the check after the wait that spares a
// second download.
func (r *cacheRef) acquire(ctx context.Context, log *slog.Logger) (string, error) {
	p := r.c.fetchLock(r.part)
	l, err := lockFile(p, true, false)
	waited, gen := false, ""
	if errors.Is(err, errLocked) {
		waited = true
		gen, _ = readRecord(p)
		log.Info("waiting for another process fetching this model into the shared cache", "url", Redact(r.url))
		wait := 10 * time.Millisecond
		for errors.Is(err, errLocked) {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			case <-t.C:
			}
			wait = min(2*wait, 500*time.Millisecond)
			l, err = lockFile(p, true, false)
		}
	}
	if err != nil {
		// No lock on this file system (read-only, no flock): fetch as a
		// lone process would; a write that needs the cache fails anyway.
		log.Warn("cannot lock the model cache; other processes sharing it are not coordinated", "err", err)
		return "", nil
	}
	r.lock = l
	// Staging of this part is left only by a process that died holding
	// this lock.
	stale, _ := filepath.Glob(filepath.Join(r.c.dir, "tmp", r.part+"-*"))
	for _, s := range stale {
		_ = os.RemoveAll(s)
	}
	if !waited {
		return "", nil
	}
	g, rel := readRecord(p)
	if g == "" || g == gen || !filepath.IsLocal(rel) {
		return "", nil
	}
	path := filepath.Join(r.c.dir, rel)
	d := r.c.entryOf(path)
	if d == "" {
		return "", nil
	}
	e, err := readEntry(d)
	if err != nil {
		return "", nil
	}
	if _, err := os.Stat(path); err != nil {
		return "", nil
	}
	r.touch(e)
	log.Info("model fetched by another process sharing the cache", "url", Redact(r.url))
	return path, nil
}

// release records result (when it is in the cache) for processes waiting
// on the fetch lock, and unlocks it.
func (r *cacheRef) release(result string) {
	if r.lock == nil {
		return
	}
	if result != "" && r.c.entryOf(result) != "" {
		if rel, err := filepath.Rel(r.c.dir, result); err == nil {
			r.lock.writeRecord(rel)
		}
	}
	r.lock.unlock()
	r.lock = nil
}

// syncTree flushes what dir holds to disk before a rename publishes it,
// so that a crash of the machine cannot leave an entry with lost data.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		return syncPath(p, d.IsDir())
	})
}

func syncPath(p string, dir bool) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if dir {
		return nil // some systems cannot sync a directory
	}
	return err
}
