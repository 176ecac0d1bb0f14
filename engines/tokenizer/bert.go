// Package tokenizer turns text into the token ids a model was trained on.
//
// Tokenizer (tokenizer.go) runs a Hugging Face tokenizer.json; the parts
// BERT needs (BERT's character classes below, the WordPiece model) are
// shared with Bert.
//
// Bert is BERT's WordPiece tokenizer as google-research/bert's
// tokenization.py (and EasyTransfer's copy of it, FullTokenizer) runs it:
// clean the text, space out CJK ideographs, split on whitespace, lower-case
// and strip accents, split off punctuation, then cut each word into the
// longest pieces the vocabulary has ("##" marks a piece that continues a
// word). Hugging Face tokenizers' BertNormalizer + BertPreTokenizer +
// WordPiece compute the same, which the tests check.
package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxVocabLineBytes bounds one line of a vocab.txt.
const MaxVocabLineBytes = 1 << 16

// Vocab is a WordPiece vocabulary: token -> id, and back.
type Vocab struct {
	ids    map[string]int32
	tokens []string
}

// ReadVocab reads a vocab.txt: one token a line, its id the line's number
// from 0, the line trimmed of surrounding whitespace as tokenization.py's
// load_vocab does (a token listed twice keeps its last line's id, as
// there). Empty lines count as ids too.
func ReadVocab(r io.Reader) (*Vocab, error) {
	v := &Vocab{ids: map[string]int32{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxVocabLineBytes)
	for sc.Scan() {
		line := sc.Bytes()
		if !utf8.Valid(line) {
			return nil, fmt.Errorf("vocab line %d is not UTF-8", len(v.tokens)+1)
		}
		tok := strings.TrimSpace(string(line))
		if len(v.tokens) >= 1<<31-1 {
			return nil, fmt.Errorf("vocab has over %d lines", 1<<31-1)
		}
		v.ids[tok] = int32(len(v.tokens))
		v.tokens = append(v.tokens, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vocab line %d: %w", len(v.tokens)+1, err)
	}
	if len(v.tokens) == 0 {
		return nil, fmt.Errorf("vocab is empty")
	}
	return v, nil
}

// ParseVocab is ReadVocab of b.
func ParseVocab(b []byte) (*Vocab, error) { return ReadVocab(bytes.NewReader(b)) }

// Len is the number of ids.
func (v *Vocab) Len() int { return len(v.tokens) }

// ID returns token's id.
func (v *Vocab) ID(token string) (int32, bool) {
	id, ok := v.ids[token]
	return id, ok
}

// Token returns id's token, "" when id is out of range.
func (v *Vocab) Token(id int32) string {
	if id < 0 || int(id) >= len(v.tokens) {
		return ""
	}
	return v.tokens[id]
}

// BertOptions are the tokenizer's switches.
type BertOptions struct {
	// LowerCase lower-cases the text and strips its accents (do_lower_case).
	LowerCase bool
	// MaxInputCharsPerWord: a longer word becomes the unknown token whole
	// (google-research/bert: 100, EasyTransfer: 200). 0 means 100.
	MaxInputCharsPerWord int
	// Unknown is the unknown token, "[UNK]" when empty; it must be in the
	// vocabulary.
	Unknown string
	// PythonLower lower-cases as Python's str.lower does (tokenization.py,
	// EasyTransfer's FullTokenizer): a word-final capital sigma becomes ς.
	// Without it each character is lower-cased alone, as Hugging Face
	// tokenizers does (Σ is always σ). Nothing else differs.
	PythonLower bool
}

// Bert is a BERT WordPiece tokenizer; safe for concurrent use.
type Bert struct {
	vocab   *Vocab
	opts    BertOptions
	unk     string
	unkID   int32
	special map[string]int32 // [CLS], [SEP], [PAD], [MASK] where the vocabulary has them
	wp      *wordPiece
}

// NewBert returns a tokenizer over vocab.
func NewBert(vocab *Vocab, opts BertOptions) (*Bert, error) {
	if opts.MaxInputCharsPerWord <= 0 {
		opts.MaxInputCharsPerWord = 100
	}
	unk := opts.Unknown
	if unk == "" {
		unk = "[UNK]"
	}
	id, ok := vocab.ID(unk)
	if !ok {
		return nil, fmt.Errorf("the vocabulary has no unknown token %q", unk)
	}
	b := &Bert{vocab: vocab, opts: opts, unk: unk, unkID: id, special: map[string]int32{}}
	b.wp = &wordPiece{v: vocab, prefix: "##", unk: unk, unkID: id, maxChars: opts.MaxInputCharsPerWord}
	for _, s := range []string{"[CLS]", "[SEP]", "[PAD]", "[MASK]"} {
		if id, ok := vocab.ID(s); ok {
			b.special[s] = id
		}
	}
	return b, nil
}

// Vocab is the tokenizer's vocabulary.
func (b *Bert) Vocab() *Vocab { return b.vocab }

// SpecialID returns the id of a special token ("[CLS]", "[SEP]", ...).
func (b *Bert) SpecialID(tok string) (int32, bool) {
	id, ok := b.special[tok]
	return id, ok
}

// Tokenize returns text's word pieces.
func (b *Bert) Tokenize(text string) []string {
	var out []string
	for _, w := range b.words(text) {
		out = b.wordPieces(out, w)
	}
	return out
}

// TokenizeIDs returns the ids of text's word pieces.
func (b *Bert) TokenizeIDs(text string) []int32 {
	toks := b.Tokenize(text)
	ids := make([]int32, len(toks))
	for i, t := range toks {
		ids[i] = b.id(t)
	}
	return ids
}

func (b *Bert) id(tok string) int32 {
	if id, ok := b.vocab.ID(tok); ok {
		return id
	}
	return b.unkID
}

// words is the basic tokenizer: cleaned text split on whitespace, each
// word lower-cased and stripped of accents when asked, punctuation split
// off as words of its own.
func (b *Bert) words(text string) []string {
	var sb strings.Builder
	sb.Grow(len(text))
	for _, r := range text {
		switch {
		case r == 0 || r == utf8.RuneError || isControl(r):
		case isWhitespace(r):
			sb.WriteByte(' ')
		case isCJK(r):
			sb.WriteByte(' ')
			sb.WriteRune(r)
			sb.WriteByte(' ')
		default:
			sb.WriteRune(r)
		}
	}
	var out []string
	for _, w := range strings.FieldsFunc(sb.String(), unicode.IsSpace) {
		if b.opts.LowerCase {
			w = stripAccents(lower(w, b.opts.PythonLower))
		}
		out = splitPunct(out, w)
	}
	return out
}

// wordPieces appends w's pieces: the WordPiece model's greedy longest
// match first, "##" before every piece but the first; a word that cannot be
// covered, or is longer than MaxInputCharsPerWord runes, is the unknown
// token.
func (b *Bert) wordPieces(out []string, w string) []string {
	n := len(out)
	if _, ok := b.wp.pieces(w, nil, func(id int32, _, _ int) { out = append(out, b.vocab.tokens[id]) }); !ok {
		return append(out[:n], b.unk)
	}
	return out
}

// splitPunct appends w split around its punctuation characters.
func splitPunct(out []string, w string) []string {
	start := 0
	for i, r := range w {
		if isPunct(r) {
			if i > start {
				out = append(out, w[start:i])
			}
			out = append(out, string(r))
			start = i + utf8.RuneLen(r)
		}
	}
	if start < len(w) {
		out = append(out, w[start:])
	}
	return out
}

// isWhitespace: space, tab, newline, carriage return and Unicode's space
// separators (Zs).
func isWhitespace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r'
	}
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.Zs, r)
}

