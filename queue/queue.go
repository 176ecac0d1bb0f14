// Package queue is the queue service of asynchronous services: durable
// queues of frames (EAS's DataFrame: an index, bytes, tags) with consumer
// windows, commits, negative acknowledgements, redelivery and dead
// letters. A service's queues (its input and its sink) live in one Store,
// so that moving a request's answer to the sink and committing the request
// is one transaction: a crash leaves either both or neither.
//
// The embedded Store is bbolt (one file, copy-on-write B+tree, fsync per
// transaction): it survives kill -9 without a recovery step, and a group
// commit (commit.go) gives concurrent writes one transaction and one fsync.
//
// Delivery is at least once. An entry handed to a consumer (a watcher) and
// not committed goes back to the ready set when the consumer goes away or
// acknowledges it negatively, with its delivery count kept on disk; past
// Config.MaxDelivery deliveries it is dead-lettered instead.
package queue

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Errors a queue returns; the HTTP layer maps them to status codes.
var (
	ErrFull     = errors.New("queue is full")
	ErrTooLarge = errors.New("payload larger than the queue's limit")
	ErrEnded    = errors.New("queue is at its end of stream")
	ErrClosed   = errors.New("queue is closed")
	ErrNoEntry  = errors.New("no such entry in the queue")
)

// RequestIDTag is the tag every frame carries: the request id Put made.
const RequestIDTag = "requestId"

// Config bounds a queue.
type Config struct {
	MaxLength   int  // entries; a full queue refuses Put (ErrFull)
	MaxPayload  int  // bytes of one frame's data
	MaxDelivery int  // deliveries before an entry is dead-lettered; <= 0: 5
	AutoEvict   bool // a full queue drops its oldest ready entry instead of refusing
}

// Options tune a Store.
type Options struct {
	// SyncEachPut makes every Put its own transaction and fsync, instead
	// of joining the group commit of concurrent writes. Both are durable
	// once Put returns; the group commit is faster under load.
	SyncEachPut bool
}

// Store holds the queues of one service in one bbolt file.
type Store struct {
	db     *bolt.DB
	opts   Options
	commit *committer

	mu     sync.Mutex
	queues map[string]*boltQueue
}

// Open opens (or creates) the store at path.
func Open(path string, opts Options) (*Store, error) {
	// The freelist is not written at each commit (it is rebuilt by a scan
	// at open): a queue deletes as much as it writes, and an array
	// freelist written per commit grows with the churn and slows every
	// commit.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("queue store %s: %w", path, err)
	}
	return &Store{db: db, opts: opts, queues: map[string]*boltQueue{}, commit: newCommitter(db)}, nil
}

// Close closes the store; its queues' watchers end.
func (s *Store) Close() error {
	s.mu.Lock()
	qs := s.queues
	s.queues = map[string]*boltQueue{}
	s.mu.Unlock()
	for _, q := range qs {
		q.close()
	}
	s.commit.close()
	return s.db.Close()
}

