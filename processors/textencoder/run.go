package textencoder

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
)

// BatchKey lets requests share a run: every row is padded to the batch's
// longest, which changes no answer (the attention mask keeps padding out
// of attention, and pooling reads a row's real tokens only). With the
// bucket batcher (metadata.rpc.batcher "bucket"), requests share a run
// only within one bucket of metadata.rpc.buckets.
func (m *Model) BatchKey(p *Payload) (string, bool) {
	if m.spec.Batcher != "bucket" || len(m.spec.Buckets) == 0 {
		return Code, true
	}
	n := p.longest()
	for _, b := range m.spec.Buckets {
		if n <= b {
			return "bucket-" + strconv.Itoa(b), true
		}
	}
	return "bucket-over", true
}

// Run feeds the batch's rows to the model in runs of similar length: the
// rows sorted by length are cut into groups whose padding stays within
// maxPadWaste of their real tokens, each group one run padded to its
// longest (padding changes no answer; on a CPU it costs as much as real
// tokens, so one run padded to the longest of very different texts can be
// slower than running them alone). Then each row is pooled or scored.
func (m *Model) Run(ctx context.Context, batch []*Payload) ([]*Result, error) {
	if m.rt == nil {
		return nil, errNotLoaded
	}
	type ref struct{ p, r int }
	var refs []ref
	for i, p := range batch {
		for j := range p.rows {
			refs = append(refs, ref{i, j})
		}
	}
	rowOf := func(x ref) row { return batch[x.p].rows[x.r] }
	sort.SliceStable(refs, func(i, j int) bool { return len(rowOf(refs[i]).ids) < len(rowOf(refs[j]).ids) })
	res := make([]*Result, len(batch))
	for i, p := range batch {
		res[i] = &Result{rows: make([][]float32, len(p.rows))}
	}
	for start := 0; start < len(refs); {
		end, real := start, 0
		for end < len(refs) {
			n := len(rowOf(refs[end]).ids)
			if end > start && float64((end-start+1)*n) > (1+maxPadWaste)*float64(real+n) {
				break
			}
			real += n
			end++
		}
		rows := make([]row, end-start)
		for k := range rows {
			rows[k] = rowOf(refs[start+k])
		}
		out, dim, err := m.forward(ctx, rows)
		if err != nil {
			return nil, err
		}
		for k, v := range out {
			x := refs[start+k]
			res[x.p].rows[x.r] = v
			res[x.p].dim = dim
		}
		start = end
	}
	return res, nil
}

// maxPadWaste is how much padding a run may carry beyond its real
// tokens before its rows are split into runs of their own lengths.
const maxPadWaste = 0.25

