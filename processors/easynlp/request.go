package easynlp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/eas-server/eas-server/engines/encoder"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
)

// maxRecords bounds the records of one request.
const maxRecords = 4096

var errNotLoaded = errors.New("easynlp app is not loaded")

// Payload is one request, tokenized on the caller's goroutine.
type Payload struct {
	list bool // the body was a JSON list (of more than one record: EasyNLP answers a list of one with a dict)
	rows []row
}

// row is one record: its unpadded ids and what post-processing needs.
type row struct {
	id    json.RawMessage // the record's "id", or a new uuid
	ids   []int32
	types []int32
	n     int // real tokens (the attention mask's ones)
	padTo int // positions the answer covers (EasyNLP's padded length); n for a pooled answer
	padID int32
	// tokens are sequence labeling's pieces, "[CLS] ... [SEP]".
	tokens []string
}

// Result is one payload's outputs, per row.
type Result struct {
	rows [][][]float32 // row -> graph output -> values ([padTo][X] flattened for per-token outputs)
}

// Decode parses {"first_sequence": "...", ...} or a list of them and
// tokenizes each as EasyNLP's predictor's preprocess does.
func (a *App) Decode(_ context.Context, req *processors.Request) (*Payload, error) {
	if a.tok == nil {
		return nil, errNotLoaded
	}
	body := bytes.TrimSpace(req.Body)
	p := &Payload{}
	var items []map[string]json.RawMessage
	send := fmt.Sprintf(`{"%s": "text"}`, a.first)
	if len(body) > 0 && body[0] == '[' {
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, processors.BadInputf("the body must be a JSON object %s or a list of them: %v", send, err)
		}
		p.list = len(items) > 1
	} else {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(body, &one); err != nil {
			return nil, processors.BadInputf("the body must be a JSON object %s or a list of them", send)
		}
		if len(one) > 0 {
			items = []map[string]json.RawMessage{one}
		}
	}
	if len(items) == 0 {
		return nil, processors.BadInputf("the request has no records: send %s", send)
	}
	if len(items) > maxRecords {
		return nil, processors.BadInputf("the request has %d records, over the %d one request may carry", len(items), maxRecords)
	}
	seqLen, err := a.requestLength(items)
	if err != nil {
		return nil, err
	}
	p.rows = make([]row, len(items))
	for i, it := range items {
		if it == nil {
			return nil, processors.BadInputf("record %d is null: send %s", i, send)
		}
		if err := a.encode(&p.rows[i], it, seqLen); err != nil {
			if len(items) > 1 {
				return nil, processors.BadInputf("record %d: %v", i, err)
			}
			return nil, err
		}
	}
	return p, nil
}

// requestLength is EasyNLP's max_seq_length: the largest sequence_length
// of the records up to the first that has none, else the configured one.
func (a *App) requestLength(items []map[string]json.RawMessage) (int, error) {
	n := -1
	for i, it := range items {
		raw, ok := it["sequence_length"]
		if !ok {
			break
		}
		var v int
		if err := json.Unmarshal(raw, &v); err != nil {
			return 0, processors.BadInputf("record %d: sequence_length must be an integer", i)
		}
		n = max(n, v)
	}
	if n == -1 {
		return a.seqLen, nil
	}
	limit := a.model.MaxLen()
	switch {
	case n < 2:
		return 0, processors.BadInputf("sequence_length %d leaves no room for [CLS] and [SEP]: send 2 or more", n)
	case n > limit:
		return 0, processors.BadInputf("sequence_length %d is over the %d positions of the model: send at most %d", n, limit, limit)
	}
	return n, nil
}

// text reads the string under key; ok is false when the key is absent or
// null (Python's record.get).
func text(it map[string]json.RawMessage, key string) (string, bool, error) {
	raw, ok := it[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, processors.BadInputf("%q must be a string", key)
	}
	return s, true, nil
}

