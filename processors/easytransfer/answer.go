package easytransfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/internal/jsonenc"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

var errNotLoaded = errors.New("easytransfer app is not loaded")

// Encode answers one JSON object per text (a list for a list request):
// every output of the signature as numbers, "predictions" mapped through
// the labels as EasyTransfer's postprocessors map it.
func (a *App) Encode(_ context.Context, p *Payload, r *Result) (*processors.Response, error) {
	answers := make([]map[string]any, p.n)
	for i := range answers {
		answers[i] = map[string]any{}
	}
	for _, t := range r.outputs {
		vals, err := t.Float64s()
		if err != nil {
			return nil, fmt.Errorf("easytransfer: output %q: %v", t.Name, err)
		}
		per := len(vals) / max(p.n, 1)
		kind := numKind(t.DType)
		for i := range answers {
			row := vals[i*per : (i+1)*per]
			if t.Name == "predictions" && a.cfg.Type == SequenceLabeling {
				answers[i][t.Name] = a.wordTags(row, p.origin[i])
				continue
			}
			if t.Name == "predictions" && kind == 0 && len(a.labels) > 0 && a.cfg.Type != Vectorization {
				answers[i][t.Name] = a.labelOf(row, len(t.Shape) > 1)
				continue
			}
			answers[i][t.Name] = nest(row, t.Shape[1:], kind)
		}
	}
	if a.cfg.Type == SequenceLabeling {
		// The per-piece outputs are of the padded pieces, not the words:
		// the answer is the words' tags.
		for _, ans := range answers {
			for k := range ans {
				if k != "predictions" {
					delete(ans, k)
				}
			}
		}
	}
	var v any = answers[0]
	if p.list {
		v = answers
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: b, ContentType: "application/json"}, nil
}

// labelOf is a class id's label, or, for a multi-label model's row of 0s
// and 1s, the labels of the 1s joined by commas.
func (a *App) labelOf(row []float64, multi bool) any {
	if !multi {
		id := int(row[0])
		if id < 0 || id >= len(a.labels) {
			return id
		}
		return a.labels[id]
	}
	var on []string
	for i, v := range row {
		if v == 1 && i < len(a.labels) {
			on = append(on, a.labels[i])
		}
	}
	return strings.Join(on, ",")
}

// wordTags is EasyTransfer's LabelingPostprocessor: the tag of each word
// is its first piece's (an out-of-range tag, [CLS] or [SEP] becomes the last
// label), and words cut off by sequence_length get the last label.
func (a *App) wordTags(pred []float64, origin []int) string {
	last := len(a.labels) - 1
	var tags []string
	prev := -1
	words := 0
	for k := 0; k < len(pred) && k < len(origin); k++ {
		o := origin[k]
		if o == -1 || o == prev {
			continue
		}
		id := int(pred[k])
		if id < 0 || id > last {
			id = last
		}
		if l := a.labels[id]; l == "[CLS]" || l == "[SEP]" {
			id = last
		}
		tags = append(tags, a.labels[id])
		prev = o
	}
	for _, o := range origin {
		words = max(words, o+1)
	}
	for len(tags) < words {
		tags = append(tags, a.labels[last])
	}
	return strings.Join(tags, " ")
}

// nest shapes a row's values as nested JSON arrays of shape (a scalar for
// none).
func nest(v []float64, shape []int64, kind int) any {
	if len(shape) == 0 {
		return number{v[0], kind}
	}
	if len(shape) == 1 {
		out := make([]number, len(v))
		for i, x := range v {
			out[i] = number{x, kind}
		}
		return out
	}
	n := int(shape[0])
	out := make([]any, n)
	per := len(v) / max(n, 1)
	for i := range out {
		out[i] = nest(v[i*per:(i+1)*per], shape[1:], kind)
	}
	return out
}

// numKind is 0 for an integer dtype, else the float's bits (32 or 64): a
// float32 is written with the fewest digits that read back as it.
func numKind(d tensor.DType) int {
	switch d {
	case tensor.Float64:
		return 64
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
		return 32
	}
	return 0
}

// number is one output value in JSON; a non-finite float, which JSON
// cannot carry, is null.
type number struct {
	v    float64
	kind int
}

func (n number) MarshalJSON() ([]byte, error) {
	if n.kind == 0 {
		return strconv.AppendInt(nil, int64(n.v), 10), nil
	}
	return jsonenc.AppendFloat(nil, n.v, n.kind), nil
}
