package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// postProcessor adds the special tokens of one text or a pair and merges
// a pair into one encoding.
//
// process takes the encodings of one text or a pair and returns pieces
// that are concatenated into the final encoding (tokenizers'
// process_encodings, which a Sequence chains before the merge).
type postProcessor interface {
	addedTokens(pair bool) int
	process(encs []*Encoded, addSpecial bool) []*Encoded
}

// templatePiece is one place of a template: a sequence (seq "A" or "B")
// or a special token, with its type id.
type templatePiece struct {
	seq     string
	special string
	typeID  int32
}

type specialTokens struct {
	IDs    []int32  `json:"ids"`
	Tokens []string `json:"tokens"`
}

// templateProcessor is TemplateProcessing.
type templateProcessor struct {
	single, pair []templatePiece
	specials     map[string]specialTokens
}

func (t *templateProcessor) count(tpl []templatePiece) int {
	n := 0
	for _, p := range tpl {
		if p.seq == "" {
			n += len(t.specials[p.special].IDs)
		}
	}
	return n
}

func (t *templateProcessor) addedTokens(pair bool) int {
	if pair {
		return t.count(t.pair)
	}
	return t.count(t.single)
}

func (t *templateProcessor) process(encs []*Encoded, addSpecial bool) []*Encoded {
	a, b := encs[0], pairOf(encs)
	tpl := t.single
	if b != nil {
		tpl = t.pair
	}
	n := a.Len() + t.count(tpl)
	if b != nil {
		n += b.Len()
	}
	e := newEncoded(n)
	e.texts, e.hasTexts = a.texts, true
	for _, p := range tpl {
		switch {
		case p.seq == "A":
			e.appendAll(a, p.typeID, true)
		case p.seq == "B":
			if b != nil {
				e.appendAll(b, p.typeID, true)
			}
		case addSpecial:
			st := t.specials[p.special]
			for i, id := range st.IDs {
				e.appendTok(id, p.typeID, st.Tokens[i], [2]int{}, -1, 1)
			}
		}
	}
	return []*Encoded{e}
}

func pairOf(encs []*Encoded) *Encoded {
	if len(encs) > 1 {
		return encs[1]
	}
	return nil
}

func parseTemplate(path string, raw json.RawMessage) ([]templatePiece, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		var out []templatePiece
		for _, f := range strings.Fields(s) {
			name, tid, _ := strings.Cut(f, ":")
			typeID := int64(0)
			if tid != "" {
				var err error
				if typeID, err = strconv.ParseInt(tid, 10, 32); err != nil {
					return nil, fmt.Errorf("%s: %q", path, f)
				}
			}
			switch name {
			case "$", "$A", "$0":
				out = append(out, templatePiece{seq: "A", typeID: int32(typeID)})
			case "$B", "$1":
				out = append(out, templatePiece{seq: "B", typeID: int32(typeID)})
			default:
				if strings.HasPrefix(name, "$") {
					if n, err := strconv.Atoi(name[1:]); err == nil && tid == "" {
						out = append(out, templatePiece{seq: "A", typeID: int32(n)})
						continue
					}
					return nil, fmt.Errorf("%s: %q", path, f)
				}
				out = append(out, templatePiece{special: name, typeID: int32(typeID)})
			}
		}
		return out, nil
	}
	var list []struct {
		Sequence *struct {
			ID     string `json:"id"`
			TypeID int32  `json:"type_id"`
		}
		SpecialToken *struct {
			ID     string `json:"id"`
			TypeID int32  `json:"type_id"`
		}
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var out []templatePiece
	for i, p := range list {
		switch {
		case p.Sequence != nil && (p.Sequence.ID == "A" || p.Sequence.ID == "B"):
			out = append(out, templatePiece{seq: p.Sequence.ID, typeID: p.Sequence.TypeID})
		case p.SpecialToken != nil:
			out = append(out, templatePiece{special: p.SpecialToken.ID, typeID: p.SpecialToken.TypeID})
		default:
			return nil, fmt.Errorf("%s[%d]: neither a Sequence A/B nor a SpecialToken", path, i)
		}
	}
	return out, nil
}

// bertProcessor is BertProcessing: [CLS] A [SEP] (B [SEP], type 1).
// robertaProcessor is RobertaProcessing: <s> A </s> (</s> B </s>), all of
// type 0, offsets trimmed of spaces as ByteLevel's.
type bertProcessor struct {
	sep, cls     string
	sepID, clsID int32
	roberta      bool
	trimOffsets  bool
	prefixSpace  bool
}

func (p *bertProcessor) addedTokens(pair bool) int {
	switch {
	case !pair:
		return 2
	case p.roberta:
		return 4
	}
	return 3
}

func (p *bertProcessor) process(encs []*Encoded, addSpecial bool) []*Encoded {
	a, b := encs[0], pairOf(encs)
	if p.roberta {
		if p.trimOffsets {
			trimOffsets(a, p.prefixSpace)
			if b != nil {
				trimOffsets(b, p.prefixSpace)
			}
		}
		for i := range a.TypeIDs {
			a.TypeIDs[i] = 0
		}
		if b != nil {
			for i := range b.TypeIDs {
				b.TypeIDs[i] = 0
			}
		}
	}
	if !addSpecial {
		return encs
	}
	n := a.Len() + 4
	if b != nil {
		n += b.Len()
	}
	e := newEncoded(n)
	e.texts, e.hasTexts = a.texts, true
	e.appendTok(p.clsID, 0, p.cls, [2]int{}, -1, 1)
	e.appendAll(a, 0, true)
	e.appendTok(p.sepID, 0, p.sep, [2]int{}, -1, 1)
	if b != nil {
		t := int32(1)
		if p.roberta {
			t = 0
			e.appendTok(p.sepID, t, p.sep, [2]int{}, -1, 1)
		}
		e.appendAll(b, t, true)
		e.appendTok(p.sepID, t, p.sep, [2]int{}, -1, 1)
	}
	return []*Encoded{e}
}

