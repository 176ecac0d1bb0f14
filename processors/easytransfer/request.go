package easytransfer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// maxTexts bounds the texts of one request.
const maxTexts = 4096

// Payload is one request, tokenized on the caller's goroutine: n rows of
// sequence_length ids, mask and segment ids.
type Payload struct {
	list            bool // the body was a JSON list: answer a list
	n               int
	ids, mask, segs []int32
	// origin is, for sequence labeling, each text's piece -> word index
	// (-1 for [CLS] and [SEP]), untruncated, as EasyTransfer keeps it.
	origin [][]int
}

// Result is the signature's outputs for one payload's rows.
type Result struct {
	outputs []tensor.Tensor
}

// Decode parses {"first_sequence": "...", "second_sequence": "..."} (or the
// training's column names as keys), or a list of them, and tokenizes each.
func (a *App) Decode(_ context.Context, req *processors.Request) (*Payload, error) {
	if a.tok == nil {
		return nil, errNotLoaded
	}
	body := bytes.TrimSpace(req.Body)
	p := &Payload{}
	var items []map[string]json.RawMessage
	switch {
	case len(body) > 0 && body[0] == '[':
		p.list = true
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, processors.BadInputf("the body must be a JSON object {\"first_sequence\": \"text\"} or a list of them: %v", err)
		}
		if len(items) == 0 {
			return nil, processors.BadInputf("the request's list is empty")
		}
		if len(items) > maxTexts {
			return nil, processors.BadInputf("the request has %d texts, over the %d one request may carry", len(items), maxTexts)
		}
	default:
		var one map[string]json.RawMessage
		if err := json.Unmarshal(body, &one); err != nil || one == nil {
			return nil, processors.BadInputf("the body must be a JSON object {\"first_sequence\": \"text\"} or a list of them")
		}
		items = []map[string]json.RawMessage{one}
	}
	p.n = len(items)
	size := p.n * a.seqLen
	p.ids, p.mask, p.segs = make([]int32, size), make([]int32, size), make([]int32, size)
	for i, it := range items {
		if err := a.encode(p, i, it); err != nil {
			if len(items) > 1 {
				return nil, processors.BadInputf("text %d: %v", i, err)
			}
			return nil, err
		}
	}
	return p, nil
}

// text returns the string under the first of keys present in it.
func text(it map[string]json.RawMessage, keys ...string) (string, bool, error) {
	for _, k := range keys {
		if k == "" {
			continue
		}
		raw, ok := it[k]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, processors.BadInputf("%q must be a string", k)
		}
		return s, true, nil
	}
	return "", false, nil
}

// encode tokenizes item i into row i of p.
func (a *App) encode(p *Payload, i int, it map[string]json.RawMessage) error {
	first, ok, err := text(it, "first_sequence", a.first)
	if err != nil {
		return err
	}
	if !ok {
		return processors.BadInputf("no text: send {\"first_sequence\": \"...\"}%s", also(a.first))
	}
	second, hasSecond, err := text(it, "second_sequence", a.second)
	if err != nil {
		return err
	}
	if a.second != "" && !hasSecond && a.cfg.Type != SequenceLabeling {
		return processors.BadInputf("this model was trained on text pairs: send \"second_sequence\" too%s", also(a.second))
	}
	off := i * a.seqLen
	if a.cfg.Type == SequenceLabeling {
		return a.encodeWords(p, off, first)
	}
	aIDs := a.tok.TokenizeIDs(first)
	var bIDs []int32
	if hasSecond {
		bIDs = a.tok.TokenizeIDs(second)
	}
	e, err := a.tok.EncodePair(aIDs, bIDs, hasSecond, a.seqLen, true)
	if err != nil {
		return err
	}
	copy(p.ids[off:], e.IDs)
	copy(p.mask[off:], e.Mask)
	copy(p.segs[off:], e.TypeIDs)
	return nil
}

func also(column string) string {
	if column == "" || column == "first_sequence" || column == "second_sequence" {
		return ""
	}
	return fmt.Sprintf(" (or the training's column name %q)", column)
}

// encodeWords is EasyTransfer's sequence labeling preprocessing: the text
// split on single spaces into words, each word's pieces (an empty one is
// [UNK]), "[CLS] pieces [SEP]" with the pieces cut to sequence_length-2.
func (a *App) encodeWords(p *Payload, off int, text string) error {
	unk, _ := a.tok.Vocab().ID("[UNK]")
	cls, _ := a.tok.SpecialID("[CLS]")
	sep, _ := a.tok.SpecialID("[SEP]")
	ids := []int32{cls}
	origin := []int{-1}
	for w, word := range strings.Split(text, " ") {
		pieces := a.tok.TokenizeIDs(word)
		if len(pieces) == 0 {
			pieces = []int32{unk}
		}
		ids = append(ids, pieces...)
		for range pieces {
			origin = append(origin, w)
		}
	}
	if len(ids) > a.seqLen-1 {
		ids = ids[:a.seqLen-1]
	}
	ids = append(ids, sep)
	origin = append(origin, -1)
	copy(p.ids[off:], ids)
	for j := range ids {
		p.mask[off+j] = 1
	}
	p.origin = append(p.origin, origin)
	return nil
}

// BatchKey lets every request share a run: all are padded to
// sequence_length.
func (a *App) BatchKey(*Payload) (string, bool) { return "easytransfer", true }

// Run feeds the rows of the whole batch to the SavedModel at once and
// splits its outputs back per payload.
func (a *App) Run(ctx context.Context, batch []*Payload) ([]*Result, error) {
	if a.tok == nil {
		return nil, errNotLoaded
	}
	total := 0
	for _, p := range batch {
		total += p.n
	}
	shape := []int64{int64(total), int64(a.seqLen)}
	cols := [3][]int32{make([]int32, 0, total*a.seqLen), make([]int32, 0, total*a.seqLen), make([]int32, 0, total*a.seqLen)}
	for _, p := range batch {
		cols[0] = append(cols[0], p.ids...)
		cols[1] = append(cols[1], p.mask...)
		cols[2] = append(cols[2], p.segs...)
	}
	tp := &processors.TensorPayload{}
	for i, in := range a.inputs {
		if in.DType == "INT64" {
			v := make([]int64, len(cols[i]))
			for j, x := range cols[i] {
				v[j] = int64(x)
			}
			tp.Inputs = append(tp.Inputs, tensor.Own(in.Name, shape, v))
		} else {
			tp.Inputs = append(tp.Inputs, tensor.Own(in.Name, shape, cols[i]))
		}
	}
	ip, err := a.inner.FromTensors(ctx, tp)
	if err != nil {
		return nil, fmt.Errorf("easytransfer: the SavedModel refused the tokenized batch: %w", err)
	}
	rs, err := a.inner.Run(ctx, []any{ip})
	if err != nil {
		return nil, err
	}
	tr, err := a.inner.ToTensors(ctx, ip, rs[0])
	if err != nil {
		return nil, err
	}
	out := make([]*Result, len(batch))
	lo := int64(0)
	for i, p := range batch {
		hi := lo + int64(p.n)
		r := &Result{}
		for _, t := range tr.Outputs {
			if len(t.Shape) == 0 || t.Shape[0] != int64(total) {
				return nil, fmt.Errorf("easytransfer: output %q has shape %v, not %d rows (one per text)", t.Name, t.Shape, total)
			}
			part, err := rows(t, lo, hi)
			if err != nil {
				return nil, err
			}
			r.outputs = append(r.outputs, part)
		}
		out[i] = r
		lo = hi
	}
	return out, nil
}
