package llm

import (
	"context"
	"slices"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/processors"
)

// The slot cache, used when slotAttention rewrote the graph.
//
// Every sequence holds a slot: row `slot` of one buffer per cache tensor,
// shaped [slots, kv_heads, cols, head_dim], with its n tokens in columns
// 0..n-1. GroupQueryAttention writes a step's keys and values at each row's
// own position and reads only that row's tokens, and the buffer is both the
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
// Columns grow to the longest sequence's need, rounded up to slotCols,
// plus the dummies' free column (every sequence's n < cols), and shrink
// when the longest no longer needs half of them; slots double when all are
// taken. Either copies each sequence's tokens once; the buffers go when
// the last sequence is released.
type slotCache struct {
	bufs        [][]byte // per cache tensor
	slots, cols int
	seqs        []*sequence // per slot: nil when free
	live        int
}

// slotCols is the step in which the columns grow: a decode loop copies the
// caches once every slotCols tokens of its longest sequence.
const slotCols = 64

// slotBytes is one slot's size in one cache tensor of cols columns.
func (m *Model) slotBytes(cols int) int {
	return m.lay.kvHeads * cols * m.lay.headDim * m.lay.elemSize()
}

// resizeSlots remakes the buffers as slots x cols, copying each sequence's
// tokens.
func (m *Model) resizeSlots(slots, cols int) {
	c := m.sc
	h, rowBytes := m.lay.kvHeads, m.lay.headDim*m.lay.elemSize()
	bufs := make([][]byte, m.lay.kvTensors())
	for t := range bufs {
		bufs[t] = make([]byte, slots*m.slotBytes(cols))
		for i, s := range c.seqs {
			if s == nil || s.n == 0 {
				continue
			}
			for j := 0; j < h; j++ {
				from, to := (i*h+j)*c.cols*rowBytes, (i*h+j)*cols*rowBytes
				copy(bufs[t][to:to+s.n*rowBytes], c.bufs[t][from:from+s.n*rowBytes])
			}
		}
	}
	m.kvBytes = int64(len(bufs)) * int64(slots) * int64(m.slotBytes(cols))
	c.bufs, c.slots, c.cols = bufs, slots, cols
	c.seqs = append(c.seqs, make([]*sequence, slots-len(c.seqs))...)
}

// dropSlot frees s's slot; the buffers go with the last one.
func (m *Model) dropSlot(s *sequence) {
	c := m.sc
	if s.slot < 0 {
		return
	}
	c.seqs[s.slot], s.slot = nil, -1
	c.live--
	if c.live == 0 {
		c.bufs, c.seqs, c.slots, c.cols = nil, nil, 0, 0
		m.kvBytes = 0
	}
}

// colsFor is the columns a longest need of n tokens takes.
func (m *Model) colsFor(n int) int {
	return min((n+1+slotCols-1)/slotCols*slotCols, m.ctxLen+1)
}

// slotStep is Step on the slot cache.
func (m *Model) slotStep(ctx context.Context, batch []processors.StepInput, seqs []*sequence) ([][]float32, error) {
	c := m.sc
	// Slots for newcomers, lowest first, and room for every new token.
	need := 0
	for i, s := range seqs {
		need = max(need, s.n+len(batch[i].Tokens))
	}
	for _, s := range c.seqs {
		if s != nil {
			need = max(need, s.n)
		}
	}
	slots := c.slots
	newcomers := 0
	for _, s := range seqs {
		if s.slot < 0 {
			newcomers++
		}
	}
	for slots-c.live < newcomers {
		slots = max(8, 2*slots)
	}
	cols := c.cols
	if want := m.colsFor(need); want > cols || 2*want <= cols {
		cols = want
	}
	if slots != c.slots || cols != c.cols {
		m.resizeSlots(slots, cols)
	}
	for _, s := range seqs {
		if s.slot < 0 {
			s.slot = slices.Index(c.seqs, nil)
			c.seqs[s.slot] = s
			c.live++
		}
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
		n := 0
		if row.seq != nil {
			n = row.seq.n
		}
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
	from, to := lo*m.slotBytes(c.cols), (lo+bsz)*m.slotBytes(c.cols)
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
		at := k
		if !lay.lastOnly {
			at = r*s + len(row.toks) - 1
		}
		out[r] = all(at)
		k++
	}
	return out, nil
}
