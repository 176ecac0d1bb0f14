package llm

import (
	"context"
	"fmt"
	"path/filepath"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/tensor"
)

// feeds collects a run's tensors over Go memory; the first error sticks.
type feeds struct {
	vals []ort.Value
	err  error
}

// add wraps data as a tensor of shape.
func (f *feeds) add(shape ort.Shape, data []byte, elem ort.TensorElementDataType) {
	if f.err != nil {
		return
	}
	if len(data) == 0 {
		data = empty[:] // a tensor with a zero dimension still needs a pointer
	}
	v, err := ort.NewCustomDataTensor(shape, data, elem)
	if err != nil {
		f.err = fmt.Errorf("llm: tensor %v: %w", shape, err)
		return
	}
	f.vals = append(f.vals, v)
}

func (f *feeds) destroy() {
	for _, v := range f.vals {
		_ = v.Destroy()
	}
}

// exec runs the session, stopped when ctx ends.
func (m *Model) exec(ctx context.Context, in, out []ort.Value) error {
	var runOpts *ort.RunOptions
	if ctx.Done() != nil {
		ro, err := ort.NewRunOptions()
		if err != nil {
			return fmt.Errorf("llm: run options: %w", err)
		}
		defer ro.Destroy()
		stop := context.AfterFunc(ctx, func() { _ = ro.Terminate() })
		defer stop()
		runOpts = ro
	}
	if err := m.session.RunWithOptions(in, out, runOpts); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("llm: run %s: %w", filepath.Base(m.file), err)
	}
	return nil
}

// logitsBuffer sizes run g's logits buffer for rows rows of the vocabulary,
// in the graph's element type, and returns it with a reader of row i as
// float32 (aliasing the buffer for float32 logits, converted for float16).
func (m *Model) logitsBuffer(g, rows int) ([]byte, func(i int) []float32) {
	for len(m.logits) <= g {
		m.logits = append(m.logits, nil)
	}
	vocab := m.cfg.Vocab
	half := m.lay.logitsElem == ort.TensorElementDataTypeFloat16
	size := rows * vocab * 4
	if half {
		size = rows * vocab * 2
	}
	if words := (size + 3) / 4; cap(m.logits[g]) < words {
		m.logits[g] = make([]float32, words) // float32 words: aligned for the rows returned
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m.logits[g]))), size)
	if size == 0 {
		return buf, nil
	}
	if half {
		h := unsafe.Slice((*uint16)(unsafe.Pointer(&buf[0])), rows*vocab)
		return buf, func(i int) []float32 {
			row := make([]float32, vocab)
			for j := range row {
				row[j] = tensor.Float16ToFloat32(h[i*vocab+j])
			}
			return row
		}
	}
	all := unsafe.Slice((*float32)(unsafe.Pointer(&buf[0])), rows*vocab)
	return buf, func(i int) []float32 { return all[i*vocab : (i+1)*vocab : (i+1)*vocab] }
}

// int32Bytes lays out v little-endian.
func int32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}
