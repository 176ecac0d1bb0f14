package easynlp

import (
	"context"
	"fmt"
	"strconv"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
)

// longest is the positions a payload's rows need.
func (p *Payload) longest() int {
	n := 0
	for _, r := range p.rows {
		n = max(n, r.padTo, r.n)
	}
	return n
}

// BatchKey lets requests share a run: every row is padded to the batch's
// longest, which changes no answer (padding is masked out of attention,
// and a per-token answer keeps only its own positions). With the bucket
// batcher (metadata.rpc.batcher "bucket"), requests share a run only
// within one bucket of metadata.rpc.buckets, so a short text does not pay
// for a long one's padding.
func (a *App) BatchKey(p *Payload) (string, bool) {
	if a.spec.Batcher != "bucket" || len(a.spec.Buckets) == 0 {
		return "easynlp", true
	}
	n := p.longest()
	for _, b := range a.spec.Buckets {
		if n <= b {
			return "bucket-" + strconv.Itoa(b), true
		}
	}
	return "bucket-over", true
}

// Run feeds every row of the batch to the encoder at once, padded to the
// longest, and splits the outputs back per row.
func (a *App) Run(ctx context.Context, batch []*Payload) ([]*Result, error) {
	if a.rt == nil {
		return nil, errNotLoaded
	}
	total, L := 0, 0
	for _, p := range batch {
		total += len(p.rows)
		L = max(L, p.longest())
	}
	shape := []int64{int64(total), int64(L)}
	ids := make([]int64, total*L)
	mask := make([]int64, total*L)
	types := make([]int64, total*L)
	k := 0
	for _, p := range batch {
		for _, r := range p.rows {
			off := k * L
			for j := 0; j < L; j++ {
				if j < r.n {
					ids[off+j], mask[off+j], types[off+j] = int64(r.ids[j]), 1, int64(r.types[j])
				} else {
					ids[off+j] = int64(r.padID)
				}
			}
			k++
		}
	}
	tp := &processors.TensorPayload{Inputs: []tensor.Tensor{
		tensor.Own("input_ids", shape, ids),
		tensor.Own("attention_mask", shape, mask),
		tensor.Own("token_type_ids", shape, types),
	}}
	ip, err := a.rt.FromTensors(ctx, tp)
	if err != nil {
		return nil, fmt.Errorf("easynlp: the encoder refused the tokenized batch: %w", err)
	}
	rs, err := a.rt.Run(ctx, []*onnx.Payload{ip})
	if err != nil {
		return nil, err
	}
	outs := rs[0].Outputs
	vals := make([][]float32, len(outs))
	for i, t := range outs {
		if vals[i], err = t.AsFloat32(); err != nil {
			return nil, fmt.Errorf("easynlp: output %q: %v", t.Name, err)
		}
		if len(t.Shape) == 0 || t.Shape[0] != int64(total) {
			return nil, fmt.Errorf("easynlp: output %q has shape %v, not %d rows", t.Name, t.Shape, total)
		}
	}
	res := make([]*Result, len(batch))
	k = 0
	for i, p := range batch {
		r := &Result{rows: make([][][]float32, len(p.rows))}
		for j, rw := range p.rows {
			per := make([][]float32, len(outs))
			for o, t := range outs {
				v := vals[o]
				if len(t.Shape) == 3 {
					// [rows, L, X]: this row's first padTo positions.
					x := int(t.Shape[2])
					start := k * L * x
					per[o] = v[start : start+rw.padTo*x]
				} else {
					w := len(v) / total
					per[o] = v[k*w : (k+1)*w]
				}
			}
			r.rows[j] = per
			k++
		}
		res[i] = r
	}
	return res, nil
}