// isControl: Unicode's "other" categories (Cc, Cf, Co, Cs and unassigned),
// but tab, newline and carriage return, which count as whitespace.
func isControl(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f
	}
	return unicode.In(r, unicode.C) || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

// isPunct: ASCII's non-alphanumeric printable characters (BERT counts
// $, +, ^, ... as punctuation) and Unicode's punctuation (P*).
func isPunct(r rune) bool {
	if r >= 33 && r <= 47 || r >= 58 && r <= 64 || r >= 91 && r <= 96 || r >= 123 && r <= 126 {
		return true
	}
	return unicode.IsPunct(r)
}

// isCJK reports the CJK Unified Ideographs blocks BERT spaces out (not
// Hangul, Hiragana or Katakana).
func isCJK(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF || r >= 0x3400 && r <= 0x4DBF ||
		r >= 0x20000 && r <= 0x2A6DF || r >= 0x2A700 && r <= 0x2B73F ||
		r >= 0x2B740 && r <= 0x2B81F || r >= 0x2B820 && r <= 0x2CEAF ||
		r >= 0xF900 && r <= 0xFAFF || r >= 0x2F800 && r <= 0x2FA1F
}

// stripAccents removes the combining marks (Mn) of w's canonical
// decomposition (NFD).
func stripAccents(w string) string {
	d := norm.NFD.String(w)
	if !strings.ContainsFunc(d, isMn) {
		return d
	}
	return strings.Map(func(r rune) rune {
		if isMn(r) {
			return -1
		}
		return r
	}, d)
}

func isMn(r rune) bool { return r >= 0x300 && unicode.Is(unicode.Mn, r) }

// lower is Unicode's full lower-casing of each character (Rust's
// char::to_lowercase): the simple mapping, plus İ -> i̇; with finalSigma a
// word-final capital sigma becomes ς as in Python's str.lower.
func lower(w string, finalSigma bool) string {
	ascii := true
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(w)
	}
	var sb strings.Builder
	sb.Grow(len(w))
	for i, r := range w {
		switch r {
		case 'İ':
			sb.WriteString("i\u0307")
		case 'Σ':
			if finalSigma && isFinalSigma(w, i) {
				sb.WriteRune('ς')
			} else {
				sb.WriteRune('σ')
			}
		default:
			sb.WriteRune(unicode.ToLower(r))
		}
	}
	return sb.String()
}

