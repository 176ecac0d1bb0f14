package queue

import (
	"container/heap"
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// A queue indexes its entries by tag (key=value, the request id among
// them) in memory, so that a read by request id and a watcher with a tag
// filter look at the entries that match, not at the whole queue, and
// never open a store transaction per entry. An entry keeps the hashes of
// its tags, not the tags: 8 bytes a tag, whatever their length. The
// hash is seeded per queue; a false match (probability 2^-64 per tag
// compared) is caught where the entry is read, except by a watcher, which
// would deliver it.

// tagHash hashes one key=value pair with the queue's seed.
func (q *boltQueue) tagHash(k, v string) uint64 {
	var h maphash.Hash
	h.SetSeed(q.seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(k)))
	h.Write(n[:])
	h.WriteString(k)
	h.WriteString(v)
	return h.Sum64()
}

// tagHashes are an entry's tag hashes, sorted.
func (q *boltQueue) tagHashes(tags map[string]string) []uint64 {
	hs := make([]uint64, 0, len(tags))
	for k, v := range tags {
		hs = append(hs, q.tagHash(k, v))
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

// filterHashes hashes a filter's pairs.
func (q *boltQueue) filterHashes(filter map[string]string) []uint64 {
	hs := make([]uint64, 0, len(filter))
	for k, v := range filter {
		hs = append(hs, q.tagHash(k, v))
	}
	return hs
}

// hasTags reports whether e carries every hash of hs.
func (e *entry) hasTags(hs []uint64) bool {
	for _, h := range hs {
		if _, ok := slices.BinarySearch(e.tags, h); !ok {
			return false
		}
	}
	return true
}

// posting is the set of entries carrying one tag. Most tags (a request
// id) are on one entry: that one is held without a map.
type posting struct {
	one  *entry
	many map[uint64]*entry
}

func (p *posting) add(e *entry) {
	switch {
	case p.many != nil:
		p.many[e.index] = e
	case p.one == nil:
		p.one = e
	default:
		p.many = map[uint64]*entry{p.one.index: p.one, e.index: e}
		p.one = nil
	}
}

// remove takes the entry idx out; false when the set is then empty.
func (p *posting) remove(idx uint64) bool {
	if p.one != nil {
		if p.one.index == idx {
			p.one = nil
		}
		return p.one != nil
	}
	delete(p.many, idx)
	return len(p.many) > 0
}

func (p posting) len() int {
	if p.one != nil {
		return 1
	}
	return len(p.many)
}

func (p posting) each(f func(*entry)) {
	if p.one != nil {
		f(p.one)
	}
	for _, e := range p.many {
		f(e)
	}
}

// addLocked makes a stored entry known: in entries, the tag index and the
// ready heap.
func (q *boltQueue) addLocked(e *entry) {
	q.entries[e.index] = e
	for _, h := range e.tags {
		p := q.byTag[h]
		p.add(e)
		q.byTag[h] = p
	}
	heap.Push(&q.ready, e)
}

// unindexLocked takes a dropped entry out of the tag index.
func (q *boltQueue) unindexLocked(e *entry) {
	for _, h := range e.tags {
		if p, ok := q.byTag[h]; ok {
			if p.remove(e.index) {
				q.byTag[h] = p
			} else {
				delete(q.byTag, h)
			}
		}
	}
}

// candidatesLocked are the entries that may match a filter (its hashes):
// those of its rarest tag; false when the filter is empty (every entry
// may).
func (q *boltQueue) candidatesLocked(hs []uint64) (posting, bool) {
	if len(hs) == 0 {
		return posting{}, false
	}
	var best posting
	for i, h := range hs {
		p := q.byTag[h]
		if p.len() == 0 {
			return posting{}, true
		}
		if i == 0 || p.len() < best.len() {
			best = p
		}
	}
	return best, true
}
