package llm

import (
	"context"
	"fmt"
	"slices"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/processors"
)

// The slot cache, used when slotAttention rewrote the graph.
//
// Every sequence holds a slot: row `slot` of one buffer per cache tensor,
// shaped [slots, kv_heads, cols, head_dim], with its n tokens in columns
// 0..n-1 and cols the context length plus one (the dummies' free column),
// so that no sequence's growth moves the others' tokens.
// GroupQueryAttention writes a step's keys and values at each row's own
// position and reads only that row's tokens, and the buffer is both the
// run's past and its present, so sequences join and leave without anyone's
// cache being copied or padded. A step makes:
//   - one run for every input of one token (decode tokens, one-token
//     prompt chunks) over slots 0..hi-1, hi past the last such slot; a slot
//     in that range without a token this step (free, in its prompt, or left
//     out by the scheduler) feeds a dummy token written at its column n,
//     past its tokens, where its next real token will overwrite it, and
//     whose logits are not computed;
//   - one run per longer prompt chunk, over its own slot (ONNX Runtime's
//     GroupQueryAttention takes several new tokens after a cache for one
//     row at a time).
//
// A newcomer takes the lowest slot no sequence runs in, so that the decode
// run spans few dummies; a prefix retained there moves to a free slot, else
// to the least recently used retained one's (which goes).
//
// Prefixes: each slot records the tokens its columns hold. A released
// sequence's slot keeps them (retained) until the slot is needed. A prompt
// chunk whose tokens continue another slot's (a system prompt, a chat's
// earlier turns, another choice of the same prompt) is not computed: a
// newcomer takes a retained slot over as it is, else the keys and values
// are copied from that slot (a copy of memory, against a model's forward
// pass per token); the chunk's last token always runs, its logits being
// the step's answer. A failed run leaves a sequence with the reused prefix
// it took.
//
// Memory (slotmem_linux.go): the buffers are mappings whose pages the
// kernel gives where tokens are written, so the cache holds the tokens its
// slots hold (to within a page per slot and head), not slots x cols; a
// slot's pages past its tokens go back when it is freed or cut. Slots grow
// in eights when all are running (so they stay within the scheduler's
// max_num_seqs rounded up), by remapping, without a copy; the buffers go
// when no slot holds any tokens.
type slotCache struct {
	bufs        [][]byte // per cache tensor, from growBytes
	slots, cols int
	seqs        []*sequence // per slot: its sequence, nil when free or retained
	hist        [][]int32   // per slot: the tokens whose keys and values its columns hold
	used        []uint64    // per retained slot: when it was last released or read
	clock       uint64
	live        int  // slots with a sequence
	reuse       bool // reuse prefixes; keep a released sequence's tokens for that
	reused      int  // prompt tokens taken from other slots so far
}

// minPrefix is the shortest prefix worth reusing.
const minPrefix = 8

// colBytes is one column of one head in one cache tensor: a token's key
// or value for that head.
func (m *Model) colBytes() int { return m.lay.headDim * m.lay.elemSize() }

// slotBytes is one slot's size in one cache tensor.
func (m *Model) slotBytes() int { return m.lay.kvHeads * m.sc.cols * m.colBytes() }

// growSlots makes room for slots slots, keeping every slot's tokens where
// they are.
func (m *Model) growSlots(slots int) error {
	c := m.sc
	if c.bufs == nil {
		c.bufs, c.cols = make([][]byte, m.lay.kvTensors()), m.ctxLen+1
	}
	size := slots * m.slotBytes()
	for t, b := range c.bufs {
		g, err := growBytes(b, size)
		if err != nil {
			return fmt.Errorf("the key/value cache for %d sequences (%d bytes per cache tensor): %w", slots, size, err)
		}
		c.bufs[t] = g
	}
	c.slots = slots
	c.seqs = append(c.seqs, make([]*sequence, slots-len(c.seqs))...)
	c.hist = append(c.hist, make([][]int32, slots-len(c.hist))...)
	c.used = append(c.used, make([]uint64, slots-len(c.used))...)
	return nil
}