// forward runs rows as one run padded to the longest of them and pools or
// scores each; dim is the width of a token embedding (pooling none).
func (m *Model) forward(ctx context.Context, rows []row) ([][]float32, int, error) {
	total, L := len(rows), 0
	for _, r := range rows {
		L = max(L, len(r.ids))
	}
	ids := make([]int64, total*L)
	mask := make([]int64, total*L)
	types := make([]int64, total*L)
	for k, r := range rows {
		off := k * L
		for j := 0; j < L; j++ {
			if j < len(r.ids) {
				ids[off+j], mask[off+j], types[off+j] = int64(r.ids[j]), 1, int64(r.types[j])
			} else {
				ids[off+j] = int64(m.padID)
			}
		}
	}
	shape := []int64{int64(total), int64(L)}
	mk := func(name string, v []int64) tensor.Tensor {
		if m.intInputs {
			w := make([]int32, len(v))
			for i, x := range v {
				w[i] = int32(x)
			}
			return tensor.Own(name, shape, w)
		}
		return tensor.Own(name, shape, v)
	}
	tp := &processors.TensorPayload{Inputs: []tensor.Tensor{mk(m.ids, ids)}}
	if m.mask != "" {
		tp.Inputs = append(tp.Inputs, mk(m.mask, mask))
	}
	if m.types != "" {
		tp.Inputs = append(tp.Inputs, mk(m.types, types))
	}
	ip, err := m.rt.FromTensors(ctx, tp)
	if err != nil {
		return nil, 0, fmt.Errorf("text_encoder: the model refused the tokenized batch: %w", err)
	}
	rs, err := m.rt.Run(ctx, []*onnx.Payload{ip})
	if err != nil {
		return nil, 0, err
	}
	var out *tensor.Tensor
	for i := range rs[0].Outputs {
		if rs[0].Outputs[i].Name == m.output {
			out = &rs[0].Outputs[i]
		}
	}
	if out == nil {
		return nil, 0, fmt.Errorf("text_encoder: the model gave no output %q", m.output)
	}
	vals, err := out.AsFloat32()
	if err != nil {
		return nil, 0, fmt.Errorf("text_encoder: output %q: %v", m.output, err)
	}
	sh := out.Shape
	switch {
	case len(sh) == 3 && sh[0] == int64(total) && sh[1] == int64(L):
		if m.task == TaskClassification {
			return nil, 0, fmt.Errorf("text_encoder: the classification output %q has shape %v, not [batch, labels]", m.output, sh)
		}
	case len(sh) == 2 && sh[0] == int64(total):
		if m.task == TaskEmbedding && m.pooling != "none" {
			return nil, 0, fmt.Errorf("text_encoder: the output %q has shape %v (one vector per text): model_config.pooling must be none", m.output, sh)
		}
	default:
		return nil, 0, fmt.Errorf("text_encoder: the output %q has shape %v, not [%d, %d, hidden] or [%d, width]", m.output, sh, total, L, total)
	}
	res := make([][]float32, total)
	dim := 0
	for k, rw := range rows {
		if len(sh) == 3 {
			H := int(sh[2])
			dim = H
			res[k] = m.pool(vals[k*L*H:(k+1)*L*H], len(rw.ids), H)
		} else {
			w := int(sh[1])
			v := append([]float32(nil), vals[k*w:(k+1)*w]...)
			if m.task == TaskClassification {
				apply(m.fn, v)
			} else if m.normalize {
				l2(v)
			}
			res[k] = v
		}
	}
	return res, dim, nil
}

// pool reduces one row's [L, H] hidden states over its n real tokens as
// sentence-transformers' Pooling does, then normalizes; pooling none
// keeps the n token vectors (each normalized when asked).
func (m *Model) pool(h []float32, n, H int) []float32 {
	switch m.pooling {
	case "cls":
		v := append([]float32(nil), h[:H]...)
		if m.normalize {
			l2(v)
		}
		return v
	case "none":
		v := append([]float32(nil), h[:n*H]...)
		if m.normalize {
			for t := 0; t < n; t++ {
				l2(v[t*H : (t+1)*H])
			}
		}
		return v
	}
	acc := make([]float64, H)
	if m.pooling == "max" {
		for d := range acc {
			acc[d] = math.Inf(-1)
		}
	}
	for t := 0; t < n; t++ {
		row := h[t*H : (t+1)*H]
		for d, x := range row {
			if m.pooling == "max" {
				acc[d] = max(acc[d], float64(x))
			} else {
				acc[d] += float64(x)
			}
		}
	}
	v := make([]float32, H)
	for d, x := range acc {
		if m.pooling == "mean" {
			x /= math.Max(float64(n), 1e-9)
		}
		v[d] = float32(x)
	}
	if m.normalize {
		l2(v)
	}
	return v
}

// l2 divides v by its norm (at least 1e-12, torch's F.normalize).
func l2(v []float32) {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	nrm := math.Max(math.Sqrt(s), 1e-12)
	for i := range v {
		v[i] = float32(float64(v[i]) / nrm)
	}
}

// apply is Hugging Face's pipelines' function_to_apply on one row of
// logits.
func apply(fn string, v []float32) {
	switch fn {
	case "sigmoid":
		for i, x := range v {
			v[i] = float32(1 / (1 + math.Exp(-float64(x))))
		}
	case "softmax":
		mx := math.Inf(-1)
		for _, x := range v {
			mx = max(mx, float64(x))
		}
		s := 0.0
		e := make([]float64, len(v))
		for i, x := range v {
			e[i] = math.Exp(float64(x) - mx)
			s += e[i]
		}
		for i := range v {
			v[i] = float32(e[i] / s)
		}
	}
}
