package llm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/processors"
)

// The key/value cache.
//
// Every sequence's cache lives in a block: per cache tensor of the graph one
// buffer shaped as the graph's past, [rows, heads, cols, head_dim] (split)
// or [2, rows, heads, cols, head_dim] (stacked), with a mask saying which
// columns of each row hold a token. A run's present tensors are written
// straight into a new block's buffers, so after a Step the batch's
// sequences share that block, row i being the batch's input i, with the
// padding of the run left in place as masked columns. When the next Step
// has the same sequences in the same order (a decode loop), that block is
// fed back as the past without a copy. Otherwise Step repacks: a new block
// is made for the batch and each sequence's valid columns copied into it,
// right-aligned so the padding comes first; the sequences of old blocks
// that are not in the batch are moved to blocks of their own (one row, no
// padding), and the old blocks are freed. Freed buffers are kept for the
// next blocks (spare), so a decode loop allocates nothing new while its
// length stays within a buffer's headroom.

// block holds the caches of rows sequences.
type block struct {
	bufs [][]byte // per cache tensor
	rows int
	cols int
	seqs []*sequence // per row; a row whose sequence was released or moved holds nil or a sequence whose blk is another block
	mask []bool      // rows*cols: the columns that hold a token
	live int         // rows whose sequence is still here
	size int64       // the bytes accounted for
}

// sequence is one processors.Sequence of a Model.
type sequence struct {
	m        *Model
	n        int    // cached tokens
	blk      *block // nil while empty
	row      int
	slot     int // its row of the slot cache (slots.go), -1 while it has none
	released bool
}

// Len is the number of tokens in the sequence's cache.
func (s *sequence) Len() int {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return s.n
}

// Release frees the sequence's cache. A sequence that shares the block of
// the last Step with others keeps its rows until the next Step repacks
// that block (its membership changed), which frees them.
func (s *sequence) Release() {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	if m.sc != nil {
		m.dropSlot(s)
	} else if b := s.blk; b != nil {
		b.seqs[s.row] = nil
		b.live--
		if b.live == 0 {
			m.freeBlock(b)
		}
	}
	s.blk, s.n = nil, 0
}

// NewSequence starts an empty sequence.
func (m *Model) NewSequence() processors.Sequence { return &sequence{m: m, slot: -1} }

// KVBytes is the memory the caches hold now, in bytes: on the slot cache
// the tokens its slots hold (running or retained), else the blocks in use
// (not the spare buffers kept for reuse).
func (m *Model) KVBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sc != nil {
		return m.heldBytes()
	}
	return m.kvBytes
}

// planes is 2 for the stacked form (key and value in one tensor), else 1.
func (m *Model) planes() int {
	if m.lay.form == kvStacked {
		return 2
	}
	return 1
}

// tensorBytes is the size of one cache tensor of rows x cols.
func (m *Model) tensorBytes(rows, cols int) int {
	return m.planes() * rows * m.lay.kvHeads * cols * m.lay.headDim * m.lay.elemSize()
}

// newBlock makes a block of rows x cols with buffers from spare where one
// is large enough. Its content is undefined and its mask all false.
func (m *Model) newBlock(rows, cols int) *block {
	need := m.tensorBytes(rows, cols)
	// Headroom: a decode loop grows a block by one column a step, and the
	// buffer two steps back is reused when it has room for that.
	room := m.tensorBytes(rows, cols+max(16, cols/4))
	b := &block{rows: rows, cols: cols, mask: make([]bool, rows*cols), seqs: make([]*sequence, rows)}
	b.bufs = make([][]byte, m.lay.kvTensors())
	for i := range b.bufs {
		b.bufs[i] = m.takeSpare(need, room)
	}
	b.size = int64(need) * int64(len(b.bufs))
	m.kvBytes += b.size
	return b
}

// freeBlock returns a block's buffers to spare.
func (m *Model) freeBlock(b *block) {
	if b.bufs == nil {
		return
	}
	m.kvBytes -= b.size
	for _, buf := range b.bufs {
		m.putSpare(buf)
	}
	b.bufs, b.seqs, b.mask = nil, nil, nil
}