// cut keeps the first n of slot j's tokens and returns the pages past
// them.
func (m *Model) cut(j, n int) {
	c := m.sc
	if len(c.hist[j]) <= n {
		return
	}
	c.hist[j] = c.hist[j][:n]
	h, col := m.lay.kvHeads, m.colBytes()
	for _, b := range c.bufs {
		if n == 0 {
			dropPages(b, j*m.slotBytes(), (j+1)*m.slotBytes())
			continue
		}
		for k := 0; k < h; k++ {
			head := (j*h + k) * c.cols * col
			dropPages(b, head+n*col, head+c.cols*col)
		}
	}
}

// copySlot copies n columns of slot from, starting at column at, into
// slot dst at the same columns.
func (m *Model) copySlot(dst, from, at, n int) {
	c := m.sc
	h, col := m.lay.kvHeads, m.colBytes()
	for _, b := range c.bufs {
		for k := 0; k < h; k++ {
			so := ((from*h+k)*c.cols + at) * col
			do := ((dst*h+k)*c.cols + at) * col
			copy(b[do:do+n*col], b[so:so+n*col])
		}
	}
}

// heldBytes is the memory the slots' tokens take.
func (m *Model) heldBytes() int64 {
	n := 0
	for _, h := range m.sc.hist {
		n += len(h)
	}
	return int64(n) * int64(len(m.sc.bufs)*m.lay.kvHeads*m.colBytes())
}

// dropSlot frees s's slot, or keeps its tokens as a reusable prefix; the
// buffers go when nothing is left in them.
func (m *Model) dropSlot(s *sequence) {
	c := m.sc
	if s.slot < 0 || s.slot >= len(c.seqs) || c.seqs[s.slot] != s { // none, or the model closed
		s.slot = -1
		return
	}
	c.seqs[s.slot] = nil
	if c.reuse && len(c.hist[s.slot]) >= minPrefix {
		c.clock++
		c.used[s.slot] = c.clock
	} else {
		m.cut(s.slot, 0)
	}
	s.slot = -1
	c.live--
	if c.live == 0 && !slices.ContainsFunc(c.hist, func(h []int32) bool { return len(h) > 0 }) {
		m.freeSlots()
	}
}

// freeSlots returns the buffers, forgetting every slot.
func (m *Model) freeSlots() {
	c := m.sc
	for _, b := range c.bufs {
		freeBytes(b)
	}
	c.bufs, c.seqs, c.hist, c.used, c.slots, c.cols, c.live = nil, nil, nil, nil, 0, 0, 0
}

// prefixReuse is a prompt chunk's tokens found in another slot: L tokens
// after the sequence's own, in slot from.
type prefixReuse struct {
	from, n int
}

// findPrefix finds the slot, other than s's, whose tokens continue s's own
// history furthest into the chunk toks, leaving its last token to run (its
// logits are the step's answer); ok when that is at least minPrefix tokens.
func (m *Model) findPrefix(s *sequence, toks []int32) (prefixReuse, bool) {
	c := m.sc
	var own []int32
	if s.slot >= 0 {
		own = c.hist[s.slot]
	}
	best := prefixReuse{from: -1}
	for j, h := range c.hist {
		if j == s.slot || len(h) <= len(own) || !slices.Equal(h[:len(own)], own) {
			continue
		}
		n := 0
		for rest := h[len(own):]; n < len(rest) && n < len(toks)-1 && rest[n] == toks[n]; n++ {
		}
		if n > best.n {
			best = prefixReuse{from: j, n: n}
		}
	}
	return best, best.n >= minPrefix
}