// isFinalSigma is Unicode's Final_Sigma condition for the Σ at byte i of w: a
// cased letter before it and none after it, skipping case-ignorable
// characters on both sides.
func isFinalSigma(w string, i int) bool {
	before := false
	for j := i; j > 0; {
		r, size := utf8.DecodeLastRuneInString(w[:j])
		j -= size
		if caseIgnorable(r) {
			continue
		}
		before = cased(r)
		break
	}
	if !before {
		return false
	}
	for j := i + len("Σ"); j < len(w); {
		r, size := utf8.DecodeRuneInString(w[j:])
		j += size
		if caseIgnorable(r) {
			continue
		}
		return !cased(r)
	}
	return true
}

func cased(r rune) bool {
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase)
}

// caseIgnorable: marks, format characters, modifier letters and symbols,
// and the word-break MidLetter, MidNumLet and Single_Quote characters.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xB7, 0x387, 0x55F, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// Encoding is a BERT model's input for one text or text pair: token ids,
// segment (token type) ids and the attention mask, each of one length.
type Encoding struct {
	IDs, TypeIDs, Mask []int32
}

// EncodePair builds "[CLS] a [SEP]", or "[CLS] a [SEP] b [SEP]" when hasB,
// from the pieces' ids, as BERT's classifiers are fed: a pair longer than
// maxLen loses pieces from the end of the longer text first (b when equal),
// a single text is cut to maxLen-2 pieces; when pad, the three lists are
// filled to maxLen with 0. The vocabulary must hold [CLS] and [SEP].
func (b *Bert) EncodePair(a, bIDs []int32, hasB bool, maxLen int, pad bool) (Encoding, error) {
	cls, ok1 := b.special["[CLS]"]
	sep, ok2 := b.special["[SEP]"]
	if !ok1 || !ok2 {
		return Encoding{}, fmt.Errorf("the vocabulary has no [CLS] or no [SEP]")
	}
	if hasB {
		if maxLen < 3 {
			return Encoding{}, fmt.Errorf("a sequence length of %d has no room for a pair", maxLen)
		}
		for len(a)+len(bIDs) > maxLen-3 {
			if len(a) > len(bIDs) {
				a = a[:len(a)-1]
			} else {
				bIDs = bIDs[:len(bIDs)-1]
			}
		}
	} else {
		if maxLen < 2 {
			return Encoding{}, fmt.Errorf("a sequence length of %d has no room for [CLS] and [SEP]", maxLen)
		}
		if len(a) > maxLen-2 {
			a = a[:maxLen-2]
		}
		bIDs = nil
	}
	n := len(a) + 2
	if hasB {
		n += len(bIDs) + 1
	}
	size := n
	if pad && maxLen > size {
		size = maxLen
	}
	e := Encoding{IDs: make([]int32, size), TypeIDs: make([]int32, size), Mask: make([]int32, size)}
	e.IDs[0] = cls
	copy(e.IDs[1:], a)
	e.IDs[1+len(a)] = sep
	if hasB {
		copy(e.IDs[2+len(a):], bIDs)
		e.IDs[n-1] = sep
		for i := 2 + len(a); i < n; i++ {
			e.TypeIDs[i] = 1
		}
	}
	for i := 0; i < n; i++ {
		e.Mask[i] = 1
	}
	return e, nil
}

// MaxBertDirFileBytes bounds vocab.txt and tokenizer_config.json as
// ReadBertDir reads them.
const MaxBertDirFileBytes = 64 << 20

// ReadBertDir reads a BERT model directory's WordPiece vocabulary
// (vocab.txt) and whether to lower-case (tokenizer_config.json's
// do_lower_case; true when the file or the key is absent, as Hugging
// Face's BertTokenizer defaults). A missing vocab.txt is an error wrapping
// fs.ErrNotExist, so callers can say what they looked for.
func ReadBertDir(dir string) (vocab *Vocab, lowerCase bool, err error) {
	read := func(name string) ([]byte, error) {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", p)
		}
		if st.Size() > MaxBertDirFileBytes {
			return nil, fmt.Errorf("%s is %d bytes, over the %d read", p, st.Size(), MaxBertDirFileBytes)
		}
		return os.ReadFile(p)
	}
	vb, err := read("vocab.txt")
	if err != nil {
		return nil, false, err
	}
	if vocab, err = ParseVocab(vb); err != nil {
		return nil, false, fmt.Errorf("vocab.txt: %v", err)
	}
	lowerCase = true
	if b, err := read("tokenizer_config.json"); err == nil {
		var tc struct {
			DoLowerCase *bool `json:"do_lower_case"`
		}
		if json.Unmarshal(b, &tc) == nil && tc.DoLowerCase != nil {
			lowerCase = *tc.DoLowerCase
		}
	}
	return vocab, lowerCase, nil
}
