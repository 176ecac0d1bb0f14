package torchckpt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/eas-server/eas-server/tensor"
)

// maxHeaderBytes bounds a safetensors header (the format's own limit is
// 100 MB).
const maxHeaderBytes = 100 << 20

var safeDTypes = map[string]struct {
	dtype string
	size  int
}{
	"F32": {"float32", 4}, "F16": {"float16", 2}, "BF16": {"bfloat16", 2}, "F64": {"float64", 8},
	"I64": {"int64", 8}, "I32": {"int32", 4}, "I16": {"int16", 2}, "I8": {"int8", 1},
	"U8": {"uint8", 1}, "BOOL": {"bool", 1}, "U16": {"uint16", 2}, "U32": {"uint32", 4}, "U64": {"uint64", 8},
}

// ReadSafetensors reads a safetensors file: an 8-byte little-endian header
// length, a JSON header {"name": {"dtype", "shape", "data_offsets"}}, and
// the tensors' bytes.
func ReadSafetensors(data []byte) (*StateDict, error) {
	if len(data) < 8 {
		return nil, errors.New("safetensors: the file is shorter than its header length")
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeaderBytes || n > uint64(len(data)-8) {
		return nil, fmt.Errorf("safetensors: a header of %d bytes in a file of %d", n, len(data))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		return nil, fmt.Errorf("safetensors: the header is not a JSON object: %v", err)
	}
	body := data[8+n:]
	type entry struct {
		name    string
		DType   string   `json:"dtype"`
		Shape   []int64  `json:"shape"`
		Offsets []uint64 `json:"data_offsets"`
	}
	var entries []entry
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		e := entry{name: name}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %v", name, err)
		}
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		if len(entries[i].Offsets) == 2 && len(entries[j].Offsets) == 2 && entries[i].Offsets[0] != entries[j].Offsets[0] {
			return entries[i].Offsets[0] < entries[j].Offsets[0]
		}
		return entries[i].name < entries[j].name
	})
	sd := &StateDict{Tensors: map[string]*Tensor{}}
	elems := uint64(len(data)) // tensors may overlap: bound what they total
	for _, e := range entries {
		info, ok := safeDTypes[e.DType]
		if !ok {
			return nil, fmt.Errorf("safetensors: tensor %q has dtype %q", e.name, e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] > e.Offsets[1] || e.Offsets[1] > uint64(len(body)) {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets %v are not within the %d bytes of data", e.name, e.Offsets, len(body))
		}
		if len(e.Shape) > 16 {
			return nil, fmt.Errorf("safetensors: tensor %q has rank %d", e.name, len(e.Shape))
		}
		size := e.Offsets[1] - e.Offsets[0]
		numel := uint64(1)
		for _, d := range e.Shape {
			if d < 0 {
				return nil, fmt.Errorf("safetensors: tensor %q has shape %v", e.name, e.Shape)
			}
			if d != 0 && numel > math.MaxInt64/uint64(d) {
				return nil, fmt.Errorf("safetensors: tensor %q has shape %v", e.name, e.Shape)
			}
			numel *= uint64(d)
		}
		if numel > size || numel*uint64(info.size) != size {
			return nil, fmt.Errorf("safetensors: tensor %q: shape %v of %s is not its %d bytes", e.name, e.Shape, e.DType, size)
		}
		if numel > elems {
			return nil, errors.New("safetensors: the tensors hold more elements than the file could")
		}
		elems -= numel
		raw := body[e.Offsets[0]:e.Offsets[1]]
		t := &Tensor{DType: info.dtype, Shape: append([]int64{}, e.Shape...)}
		switch info.dtype {
		case "float32":
			t.F32 = make([]float32, numel)
			for i := range t.F32 {
				t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case "float16":
			t.F32 = make([]float32, numel)
			for i := range t.F32 {
				t.F32[i] = tensor.Float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
			}
		case "bfloat16":
			t.F32 = make([]float32, numel)
			for i := range t.F32 {
				t.F32[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
			}
		}
		if err := sd.add(e.name, t); err != nil {
			return nil, fmt.Errorf("safetensors: %v", err)
		}
	}
	return sd, nil
}