// Queue opens the named queue, loading what the store holds of it.
func (s *Store) Queue(ctx context.Context, name string, cfg Config) (Queue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.MaxDelivery <= 0 {
		cfg.MaxDelivery = 5
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[name]; ok {
		q.mu.Lock()
		q.cfg = cfg
		q.mu.Unlock()
		return q, nil
	}
	q := &boltQueue{s: s, name: name, cfg: cfg, data: []byte(name + "/data"), meta: []byte(name + "/meta"),
		entries: map[uint64]*entry{}, byTag: map[uint64]posting{}, seed: maphash.MakeSeed(),
		owner: map[uint64]*boltWatcher{}, watchers: map[*boltWatcher]bool{}, changed: make(chan struct{})}
	err := s.db.Update(func(tx *bolt.Tx) error {
		d, err := tx.CreateBucketIfNotExists(q.data)
		if err != nil {
			return err
		}
		m, err := tx.CreateBucketIfNotExists(q.meta)
		if err != nil {
			return err
		}
		if v := m.Get(keyLast); len(v) == 8 {
			q.last = binary.BigEndian.Uint64(v)
		}
		q.ended = m.Get(keyEnded) != nil
		return d.ForEach(func(k, v []byte) error {
			var r record
			if err := r.view(v); err != nil {
				return fmt.Errorf("%s entry %d: %w", name, binary.BigEndian.Uint64(k), err)
			}
			idx := binary.BigEndian.Uint64(k)
			q.addLocked(&entry{index: idx, priority: r.Priority, deliveries: r.Deliveries, enqueued: r.Enqueued,
				size: int64(len(v)), tags: q.tagHashes(r.Tags)})
			q.last = max(q.last, idx)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	s.queues[name] = q
	return q, nil
}

var (
	keyLast  = []byte("last")
	keyEnded = []byte("ended")
)

// entry is what a queue keeps in memory of one stored entry.
type entry struct {
	index      uint64
	priority   int64
	deliveries int64
	enqueued   int64
	heapIdx    int      // position in the ready heap; -1 when not ready
	size       int64    // bytes stored, what a read's byte cap counts
	tags       []uint64 // hashes of its tags (index.go), sorted
}

// readyHeap orders ready entries: higher priority first, then lower index.
type readyHeap []*entry

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].index < h[j].index
}
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *readyHeap) Push(x any) {
	e := x.(*entry)
	e.heapIdx = len(*h)
	*h = append(*h, e)
}
func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	e.heapIdx = -1
	return e
}

// boltQueue is one durable queue of a Store.
type boltQueue struct {
	s          *Store
	name       string
	data, meta []byte // bucket names

	mu           sync.Mutex
	cfg          Config
	last         uint64
	entries      map[uint64]*entry
	byTag        map[uint64]posting // tag hash -> entries (index.go)
	seed         maphash.Seed
	ready        readyHeap
	owner        map[uint64]*boltWatcher // delivered and not committed
	watchers     map[*boltWatcher]bool
	changed      chan struct{} // closed and replaced on every change
	ended        bool
	closed       bool
	redeliveries int64
	consumers    int // watchers made, for their default ids
	deadLetter   DeadLetterFunc
	ackErrors    atomic.Int64 // background writes of deliveries that failed
	deadLettered atomic.Int64 // entries given back past MaxDelivery (Stats.DeadLettered)
	// examined counts entries looked at to find a watcher's next entry
	// or plan a read: what the tag index keeps to the matching ones.
	examined atomic.Int64
}

// countAckError counts a failed background write of a delivery (its
// count, or an auto-commit's delete), which no caller sees; a store
// closing meanwhile is no failure.
func (q *boltQueue) countAckError(err error) {
	if err != nil && !errors.Is(err, ErrClosed) {
		q.ackErrors.Add(1)
	}
}

// Name is the queue's name.
func (q *boltQueue) Name() string { return q.name }

// SetDeadLetter sets where an entry goes after MaxDelivery deliveries (the
// input queue's go to the sink, with the reason); nil drops them.
func (q *boltQueue) SetDeadLetter(f DeadLetterFunc) {
	q.mu.Lock()
	q.deadLetter = f
	q.mu.Unlock()
}

func (q *boltQueue) signalLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

func idxKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// NewRequestID makes a request id.
func NewRequestID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail
	return hex.EncodeToString(b[:])
}

// Put appends a frame and returns its index once it is on disk. tags may
// be nil; the request id is added to them.
func (q *boltQueue) Put(ctx context.Context, data []byte, tags map[string]string, priority int64) (uint64, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	id := tags[RequestIDTag]
	if id == "" {
		id = NewRequestID()
	}
	t := make(map[string]string, len(tags)+1)
	for k, v := range tags {
		t[k] = v
	}
	t[RequestIDTag] = id
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return 0, "", ErrClosed
	case q.ended:
		q.mu.Unlock()
		return 0, "", ErrEnded
	case q.cfg.MaxPayload > 0 && len(data) > q.cfg.MaxPayload:
		q.mu.Unlock()
		return 0, "", fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), q.cfg.MaxPayload)
	}
	var evict []uint64
	if q.cfg.MaxLength > 0 && len(q.entries) >= q.cfg.MaxLength {
		if !q.cfg.AutoEvict || q.ready.Len() == 0 {
			q.mu.Unlock()
			return 0, "", FullError(q.name, q.cfg.MaxLength, nil)
		}
		evict = append(evict, q.oldestReadyLocked())
	}
	q.last++
	idx := q.last
	q.mu.Unlock()
	r := record{Frame: Frame{Index: idx, Data: data, Tags: t}, Priority: priority, Enqueued: time.Now().UnixNano()}
	val := r.marshal()
	write := func(tx *bolt.Tx) error {
		b := tx.Bucket(q.data)
		for _, e := range evict {
			if err := b.Delete(idxKey(e)); err != nil {
				return err
			}
		}
		if err := b.Put(idxKey(idx), val); err != nil {
			return err
		}
		m := tx.Bucket(q.meta)
		if v := m.Get(keyLast); len(v) == 8 && binary.BigEndian.Uint64(v) >= idx {
			return nil
		}
		return m.Put(keyLast, idxKey(idx))
	}
	var err error
	if q.s.opts.SyncEachPut {
		err = q.s.db.Update(write)
	} else {
		err = q.s.commit.do(ctx, write)
	}
	if err != nil {
		return 0, "", err
	}
	e := &entry{index: idx, priority: priority, enqueued: r.Enqueued, size: int64(len(val)), tags: q.tagHashes(t)}
	q.mu.Lock()
	for _, x := range evict {
		q.dropLocked(x)
	}
	q.addLocked(e)
	q.signalLocked()
	q.mu.Unlock()
	return idx, id, nil
}

