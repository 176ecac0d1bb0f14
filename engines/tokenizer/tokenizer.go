package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"unicode/utf8"
)

// MaxTokenizerJSONBytes bounds a tokenizer.json (gemma3's is 33 MB).
const MaxTokenizerJSONBytes = 256 << 20

// Tokenizer is a Hugging Face tokenizer.json pipeline: added tokens split
// out, normalizer, pre-tokenizer, model, post-processor (special tokens,
// pairs, type ids), truncation and padding, and the decoder back. Its
// encodings equal tokenizers' (ids, tokens, offsets, type ids, masks);
// offsets are in bytes of the text given. Safe for concurrent use.
type Tokenizer struct {
	normalizer normalizer
	pre        preTokenizer
	model      model
	post       postProcessor
	decoder    decoder
	added      *addedVocab
	trunc      *Truncation
	pad        *Padding
}

// Truncation is tokenizer.json's truncation: encodings longer than
// MaxLength (special tokens included) lose tokens from the end (Direction
// "Right") or the start ("Left"); Strategy says from which of a pair:
// "LongestFirst", "OnlyFirst" or "OnlySecond".
type Truncation struct {
	MaxLength int
	Strategy  string
	Direction string
}

// Padding is tokenizer.json's padding: to Length (0: the longest of the
// batch), rounded up to a multiple of PadToMultipleOf, on the Direction
// side, with PadID, PadTypeID and PadToken.
type Padding struct {
	Length          int
	PadToMultipleOf int
	Direction       string
	PadID           int32
	PadTypeID       int32
	PadToken        string
}

// Encoded is the model input of one text or pair (Encoding in tokenizers).
type Encoded struct {
	IDs     []int32
	TypeIDs []int32
	Tokens  []string
	// Offsets are the [start, end) bytes of each token in its text (of the
	// pair's text for its tokens); special tokens have [0, 0).
	Offsets           [][2]int
	WordIDs           []int32 // -1 for special tokens and padding
	SpecialTokensMask []int32
	AttentionMask     []int32
	SequenceIDs       []int32 // 0 or 1 (a pair's text), -1 for special tokens and padding

	texts    [2]string // the texts the offsets are in, for trimOffsets
	hasTexts bool
}

func (e *Encoded) Len() int { return len(e.IDs) }

// newEncoded is an empty encoding with room for n tokens, its six int32
// lists in one allocation.
func newEncoded(n int) *Encoded {
	b := make([]int32, 6*n)
	part := func(k int) []int32 { return b[k*n : k*n : (k+1)*n] }
	return &Encoded{
		IDs: part(0), TypeIDs: part(1), WordIDs: part(2), SpecialTokensMask: part(3),
		AttentionMask: part(4), SequenceIDs: part(5),
		Tokens: make([]string, 0, n), Offsets: make([][2]int, 0, n),
	}
}

func (e *Encoded) appendTok(id, typeID int32, tok string, off [2]int, word, special int32) {
	e.IDs = append(e.IDs, id)
	e.TypeIDs = append(e.TypeIDs, typeID)
	e.Tokens = append(e.Tokens, tok)
	e.Offsets = append(e.Offsets, off)
	e.WordIDs = append(e.WordIDs, word)
	e.SpecialTokensMask = append(e.SpecialTokensMask, special)
	e.AttentionMask = append(e.AttentionMask, 1)
	e.SequenceIDs = append(e.SequenceIDs, -1)
}

func (e *Encoded) appendAll(o *Encoded, typeID int32, setType bool) {
	if !e.hasTexts {
		e.texts, e.hasTexts = o.texts, o.hasTexts
	}
	for i := range o.IDs {
		t := o.TypeIDs[i]
		if setType {
			t = typeID
		}
		e.IDs = append(e.IDs, o.IDs[i])
		e.TypeIDs = append(e.TypeIDs, t)
		e.Tokens = append(e.Tokens, o.Tokens[i])
		e.Offsets = append(e.Offsets, o.Offsets[i])
		e.WordIDs = append(e.WordIDs, o.WordIDs[i])
		e.SpecialTokensMask = append(e.SpecialTokensMask, o.SpecialTokensMask[i])
		e.AttentionMask = append(e.AttentionMask, o.AttentionMask[i])
		e.SequenceIDs = append(e.SequenceIDs, o.SequenceIDs[i])
	}
}

func (e *Encoded) truncate(n int, left bool) {
	if n >= len(e.IDs) {
		return
	}
	a, b := 0, n
	if left {
		a, b = len(e.IDs)-n, len(e.IDs)
	}
	e.IDs, e.TypeIDs, e.Tokens, e.Offsets = e.IDs[a:b], e.TypeIDs[a:b], e.Tokens[a:b], e.Offsets[a:b]
	e.WordIDs, e.SpecialTokensMask, e.AttentionMask = e.WordIDs[a:b], e.SpecialTokensMask[a:b], e.AttentionMask[a:b]
	e.SequenceIDs = e.SequenceIDs[a:b]
}

