package textencoder

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"

	"github.com/eas-server/eas-server/processors"
)

// Encode writes the answer: per text {"embedding": [...]} or
// {"label", "score"} (a list of top_k of them when top_k > 1); a list for
// "texts"; OpenAI's embeddings object for "input".
func (m *Model) Encode(_ context.Context, p *Payload, r *Result) (*processors.Response, error) {
	var b bytes.Buffer
	switch p.form {
	case formText:
		m.answer(&b, r.rows[0], r.dim)
	case formTexts, formInputs:
		b.WriteByte('[')
		for i, v := range r.rows {
			if i > 0 {
				b.WriteByte(',')
			}
			m.answer(&b, v, r.dim)
		}
		b.WriteByte(']')
	case formInput:
		b.WriteString(`{"object":"list","data":[`)
		for i, v := range r.rows {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"object":"embedding","index":`)
			b.WriteString(strconv.Itoa(i))
			b.WriteString(`,"embedding":`)
			m.vector(&b, v, r.dim)
			b.WriteByte('}')
		}
		b.WriteString(`],"model":`)
		name, _ := json.Marshal(m.spec.Service)
		b.Write(name)
		n := strconv.Itoa(p.tokens())
		b.WriteString(`,"usage":{"prompt_tokens":` + n + `,"total_tokens":` + n + `}}`)
	}
	return &processors.Response{Body: b.Bytes(), ContentType: "application/json"}, nil
}

func (m *Model) answer(b *bytes.Buffer, v []float32, dim int) {
	if m.task == TaskEmbedding {
		b.WriteString(`{"embedding":`)
		m.vector(b, v, dim)
		b.WriteByte('}')
		return
	}
	order := make([]int, len(v))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return v[order[i]] > v[order[j]] })
	k := min(m.topK, len(order))
	if m.topK > 1 {
		b.WriteByte('[')
	}
	for n, i := range order[:k] {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"label":`)
		lb, _ := json.Marshal(m.label(i))
		b.Write(lb)
		b.WriteString(`,"score":`)
		writeFloat(b, v[i])
		b.WriteByte('}')
	}
	if m.topK > 1 {
		b.WriteByte(']')
	}
}

// label is class i's name: config.json's id2label, else LABEL_i as
// transformers names them.
func (m *Model) label(i int) string {
	if i < len(m.labels) {
		return m.labels[i]
	}
	return "LABEL_" + strconv.Itoa(i)
}

// vector writes a pooled vector, or (pooling none) a list of token
// vectors dim wide.
func (m *Model) vector(b *bytes.Buffer, v []float32, dim int) {
	if m.pooling == "none" && dim > 0 {
		b.WriteByte('[')
		for t := 0; t*dim < len(v); t++ {
			if t > 0 {
				b.WriteByte(',')
			}
			floats(b, v[t*dim:(t+1)*dim])
		}
		b.WriteByte(']')
		return
	}
	floats(b, v)
}

func floats(b *bytes.Buffer, v []float32) {
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		writeFloat(b, x)
	}
	b.WriteByte(']')
}

// writeFloat writes x as the shortest decimal that reads back as the same
// float32 (a NaN or infinity, which JSON has no form for, as null).
func writeFloat(b *bytes.Buffer, x float32) {
	f := float64(x)
	if f != f || f > 3.5e38 || f < -3.5e38 {
		b.WriteString("null")
		return
	}
	b.Write(strconv.AppendFloat(b.AvailableBuffer(), f, 'g', -1, 32))
}
