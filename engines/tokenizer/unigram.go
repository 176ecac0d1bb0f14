package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// unigram is the Unigram model (sentencepiece's): the segmentation of
// highest total score (Viterbi), characters no piece covers becoming the
// unknown token (score: the lowest minus 10), consecutive unknowns fused,
// and with byte fallback an unknown piece written as its <0xXX> bytes when
// they all exist.
type unigram struct {
	v            *Vocab
	scores       []float64
	trie         *byteTrie
	unkID        int32 // -1: none
	minScore     float64
	byteFallback bool
}

func (u *unigram) vocab() *Vocab { return u.v }

func (u *unigram) tokenize(s string, out []token) ([]token, error) {
	if s == "" {
		return out, nil
	}
	type node struct {
		id    int32
		score float64
		start int
	}
	unkScore := u.minScore - 10
	best := make([]node, len(s)+1)
	for i := range best {
		best[i].start = -1
	}
	for i := 0; i < len(s); {
		here := best[i].score
		_, mblen := utf8.DecodeRuneInString(s[i:])
		single := false
		u.trie.prefixes(s, i, func(end int, id int32) {
			c := u.scores[id] + here
			if t := &best[end]; t.start < 0 || c > t.score {
				*t = node{id, c, i}
			}
			if end-i == mblen {
				single = true
			}
		})
		if !single {
			if u.unkID < 0 {
				return out, fmt.Errorf("unigram: no piece for %q and no unknown token", s[i:i+mblen])
			}
			c := unkScore + here
			if t := &best[i+mblen]; t.start < 0 || c > t.score {
				*t = node{u.unkID, c, i}
			}
		}
		i += mblen
	}
	// Back from the end, fusing runs of unknowns.
	type seg struct{ s, e int }
	var segs []seg
	for end := len(s); end > 0; {
		n := best[end]
		if n.id == u.unkID && len(segs) > 0 && best[segs[len(segs)-1].e].id == u.unkID && segs[len(segs)-1].s == end {
			segs[len(segs)-1].s = n.start
		} else {
			segs = append(segs, seg{n.start, end})
		}
		end = n.start
	}
	for k := len(segs) - 1; k >= 0; k-- {
		sg := segs[k]
		piece := s[sg.s:sg.e]
		if id, ok := u.v.ids[piece]; ok {
			out = append(out, token{id: id, value: piece, s: sg.s, e: sg.e})
			continue
		}
		if u.byteFallback {
			ok := true
			for i := 0; i < len(piece); i++ {
				if _, found := u.v.ids[fmt.Sprintf("<0x%02X>", piece[i])]; !found {
					ok = false
					break
				}
			}
			if ok {
				for i := 0; i < len(piece); i++ {
					b := fmt.Sprintf("<0x%02X>", piece[i])
					out = append(out, token{id: u.v.ids[b], value: b, s: sg.s, e: sg.e})
				}
				continue
			}
		}
		if u.unkID < 0 {
			return out, fmt.Errorf("unigram: no unknown token")
		}
		out = append(out, token{id: u.unkID, value: piece, s: sg.s, e: sg.e})
	}
	return out, nil
}

func parseUnigram(o *jobj) (*unigram, error) {
	var raw [][2]json.RawMessage
	if _, err := o.get("vocab", &raw); err != nil {
		return nil, err
	}
	u := &unigram{v: &Vocab{ids: make(map[string]int32, len(raw))}, trie: newByteTrie(), unkID: -1, minScore: math.Inf(1)}
	for i, r := range raw {
		var tok string
		var score float64
		if err := json.Unmarshal(r[0], &tok); err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", o.sub("vocab"), i, err)
		}
		if err := json.Unmarshal(r[1], &score); err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", o.sub("vocab"), i, err)
		}
		u.v.ids[tok] = int32(i)
		u.v.tokens = append(u.v.tokens, tok)
		u.scores = append(u.scores, score)
		u.trie.insert(tok, int32(i))
		u.minScore = math.Min(u.minScore, score)
	}
	var unk *int64
	if _, err := o.get("unk_id", &unk); err != nil {
		return nil, err
	}
	if unk != nil {
		if *unk < 0 || *unk >= int64(len(raw)) {
			return nil, fmt.Errorf("%s: %d is not in the vocabulary", o.sub("unk_id"), *unk)
		}
		u.unkID = int32(*unk)
	}
	var err error
	if u.byteFallback, err = o.boolean("byte_fallback", false); err != nil {
		return nil, err
	}
	return u, nil
}