// slotStep is Step on the slot cache, its inputs checked by Step (within
// the context, so within every slot's columns).
func (m *Model) slotStep(ctx context.Context, batch []processors.StepInput, seqs []*sequence) ([][]float32, error) {
	c := m.sc
	batch = slices.Clone(batch) // a reused prefix shortens an input's tokens

	// Prefixes: a newcomer whose prompt starts with a retained slot's
	// tokens takes that slot over (no copy); other prompt chunks that
	// continue another slot's tokens copy them after the slots are placed.
	copies := map[int]prefixReuse{} // input -> where its prefix is
	pinned := map[int]bool{}        // slots read by copies: not to be evicted
	for i, s := range seqs {
		if !c.reuse || len(batch[i].Tokens) < 2 || len(c.hist) == 0 {
			continue
		}
		p, ok := m.findPrefix(s, batch[i].Tokens)
		if !ok {
			continue
		}
		if s.slot < 0 && c.seqs[p.from] == nil && !pinned[p.from] {
			s.slot, c.seqs[p.from] = p.from, s
			m.cut(p.from, p.n)
			c.live++
			s.n = p.n
			c.reused += p.n
			batch[i].Tokens = batch[i].Tokens[p.n:]
			continue
		}
		copies[i], pinned[p.from] = p, true
	}

	// Slots for the other newcomers (more slots when too few are not
	// running).
	newcomers, spare := 0, 0
	for _, s := range seqs {
		if s.slot < 0 {
			newcomers++
		}
	}
	for j, s := range c.seqs {
		if s == nil && !pinned[j] {
			spare++
		}
	}
	if spare < newcomers {
		if err := m.growSlots((c.slots + newcomers - spare + 7) / 8 * 8); err != nil {
			return nil, err
		}
	}
	for _, s := range seqs {
		if s.slot >= 0 {
			continue
		}
		// The place: the lowest slot no sequence runs in, so that the
		// decode run spans few dummy rows. The room: a free slot, else the
		// least recently used retained one, whose prefix goes. A prefix
		// retained at the place moves to the room.
		place, room := -1, -1
		for j, o := range c.seqs {
			if o != nil || pinned[j] {
				continue
			}
			if place < 0 {
				place = j
			}
			switch {
			case len(c.hist[j]) == 0:
				if room < 0 || len(c.hist[room]) > 0 {
					room = j
				}
			case room < 0 || (len(c.hist[room]) > 0 && c.used[j] < c.used[room]):
				room = j
			}
		}
		if place != room && len(c.hist[place]) > 0 {
			m.copySlot(room, place, 0, len(c.hist[place]))
			m.cut(room, len(c.hist[place]))
			c.hist[room] = append(c.hist[room][:0], c.hist[place]...)
			c.used[room] = c.used[place]
		}
		m.cut(place, 0)
		s.slot, c.seqs[place] = place, s
		c.live++
	}
	for i, p := range copies {
		s := seqs[i]
		m.copySlot(s.slot, p.from, s.n, p.n)
		c.hist[s.slot] = append(c.hist[s.slot], batch[i].Tokens[:p.n]...)
		c.clock++
		c.used[p.from] = c.clock
		s.n += p.n
		c.reused += p.n
		batch[i].Tokens = batch[i].Tokens[p.n:]
	}

	// The decode run, then one run per prompt chunk.
	out := make([][]float32, len(batch))
	var one []int // inputs of one token
	hi := 0
	for i, in := range batch {
		if len(in.Tokens) == 1 {
			one = append(one, i)
			hi = max(hi, seqs[i].slot+1)
		}
	}
	g := 0
	if len(one) > 0 {
		rows := make([]slotRow, hi)
		for r := range rows {
			rows[r].seq = c.seqs[r] // a dummy unless given tokens below
		}
		for _, i := range one {
			rows[seqs[i].slot] = slotRow{seq: seqs[i], toks: batch[i].Tokens}
		}
		got, err := m.slotRun(ctx, g, 0, rows)
		if err != nil {
			return nil, err
		}
		for _, i := range one {
			out[i] = got[seqs[i].slot]
		}
		g++
	}
	for i, in := range batch {
		if len(in.Tokens) == 1 {
			continue
		}
		got, err := m.slotRun(ctx, g, seqs[i].slot, []slotRow{{seq: seqs[i], toks: in.Tokens}})
		if err != nil {
			return nil, err
		}
		out[i] = got[0]
		g++
	}
	return out, nil
}

