package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token of tokenizer.json's added_tokens: matched in the
// text before the model runs (special or not), on the raw text or, when
// Normalized, on the normalized one.
type AddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedVocab splits the added tokens out of a text as tokenizers'
// AddedVocabulary does: first those matched on the raw text, then, in the
// rest once normalized, the others; leftmost match first, the longest at
// that place.
type addedVocab struct {
	tokens  []AddedToken
	byID    map[int32]*AddedToken
	byText  map[string]int32
	raw     *byteTrie // values: index in tokens
	normed  *byteTrie
	special map[int32]bool
}

func newAddedVocab(toks []AddedToken, nz normalizer) *addedVocab {
	a := &addedVocab{tokens: toks, byID: map[int32]*AddedToken{}, byText: map[string]int32{}, special: map[int32]bool{}}
	for i := range toks {
		t := &a.tokens[i]
		if t.Content == "" {
			continue
		}
		a.byID[t.ID] = t
		a.byText[t.Content] = t.ID
		if t.Special {
			a.special[t.ID] = true
		}
		if t.Normalized {
			pat := t.Content
			if nz != nil {
				n := newNormString(pat)
				nz.normalize(&n)
				pat = n.norm
			}
			if a.normed == nil {
				a.normed = newByteTrie()
			}
			a.normed.insert(pat, int32(i))
		} else {
			if a.raw == nil {
				a.raw = newByteTrie()
			}
			a.raw.insert(t.Content, int32(i))
		}
	}
	return a
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// split cuts the tokens of trie out of n (AddedVocabulary.split_with_indices).
func (a *addedVocab) split(n normString, trie *byteTrie, out []piece) []piece {
	s := n.norm
	if trie == nil || s == "" {
		return append(out, piece{n: n})
	}
	type hit struct {
		s, e int
		tok  int32
	}
	var hits []hit
	startOffset := 0
	for i := 0; i < len(s); {
		if !trie.first[s[i]] {
			i++
			continue
		}
		end, ti := trie.longestAt(s, i)
		if end < 0 {
			i++
			continue
		}
		t := &a.tokens[ti]
		start, stop := i, end
		i = end
		if t.SingleWord {
			startSpace := start == 0 || !isWord(lastRune(s[:start]))
			stopSpace := stop == len(s) || !isWord(firstRune(s[stop:]))
			if !startSpace || !stopSpace {
				continue
			}
		}
		if t.LStrip {
			ns := start
			for ns > 0 {
				r, size := utf8.DecodeLastRuneInString(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= size
			}
			start = max(ns, startOffset)
		}
		if t.RStrip {
			for stop < len(s) {
				r, size := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += size
			}
		}
		hits = append(hits, hit{start, stop, ti})
		startOffset = stop
	}
	if len(hits) == 0 {
		return append(out, piece{n: n})
	}
	prev := 0
	emit := func(s, e int, tok int32) {
		sl, ok := n.slice(s, e)
		if !ok || sl.norm == "" && tok < 0 {
			return
		}
		if tok < 0 {
			out = append(out, piece{n: sl})
			return
		}
		out = append(out, piece{n: sl, hasTok: true, added: a.tokens[tok].ID})
	}
	for _, h := range hits {
		if prev < h.s {
			emit(prev, h.s, -1)
		}
		emit(h.s, h.e, h.tok)
		prev = h.e
	}
	if prev != len(s) {
		emit(prev, len(s), -1)
	}
	return out
}
