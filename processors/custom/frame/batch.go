package frame

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eas-server/eas-server/tensor"
)

// A Batch frame's payload, and the body of its Answer when the status is
// 200, is a list of requests, each a list of tensors (big-endian integers):
//
//	u32 requests
//	per request:  u32 tensors
//	per tensor:   u16 name length, name
//	              u8 datatype length, datatype (KServe's name: FP32, INT64, ...)
//	              u8 rank, then rank i64 dimensions (each >= 0)
//	              u64 data length, data (row-major, little-endian elements)
//
// BYTES (string) tensors are not carried: a batch-inference model class
// takes numeric arrays.

// maxRank bounds a tensor's rank.
const maxRank = 32

// AppendBatch appends the encoding of reqs to dst. Every tensor must be
// numeric (not tensor.String) and hold exactly its shape's bytes.
func AppendBatch(dst []byte, reqs [][]tensor.Tensor) ([]byte, error) {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(reqs)))
	for _, ts := range reqs {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(ts)))
		for _, t := range ts {
			if t.DType == tensor.String || t.DType.Size() == 0 {
				return nil, fmt.Errorf("tensor %q: datatype %v is not carried to a batch-inference model (numeric tensors only)", t.Name, t.DType)
			}
			if len(t.Name) > 0xffff {
				return nil, fmt.Errorf("tensor name of %d bytes is too long", len(t.Name))
			}
			if len(t.Shape) > maxRank {
				return nil, fmt.Errorf("tensor %q: rank %d is above %d", t.Name, len(t.Shape), maxRank)
			}
			if int64(len(t.Data)) != t.NumElements()*int64(t.DType.Size()) {
				return nil, fmt.Errorf("tensor %q: %d bytes of data for shape %v of %v", t.Name, len(t.Data), t.Shape, t.DType)
			}
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(t.Name)))
			dst = append(dst, t.Name...)
			dt := t.DType.String()
			dst = append(dst, byte(len(dt)))
			dst = append(dst, dt...)
			dst = append(dst, byte(len(t.Shape)))
			for _, d := range t.Shape {
				dst = binary.BigEndian.AppendUint64(dst, uint64(d))
			}
			dst = binary.BigEndian.AppendUint64(dst, uint64(len(t.Data)))
			dst = append(dst, t.Data...)
		}
	}
	return dst, nil
}

var errShort = errors.New("frame: batch payload ends early")

// ParseBatch decodes what AppendBatch encodes. The tensors' data alias p.
func ParseBatch(p []byte) ([][]tensor.Tensor, error) {
	r := reader{b: p}
	n, ok := r.u32()
	if !ok {
		return nil, errShort
	}
	if uint64(n) > uint64(len(p)) { // each request takes at least 4 bytes
		return nil, fmt.Errorf("frame: batch of %d requests in %d bytes", n, len(p))
	}
	reqs := make([][]tensor.Tensor, 0, n)
	for range n {
		m, ok := r.u32()
		if !ok {
			return nil, errShort
		}
		if uint64(m) > uint64(len(r.b)) {
			return nil, fmt.Errorf("frame: request of %d tensors in %d bytes", m, len(r.b))
		}
		ts := make([]tensor.Tensor, 0, m)
		for range m {
			t, err := r.tensor()
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
		reqs = append(reqs, ts)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("frame: %d bytes after the batch", len(r.b))
	}
	return reqs, nil
}

type reader struct{ b []byte }

func (r *reader) take(n uint64) ([]byte, bool) {
	if uint64(len(r.b)) < n {
		return nil, false
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out, true
}

func (r *reader) u32() (uint32, bool) {
	b, ok := r.take(4)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

func (r *reader) tensor() (tensor.Tensor, error) {
	var t tensor.Tensor
	b, ok := r.take(2)
	if !ok {
		return t, errShort
	}
	name, ok := r.take(uint64(binary.BigEndian.Uint16(b)))
	if !ok {
		return t, errShort
	}
	t.Name = string(name)
	b, ok = r.take(1)
	if !ok {
		return t, errShort
	}
	dt, ok := r.take(uint64(b[0]))
	if !ok {
		return t, errShort
	}
	d, err := tensor.ParseDType(string(dt))
	if err != nil || d == tensor.String {
		return t, fmt.Errorf("frame: tensor %q: datatype %q is not a numeric KServe datatype", t.Name, dt)
	}
	t.DType = d
	b, ok = r.take(1)
	if !ok {
		return t, errShort
	}
	if b[0] > maxRank {
		return t, fmt.Errorf("frame: tensor %q: rank %d is above %d", t.Name, b[0], maxRank)
	}
	t.Shape = make([]int64, b[0])
	elems := uint64(1)
	for i := range t.Shape {
		if b, ok = r.take(8); !ok {
			return t, errShort
		}
		v := binary.BigEndian.Uint64(b)
		if v > 1<<40 {
			return t, fmt.Errorf("frame: tensor %q: dimension %d is too large", t.Name, v)
		}
		t.Shape[i] = int64(v)
		if elems != 0 {
			if v != 0 && elems > (1<<62)/v {
				return t, fmt.Errorf("frame: tensor %q: shape %v is too large", t.Name, t.Shape[:i+1])
			}
			elems *= v
		}
	}
	if b, ok = r.take(8); !ok {
		return t, errShort
	}
	n := binary.BigEndian.Uint64(b)
	if elems > (1<<62)/uint64(d.Size()) || n != elems*uint64(d.Size()) {
		return t, fmt.Errorf("frame: tensor %q: %d bytes of data for shape %v of %v", t.Name, n, t.Shape, d)
	}
	data, ok := r.take(n)
	if !ok {
		return t, errShort
	}
	t.Data = data
	return t, nil
}
