package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// model turns one pre-tokenized piece into tokens.
type model interface {
	tokenize(s string, out []token) ([]token, error)
	vocab() *Vocab
}

// vocabFromMap builds a Vocab from tokenizer.json's token -> id object.
func vocabFromMap(path string, m map[string]int64) (*Vocab, error) {
	v := &Vocab{ids: make(map[string]int32, len(m))}
	maxID := int64(-1)
	for tok, id := range m {
		if id < 0 || id >= 1<<31-1 {
			return nil, fmt.Errorf("%s: token %q has id %d", path, tok, id)
		}
		if id > maxID {
			maxID = id
		}
	}
	if maxID >= int64(len(m))*4+1024 {
		return nil, fmt.Errorf("%s: ids up to %d for %d tokens", path, maxID, len(m))
	}
	v.tokens = make([]string, maxID+1)
	for tok, id := range m {
		v.ids[tok] = int32(id)
		v.tokens[id] = tok
	}
	return v, nil
}

// wordPiece is the WordPiece model: greedy longest match first, prefix
// before every piece but a word's first; a word that cannot be covered, or
// has more than maxChars characters, is the unknown token whole. Bert runs
// the same code.
type wordPiece struct {
	v        *Vocab
	prefix   string
	unk      string
	unkID    int32
	maxChars int
}

func (w *wordPiece) vocab() *Vocab { return w.v }

// pieces calls emit with each piece of word; false when the word is
// unknown (emit may have been called for a prefix of it).
func (w *wordPiece) pieces(word string, key []byte, emit func(id int32, s, e int)) ([]byte, bool) {
	if utf8.RuneCountInString(word) > w.maxChars {
		return key, false
	}
	for start := 0; start < len(word); {
		end := len(word)
		found := int32(-1)
		for end > start {
			key = key[:0]
			if start > 0 {
				key = append(key, w.prefix...)
			}
			key = append(key, word[start:end]...)
			if id, ok := w.v.ids[string(key)]; ok {
				found = id
				break
			}
			_, size := utf8.DecodeLastRuneInString(word[start:end])
			end -= size
		}
		if found < 0 {
			return key, false
		}
		emit(found, start, end)
		start = end
	}
	return key, true
}

func (w *wordPiece) tokenize(s string, out []token) ([]token, error) {
	n := len(out)
	_, ok := w.pieces(s, nil, func(id int32, a, b int) {
		out = append(out, token{id: id, value: w.v.tokens[id], s: a, e: b})
	})
	if !ok {
		if w.unkID < 0 {
			return out[:n], fmt.Errorf("the vocabulary has no unknown token %q", w.unk)
		}
		out = append(out[:n], token{id: w.unkID, value: w.unk, s: 0, e: len(s)})
	}
	return out, nil
}

func parseWordPiece(o *jobj, v *Vocab) (*wordPiece, error) {
	w := &wordPiece{v: v, unkID: -1}
	var err error
	if w.unk, err = o.str("unk_token", "[UNK]"); err != nil {
		return nil, err
	}
	if w.prefix, err = o.str("continuing_subword_prefix", "##"); err != nil {
		return nil, err
	}
	if w.maxChars, err = o.integer("max_input_chars_per_word", 100); err != nil {
		return nil, err
	}
	if id, ok := v.ids[w.unk]; ok {
		w.unkID = id
	}
	return w, nil
}

// bpe is the BPE model: each character a symbol (its vocabulary id, or its
// bytes' <0xXX> tokens with byte fallback, or the unknown token), then the
// merges applied lowest rank first, leftmost first among equal ranks.
type bpe struct {
	v            *Vocab
	merges       map[uint64]mergeTo
	unk          string
	unkID        int32 // -1: no unknown token
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int32
	asciiIDs     [128]int32 // single ASCII characters' ids (-1: none), without prefix or suffix

	mu    sync.RWMutex
	cache map[string][]symbol
}

type mergeTo struct{ rank, id int32 }