// slotRow is one row of a slot run: a sequence (nil for a free slot) and
// its new tokens, none for a dummy row.
type slotRow struct {
	seq  *sequence
	toks []int32
}

// slotRun runs rows over the slots from lo: each row's tokens at its
// sequence's position, a dummy token for a row without any. It returns the
// logits after each row's last token (nil for dummy rows).
func (m *Model) slotRun(ctx context.Context, g, lo int, rows []slotRow) ([][]float32, error) {
	c, lay := m.sc, m.lay
	bsz, s := len(rows), 0
	for _, r := range rows {
		s = max(s, len(r.toks))
	}
	m.runs++
	ids := make([]int64, bsz*s)
	pos := make([]int64, bsz*s)
	seqlens := make([]int32, bsz)
	var last []int64 // the flattened positions whose logits are read
	total := int32(0)
	for r, row := range rows {
		n := len(c.hist[lo+r]) // the sequence's n, or a retained prefix's length
		if len(row.toks) == 0 {
			// A dummy: token 0 at column n, which is free (n < cols).
			pos[r*s] = int64(min(n, m.ctxLen-1))
			seqlens[r] = int32(n)
		} else {
			for j, tok := range row.toks {
				ids[r*s+j] = int64(tok)
				pos[r*s+j] = int64(n + j)
			}
			seqlens[r] = int32(n + len(row.toks) - 1)
			last = append(last, int64(r*s+len(row.toks)-1))
		}
		total = max(total, seqlens[r]+1)
	}

	var f feeds
	defer f.destroy()
	f.add(ort.NewShape(int64(bsz), int64(s)), intBytes(ids, lay.idsElem), lay.idsElem)
	f.add(ort.NewShape(int64(bsz), int64(s)), intBytes(pos, lay.posElem), lay.posElem)
	shape := ort.NewShape(int64(bsz), int64(lay.kvHeads), int64(c.cols), int64(lay.headDim))
	from, to := lo*m.slotBytes(), (lo+bsz)*m.slotBytes()
	for _, buf := range c.bufs {
		f.add(shape, buf[from:to], lay.kvElem)
	}
	lrows := s
	if lay.lastOnly {
		f.add(ort.NewShape(int64(len(last)), 1), intBytes(last, ort.TensorElementDataTypeInt64), ort.TensorElementDataTypeInt64)
		lrows = 1
	}
	f.add(ort.NewShape(int64(bsz)), int32Bytes(seqlens), ort.TensorElementDataTypeInt32)
	f.add(ort.NewShape(1), int32Bytes([]int32{total}), ort.TensorElementDataTypeInt32)
	nIn := len(f.vals)
	lbatch := bsz
	if lay.lastOnly {
		lbatch = len(last)
	}
	lbuf, all := m.logitsBuffer(g, lbatch*lrows)
	f.add(ort.NewShape(int64(lbatch), int64(lrows), int64(m.cfg.Vocab)), lbuf, lay.logitsElem)
	for _, buf := range c.bufs {
		f.add(shape, buf[from:to], lay.kvElem) // the present is the past, written in place
	}
	if f.err != nil {
		return nil, f.err
	}
	if err := m.exec(ctx, f.vals[:nIn], f.vals[nIn:]); err != nil {
		return nil, err
	}

	out := make([][]float32, bsz)
	k := 0
	for r, row := range rows {
		if len(row.toks) == 0 {
			continue
		}
		row.seq.n += len(row.toks)
		c.hist[lo+r] = append(c.hist[lo+r], row.toks...)
		at := k
		if !lay.lastOnly {
			at = r*s + len(row.toks) - 1
		}
		out[r] = all(at)
		k++
	}
	return out, nil
}
