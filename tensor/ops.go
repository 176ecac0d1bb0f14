package tensor

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Clone returns a deep copy of t.
func (t Tensor) Clone() Tensor {
	c := Tensor{Name: t.Name, DType: t.DType, Shape: cloneShape(t.Shape)}
	if t.Data != nil {
		c.Data = bytes.Clone(t.Data)
	}
	if t.Strings != nil {
		c.Strings = make([][]byte, len(t.Strings))
		for i, s := range t.Strings {
			c.Strings[i] = bytes.Clone(s)
		}
	}
	return c
}

// rowElems is the element count of one row along axis 0 (product of the
// trailing dims). The caller has validated the tensor.
func rowElems(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape[1:] {
		n *= d
	}
	return n
}

// Concat joins tensors along axis 0: the batching primitive. All must share
// name, dtype, rank (>= 1) and the dims after the first; the result has the
// summed first dim and the first tensor's name. Data is always copied, so the
// result never aliases an input. One tensor is returned as is.
func Concat(ts []Tensor) (Tensor, error) {
	if len(ts) == 0 {
		return Tensor{}, fmt.Errorf("concat: no tensors")
	}
	first := ts[0]
	if err := first.Validate(); err != nil {
		return Tensor{}, fmt.Errorf("concat: %w", err)
	}
	if len(first.Shape) == 0 {
		return Tensor{}, fmt.Errorf("concat: tensor %q is a scalar; only tensors of rank >= 1 concatenate along axis 0", first.Name)
	}
	if len(ts) == 1 {
		return first, nil
	}
	rows := int64(0)
	for i := range ts {
		t := &ts[i]
		if i > 0 {
			if err := t.Validate(); err != nil {
				return Tensor{}, fmt.Errorf("concat: %w", err)
			}
		}
		if t.Name != first.Name || t.DType != first.DType || len(t.Shape) != len(first.Shape) || !slices.Equal(t.Shape[1:], first.Shape[1:]) {
			return Tensor{}, fmt.Errorf("concat: tensor %d (%q %s %s) does not match tensor 0 (%q %s %s) after the first dim",
				i, t.Name, t.DType, FormatShape(t.Shape), first.Name, first.DType, FormatShape(first.Shape))
		}
		rows += t.Shape[0]
	}
	shape := cloneShape(first.Shape)
	shape[0] = rows
	if _, err := Elements(shape); err != nil {
		return Tensor{}, fmt.Errorf("concat: %w", err)
	}
	out := Tensor{Name: first.Name, DType: first.DType, Shape: shape}
	if first.DType == String {
		out.Strings = make([][]byte, 0, rows*rowElems(shape))
		for _, t := range ts {
			out.Strings = append(out.Strings, t.Strings...)
		}
		return out, nil
	}
	total := 0
	for _, t := range ts {
		total += len(t.Data)
	}
	out.Data = make([]byte, 0, total)
	for _, t := range ts {
		out.Data = append(out.Data, t.Data...)
	}
	return out, nil
}

// Split cuts t along axis 0 into pieces of the given row counts, which must
// sum to t's first dim: the inverse of Concat. The pieces alias t's data
// (capacity-limited so an append cannot spill into a neighbour); like every
// tensor they are read-only.
func Split(t Tensor, sizes []int64) ([]Tensor, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	if len(t.Shape) == 0 {
		return nil, fmt.Errorf("split: tensor %q is a scalar; only tensors of rank >= 1 split along axis 0", t.Name)
	}
	var sum int64
	for i, s := range sizes {
		if s < 0 {
			return nil, fmt.Errorf("split: tensor %q: size %d is %d; sizes must be >= 0", t.Name, i, s)
		}
		if sum <= t.Shape[0] {
			sum += s // stop growing once over, so a long list cannot overflow
		}
	}
	if sum != t.Shape[0] {
		return nil, fmt.Errorf("split: tensor %q: sizes %v do not sum to the first dim %d (shape %s); does the model keep the batch dimension first?",
			t.Name, sizes, t.Shape[0], FormatShape(t.Shape))
	}
	row := rowElems(t.Shape)
	out := make([]Tensor, len(sizes))
	var at int64
	for i, s := range sizes {
		shape := cloneShape(t.Shape)
		shape[0] = s
		p := Tensor{Name: t.Name, DType: t.DType, Shape: shape}
		lo, hi := at*row, (at+s)*row
		if t.DType == String {
			p.Strings = t.Strings[lo:hi:hi]
		} else {
			size := int64(t.DType.Size())
			p.Data = t.Data[lo*size : hi*size : hi*size]
		}
		out[i] = p
		at += s
	}
	return out, nil
}

