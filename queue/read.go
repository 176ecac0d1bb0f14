package queue

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultMaxReadBytes caps a get's answer when API.MaxReadBytes is 0: a
// read of many large entries answers what fits and says where to go on
// (HeaderNextIndex), instead of building gigabytes.
const DefaultMaxReadBytes int64 = 64 << 20

// readBatchBytes bounds what a read holds at once besides one entry: the
// entries it copies out of the store in one short transaction.
const readBatchBytes = 1 << 20

// ReadOptions say what a read answers.
type ReadOptions struct {
	From       uint64            // the first index; 0: the head
	Length     int               // the most entries; <= 0: 1
	Timeout    time.Duration     // how long to wait for a first match
	AutoDelete bool              // delete the entries answered
	Filter     map[string]string // only entries whose tags hold all of it
	// MaxBytes caps the entries' bytes (data, tags, message, as stored):
	// the read stops before the entry that would pass it, and always
	// answers one entry, which a put has bounded already. <= 0: no cap.
	MaxBytes int64
}

// FrameWriter takes a read's frames as they come off the store, so that
// an answer is never held whole.
type FrameWriter interface {
	// Begin comes once, before the first frame. next is where to read on
	// (the first matching index left out) when MaxBytes cut the read
	// short, else 0.
	Begin(next uint64) error
	// Frame takes one frame; f.Data is valid only during the call.
	Frame(f Frame) error
}

// SizeOf is what a frame counts against ReadOptions.MaxBytes on a broker:
// its data, message and tags.
func SizeOf(f Frame) int64 {
	n := len(f.Data) + len(f.Message)
	for k, v := range f.Tags {
		n += len(k) + len(v)
	}
	return int64(n)
}

// collector keeps a read's frames: Get on top of Read.
type collector struct{ frames []Frame }

func (c *collector) Begin(uint64) error { return nil }
func (c *collector) Frame(f Frame) error {
	f.Data = bytes.Clone(f.Data)
	c.frames = append(c.frames, f)
	return nil
}

// Get returns up to length frames from index from (0: the head) on whose
// tags match filter, waiting up to timeout for one when there is none;
// autoDelete deletes what it returns. It holds them all: the queue API
// reads with Read.
func (q *boltQueue) Get(ctx context.Context, from uint64, length int, timeout time.Duration, autoDelete bool, filter map[string]string) ([]Frame, error) {
	var c collector
	_, err := q.Read(ctx, ReadOptions{From: from, Length: length, Timeout: timeout, AutoDelete: autoDelete, Filter: filter}, &c)
	return c.frames, err
}

// Read hands w up to o.Length frames in index order, from o.From on, whose
// tags match o.Filter, waiting up to o.Timeout for one; it returns how
// many w took. A filtered read plans from the tag index (the entries of
// the filter's rarest tag); an unfiltered one walks the store's keys from
// o.From. Either way the plan stops at o.MaxBytes, and the entries are
// then copied out of the store a batch at a time (readBatchBytes, one
// short transaction each) and handed to w outside the transaction.
func (q *boltQueue) Read(ctx context.Context, o ReadOptions, w FrameWriter) (int, error) {
	length := max(o.Length, 1)
	hs := q.filterHashes(o.Filter)
	deadline := time.Now().Add(o.Timeout)
	for {
		q.mu.Lock()
		wait, closed := q.changed, q.closed
		var plan []uint64
		var next uint64
		cands, filtered := q.candidatesLocked(hs)
		if filtered {
			plan, next = q.planLocked(cands, hs, o.From, length, o.MaxBytes)
		}
		q.mu.Unlock()
		if closed {
			return 0, ErrClosed
		}
		if !filtered {
			var err error
			if plan, next, err = q.planScan(o.From, length, o.MaxBytes); err != nil {
				return 0, err
			}
		}
		if len(plan) > 0 {
			sent, err := q.stream(ctx, plan, next, o.Filter, w)
			if len(sent) > 0 && o.AutoDelete {
				// What w took is answered, whether or not the caller
				// stays for the delete.
				if derr := q.Delete(context.WithoutCancel(ctx), sent...); err == nil {
					err = derr
				}
			}
			if len(sent) > 0 || err != nil {
				return len(sent), err
			}
			// Every planned entry went meanwhile: wait for more.
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, nil
		}
		t := time.NewTimer(left)
		select {
		case <-wait:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		}
		t.Stop()
	}
}

