package easynlp

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/encoder"
	"github.com/eas-server/eas-server/processors"
)

// Encode answers as EasyNLP's predictors' postprocess: one dict per record
// (a list for several; EasyNLP answers a list of one with its dict), keys
// in its order, the vectors in its string forms (numpy float32s joined by
// commas).
func (a *App) Encode(_ context.Context, p *Payload, r *Result) (*processors.Response, error) {
	var buf bytes.Buffer
	if p.list {
		buf.WriteByte('[')
	}
	for i, rw := range p.rows {
		if i > 0 {
			buf.WriteString(", ")
		}
		a.answer(&buf, rw, r.rows[i])
	}
	if p.list {
		buf.WriteByte(']')
	}
	return &processors.Response{Body: buf.Bytes(), ContentType: "application/json"}, nil
}

// obj writes a JSON object with its keys in order.
type obj struct {
	b *bytes.Buffer
	n int
}

func (o *obj) key(k string) *bytes.Buffer {
	if o.n == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteString(", ")
	}
	o.n++
	kb, _ := json.Marshal(k)
	o.b.Write(kb)
	o.b.WriteString(": ")
	return o.b
}

func (o *obj) str(k, v string) {
	vb, _ := json.Marshal(v)
	o.key(k).Write(vb)
}

func (o *obj) raw(k string, v []byte) { o.key(k).Write(v) }

func (o *obj) end() {
	if o.n == 0 {
		o.b.WriteByte('{')
	}
	o.b.WriteByte('}')
}

func (a *App) answer(buf *bytes.Buffer, rw row, outs [][]float32) {
	o := &obj{b: buf}
	switch a.head {
	case encoder.Classify, encoder.Multi:
		logits, probs := outs[0], outs[1]
		order := make([]int, len(probs))
		for i := range order {
			order[i] = i
		}
		// numpy's argsort(-probs): the largest first.
		sort.SliceStable(order, func(i, j int) bool { return probs[order[i]] > probs[order[j]] })
		o.raw("id", rw.id)
		b := o.key("output")
		b.WriteByte('[')
		for n, c := range order {
			if n > 0 {
				b.WriteString(", ")
			}
			e := &obj{b: b}
			e.str("pred", a.labels[c])
			e.raw("prob", jsonFloat(float64(probs[c])))
			e.raw("logit", jsonFloat(float64(logits[c])))
			e.end()
		}
		b.WriteByte(']')
		if a.head == encoder.Multi {
			var on []string
			for _, c := range order {
				if float64(probs[c]) > a.threshold {
					on = append(on, a.labels[c])
				}
			}
			o.str("predictions", strings.Join(on, ","))
		} else {
			o.str("predictions", a.labels[order[0]])
		}
		o.str("probabilities", joinF32(probs))
		o.str("logits", joinF32(logits))
	case encoder.TwoTower:
		o.str("emb_output", joinF32(outs[0]))
	case encoder.Vector:
		H := a.model.HiddenSize
		seq := outs[1]
		o.raw("id", rw.id)
		o.str("pooler_output", joinF32(outs[0]))
		o.str("first_token_output", joinF32(seq[:H]))
		var rowsS []string
		for j := 1; j < rw.padTo; j++ {
			rowsS = append(rowsS, joinF32(seq[j*H:(j+1)*H]))
		}
		o.str("all_hidden_outputs", strings.Join(rowsS, ";"))
	case encoder.TokenLabels:
		C := len(a.labels)
		logits := outs[0]
		tags := make([]string, rw.padTo)
		for j := range tags {
			best := 0
			for c := 1; c < C; c++ {
				if logits[j*C+c] > logits[j*C+best] {
					best = c
				}
			}
			tags[j] = a.labels[best]
		}
		o.raw("id", rw.id)
		b := o.key("output")
		b.WriteByte('[')
		for n, w := range entities(tags, rw.tokens) {
			if n > 0 {
				b.WriteString(", ")
			}
			e := &obj{b: b}
			e.str("word", w.word)
			e.str("tag", w.tag)
			e.raw("start", strconv.AppendInt(nil, int64(w.start), 10))
			e.raw("end", strconv.AppendInt(nil, int64(w.end), 10))
			e.end()
		}
		b.WriteByte(']')
		o.str("predictions", strings.Join(tags, " "))
	}
	o.end()
}

type entity struct {
	word, tag  string
	start, end int
}

// entities is EasyNLP's post_process_one_pred: a B-X tag (not on [CLS] or
// [SEP]) starts an entity that runs over the I-X tags after it.
func entities(tags, tokens []string) []entity {
	var out []entity
	for i := 0; i < len(tokens); {
		if strings.HasPrefix(tags[i], "B") && tokens[i] != "[CLS]" && tokens[i] != "[SEP]" {
			parts := strings.Split(tags[i], "-")
			typ := parts[len(parts)-1]
			st := i
			i++
			for i < len(tokens) && tags[i] == "I-"+typ && tokens[i] != "[SEP]" {
				i++
			}
			out = append(out, entity{strings.Join(tokens[st:i], ""), typ, st - 1, i - 1})
			continue
		}
		i++
	}
	return out
}

// joinF32 is ",".join(str(t) for t in row) of a numpy float32 row.
func joinF32(v []float32) string {
	b := make([]byte, 0, len(v)*12)
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendNumpy32(b, x)
	}
	return string(b)
}

// appendNumpy32 writes str(numpy.float32(x)): the shortest digits that
// read back as the float32, positional for 1e-4 <= |x| < 1e16 (with ".0"
// when whole), else d.ddde±XX.
func appendNumpy32(b []byte, x float32) []byte {
	f := float64(x)
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	a := math.Abs(f)
	sci := a != 0 && (a < 1e-4 || a >= 1e16)
	return appendPy(b, f, 32, sci)
}

// jsonFloat is float(numpy.float32) as Python's json.dumps writes it:
// repr of the float64.
func jsonFloat(f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null") // JSON has no NaN; Python would write NaN
	}
	e := exponent(f)
	return appendPy(nil, f, 64, f != 0 && (e < -4 || e >= 16))
}

// exponent is the decimal exponent of f's shortest digits.
func exponent(f float64) int {
	s := strconv.FormatFloat(f, 'e', -1, 64)
	i := strings.IndexByte(s, 'e')
	n, _ := strconv.Atoi(s[i+1:])
	return n
}

// appendPy writes f's shortest digits (for a float of bits) Python's way.
func appendPy(b []byte, f float64, bits int, sci bool) []byte {
	if sci {
		s := strconv.FormatFloat(f, 'e', -1, bits) // d.ddde±XX, at least 2 exponent digits
		return append(b, s...)
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	b = append(b, s...)
	if !strings.ContainsAny(s, ".") {
		b = append(b, ".0"...)
	}
	return b
}