// Pad right-pads every dim of t up to shape (same rank, each target dim >= the
// current one), filling new elements with padValue converted to t's dtype
// (see PutFloat64); BYTES tensors pad with empty strings. Used by the pad and
// bucket batchers to bring variable-length inputs to one shape. When shape
// equals t's shape, t is returned as is.
func Pad(t Tensor, shape []int64, padValue float64) (Tensor, error) {
	if err := t.Validate(); err != nil {
		return Tensor{}, fmt.Errorf("pad: %w", err)
	}
	if len(shape) != len(t.Shape) {
		return Tensor{}, fmt.Errorf("pad: tensor %q has rank %d (shape %s) but the target %s has rank %d",
			t.Name, len(t.Shape), FormatShape(t.Shape), FormatShape(shape), len(shape))
	}
	for i := range shape {
		if shape[i] < t.Shape[i] {
			return Tensor{}, fmt.Errorf("pad: tensor %q: target %s is smaller than shape %s in dim %d; padding only grows dims",
				t.Name, FormatShape(shape), FormatShape(t.Shape), i)
		}
	}
	if slices.Equal(shape, t.Shape) {
		return t, nil
	}
	n, err := Elements(shape)
	if err != nil {
		return Tensor{}, fmt.Errorf("pad: tensor %q: %w", t.Name, err)
	}
	out := Tensor{Name: t.Name, DType: t.DType, Shape: cloneShape(shape)}
	if t.DType == String {
		out.Strings = make([][]byte, n)
		for i := range out.Strings {
			out.Strings[i] = []byte{}
		}
	} else {
		size := t.DType.Size()
		out.Data = make([]byte, n*int64(size))
		if padValue != 0 {
			elem := make([]byte, size)
			PutFloat64(t.DType, elem, padValue)
			for off := 0; off < len(out.Data); off += size {
				copy(out.Data[off:], elem)
			}
		}
	}
	copyCorner(&out, &t, t.Shape)
	return out, nil
}

// copyCorner copies the leading box (a shape no larger than either tensor's,
// same rank) from src into dst, one innermost row at a time. Pad uses it with
// box = src's shape, Slice with box = dst's shape.
func copyCorner(dst, src *Tensor, box []int64) {
	if n, _ := Elements(box); n == 0 {
		return
	}
	rank := len(box)
	if rank == 0 {
		if src.DType == String {
			dst.Strings[0] = src.Strings[0]
		} else {
			copy(dst.Data, src.Data)
		}
		return
	}
	inner := box[rank-1]
	dstStride := make([]int64, rank)
	srcStride := make([]int64, rank)
	ds, ss := int64(1), int64(1)
	for i := rank - 1; i >= 0; i-- {
		dstStride[i], srcStride[i] = ds, ss
		ds *= dst.Shape[i]
		ss *= src.Shape[i]
	}
	idx := make([]int64, rank) // counter over the outer dims; idx[rank-1] stays 0
	size := int64(src.DType.Size())
	for {
		var so, do int64
		for i := 0; i < rank-1; i++ {
			so += idx[i] * srcStride[i]
			do += idx[i] * dstStride[i]
		}
		if src.DType == String {
			copy(dst.Strings[do:do+inner], src.Strings[so:so+inner])
		} else {
			copy(dst.Data[do*size:(do+inner)*size], src.Data[so*size:(so+inner)*size])
		}
		i := rank - 2
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < box[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

// Slice keeps the leading n entries of axis, t[..., :n, ...]: the unpadding
// of an output whose length follows a padded input. The result is a copy
// unless axis is 0 (then it aliases t's data) or n equals the dim.
func Slice(t Tensor, axis int, n int64) (Tensor, error) {
	if err := t.Validate(); err != nil {
		return Tensor{}, fmt.Errorf("slice: %w", err)
	}
	if axis < 0 || axis >= len(t.Shape) {
		return Tensor{}, fmt.Errorf("slice: tensor %q has rank %d (shape %s); axis %d is out of range", t.Name, len(t.Shape), FormatShape(t.Shape), axis)
	}
	if n < 0 || n > t.Shape[axis] {
		return Tensor{}, fmt.Errorf("slice: tensor %q: cannot keep %d entries of axis %d, which has %d (shape %s)", t.Name, n, axis, t.Shape[axis], FormatShape(t.Shape))
	}
	if n == t.Shape[axis] {
		return t, nil
	}
	if axis == 0 {
		parts, err := Split(t, []int64{n, t.Shape[0] - n})
		if err != nil {
			return Tensor{}, err
		}
		return parts[0], nil
	}
	shape := cloneShape(t.Shape)
	shape[axis] = n
	total, _ := Elements(shape)
	out := Tensor{Name: t.Name, DType: t.DType, Shape: shape}
	if t.DType == String {
		out.Strings = make([][]byte, total)
	} else {
		out.Data = make([]byte, total*int64(t.DType.Size()))
	}
	copyCorner(&out, &t, shape)
	return out, nil
}

// TrailingKey is a key for "may these requests' inputs join one batch": the
// name, dtype and dims after the first of every tensor, in order. Two payloads
// with equal keys can be concatenated input by input. Scalars are keyed with
// their full (empty) shape and never concatenate; see BatchSize.
func TrailingKey(ts []Tensor) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.Quote(t.Name))
		b.WriteByte(':')
		b.WriteString(t.DType.String())
		if len(t.Shape) == 0 {
			b.WriteString(":scalar")
			continue
		}
		b.WriteByte(':')
		b.WriteString(FormatShape(t.Shape[1:]))
	}
	return b.String()
}