func (e *Encoded) pad(p *Padding, n int) {
	k := n - len(e.IDs)
	if k <= 0 {
		return
	}
	f := &Encoded{}
	for i := 0; i < k; i++ {
		f.appendTok(p.PadID, p.PadTypeID, p.PadToken, [2]int{}, -1, 1)
		f.AttentionMask[i] = 0
	}
	if p.Direction == "Left" {
		f.appendAll(e, 0, false)
		*e = *f
	} else {
		e.appendAll(f, 0, false)
	}
}

// LoadTokenizerFile reads a tokenizer.json.
func LoadTokenizerFile(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseTokenizerJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokenizerJSON builds a tokenizer from a tokenizer.json. A component
// or setting it does not implement is refused, named by its JSON path.
func ParseTokenizerJSON(b []byte) (*Tokenizer, error) {
	if len(b) > MaxTokenizerJSONBytes {
		return nil, fmt.Errorf("tokenizer.json of %d bytes is over %d", len(b), MaxTokenizerJSONBytes)
	}
	o, err := newJobj("$", b)
	if err != nil {
		return nil, err
	}
	o.ignore("version")
	t := &Tokenizer{}
	if r, ok := o.raw("normalizer"); ok {
		if t.normalizer, err = parseNormalizer("$.normalizer", r); err != nil {
			return nil, err
		}
	}
	if r, ok := o.raw("pre_tokenizer"); ok {
		if t.pre, err = parsePreTokenizer("$.pre_tokenizer", r); err != nil {
			return nil, err
		}
	}
	r, ok := o.raw("model")
	if !ok {
		return nil, fmt.Errorf("$.model: missing")
	}
	if t.model, err = parseModel("$.model", r); err != nil {
		return nil, err
	}
	if r, ok := o.raw("post_processor"); ok {
		if t.post, err = parsePostProcessor("$.post_processor", r); err != nil {
			return nil, err
		}
	}
	if r, ok := o.raw("decoder"); ok {
		if t.decoder, err = parseDecoder("$.decoder", r); err != nil {
			return nil, err
		}
	}
	var added []AddedToken
	if _, err := o.get("added_tokens", &added); err != nil {
		return nil, err
	}
	t.added = newAddedVocab(added, t.normalizer)
	if r, ok := o.raw("truncation"); ok {
		if t.trunc, err = parseTruncation(r); err != nil {
			return nil, err
		}
	}
	if r, ok := o.raw("padding"); ok {
		if t.pad, err = parsePadding(r); err != nil {
			return nil, err
		}
	}
	return t, o.done()
}

func parseTruncation(r json.RawMessage) (*Truncation, error) {
	o, err := newJobj("$.truncation", r)
	if err != nil {
		return nil, err
	}
	tr := &Truncation{}
	if tr.MaxLength, err = o.integer("max_length", 512); err != nil {
		return nil, err
	}
	if tr.Strategy, err = o.str("strategy", "LongestFirst"); err != nil {
		return nil, err
	}
	if tr.Direction, err = o.str("direction", "Right"); err != nil {
		return nil, err
	}
	stride, err := o.integer("stride", 0)
	if err != nil {
		return nil, err
	}
	if stride != 0 {
		return nil, fmt.Errorf("$.truncation.stride: %d is not supported (overflowing windows)", stride)
	}
	if err := tr.check(); err != nil {
		return nil, fmt.Errorf("$.truncation: %v", err)
	}
	return tr, o.done()
}

func (tr *Truncation) check() error {
	switch tr.Strategy {
	case "LongestFirst", "OnlyFirst", "OnlySecond":
	default:
		return fmt.Errorf("unknown strategy %q", tr.Strategy)
	}
	switch tr.Direction {
	case "Right", "Left":
	default:
		return fmt.Errorf("unknown direction %q", tr.Direction)
	}
	if tr.MaxLength < 0 {
		return fmt.Errorf("max_length %d", tr.MaxLength)
	}
	return nil
}

func parsePadding(r json.RawMessage) (*Padding, error) {
	o, err := newJobj("$.padding", r)
	if err != nil {
		return nil, err
	}
	p := &Padding{}
	sr, ok := o.raw("strategy")
	if ok {
		var s string
		var fixed struct{ Fixed *int }
		if json.Unmarshal(sr, &s) == nil && s == "BatchLongest" {
		} else if json.Unmarshal(sr, &fixed) == nil && fixed.Fixed != nil && *fixed.Fixed >= 0 {
			p.Length = *fixed.Fixed
		} else {
			return nil, fmt.Errorf("$.padding.strategy: %s is not supported", sr)
		}
	}
	if p.Direction, err = o.str("direction", "Right"); err != nil {
		return nil, err
	}
	if p.Direction != "Right" && p.Direction != "Left" {
		return nil, fmt.Errorf("$.padding.direction: %q", p.Direction)
	}
	var mult *int
	if _, err := o.get("pad_to_multiple_of", &mult); err != nil {
		return nil, err
	}
	if mult != nil {
		p.PadToMultipleOf = *mult
	}
	id, err := o.integer("pad_id", 0)
	if err != nil {
		return nil, err
	}
	tid, err := o.integer("pad_type_id", 0)
	if err != nil {
		return nil, err
	}
	p.PadID, p.PadTypeID = int32(id), int32(tid)
	if p.PadToken, err = o.str("pad_token", "[PAD]"); err != nil {
		return nil, err
	}
	return p, o.done()
}

// Truncation is the tokenizer's truncation, nil when none.
func (t *Tokenizer) Truncation() *Truncation { return t.trunc }

// Padding is the tokenizer's padding, nil when none.
func (t *Tokenizer) Padding() *Padding { return t.pad }

// WithTruncation is a tokenizer sharing t's parts with another truncation
// (nil: none).
func (t *Tokenizer) WithTruncation(tr *Truncation) (*Tokenizer, error) {
	if tr != nil {
		if err := tr.check(); err != nil {
			return nil, err
		}
	}
	c := *t
	c.trunc = tr
	return &c, nil
}

// WithPadding is a tokenizer sharing t's parts with another padding (nil:
// none).
func (t *Tokenizer) WithPadding(p *Padding) *Tokenizer {
	c := *t
	c.pad = p
	return &c
}

// Vocab is the model's vocabulary (added tokens not included).
func (t *Tokenizer) Vocab() *Vocab { return t.model.vocab() }

// TokenToID returns a token's id, added tokens first.
func (t *Tokenizer) TokenToID(tok string) (int32, bool) {
	if id, ok := t.added.byText[tok]; ok {
		return id, true
	}
	return t.model.vocab().ID(tok)
}

// IDToToken returns an id's token, added tokens first.
func (t *Tokenizer) IDToToken(id int32) (string, bool) {
	if a, ok := t.added.byID[id]; ok {
		return a.Content, true
	}
	v := t.model.vocab()
	if id < 0 || int(id) >= len(v.tokens) {
		return "", false
	}
	if s := v.tokens[id]; s != "" {
		return s, true
	}
	_, ok := v.ids[""]
	return "", ok && v.ids[""] == id
}

// encodeOne runs one text through added tokens, normalizer,
// pre-tokenizer and model.
func (t *Tokenizer) encodeOne(text string, typeID int32) (*Encoded, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("the text is not valid UTF-8")
	}
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("a text of %d bytes is too long", len(text))
	}
	pieces := t.added.split(newNormString(text), t.added.raw, nil)
	var out []piece
	for _, pc := range pieces {
		if pc.hasTok {
			out = append(out, pc)
			continue
		}
		if t.normalizer != nil {
			t.normalizer.normalize(&pc.n)
		}
		if pc.n.norm == "" {
			continue
		}
		for _, q := range t.added.split(pc.n, t.added.normed, nil) {
			if q.n.norm != "" {
				out = append(out, q)
			}
		}
	}
	pt := &preTokenized{pieces: out}
	if t.pre != nil {
		t.pre.preTokenize(pt)
	}
	toks := make([]token, 0, len(text)/3+4)
	counts := make([]int, len(pt.pieces))
	for i := range pt.pieces {
		pc := &pt.pieces[i]
		if pc.hasTok {
			toks = append(toks, token{id: pc.added, value: pc.n.norm, s: 0, e: len(pc.n.norm)})
		} else {
			var err error
			if toks, err = t.model.tokenize(pc.n.norm, toks); err != nil {
				return nil, err
			}
		}
		counts[i] = len(toks)
	}
	e := newEncoded(len(toks))
	e.texts[typeID&1] = text
	k := 0
	for i := range pt.pieces {
		pc := &pt.pieces[i]
		for ; k < counts[i]; k++ {
			tk := toks[k]
			off := [2]int{tk.s, tk.e}
			if a, b, ok := pc.n.toOriginal(tk.s, tk.e); ok {
				off = [2]int{pc.n.shift + a, pc.n.shift + b}
			}
			e.appendTok(tk.id, typeID, tk.value, off, int32(i), 0)
			e.SequenceIDs[len(e.SequenceIDs)-1] = typeID
		}
	}
	return e, nil
}

