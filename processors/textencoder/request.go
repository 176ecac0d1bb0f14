package textencoder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/eas-server/eas-server/processors"
)

// maxTexts bounds the texts of one request.
const maxTexts = 4096

var errNotLoaded = errors.New("text_encoder model is not loaded")

// form is how the request named its texts, which decides the answer's
// shape.
type form int

const (
	formText   form = iota // {"text": "..."}: one answer object
	formTexts              // {"texts": [...]}: a list of them
	formInput              // {"input": "..." | [...]}: OpenAI's embeddings list
	formInputs             // {"input": [...]} for a classifier: a list
)

// Payload is one request, tokenized on the caller's goroutine.
type Payload struct {
	form form
	rows []row
}

// row is one text's unpadded model input.
type row struct {
	ids, types []int32
}

// Result is one payload's answers, per row: a pooled embedding, a token
// embedding per real token (pooling none, dim wide), or the scores.
type Result struct {
	rows [][]float32
	dim  int
}

// send says what a request looks like.
const send = `send {"text": "..."}, {"texts": ["...", ...]} or {"input": "..." | ["...", ...]}`

// otherKeys are keys OpenAI's embeddings clients send beside input, read
// and ignored (encoding_format must be float).
var otherKeys = []string{"model", "user", "encoding_format"}

// Decode parses the request and tokenizes its texts.
func (m *Model) Decode(_ context.Context, req *processors.Request) (*Payload, error) {
	if m.tok == nil && m.bert == nil {
		return nil, errNotLoaded
	}
	texts, f, err := parseRequest(req.Body)
	if err != nil {
		return nil, err
	}
	if f == formInput && m.task == TaskClassification {
		f = formInputs
	}
	p := &Payload{form: f, rows: make([]row, len(texts))}
	for i, s := range texts {
		if err := m.encode(&p.rows[i], s); err != nil {
			if f == formText || len(texts) == 1 && f == formInput {
				return nil, processors.BadInputf("%v", err)
			}
			return nil, processors.BadInputf("text %d: %v", i, err)
		}
	}
	return p, nil
}

// parseRequest reads the body's texts and their form.
func parseRequest(body []byte) ([]string, form, error) {
	body = bytes.TrimSpace(body)
	var obj map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &obj) != nil {
		return nil, 0, processors.BadInputf("the body must be a JSON object: %s", send)
	}
	var keys []string
	for k := range obj {
		switch {
		case k == "text" || k == "texts" || k == "input":
			keys = append(keys, k)
		case slices.Contains(otherKeys, k):
		default:
			return nil, 0, processors.BadInputf("unknown key %q: %s", k, send)
		}
	}
	if len(keys) != 1 {
		return nil, 0, processors.BadInputf("the request must have exactly one of \"text\", \"texts\" and \"input\" (it has %d): %s", len(keys), send)
	}
	if raw, ok := obj["encoding_format"]; ok {
		var ef string
		if json.Unmarshal(raw, &ef) != nil || ef != "float" {
			return nil, 0, processors.BadInputf("encoding_format %s is not served: only \"float\" (omit it for float)", raw)
		}
	}
	raw := bytes.TrimSpace(obj[keys[0]])
	var one string
	var many []string
	isList := len(raw) > 0 && raw[0] == '['
	if isList {
		if err := json.Unmarshal(raw, &many); err != nil {
			return nil, 0, processors.BadInputf("%q must be a list of strings (token id lists are not read: send the text): %s", keys[0], send)
		}
	} else if err := json.Unmarshal(raw, &one); err != nil || raw[0] != '"' {
		return nil, 0, processors.BadInputf("%q must be a string%s: %s", keys[0], map[bool]string{true: " or a list of strings", false: ""}[keys[0] == "input"], send)
	}
	switch {
	case keys[0] == "text" && isList:
		return nil, 0, processors.BadInputf("\"text\" must be a string; a list goes in \"texts\": %s", send)
	case keys[0] == "texts" && !isList:
		return nil, 0, processors.BadInputf("\"texts\" must be a list of strings; one string goes in \"text\": %s", send)
	case isList && len(many) == 0:
		return nil, 0, processors.BadInputf("%q is an empty list: %s", keys[0], send)
	case len(many) > maxTexts:
		return nil, 0, processors.BadInputf("%q has %d texts, over the %d one request may carry", keys[0], len(many), maxTexts)
	}
	switch keys[0] {
	case "text":
		return []string{one}, formText, nil
	case "texts":
		return many, formTexts, nil
	}
	if !isList {
		many = []string{one}
	}
	return many, formInput, nil
}

// encode tokenizes one text, its special tokens added, cut to max_length
// (or refused over it when truncation is off).
func (m *Model) encode(r *row, s string) error {
	if m.tok != nil {
		e, err := m.tok.Encode(s, true)
		if err != nil {
			return fmt.Errorf("tokenizing: %v", err)
		}
		if e.Len() > m.maxLen {
			return fmt.Errorf("the text is %d tokens, over max_length %d (model_config.truncation is false): send a shorter text", e.Len(), m.maxLen)
		}
		r.ids, r.types = e.IDs, e.TypeIDs
		return nil
	}
	pieces := m.bert.TokenizeIDs(s)
	if !m.truncate && len(pieces)+2 > m.maxLen {
		return fmt.Errorf("the text is %d tokens, over max_length %d (model_config.truncation is false): send a shorter text", len(pieces)+2, m.maxLen)
	}
	e, err := m.bert.EncodePair(pieces, nil, false, m.maxLen, false)
	if err != nil {
		return err
	}
	r.ids, r.types = e.IDs, e.TypeIDs
	return nil
}

// longest is the positions a payload's rows need.
func (p *Payload) longest() int {
	n := 0
	for _, r := range p.rows {
		n = max(n, len(r.ids))
	}
	return n
}

// tokens is the payload's token count (OpenAI's usage).
func (p *Payload) tokens() int {
	n := 0
	for _, r := range p.rows {
		n += len(r.ids)
	}
	return n
}