// encode tokenizes one record into r.
func (a *App) encode(r *row, it map[string]json.RawMessage, seqLen int) error {
	if raw, ok := it["id"]; ok {
		r.id = raw
	} else {
		r.id = newUUID()
	}
	first, ok, err := text(it, a.first)
	if err != nil {
		return err
	}
	if !ok {
		return processors.BadInputf("no text: send {\"%s\": \"...\"}", a.first)
	}
	r.padID = a.padID
	if a.app == SequenceLabeling {
		return a.encodeChars(r, first, seqLen)
	}
	second, hasSecond, err := text(it, a.second)
	if err != nil {
		return err
	}
	if hasSecond && seqLen < 3 {
		return processors.BadInputf("sequence_length %d has no room for a pair", seqLen)
	}
	e, err := a.tok.EncodePair(a.tokenizeIDs(first), a.tokenizeIDs(second), hasSecond, seqLen, false)
	if err != nil {
		return err
	}
	r.ids, r.types, r.n = e.IDs, e.TypeIDs, len(e.IDs)
	if a.oneType {
		clear(r.types)
	}
	r.padTo = r.n
	if a.head == encoder.Vector {
		r.padTo = seqLen // all_hidden_outputs covers the padded positions
	}
	return nil
}

// encodeChars is EasyNLP's sequence labeling preprocess: the text's
// characters joined by spaces and split on single spaces (so a space
// becomes two empty words), each word's pieces ([UNK] for none),
// "[CLS] pieces [SEP]" with the pieces cut to sequence_length-2, padded
// with 0 to sequence_length (the tags cover every position).
func (a *App) encodeChars(r *row, text string, seqLen int) error {
	chars := make([]string, 0, len(text))
	for _, c := range text {
		chars = append(chars, string(c))
	}
	words := strings.Split(strings.Join(chars, " "), " ")
	toks := []string{"[CLS]"}
	for _, w := range words {
		pieces := a.tokenize(w)
		if len(pieces) == 0 {
			pieces = []string{"[UNK]"}
		}
		toks = append(toks, pieces...)
		if len(toks) >= seqLen {
			break
		}
	}
	if len(toks) > seqLen-1 {
		toks = toks[:seqLen-1]
	}
	toks = append(toks, "[SEP]")
	r.tokens = toks
	r.ids = make([]int32, len(toks))
	unk, _ := a.tok.Vocab().ID("[UNK]")
	for i, t := range toks {
		id, ok := a.tok.Vocab().ID(t)
		if !ok {
			id = unk
		}
		r.ids[i] = id
	}
	r.types = make([]int32, len(toks))
	r.n, r.padTo, r.padID = len(toks), seqLen, 0
	return nil
}

// special is a special token of the vocabulary, kept whole in text as
// Hugging Face's BertTokenizer keeps its special tokens.
type special struct {
	text string
	id   int32
}

func specialTokens(v *tokenizer.Vocab) []special {
	var out []special
	for _, s := range []string{"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"} {
		if id, ok := v.ID(s); ok {
			out = append(out, special{s, id})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].text) > len(out[j].text) })
	return out
}

// splitSpecial cuts text around its special tokens (case-sensitive, as
// the tokenizer's trie matches them): each part is text to tokenize or a
// special token's id (>= 0).
func (a *App) splitSpecial(text string, f func(part string, id int32)) {
	start := 0
	for i := 0; i < len(text); {
		if text[i] != '[' {
			i++
			continue
		}
		matched := false
		for _, s := range a.special {
			if strings.HasPrefix(text[i:], s.text) {
				if i > start {
					f(text[start:i], -1)
				}
				f("", s.id)
				i += len(s.text)
				start = i
				matched = true
				break
			}
		}
		if !matched {
			i++
		}
	}
	if start < len(text) {
		f(text[start:], -1)
	}
}

// tokenizeIDs is BertTokenizer's tokenize and convert_tokens_to_ids.
func (a *App) tokenizeIDs(text string) []int32 {
	var ids []int32
	a.splitSpecial(text, func(part string, id int32) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		ids = append(ids, a.tok.TokenizeIDs(part)...)
	})
	return ids
}

// tokenize is BertTokenizer's tokenize, as strings.
func (a *App) tokenize(text string) []string {
	var toks []string
	a.splitSpecial(text, func(part string, id int32) {
		if id >= 0 {
			toks = append(toks, a.tok.Vocab().Token(id))
			return
		}
		toks = append(toks, a.tok.Tokenize(part)...)
	})
	return toks
}

// newUUID is a random (version 4) UUID as a JSON string, what EasyNLP's
// str(uuid.uuid4()) gives a record without an id.
func newUUID() json.RawMessage {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return json.RawMessage(fmt.Sprintf(`"%x-%x-%x-%x-%x"`, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}