// oldestReadyLocked is the ready entry with the lowest index.
func (q *boltQueue) oldestReadyLocked() uint64 {
	var oldest uint64
	for _, e := range q.ready {
		if oldest == 0 || e.index < oldest {
			oldest = e.index
		}
	}
	return oldest
}

// isReadyLocked reports whether e waits in the ready heap.
func (q *boltQueue) isReadyLocked(e *entry) bool {
	return e.heapIdx >= 0 && e.heapIdx < len(q.ready) && q.ready[e.heapIdx] == e
}

// dropLocked forgets an entry (already deleted on disk).
func (q *boltQueue) dropLocked(idx uint64) {
	e, ok := q.entries[idx]
	if !ok {
		return
	}
	if q.isReadyLocked(e) {
		heap.Remove(&q.ready, e.heapIdx)
	}
	delete(q.entries, idx)
	q.unindexLocked(e)
	if w := q.owner[idx]; w != nil {
		delete(w.inflight, idx)
		delete(q.owner, idx)
	}
}

// read loads a frame from disk.
func (q *boltQueue) read(tx *bolt.Tx, idx uint64) (record, bool, error) {
	v := tx.Bucket(q.data).Get(idxKey(idx))
	if v == nil {
		return record{}, false, nil
	}
	var r record
	if err := r.unmarshal(v); err != nil {
		return record{}, false, err
	}
	r.Index = idx
	return r, true, nil
}

// Matches reports whether tags hold every key and value of filter.
func Matches(tags, filter map[string]string) bool {
	for k, v := range filter {
		if tags[k] != v {
			return false
		}
	}
	return true
}

// Delete removes entries whatever their state; missing ones are skipped.
func (q *boltQueue) Delete(ctx context.Context, indexes ...uint64) error {
	err := q.s.commit.do(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(q.data)
		for _, i := range indexes {
			if err := b.Delete(idxKey(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	q.mu.Lock()
	for _, i := range indexes {
		q.dropLocked(i)
	}
	q.signalLocked()
	q.mu.Unlock()
	return nil
}

// Commit acknowledges delivered entries: they are done and deleted.
func (q *boltQueue) Commit(ctx context.Context, indexes ...uint64) error {
	return q.Delete(ctx, indexes...)
}

// Truncate deletes every entry below index.
func (q *boltQueue) Truncate(ctx context.Context, index uint64) error {
	q.mu.Lock()
	var idx []uint64
	for i := range q.entries {
		if i < index {
			idx = append(idx, i)
		}
	}
	q.mu.Unlock()
	return q.Delete(ctx, idx...)
}

// End marks the end of the stream: Put is refused from now on, and
// watchers end once the ready entries are delivered. force drops the ready
// entries too.
func (q *boltQueue) End(ctx context.Context, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(q.meta).Put(keyEnded, []byte{1}) }); err != nil {
		return err
	}
	q.mu.Lock()
	q.ended = true
	var drop []uint64
	if force {
		for _, e := range q.ready {
			drop = append(drop, e.index)
		}
	}
	q.signalLocked()
	q.mu.Unlock()
	if len(drop) > 0 {
		return q.Delete(ctx, drop...)
	}
	return nil
}

// Negative returns delivered entries to the ready set (or dead-letters
// those delivered MaxDelivery times), with the reason for a dead letter.
func (q *boltQueue) Negative(ctx context.Context, reason string, indexes ...uint64) error {
	var dead []*entry
	q.mu.Lock()
	for _, i := range indexes {
		w := q.owner[i]
		e := q.entries[i]
		if w == nil || e == nil {
			continue
		}
		delete(w.inflight, i)
		delete(q.owner, i)
		if e.deliveries >= int64(q.cfg.MaxDelivery) {
			dead = append(dead, e)
			continue
		}
		q.redeliveries++
		heap.Push(&q.ready, e)
	}
	dl := q.deadLetter
	q.signalLocked()
	q.mu.Unlock()
	for _, e := range dead {
		if err := q.deadLetterOne(ctx, dl, e.index, e.deliveries, reason); err != nil {
			return err
		}
	}
	return nil
}

// deadLetterOne hands an entry to the dead-letter function and deletes it.
func (q *boltQueue) deadLetterOne(ctx context.Context, dl DeadLetterFunc, idx uint64, deliveries int64, reason string) error {
	var r record
	var ok bool
	err := q.s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, ok, err = q.read(tx, idx)
		return err
	})
	if err != nil || !ok {
		return err
	}
	msg := fmt.Sprintf("dead-lettered after %d deliveries: %s", deliveries, reason)
	q.deadLettered.Add(1)
	if dl != nil {
		return dl(ctx, r.Frame, msg) // it deletes the entry, with its own write
	}
	return q.Delete(ctx, idx)
}