// byteLevelProcessor is the ByteLevel post-processor: offsets trimmed of
// the spaces their tokens start or end with.
type byteLevelProcessor struct{ trim, prefixSpace bool }

func (byteLevelProcessor) addedTokens(bool) int { return 0 }

func (p byteLevelProcessor) process(encs []*Encoded, _ bool) []*Encoded {
	if p.trim {
		for _, e := range encs {
			trimOffsets(e, p.prefixSpace)
		}
	}
	return encs
}

// trimOffsets is ByteLevel's process_offsets: a token's offsets lose its
// leading and trailing spaces (Ġ or whitespace), but for the first
// token's single leading space when a prefix space was added. tokenizers
// moves character offsets by the token's count of such characters (which
// may land inside a character the token does not start with); here the
// byte offsets move by as many characters of the text.
func trimOffsets(e *Encoded, prefixSpace bool) {
	isSp := func(r rune) bool { return r == 'Ġ' || unicode.IsSpace(r) }
	for i, tok := range e.Tokens {
		off := &e.Offsets[i]
		text := e.texts[max(e.SequenceIDs[i], 0)&1]
		lead, trail := 0, 0
		for _, r := range tok {
			if !isSp(r) {
				break
			}
			lead++
		}
		for k := len(tok); k > 0; {
			r, size := utf8.DecodeLastRuneInString(tok[:k])
			if !isSp(r) {
				break
			}
			trail++
			k -= size
		}
		if lead > 0 {
			first := i == 0 || off[0] == 0
			if !(first && prefixSpace && lead == 1) {
				off[0] = min(moveChars(text, off[0], lead), off[1])
			}
		}
		if trail > 0 && charsBefore(text, off[1]) >= trail {
			off[1] = max(moveChars(text, off[1], -trail), off[0])
		}
	}
}

// moveChars moves byte position p of text by n characters (past the end,
// by bytes).
func moveChars(text string, p, n int) int {
	for ; n > 0; n-- {
		if p >= len(text) {
			return p + n
		}
		_, size := utf8.DecodeRuneInString(text[p:])
		p += size
	}
	for ; n < 0 && p > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:min(p, len(text))])
		p -= size
	}
	return p
}

func charsBefore(text string, p int) int { return utf8.RuneCountInString(text[:min(p, len(text))]) }

type processorSeq []postProcessor

func (s processorSeq) addedTokens(pair bool) int {
	n := 0
	for _, p := range s {
		n += p.addedTokens(pair)
	}
	return n
}

// process runs each processor in turn on the pieces the one before made.
func (s processorSeq) process(encs []*Encoded, addSpecial bool) []*Encoded {
	for _, p := range s {
		encs = p.process(encs, addSpecial)
	}
	return encs
}

func parsePostProcessor(path string, raw json.RawMessage) (postProcessor, error) {
	o, t, err := typed(path, raw)
	if err != nil {
		return nil, err
	}
	var pp postProcessor
	switch t {
	case "TemplateProcessing":
		tp := &templateProcessor{}
		for _, k := range []string{"single", "pair"} {
			r, ok := o.raw(k)
			if !ok {
				continue
			}
			tpl, err := parseTemplate(o.sub(k), r)
			if err != nil {
				return nil, err
			}
			if k == "single" {
				tp.single = tpl
			} else {
				tp.pair = tpl
			}
		}
		if _, err := o.get("special_tokens", &tp.specials); err != nil {
			return nil, err
		}
		for _, tpl := range [][]templatePiece{tp.single, tp.pair} {
			for _, p := range tpl {
				st, ok := tp.specials[p.special]
				if p.seq == "" && (!ok || len(st.IDs) != len(st.Tokens)) {
					return nil, fmt.Errorf("%s: special token %q is not in special_tokens", path, p.special)
				}
			}
		}
		pp = tp
	case "BertProcessing", "RobertaProcessing":
		bp := &bertProcessor{roberta: t == "RobertaProcessing"}
		for _, k := range []string{"sep", "cls"} {
			var pair [2]json.RawMessage
			if _, err := o.get(k, &pair); err != nil {
				return nil, err
			}
			var name string
			var id int32
			if json.Unmarshal(pair[0], &name) != nil || json.Unmarshal(pair[1], &id) != nil {
				return nil, fmt.Errorf("%s: not [token, id]", o.sub(k))
			}
			if k == "sep" {
				bp.sep, bp.sepID = name, id
			} else {
				bp.cls, bp.clsID = name, id
			}
		}
		if bp.roberta {
			if bp.trimOffsets, err = o.boolean("trim_offsets", true); err != nil {
				return nil, err
			}
			if bp.prefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
				return nil, err
			}
		}
		pp = bp
	case "ByteLevel":
		var bl byteLevelProcessor
		if bl.trim, err = o.boolean("trim_offsets", true); err != nil {
			return nil, err
		}
		if bl.prefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
			return nil, err
		}
		o.ignore("use_regex")
		pp = bl
	case "Sequence":
		var list []json.RawMessage
		if _, err := o.get("processors", &list); err != nil {
			return nil, err
		}
		seq := processorSeq{}
		for i, r := range list {
			x, err := parsePostProcessor(fmt.Sprintf("%s.processors[%d]", path, i), r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		pp = seq
	default:
		return nil, unsupported(path, "post-processor", t)
	}
	return pp, o.done()
}