// Words up to bpeCacheMaxLen bytes are cached, up to bpeCacheSize of them
// (tokenizers' BPE cache: 10000 words under 256 bytes).
const (
	bpeCacheSize   = 10000
	bpeCacheMaxLen = 256
)

func (b *bpe) vocab() *Vocab { return b.v }

func pairKey(a, c int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(c)) }

// scratch is reusable memory for long words (not cached): symbols and the
// merge queue.
type scratch struct {
	syms []symbol
	heap []mergeItem
}

var bpeScratch sync.Pool

type symbol struct {
	id         int32
	prev, next int32
	len        int32
}

func (b *bpe) tokenize(s string, out []token) ([]token, error) {
	if s == "" {
		return out, nil
	}
	if b.ignoreMerges {
		if id, ok := b.v.ids[s]; ok {
			return append(out, token{id: id, value: b.v.tokens[id], s: 0, e: len(s)}), nil
		}
	}
	var syms []symbol
	cached := false
	if len(s) < bpeCacheMaxLen {
		b.mu.RLock()
		syms, cached = b.cache[s]
		b.mu.RUnlock()
	}
	if !cached {
		var err error
		sc, _ := bpeScratch.Get().(*scratch)
		if sc == nil {
			sc = &scratch{}
		}
		// The scratch memory goes back once the tokens are read from it.
		defer bpeScratch.Put(sc)
		syms, err = b.word(s, sc)
		if err != nil {
			return out, err
		}
		if len(s) < bpeCacheMaxLen {
			b.mu.Lock()
			if len(b.cache) < bpeCacheSize {
				b.cache[s] = syms
			}
			b.mu.Unlock()
		}
	}
	off := 0
	for _, sy := range syms {
		out = append(out, token{id: sy.id, value: b.v.tokens[sy.id], s: off, e: off + int(sy.len)})
		off += int(sy.len)
	}
	return out, nil
}

// word is BPE's merge_word on sc's memory: the symbols of w, merged.
func (b *bpe) word(w string, sc *scratch) ([]symbol, error) {
	syms := sc.syms[:0]
	if cap(syms) < len(w) {
		syms = make([]symbol, 0, len(w))
	}
	add := func(id int32, n int) {
		syms = append(syms, symbol{id: id, prev: int32(len(syms) - 1), next: -1, len: int32(n)})
		if len(syms) > 1 {
			syms[len(syms)-2].next = int32(len(syms) - 1)
		}
	}
	unkID, unkLen := int32(-1), 0
	var key []byte
	for i := 0; i < len(w); {
		_, size := utf8.DecodeRuneInString(w[i:])
		key = key[:0]
		if i > 0 {
			key = append(key, b.prefix...)
		}
		key = append(key, w[i:i+size]...)
		if i+size == len(w) {
			key = append(key, b.suffix...)
		}
		var id int32 = -1
		if size == 1 && w[i] < utf8.RuneSelf && len(key) == 1 {
			id = b.asciiIDs[w[i]]
		} else if x, ok := b.v.ids[string(key)]; ok {
			id = x
		}
		i += size
		if id >= 0 {
			if unkID >= 0 {
				add(unkID, unkLen)
				unkID = -1
			}
			add(id, size)
			continue
		}
		if b.byteFallback {
			all := true
			for _, c := range key {
				if b.byteIDs[c] < 0 {
					all = false
					break
				}
			}
			if all {
				// A pending unknown stays pending, as in tokenizers.
				for _, c := range key {
					add(b.byteIDs[c], 1)
				}
				continue
			}
		}
		if b.unk != "" {
			if b.unkID < 0 {
				return nil, fmt.Errorf("the vocabulary has no unknown token %q", b.unk)
			}
			switch {
			case unkID >= 0 && b.fuseUnk:
				unkLen += size
			case unkID >= 0:
				add(unkID, unkLen)
				unkLen = size
			default:
				unkID, unkLen = b.unkID, size
			}
		}
	}
	if unkID >= 0 {
		add(unkID, unkLen)
	}
	sc.heap = b.mergeAll(syms, sc.heap)
	sc.syms = syms
	out := syms[:0]
	for _, sy := range syms {
		if sy.len != 0 {
			out = append(out, sy)
		}
	}
	if len(w) < bpeCacheMaxLen {
		return append([]symbol(nil), out...), nil // cached: no spare capacity kept
	}
	return out, nil
}