// Search says where an entry stands: held by a watcher, or waiting behind
// the ready entries that come first in delivery order (higher priority,
// then lower index). It costs one pass over the ready entries.
func (q *boltQueue) Search(_ context.Context, index uint64) (Position, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return Position{}, ErrClosed
	}
	e, ok := q.entries[index]
	if !ok {
		return Position{}, fmt.Errorf("%w: index %d (already answered, committed or deleted, or never put)", ErrNoEntry, index)
	}
	if w := q.owner[index]; w != nil {
		return Position{InFlight: true, Consumer: w.id}, nil
	}
	if !q.isReadyLocked(e) {
		return Position{InFlight: true}, nil // being handed out this instant
	}
	ahead := 0
	for _, o := range q.ready {
		if o != e && readyHeap([]*entry{o, e}).Less(0, 1) {
			ahead++
		}
	}
	return Position{Ahead: ahead}, nil
}

// Stats are a queue's numbers for /metrics and desc.
type Stats struct {
	Length       int
	InFlight     int
	Consumers    int
	OldestAge    time.Duration
	Redeliveries int64
	Last         uint64
	First        uint64
	Ended        bool
	// AckErrors counts acknowledgements no caller saw fail: a broker's
	// acks and naks of entries fetched and given back, dead letters
	// handed on while fetching, the embedded store's background writes of
	// delivery counts and auto-commits (since the queue was opened here).
	AckErrors int64
	// DeadLettered counts the entries given back past MaxDelivery since the
	// queue was opened here: moved on by the dead-letter function (the
	// input queue's, into the sink as a 500 answer), or deleted where there
	// is none (the sink's: an answer its readers took MaxDelivery times
	// without committing it is gone).
	DeadLettered int64
	MaxLength    int
	MaxPayload   int
}

// Stats reads the queue's numbers, from memory: it does not fail.
func (q *boltQueue) Stats(context.Context) (Stats, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := Stats{Length: len(q.entries), InFlight: len(q.owner), Consumers: len(q.watchers), Redeliveries: q.redeliveries,
		AckErrors: q.ackErrors.Load(), DeadLettered: q.deadLettered.Load(), Last: q.last, Ended: q.ended, MaxLength: q.cfg.MaxLength, MaxPayload: q.cfg.MaxPayload}
	var oldest int64
	for i, e := range q.entries {
		if st.First == 0 || i < st.First {
			st.First = i
		}
		if oldest == 0 || e.enqueued < oldest {
			oldest = e.enqueued
		}
	}
	if oldest > 0 {
		st.OldestAge = time.Since(time.Unix(0, oldest))
	}
	return st, nil
}