// Encode encodes one text; addSpecial adds the post-processor's special
// tokens. Truncation and padding are the tokenizer's.
func (t *Tokenizer) Encode(text string, addSpecial bool) (*Encoded, error) {
	e, err := t.encodeOne(text, 0)
	if err != nil {
		return nil, err
	}
	return t.postProcess(e, nil, addSpecial, 0)
}

// EncodePair encodes a pair of texts (a question and its context, two
// sentences to compare).
func (t *Tokenizer) EncodePair(a, b string, addSpecial bool) (*Encoded, error) {
	ea, err := t.encodeOne(a, 0)
	if err != nil {
		return nil, err
	}
	eb, err := t.encodeOne(b, 1)
	if err != nil {
		return nil, err
	}
	return t.postProcess(ea, eb, addSpecial, 0)
}

// EncodeBatch encodes texts (pairs when pairs is not nil, of the same
// length); padding to the batch's longest applies across them.
func (t *Tokenizer) EncodeBatch(texts, pairs []string, addSpecial bool) ([]*Encoded, error) {
	if pairs != nil && len(pairs) != len(texts) {
		return nil, fmt.Errorf("%d texts and %d pairs", len(texts), len(pairs))
	}
	out := make([]*Encoded, len(texts))
	noPad := t.WithPadding(nil)
	for i, s := range texts {
		var err error
		if pairs != nil {
			out[i], err = noPad.EncodePair(s, pairs[i], addSpecial)
		} else {
			out[i], err = noPad.Encode(s, addSpecial)
		}
		if err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
	}
	if t.pad != nil {
		n := t.padLength(out)
		for _, e := range out {
			e.pad(t.pad, n)
		}
	}
	return out, nil
}