// mergeItem is a candidate merge: key is rank<<32 | position, so the
// smallest key is the lowest rank, leftmost.
type mergeItem struct {
	key uint64
	id  int32
}

func mergeKey(rank, pos int32) uint64 { return uint64(uint32(rank))<<32 | uint64(uint32(pos)) }

// mergeAll applies the merges through a priority queue keyed by (rank,
// position), skipping entries whose pair has changed since. The queue is a
// 4-ary heap, as tokenizers' (shallower than a binary one).
func (b *bpe) mergeAll(syms []symbol, h []mergeItem) []mergeItem {
	h = h[:0]
	push := func(h []mergeItem, it mergeItem) []mergeItem { return heapPush(h, it) }
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := b.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = push(h, mergeItem{mergeKey(m.rank, int32(i)), m.id})
		}
	}
	for len(h) > 0 {
		var top mergeItem
		top, h = heapPop(h)
		pos := int32(uint32(top.key))
		cur := &syms[pos]
		if cur.len == 0 || cur.next < 0 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if m, ok := b.merges[pairKey(cur.id, right.id)]; !ok || m.id != top.id {
			continue
		}
		cur.id = top.id
		cur.len += right.len
		cur.next = right.next
		syms[nextPos].len = 0
		if right.next >= 0 && int(right.next) < len(syms) {
			syms[right.next].prev = pos
		}
		if cur.prev >= 0 {
			if m, ok := b.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h = push(h, mergeItem{mergeKey(m.rank, cur.prev), m.id})
			}
		}
		if cur.next >= 0 && int(cur.next) < len(syms) {
			if m, ok := b.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h = push(h, mergeItem{mergeKey(m.rank, pos), m.id})
			}
		}
	}
	return h
}

// newBPE builds the model from a vocabulary and merges (pairs of tokens,
// rank their order).
func newBPE(v *Vocab, merges [][2]string, prefix string) (*bpe, error) {
	b := &bpe{v: v, unkID: -1, prefix: prefix, merges: make(map[uint64]mergeTo, len(merges)), cache: map[string][]symbol{}}
	for i := range b.asciiIDs {
		b.asciiIDs[i] = -1
		if id, ok := v.ids[string(rune(i))]; ok {
			b.asciiIDs[i] = id
		}
	}
	for i := range b.byteIDs {
		b.byteIDs[i] = -1
		if id, ok := v.ids[fmt.Sprintf("<0x%02X>", i)]; ok {
			b.byteIDs[i] = id
		}
	}
	var buf []byte
	for rank, m := range merges {
		a, ok1 := v.ids[m[0]]
		c, ok2 := v.ids[m[1]]
		if !ok1 || !ok2 {
			missing := m[0]
			if ok1 {
				missing = m[1]
			}
			return nil, fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, m[0], m[1], missing)
		}
		right := m[1]
		if len(prefix) > 0 && len(right) >= len(prefix) {
			right = right[len(prefix):]
		}
		buf = append(append(buf[:0], m[0]...), right...)
		id, ok := v.ids[string(buf)]
		if !ok {
			return nil, fmt.Errorf("merge %d (%q %q): %q is not in the vocabulary", rank, m[0], m[1], buf)
		}
		b.merges[pairKey(a, c)] = mergeTo{int32(rank), id}
	}
	return b, nil
}