// WaitRoom waits until the queue has room for one more entry.
func (q *boltQueue) WaitRoom(ctx context.Context) error {
	for {
		q.mu.Lock()
		wait, full, closed := q.changed, q.cfg.MaxLength > 0 && len(q.entries) >= q.cfg.MaxLength && !q.cfg.AutoEvict, q.closed
		q.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case !full:
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (q *boltQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.signalLocked()
	q.mu.Unlock()
}

// boltWatcher is one consumer of a boltQueue: it receives ready entries, at most Window of
// them uncommitted at once.
type boltWatcher struct {
	q      *boltQueue
	id     string
	window int
	from   uint64
	filter map[string]string
	// filterHashes are filter's tag hashes (index.go).
	filterHashes []uint64
	autoCommit   bool
	indexOnly    bool
	inflight     map[uint64]bool
	done         bool
}

// WatchOptions say what a watcher receives.
type WatchOptions struct {
	From       uint64            // skip entries below this index
	Window     int               // uncommitted entries at once; <= 0: 1
	Filter     map[string]string // only entries whose tags match
	AutoCommit bool              // an entry is committed as it is delivered
	IndexOnly  bool              // frames carry the index and tags, not the data
	// Consumer names the watcher in a search's answer; "" names it
	// "<queue>.consumer-<n>".
	Consumer string
}

// Watch adds a consumer.
func (q *boltQueue) Watch(o WatchOptions) Watcher {
	w := &boltWatcher{q: q, id: o.Consumer, window: max(o.Window, 1), from: o.From, filter: o.Filter, filterHashes: q.filterHashes(o.Filter),
		autoCommit: o.AutoCommit, indexOnly: o.IndexOnly, inflight: map[uint64]bool{}}
	q.mu.Lock()
	q.consumers++
	if w.id == "" {
		w.id = fmt.Sprintf("%s.consumer-%d", q.name, q.consumers)
	}
	q.watchers[w] = true
	q.signalLocked()
	q.mu.Unlock()
	return w
}

// Next waits for the next entry this watcher may take and delivers it.
// It returns io.EOF once the queue has ended and holds nothing ready.
func (w *boltWatcher) Next(ctx context.Context) (Frame, error) {
	q := w.q
	for {
		q.mu.Lock()
		if w.done || q.closed {
			q.mu.Unlock()
			return Frame{}, ErrClosed
		}
		var e *entry
		if len(w.inflight) < w.window {
			e = w.takeLocked()
		}
		if e == nil {
			if q.ended && q.ready.Len() == 0 && len(w.inflight) == 0 {
				q.mu.Unlock()
				return Frame{}, io.EOF
			}
			wait := q.changed
			q.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return Frame{}, ctx.Err()
			}
		}
		e.deliveries++
		if !w.autoCommit {
			q.owner[e.index] = w
			w.inflight[e.index] = true
		}
		q.mu.Unlock()
		f, err := w.deliver(e)
		if err != nil {
			return Frame{}, err
		}
		if f == nil {
			continue // deleted meanwhile
		}
		return *f, nil
	}
}

// takeLocked pops the first ready entry this watcher may take.
func (w *boltWatcher) takeLocked() *entry {
	q := w.q
	if w.from == 0 && len(w.filter) == 0 {
		if q.ready.Len() == 0 {
			return nil
		}
		return heap.Pop(&q.ready).(*entry)
	}
	// With a filter only the entries of its rarest tag are looked at;
	// with _index_ alone, every ready one.
	var look func(func(*entry))
	if cands, ok := q.candidatesLocked(w.filterHashes); ok {
		look = cands.each
	} else {
		look = func(f func(*entry)) {
			for _, e := range q.ready {
				f(e)
			}
		}
	}
	var best *entry
	n := int64(0)
	look(func(e *entry) {
		n++
		if e.index < w.from || !q.isReadyLocked(e) || !e.hasTags(w.filterHashes) {
			return
		}
		if best == nil || readyHeap([]*entry{e, best}).Less(0, 1) {
			best = e
		}
	})
	q.examined.Add(n)
	if best != nil {
		heap.Remove(&q.ready, best.heapIdx)
	}
	return best
}

// deliver reads the entry and returns its frame (nil when it is gone).
// Its disk write (the delivery count; with AutoCommit the delete) happens
// in the background: a consumer does not wait for a write per entry it
// takes, and a crash before the write lands costs a count one short or,
// with AutoCommit, one more delivery.
func (w *boltWatcher) deliver(e *entry) (*Frame, error) {
	q := w.q
	var r record
	var found bool
	var err error
	err = q.s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, found, err = q.read(tx, e.index)
		return err
	})
	switch {
	case err != nil || !found:
	case w.autoCommit:
		// Gone for every other consumer now; off the disk in the
		// background (a crash before that delivers it once more: at least
		// once, as any uncommitted delivery).
		q.mu.Lock()
		q.dropLocked(e.index)
		q.signalLocked()
		q.mu.Unlock()
		go func() {
			q.countAckError(q.s.commit.do(context.Background(), func(tx *bolt.Tx) error { return tx.Bucket(q.data).Delete(idxKey(e.index)) }))
		}()
	default:
		go q.noteDelivery(e.index, e.deliveries)
	}
	if err != nil || !found {
		return nil, err
	}
	f := r.Frame
	f.Deliveries = e.deliveries
	if w.indexOnly {
		f.Data = nil
	}
	return &f, nil
}