func (t *Tokenizer) padLength(es []*Encoded) int {
	n := t.pad.Length
	if n == 0 {
		for _, e := range es {
			n = max(n, e.Len())
		}
	}
	if m := t.pad.PadToMultipleOf; m > 0 && n%m > 0 {
		n += m - n%m
	}
	return n
}

// postProcess truncates, adds the special tokens and pads, as
// tokenizers' post_process.
func (t *Tokenizer) postProcess(a, b *Encoded, addSpecial bool, _ int) (*Encoded, error) {
	a.hasTexts = true
	if b != nil {
		a.texts[1] = b.texts[1]
		b.texts[0] = a.texts[0]
		b.hasTexts = true
	}
	if tr := t.trunc; tr != nil {
		max := tr.MaxLength
		if addSpecial && t.post != nil {
			n := t.post.addedTokens(b != nil)
			if n > max {
				return nil, fmt.Errorf("truncation to %d tokens leaves no room for %d special tokens", max, n)
			}
			max -= n
		}
		if err := truncatePair(a, b, max, tr); err != nil {
			return nil, err
		}
	}
	encs := []*Encoded{a}
	if b != nil {
		encs = append(encs, b)
	}
	if t.post != nil {
		encs = t.post.process(encs, addSpecial)
	}
	e := encs[0]
	for _, x := range encs[1:] {
		e.appendAll(x, 0, false)
	}
	if t.pad != nil {
		e.pad(t.pad, t.padLength([]*Encoded{e}))
	}
	return e, nil
}

func truncatePair(a, b *Encoded, max int, tr *Truncation) error {
	left := tr.Direction == "Left"
	if max == 0 {
		a.truncate(0, left)
		if b != nil {
			b.truncate(0, left)
		}
		return nil
	}
	total := a.Len()
	if b != nil {
		total += b.Len()
	}
	if total <= max {
		return nil
	}
	remove := total - max
	switch tr.Strategy {
	case "LongestFirst":
		if b == nil {
			a.truncate(total-remove, left)
			return nil
		}
		n1, n2 := a.Len(), b.Len()
		swap := n1 > n2
		if swap {
			n1, n2 = n2, n1
		}
		if n1 > max {
			n2 = n1
		} else {
			n2 = maxInt(n1, max-n1)
		}
		if n1+n2 > max {
			n1 = max / 2
			n2 = n1 + max%2
		}
		if swap {
			n1, n2 = n2, n1
		}
		a.truncate(n1, left)
		b.truncate(n2, left)
	default:
		target := a
		if tr.Strategy == "OnlySecond" {
			if b == nil {
				return fmt.Errorf("truncation OnlySecond without a second sequence")
			}
			target = b
		}
		if target.Len() <= remove {
			return fmt.Errorf("truncation %s: the sequence is too short to lose %d tokens", tr.Strategy, remove)
		}
		target.truncate(target.Len()-remove, left)
	}
	return nil
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Decode turns ids back into text through the decoder; skipSpecial leaves
// out the special added tokens. Unknown ids are skipped.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		tok, ok := t.IDToToken(id)
		if !ok {
			continue
		}
		if skipSpecial && t.added.special[id] {
			continue
		}
		toks = append(toks, tok)
	}
	if t.decoder == nil {
		s := ""
		for i, x := range toks {
			if i > 0 {
				s += " "
			}
			s += x
		}
		return s, nil
	}
	return joinStrings(t.decoder.decode(toks)), nil
}