// parseMerges reads tokenizer.json's merges: "a b" strings or [a, b] pairs.
func parseMerges(path string, raw json.RawMessage) ([][2]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := make([][2]string, 0, len(list))
	for i, r := range list {
		if len(r) > 0 && r[0] == '"' {
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return nil, fmt.Errorf("%s[%d]: %v", path, i, err)
			}
			a, c, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(c, " ") {
				return nil, fmt.Errorf("%s[%d]: %q is not two tokens", path, i, s)
			}
			out = append(out, [2]string{a, c})
			continue
		}
		var p []string
		if err := json.Unmarshal(r, &p); err != nil || len(p) != 2 {
			return nil, fmt.Errorf("%s[%d]: not a pair of tokens", path, i)
		}
		out = append(out, [2]string{p[0], p[1]})
	}
	return out, nil
}

func parseBPE(o *jobj, v *Vocab) (*bpe, error) {
	mraw, ok := o.raw("merges")
	var merges [][2]string
	if ok {
		var err error
		if merges, err = parseMerges(o.sub("merges"), mraw); err != nil {
			return nil, err
		}
	}
	var dropout *float64
	if _, err := o.get("dropout", &dropout); err != nil {
		return nil, err
	}
	if dropout != nil && *dropout != 0 {
		return nil, fmt.Errorf("%s: dropout %v is not supported (encoding would not be deterministic)", o.sub("dropout"), *dropout)
	}
	prefix, err := o.str("continuing_subword_prefix", "")
	if err != nil {
		return nil, err
	}
	b, err := newBPE(v, merges, prefix)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", o.sub("merges"), err)
	}
	if b.suffix, err = o.str("end_of_word_suffix", ""); err != nil {
		return nil, err
	}
	if b.unk, err = o.str("unk_token", ""); err != nil {
		return nil, err
	}
	if id, ok := v.ids[b.unk]; ok && b.unk != "" {
		b.unkID = id
	}
	if b.fuseUnk, err = o.boolean("fuse_unk", false); err != nil {
		return nil, err
	}
	if b.byteFallback, err = o.boolean("byte_fallback", false); err != nil {
		return nil, err
	}
	if b.ignoreMerges, err = o.boolean("ignore_merges", false); err != nil {
		return nil, err
	}
	return b, nil
}

func parseModel(path string, raw json.RawMessage) (model, error) {
	o, err := newJobj(path, raw)
	if err != nil {
		return nil, err
	}
	t, err := o.str("type", "")
	if err != nil {
		return nil, err
	}
	if t == "" {
		// Older files leave the model untagged: BPE has merges, WordPiece
		// a continuing_subword_prefix.
		switch {
		case o.m["merges"] != nil:
			t = "BPE"
		case o.m["max_input_chars_per_word"] != nil:
			t = "WordPiece"
		}
	}
	var m model
	switch t {
	case "WordPiece", "BPE":
		var vm map[string]int64
		if _, err := o.get("vocab", &vm); err != nil {
			return nil, err
		}
		v, err := vocabFromMap(o.sub("vocab"), vm)
		if err != nil {
			return nil, err
		}
		if t == "WordPiece" {
			m, err = parseWordPiece(o, v)
		} else {
			m, err = parseBPE(o, v)
		}
		if err != nil {
			return nil, err
		}
	case "Unigram":
		u, err := parseUnigram(o)
		if err != nil {
			return nil, err
		}
		m = u
	default:
		// WordLevel, ...
		return nil, unsupported(path, "model", t)
	}
	return m, o.done()
}

// heapPush and heapPop keep h a 4-ary min-heap by key.
func heapPush(h []mergeItem, it mergeItem) []mergeItem {
	h = append(h, it)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) >> 2
		if h[p].key <= it.key {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = it
	return h
}

func heapPop(h []mergeItem) (mergeItem, []mergeItem) {
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	if n == 0 {
		return top, h
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m, mk := c, h[c].key
		end := min(c+4, n)
		for k := c + 1; k < end; k++ {
			if h[k].key < mk {
				m, mk = k, h[k].key
			}
		}
		if mk >= last.key {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return top, h
}