// noteDelivery writes an entry's delivery count, unless the entry is gone
// (answered meanwhile) or holds a higher count already. A failed write is
// counted (Stats.AckErrors): the count on disk stays one short.
func (q *boltQueue) noteDelivery(idx uint64, deliveries int64) {
	q.countAckError(q.s.commit.do(context.Background(), func(tx *bolt.Tx) error {
		r, found, err := q.read(tx, idx)
		if err != nil || !found || r.Deliveries >= deliveries {
			return err
		}
		r.Deliveries = deliveries
		return tx.Bucket(q.data).Put(idxKey(idx), r.marshal())
	}))
}

// Close ends the watcher; what it held uncommitted is redelivered (or
// dead-lettered past MaxDelivery).
func (w *boltWatcher) Close(ctx context.Context, reason string) error {
	q := w.q
	q.mu.Lock()
	if w.done {
		q.mu.Unlock()
		return nil
	}
	w.done = true
	delete(q.watchers, w)
	held := make([]uint64, 0, len(w.inflight))
	for i := range w.inflight {
		held = append(held, i)
	}
	q.mu.Unlock()
	return q.Negative(ctx, reason, held...)
}

// Transfer moves a delivered input entry's answer to sink in one
// transaction: the answer is appended to sink and the input entry is
// deleted, so a crash leaves the request either answered or still queued.
func (s *Store) Transfer(ctx context.Context, in Queue, index uint64, out Queue, answer Frame) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	input, ok1 := in.(*boltQueue)
	sink, ok2 := out.(*boltQueue)
	if !ok1 || !ok2 || input.s != s || sink.s != s {
		return 0, errors.New("queue: Transfer between queues of another store")
	}
	sink.mu.Lock()
	if sink.closed {
		sink.mu.Unlock()
		return 0, ErrClosed
	}
	if limit := sink.cfg.MaxPayload; limit > 0 && len(answer.Data) > limit {
		// The request is answered all the same: with the reason.
		answer.Message = fmt.Sprintf("the answer of %d bytes is larger than the sink's limit of %d bytes (queue.sink.max_payload_size_kb)", len(answer.Data), limit)
		answer.Data = nil
		answer.Tags = maps.Clone(answer.Tags)
		answer.Tags["status"] = "413"
	}
	var evict []uint64
	if sink.cfg.AutoEvict && sink.cfg.MaxLength > 0 && len(sink.entries) >= sink.cfg.MaxLength && sink.ready.Len() > 0 {
		evict = append(evict, sink.oldestReadyLocked())
	}
	sink.last++
	idx := sink.last
	sink.mu.Unlock()
	r := record{Frame: answer, Enqueued: time.Now().UnixNano()}
	r.Index = idx
	val := r.marshal()
	err := s.commit.do(ctx, func(tx *bolt.Tx) error {
		if err := tx.Bucket(input.data).Delete(idxKey(index)); err != nil {
			return err
		}
		for _, e := range evict {
			if err := tx.Bucket(sink.data).Delete(idxKey(e)); err != nil {
				return err
			}
		}
		if err := tx.Bucket(sink.data).Put(idxKey(idx), val); err != nil {
			return err
		}
		m := tx.Bucket(sink.meta)
		if v := m.Get(keyLast); len(v) == 8 && binary.BigEndian.Uint64(v) >= idx {
			return nil
		}
		return m.Put(keyLast, idxKey(idx))
	})
	if err != nil {
		return 0, err
	}
	input.mu.Lock()
	input.dropLocked(index)
	input.signalLocked()
	input.mu.Unlock()
	e := &entry{index: idx, enqueued: r.Enqueued, size: int64(len(val)), tags: sink.tagHashes(answer.Tags)}
	sink.mu.Lock()
	for _, x := range evict {
		sink.dropLocked(x)
	}
	sink.addLocked(e)
	sink.signalLocked()
	sink.mu.Unlock()
	return idx, nil
}