// capPlan takes entries (index, size) in index order while they are fewer
// than length and within maxBytes (at least one); next is the first one
// left out by maxBytes.
type capPlan struct {
	length   int
	maxBytes int64
	total    int64
	plan     []uint64
	next     uint64
}

// add offers the next entry; false when the plan is complete.
func (p *capPlan) add(idx uint64, size int64) bool {
	if len(p.plan) >= p.length {
		return false
	}
	if p.maxBytes > 0 && len(p.plan) > 0 && p.total+size > p.maxBytes {
		p.next = idx
		return false
	}
	p.total += size
	p.plan = append(p.plan, idx)
	return true
}

// planLocked plans a filtered read from the candidates of the tag index.
func (q *boltQueue) planLocked(cands posting, hs []uint64, from uint64, length int, maxBytes int64) ([]uint64, uint64) {
	q.examined.Add(int64(cands.len()))
	m := make([]*entry, 0, min(cands.len(), length+1))
	cands.each(func(e *entry) {
		if e.index >= from && e.hasTags(hs) {
			m = append(m, e)
		}
	})
	slices.SortFunc(m, func(a, b *entry) int { return cmp.Compare(a.index, b.index) })
	p := capPlan{length: length, maxBytes: maxBytes}
	for _, e := range m {
		if !p.add(e.index, e.size) {
			break
		}
	}
	return p.plan, p.next
}

// planScan plans an unfiltered read from the store's keys (a value's
// length is read without touching its bytes).
func (q *boltQueue) planScan(from uint64, length int, maxBytes int64) ([]uint64, uint64, error) {
	p := capPlan{length: length, maxBytes: maxBytes}
	n := int64(0)
	err := q.s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(q.data).Cursor()
		for k, v := c.Seek(idxKey(from)); k != nil; k, v = c.Next() {
			n++
			if !p.add(binary.BigEndian.Uint64(k), int64(len(v))) {
				break
			}
		}
		return nil
	})
	q.examined.Add(n)
	return p.plan, p.next, err
}

// stream copies the planned entries out of the store a batch at a time
// into one reused buffer and hands them to w; it returns the indexes w
// took. Entries gone meanwhile are skipped; the tags are checked again
// (the index matched hashes).
func (q *boltQueue) stream(ctx context.Context, plan []uint64, next uint64, filter map[string]string, w FrameWriter) ([]uint64, error) {
	var sent []uint64
	var buf []byte
	var batch []Frame
	for i := 0; i < len(plan); {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		buf, batch = buf[:0], batch[:0]
		err := q.s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(q.data)
			for ; i < len(plan) && (len(batch) == 0 || len(buf) < readBatchBytes); i++ {
				v := b.Get(idxKey(plan[i]))
				if v == nil {
					continue
				}
				var r record
				if err := r.view(v); err != nil {
					return fmt.Errorf("%s entry %d: %w", q.name, plan[i], err)
				}
				if !Matches(r.Tags, filter) {
					continue
				}
				f := r.Frame
				f.Index, f.Data = plan[i], nil // r.Data is the store's memory
				if len(r.Data) > 0 {
					start := len(buf)
					buf = append(buf, r.Data...)
					f.Data = buf[start:len(buf):len(buf)]
				}
				batch = append(batch, f)
			}
			return nil
		})
		if err != nil {
			return sent, err
		}
		for _, f := range batch {
			if len(sent) == 0 {
				if err := w.Begin(next); err != nil {
					return sent, err
				}
			}
			if err := w.Frame(f); err != nil {
				return sent, err
			}
			sent = append(sent, f.Index)
		}
	}
	return sent, nil
}
