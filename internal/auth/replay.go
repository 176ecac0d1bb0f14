package auth

import (
	"sync"
	"time"
)

// DefaultReplayEntries bounds the replay cache when Options.Replay is nil:
// about 55 MB when full (52 bytes a signature: a map slot and a ring slot).
const DefaultReplayEntries = 1 << 20

// ReplayCache remembers the EAS signatures a server accepted, so that a
// signature is good only for the signature window after its first use,
// whatever time zone its Date was stamped in (see Options). Each entry is
// 64 bits of the signature and the time of its first use, kept until the
// signature's Date can no longer be accepted (at most the zone range, 26
// hours, plus twice the window). When more than its bound are held, the
// oldest are forgotten first; Evicted counts those forgotten before their
// Date expired, whose replays are then refused only by the Date check.
//
// A ReplayCache is safe for concurrent use; the zero value is not usable,
// make one with NewReplayCache.
type ReplayCache struct {
	mu      sync.Mutex
	max     int
	first   map[uint64]int64 // key -> first use, unix nanoseconds
	ring    []replayEntry    // keys in order of first use
	head, n int
	evicted int64
}

type replayEntry struct {
	key     uint64
	expires int64 // unix nanoseconds after which the Date is refused anyway
}

// NewReplayCache makes a cache holding at most limit signatures (at least
// 1024; 0 means DefaultReplayEntries). Its memory grows with use.
func NewReplayCache(limit int) *ReplayCache {
	if limit == 0 {
		limit = DefaultReplayEntries
	}
	limit = max(limit, 1024)
	return &ReplayCache{max: limit, first: map[uint64]int64{}, ring: make([]replayEntry, 1024)}
}

// defaultReplay is the cache of Options without one.
var defaultReplay = sync.OnceValue(func() *ReplayCache { return NewReplayCache(DefaultReplayEntries) })

// use records the first use of key, or returns when it was: ok is false
// when that is more than window before now. expires is when the
// signature's Date stops being accepted.
func (c *ReplayCache) use(key uint64, now, expires time.Time, window time.Duration) (first time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := now.UnixNano()
	c.expire(t)
	if f, seen := c.first[key]; seen {
		age := time.Duration(t - f)
		return time.Unix(0, f), age <= window && age >= -window
	}
	if c.n == c.max {
		c.pop(t)
	}
	if c.n == len(c.ring) {
		c.grow()
	}
	c.ring[(c.head+c.n)%len(c.ring)] = replayEntry{key: key, expires: expires.UnixNano()}
	c.n++
	c.first[key] = t
	return now, true
}

// expire forgets the entries at the head whose Date can no longer pass.
// Entries are in order of first use, not of expiry, so an expired entry
// behind a live one waits for it; it costs memory, never a wrong answer.
func (c *ReplayCache) expire(now int64) {
	for c.n > 0 && c.ring[c.head].expires < now {
		c.pop(now)
	}
}

func (c *ReplayCache) pop(now int64) {
	e := c.ring[c.head]
	if e.expires >= now {
		c.evicted++
	}
	delete(c.first, e.key)
	c.head = (c.head + 1) % len(c.ring)
	c.n--
}

func (c *ReplayCache) grow() {
	size := min(len(c.ring)*2, c.max)
	ring := make([]replayEntry, size)
	for i := range c.n {
		ring[i] = c.ring[(c.head+i)%len(c.ring)]
	}
	c.ring, c.head = ring, 0
}

// Len is the number of signatures held.
func (c *ReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Evicted counts the signatures forgotten for room while their Date could
// still pass.
func (c *ReplayCache) Evicted() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evicted
}