// BatchSize returns the first dim shared by all ts: the number of rows a
// payload adds to a batch. It fails when there are no tensors, one is a
// scalar, or their first dims differ (such a payload must run alone).
func BatchSize(ts []Tensor) (int64, error) {
	if len(ts) == 0 {
		return 0, fmt.Errorf("no tensors")
	}
	var n int64
	for i, t := range ts {
		if len(t.Shape) == 0 {
			return 0, fmt.Errorf("tensor %q is a scalar and has no batch dimension", t.Name)
		}
		if i == 0 {
			n = t.Shape[0]
		} else if t.Shape[0] != n {
			return 0, fmt.Errorf("tensor %q has first dim %d but tensor %q has %d; inputs of one request must share the batch dimension",
				t.Name, t.Shape[0], ts[0].Name, n)
		}
	}
	return n, nil
}

// Equal reports whether a and b have the same name, dtype, shape and
// element bytes. A nil and an empty Data (or Strings) are equal.
func Equal(a, b Tensor) bool {
	if a.Name != b.Name || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
		return false
	}
	if len(a.Strings) != len(b.Strings) {
		return false
	}
	for i := range a.Strings {
		if !bytes.Equal(a.Strings[i], b.Strings[i]) {
			return false
		}
	}
	return true
}

// unravel turns a flat row-major index into per-dim indexes.
func unravel(i int, shape []int64) []int64 {
	idx := make([]int64, len(shape))
	r := int64(i)
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = r % shape[d]
			r /= shape[d]
		}
	}
	return idx
}

// RankKey is the key for pad batching: the name, dtype and rank of every
// tensor, in order. Payloads with equal RankKeys can be brought to one shape
// by PadToCommon and then concatenated, whatever their dims.
func RankKey(ts []Tensor) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.Quote(t.Name))
		b.WriteByte(':')
		b.WriteString(t.DType.String())
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(t.Shape)))
	}
	return b.String()
}

// PadToCommon right-pads the dims after the first of every tensor in ts to
// their maximum over ts, so the results concatenate along axis 0. All must
// share name, dtype and rank (>= 1). Tensors already at the common shape are
// returned as is. It returns the common trailing dims too, which the caller
// needs to unpad outputs with Slice.
func PadToCommon(ts []Tensor, padValue float64) ([]Tensor, []int64, error) {
	if len(ts) == 0 {
		return nil, nil, fmt.Errorf("pad: no tensors")
	}
	first := ts[0]
	if len(first.Shape) == 0 {
		return nil, nil, fmt.Errorf("pad: tensor %q is a scalar and has no batch dimension", first.Name)
	}
	common := cloneShape(first.Shape[1:])
	for i, t := range ts[1:] {
		if t.Name != first.Name || t.DType != first.DType || len(t.Shape) != len(first.Shape) {
			return nil, nil, fmt.Errorf("pad: tensor %d (%q %s %s) does not match tensor 0 (%q %s %s) in name, dtype or rank",
				i+1, t.Name, t.DType, FormatShape(t.Shape), first.Name, first.DType, FormatShape(first.Shape))
		}
		for j, d := range t.Shape[1:] {
			common[j] = max(common[j], d)
		}
	}
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		target := append([]int64{t.Shape[0]}, common...)
		p, err := Pad(t, target, padValue)
		if err != nil {
			return nil, nil, err
		}
		out[i] = p
	}
	return out, common, nil
}