// takeSpare returns the smallest spare buffer of at least need bytes, or a
// new one of room bytes, as a slice of length need.
func (m *Model) takeSpare(need, room int) []byte {
	best := -1
	for i, s := range m.spare {
		if cap(s) >= need && (best < 0 || cap(s) < cap(m.spare[best])) {
			best = i
		}
	}
	if best >= 0 {
		buf := m.spare[best][:need]
		m.spare = slices.Delete(m.spare, best, best+1)
		return buf
	}
	return make([]byte, need, room)
}

// putSpare keeps buf for reuse: at most two blocks' worth of buffers, the
// largest.
func (m *Model) putSpare(buf []byte) {
	if m.closed || cap(buf) == 0 {
		return
	}
	m.spare = append(m.spare, buf[:0])
	if limit := 2 * m.lay.kvTensors(); len(m.spare) > limit {
		slices.SortFunc(m.spare, func(a, b []byte) int { return cap(b) - cap(a) })
		clear(m.spare[limit:])
		m.spare = m.spare[:limit]
	}
}

// copyCols copies n columns of src's row srow from column scol into dst's
// row drow from column dcol, in every cache tensor.
func (m *Model) copyCols(dst *block, drow, dcol int, src *block, srow, scol, n int) {
	h, d, es, np := m.lay.kvHeads, m.lay.headDim, m.lay.elemSize(), m.planes()
	run := n * d * es
	for t := range dst.bufs {
		for p := 0; p < np; p++ {
			for i := 0; i < h; i++ {
				so := (((p*src.rows+srow)*h+i)*src.cols + scol) * d * es
				do := (((p*dst.rows+drow)*h+i)*dst.cols + dcol) * d * es
				copy(dst.bufs[t][do:do+run], src.bufs[t][so:so+run])
			}
		}
	}
}

// zeroCols zeroes n columns of row from column col: padding must hold
// finite numbers, since a masked score times NaN is still NaN.
func (m *Model) zeroCols(b *block, row, col, n int) {
	h, d, es, np := m.lay.kvHeads, m.lay.headDim, m.lay.elemSize(), m.planes()
	run := n * d * es
	for t := range b.bufs {
		for p := 0; p < np; p++ {
			for i := 0; i < h; i++ {
				o := (((p*b.rows+row)*h+i)*b.cols + col) * d * es
				clear(b.bufs[t][o : o+run])
			}
		}
	}
}

// copySeq copies s's valid columns, in order, into dst's row drow from
// column dcol.
func (m *Model) copySeq(dst *block, drow, dcol int, s *sequence) {
	src := s.blk
	mask := src.mask[s.row*src.cols : (s.row+1)*src.cols]
	for c := 0; c < src.cols; {
		if !mask[c] {
			c++
			continue
		}
		e := c
		for e < src.cols && mask[e] {
			e++
		}
		m.copyCols(dst, drow, dcol, src, s.row, c, e-c)
		dcol += e - c
		c = e
	}
}

// repack makes the past of a batch whose sequences are not one block's
// rows in order: a new block with each sequence's cache right-aligned
// (padding first). The sequences of the old blocks that are not in the
// batch move to blocks of their own, and the old blocks are freed.
func (m *Model) repack(seqs []*sequence) *block {
	p := 0
	for _, s := range seqs {
		p = max(p, s.n)
	}
	nb := m.newBlock(len(seqs), p)
	var old []*block
	for r, s := range seqs {
		pad := p - s.n
		m.zeroCols(nb, r, 0, pad)
		if s.blk != nil {
			m.copySeq(nb, r, pad, s)
			if !slices.Contains(old, s.blk) {
				old = append(old, s.blk)
			}
		}
		for c := pad; c < p; c++ {
			nb.mask[r*p+c] = true
		}
	}
	for r, s := range seqs {
		s.blk, s.row = nb, r
		nb.seqs[r] = s
	}
	nb.live = len(seqs)
	for _, o := range old {
		for _, s := range o.seqs {
			if s != nil && s.blk == o {
				m.ownBlock(s)
			}
		}
		m.freeBlock(o)
	}
	return nb
}

// ownBlock moves s out of a shared block into one of its own, without
// padding.
func (m *Model) ownBlock(s *sequence) {
	nb := m.newBlock(1, s.n)
	m.copySeq(nb, 0, 0, s)
	for c := range nb.mask {
		nb.mask[c] = true
	}
	nb.seqs[0], nb.live = s, 1
	s.blk, s.row = nb, 0
}

// reusable says whether seqs are exactly the rows of one block, in order,
// and that block can take s more columns without exceeding the context
// length or carrying more padding than it is worth keeping.
func (m *Model) reusable(seqs []*sequence, s int) *block {
	b := seqs[0].blk
	if b == nil || b.rows != len(seqs) || b.live != len(seqs) {
		return nil
	}
	longest := 0
	for i, sq := range seqs {
		if b.seqs[i] != sq || sq.blk != b {
			return nil
		}
		longest = max(longest, sq.n)
	}
	if b.cols+s > m.ctxLen || b.cols > longest+max(64, longest/4) {
		return nil
	}
	if m.lay.positions == "" && b.cols != longest {
		return nil // without position_ids the past must be exactly the cache
	}
	return b
}

// Step runs one iteration of the batch (processors.Stepper): each input's
// tokens are appended to its sequence's cache and the logits after its
// last token returned, in order. The rows alias the model's buffers and
// are valid until the next Step. A batch normally makes one session run;
// when a failed run fails the Step, the sequences of that run are as they
// were, and those of runs before it (see groups) have taken their tokens.
func (m *Model) Step(ctx context.Context, batch []processors.StepInput) ([][]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("llm: model is closed")
	}
	if len(batch) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seqs := make([]*sequence, len(batch))
	for i, in := range batch {
		s, ok := in.Seq.(*sequence)
		switch {
		case !ok || s == nil || s.m != m:
			return nil, fmt.Errorf("llm: step input %d: not a sequence of this model", i)
		case s.released:
			return nil, fmt.Errorf("llm: step input %d: the sequence was released", i)
		case slices.Contains(seqs[:i], s):
			return nil, fmt.Errorf("llm: step input %d: the sequence appears twice in one step", i)
		case len(in.Tokens) == 0:
			return nil, fmt.Errorf("llm: step input %d: no tokens", i)
		case s.n+len(in.Tokens) > m.ctxLen:
			return nil, fmt.Errorf("llm: step input %d: %d cached and %d new tokens exceed the context length %d", i, s.n, len(in.Tokens), m.ctxLen)
		}
		for _, t := range in.Tokens {
			if t < 0 || int(t) >= m.cfg.Vocab {
				return nil, fmt.Errorf("llm: step input %d: token %d is outside the vocabulary of %d", i, t, m.cfg.Vocab)
			}
		}
		seqs[i] = s
	}
	if m.sc != nil {
		return m.slotStep(ctx, batch, seqs)
	}
	out := make([][]float32, len(batch))
	for g, idx := range m.groups(batch, seqs) {
		gs := make([]*sequence, len(idx))
		toks := make([][]int32, len(idx))
		for j, i := range idx {
			gs[j], toks[j] = seqs[i], batch[i].Tokens
		}
		rows, err := m.run(ctx, g, gs, toks)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = rows[j]
		}
	}
	return out, nil
}

// groups splits a batch into runs. When the graph takes position_ids: the
// inputs of one token (decode rows) in one run and the longer prompt
// chunks in another, since a run pads every row to its most new tokens (a
// decode row padded to a 200-token chunk would cost 200 tokens), each
// split further where the padded width (longest cache plus most new
// tokens) would exceed the context. Without position_ids, one input per
// run (positions then follow from the past's length, which must be the
// sequence's own).
func (m *Model) groups(batch []processors.StepInput, seqs []*sequence) [][]int {
	var gs [][]int
	if m.lay.positions == "" {
		for i := range batch {
			gs = append(gs, []int{i})
		}
		return gs
	}
	for _, decode := range []bool{true, false} {
		var cur []int
		longest, most := 0, 0
		for i, in := range batch {
			if (len(in.Tokens) == 1) != decode {
				continue
			}
			l, n := max(longest, seqs[i].n), max(most, len(in.Tokens))
			if len(cur) > 0 && l+n > m.ctxLen {
				gs = append(gs, cur)
				cur, l, n = nil, seqs[i].n, len(in.Tokens)
			}
			cur, longest, most = append(cur, i), l, n
		}
		if len(cur) > 0 {
			gs = append(gs, cur)
		}
	}
	return gs
}

// run runs one group of sequences: past (reused or repacked), inputs,
// the session, and the present block that becomes the sequences' cache.
func (m *Model) run(ctx context.Context, g int, seqs []*sequence, toks [][]int32) ([][]float32, error) {
	bsz, s := len(seqs), 0
	for _, t := range toks {
		s = max(s, len(t))
	}
	past := m.reusable(seqs, s)
	if past == nil {
		past = m.repack(seqs)
		m.repacks++
	}
	m.runs++
	p, t := past.cols, past.cols+s
	lay := m.lay

	// Inputs: new tokens left-aligned (padding after them, so every padded
	// query still sees its own row's tokens), positions continuing each
	// sequence, the mask carrying the past's and marking the padding.
	ids := make([]int64, bsz*s)
	pos := make([]int64, bsz*s)
	mask := make([]int64, bsz*t)
	presMask := make([]bool, bsz*t)
	for r, sq := range seqs {
		for j, tok := range toks[r] {
			ids[r*s+j] = int64(tok)
			pos[r*s+j] = int64(sq.n + j)
			presMask[r*t+p+j] = true
		}
		copy(presMask[r*t:r*t+p], past.mask[r*p:(r+1)*p])
	}
	for i, v := range presMask {
		if v {
			mask[i] = 1
		}
	}
	present := m.newBlock(bsz, t)
	present.mask = presMask

	var f feeds
	defer f.destroy()
	kvShape := func(cols int) ort.Shape {
		if lay.form == kvStacked {
			return ort.NewShape(2, int64(bsz), int64(lay.kvHeads), int64(cols), int64(lay.headDim))
		}
		return ort.NewShape(int64(bsz), int64(lay.kvHeads), int64(cols), int64(lay.headDim))
	}
	f.add(ort.NewShape(int64(bsz), int64(s)), intBytes(ids, lay.idsElem), lay.idsElem)
	f.add(ort.NewShape(int64(bsz), int64(t)), intBytes(mask, lay.maskElem), lay.maskElem)
	if lay.positions != "" {
		f.add(ort.NewShape(int64(bsz), int64(s)), intBytes(pos, lay.posElem), lay.posElem)
	}
	if lay.useCacheBranch != "" {
		// Always the branch with the cache: an empty past is a past of
		// length 0, which that branch takes as well.
		f.add(ort.NewShape(1), []byte{1}, ort.TensorElementDataTypeBool)
	}
	for _, buf := range past.bufs {
		f.add(kvShape(p), buf, lay.kvElem)
	}
	// lrows is the logits' second dimension: each row's positions, or one
	// (its last token's) when the graph computes only those.
	lrows := s
	if lay.lastOnly {
		last := make([]int64, bsz)
		for r := range seqs {
			last[r] = int64(r*s + len(toks[r]) - 1)
		}
		f.add(ort.NewShape(int64(bsz), 1), intBytes(last, ort.TensorElementDataTypeInt64), ort.TensorElementDataTypeInt64)
		lrows = 1
	}
	nIn := len(f.vals)
	lbuf, row := m.logitsBuffer(g, bsz*lrows)
	f.add(ort.NewShape(int64(bsz), int64(lrows), int64(m.cfg.Vocab)), lbuf, lay.logitsElem)
	for _, buf := range present.bufs {
		f.add(kvShape(t), buf, lay.kvElem)
	}
	if f.err != nil {
		m.freeBlock(present)
		return nil, f.err
	}
	if err := m.exec(ctx, f.vals[:nIn], f.vals[nIn:]); err != nil {
		m.freeBlock(present)
		return nil, err
	}

	// The present becomes the sequences' cache; the past is no longer
	// anyone's.
	for r, sq := range seqs {
		sq.blk, sq.row = present, r
		sq.n += len(toks[r])
		present.seqs[r] = sq
	}
	present.live = bsz
	m.freeBlock(past)

	rows := make([][]float32, bsz)
	for r := range seqs {
		rows[r] = row(lastRow(r, lrows, len(toks[r])))
	}
	return rows, nil
}

// lastRow is where row r's last token's logits are among the logits' rows:
// lrows per row (one when the graph computes only the last), n tokens fed.
func lastRow(r, lrows, n int) int {
	if lrows == 1 {
		return r
	}
	return r*lrows + n - 1
}

// empty backs the tensors with a zero dimension (a past of length 0).
var empty [8]byte

// intBytes lays out v as the graph's integer type, little-endian.
func intBytes(v []int64, elem ort.TensorElementDataType) []byte {
	if len(v) == 0 {
		return nil
	}
	if elem == ort.TensorElementDataTypeInt32 {
		w := make([]int32, len(v))
		for i, x := range v {
			w[i] = int32(x)
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}
