// Package torchckpt reads the weights of a PyTorch state_dict without Python:
// torch.save's zip format (a pickle naming storages kept as files beside
// it) through a restricted unpickler that knows only the few globals a
// state_dict's pickle names and never executes anything, and Hugging
// Face's safetensors format. Float32, float16 and bfloat16 tensors (any
// strides) are read as float32; other dtypes (a BERT's int64 position_ids
// buffer) are listed but not read.
//
// Every size is bounded: the file by the caller's limit, the pickle's
// objects by the pickle's own length, a tensor by its storage.
package torchckpt

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
	"strings"

	"github.com/eas-server/eas-server/tensor"
)

// Tensor is one entry of a state_dict. F32 holds its values in row-major
// order for a float dtype; nil otherwise.
type Tensor struct {
	DType string // "float32", "float16", "bfloat16", "int64", ...
	Shape []int64
	F32   []float32
}

// Numel is the number of elements of shape.
func Numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// StateDict is a checkpoint's tensors by key, in the file's order.
type StateDict struct {
	Keys    []string
	Tensors map[string]*Tensor
}

func (sd *StateDict) add(key string, t *Tensor) error {
	if _, dup := sd.Tensors[key]; dup {
		return fmt.Errorf("key %q appears twice", key)
	}
	sd.Keys = append(sd.Keys, key)
	sd.Tensors[key] = t
	return nil
}

// maxPickleBytes bounds data.pkl: a state_dict's pickle is a few bytes per
// key.
const maxPickleBytes = 64 << 20

// storage dtypes by the torch class a pickle names, and their widths.
var storageTypes = map[string]struct {
	dtype string
	size  int
}{
	"FloatStorage":    {"float32", 4},
	"HalfStorage":     {"float16", 2},
	"BFloat16Storage": {"bfloat16", 2},
	"DoubleStorage":   {"float64", 8},
	"LongStorage":     {"int64", 8},
	"IntStorage":      {"int32", 4},
	"ShortStorage":    {"int16", 2},
	"CharStorage":     {"int8", 1},
	"ByteStorage":     {"uint8", 1},
	"BoolStorage":     {"bool", 1},
}

// ReadTorch reads a torch.save'd state_dict in the zip format (PyTorch 1.6
// and later) from data. The legacy format (a bare pickle stream) is refused
// saying how to re-save.
func ReadTorch(data []byte) (*StateDict, error) {
	if len(data) < 4 || !bytes.Equal(data[:4], []byte("PK\x03\x04")) {
		if len(data) > 0 && data[0] == 0x80 {
			return nil, errors.New("the checkpoint is in torch.save's legacy format (before PyTorch 1.6), which is read here only as the zip format; re-save it with torch.save(torch.load(f), f) on PyTorch 1.6 or later")
		}
		return nil, errors.New("the checkpoint is not a torch.save zip archive")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("the checkpoint's zip archive: %v", err)
	}
	var pkl *zip.File
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
		if path.Base(f.Name) == "data.pkl" && strings.Count(f.Name, "/") == 1 {
			if pkl != nil {
				return nil, errors.New("the checkpoint holds two data.pkl")
			}
			pkl = f
		}
	}
	if pkl == nil {
		return nil, errors.New("the checkpoint's archive has no <name>/data.pkl: it is not a torch.save file")
	}
	prefix := path.Dir(pkl.Name)
	// What the archive's entries may total uncompressed: a zip bomb stops
	// at four times the file (torch stores its entries uncompressed).
	budget := int64(len(data))*4 + (1 << 20)
	pb, err := readEntry(pkl, maxPickleBytes, &budget)
	if err != nil {
		return nil, err
	}
	u := &unpickler{data: pb}
	root, err := u.run()
	if err != nil {
		return nil, fmt.Errorf("data.pkl: %v", err)
	}
	dict, ok := root.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("data.pkl holds a %s, not a state_dict (a dict of tensors); save model.state_dict()", typeName(root))
	}
	storages := map[string][]byte{}
	sd := &StateDict{Tensors: map[string]*Tensor{}}
	// What the tensors may total: views share storages, so without this
	// a small file could name one storage a million times.
	elems := int64(len(data))
	for i, k := range dict.keys {
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("the state_dict has a %s key; its keys must be strings", typeName(k))
		}
		rt, ok := dict.vals[i].(*pyTensor)
		if !ok {
			return nil, fmt.Errorf("the state_dict's %q is a %s, not a tensor", key, typeName(dict.vals[i]))
		}
		st := rt.storage
		raw, seen := storages[st.key]
		if !seen {
			f := files[prefix+"/data/"+st.key]
			if f == nil {
				return nil, fmt.Errorf("tensor %q: the archive has no storage data/%s", key, st.key)
			}
			raw, err = readEntry(f, int64(len(data)), &budget)
			if err != nil {
				return nil, err
			}
			storages[st.key] = raw
		}
		t, err := materialize(raw, rt, &elems)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", key, err)
		}
		if err := sd.add(key, t); err != nil {
			return nil, err
		}
	}
	return sd, nil
}

// readEntry reads one zip entry, at most limit bytes and what is left of
// budget.
func readEntry(f *zip.File, limit int64, budget *int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) || f.UncompressedSize64 > uint64(*budget) {
		return nil, fmt.Errorf("the archive's %s declares %d bytes, more than the checkpoint can hold", f.Name, f.UncompressedSize64)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("the archive's %s: %v", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(f.UncompressedSize64)+1))
	if err != nil {
		return nil, fmt.Errorf("the archive's %s: %v", f.Name, err)
	}
	if uint64(len(b)) != f.UncompressedSize64 {
		return nil, fmt.Errorf("the archive's %s is not the size it declares", f.Name)
	}
	*budget -= int64(len(b))
	return b, nil
}

// materialize reads a tensor's elements from its storage's bytes through
// its offset and strides.
func materialize(raw []byte, rt *pyTensor, elems *int64) (*Tensor, error) {
	st := rt.storage
	info := storageTypes[st.class]
	t := &Tensor{DType: info.dtype, Shape: rt.size}
	have := int64(len(raw)) / int64(info.size)
	if int64(len(raw))%int64(info.size) != 0 {
		return nil, fmt.Errorf("its storage's %d bytes are not whole %s elements", len(raw), info.dtype)
	}
	if len(rt.size) != len(rt.stride) {
		return nil, fmt.Errorf("size %v and stride %v differ in rank", rt.size, rt.stride)
	}
	if rt.offset < 0 || rt.offset > have {
		return nil, fmt.Errorf("offset %d is outside its storage's %d elements", rt.offset, have)
	}
	n := int64(1)
	last := rt.offset // the highest element index the view reaches
	for i, d := range rt.size {
		if d < 0 || rt.stride[i] < 0 {
			return nil, fmt.Errorf("size %v or stride %v is negative", rt.size, rt.stride)
		}
		if d == 0 {
			n = 0
			continue
		}
		if n > 0 && d > have/n+1 {
			return nil, fmt.Errorf("size %v has more elements than its storage's %d", rt.size, have)
		}
		n *= d
		if rt.stride[i] > have {
			return nil, fmt.Errorf("stride %v leaves its storage of %d elements", rt.stride, have)
		}
		if rt.stride[i] > 0 && d-1 > have/rt.stride[i] {
			return nil, fmt.Errorf("size %v and stride %v reach past its storage's %d elements", rt.size, rt.stride, have)
		}
		last += (d - 1) * rt.stride[i] // each term is at most have: no overflow in 16 of them
	}
	if rt.offset < 0 || (n > 0 && last >= have) {
		return nil, fmt.Errorf("offset %d, size %v and stride %v reach past its storage's %d elements", rt.offset, rt.size, rt.stride, have)
	}
	if n > have {
		return nil, fmt.Errorf("size %v has more elements than its storage's %d", rt.size, have)
	}
	var get func(i int64) float32
	switch info.dtype {
	case "float32":
		get = func(i int64) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])) }
	case "float16":
		get = func(i int64) float32 { return tensor.Float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:])) }
	case "bfloat16":
		get = func(i int64) float32 {
			return math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	default:
		return t, nil
	}
	if n > *elems {
		return nil, errors.New("the checkpoint's tensors hold more elements than its file could")
	}
	*elems -= n
	t.F32 = make([]float32, n)
	if n == 0 {
		return t, nil
	}
	idx := make([]int64, len(rt.size))
	pos := rt.offset
	for k := int64(0); k < n; k++ {
		t.F32[k] = get(pos)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			pos += rt.stride[d]
			if idx[d] < rt.size[d] {
				break
			}
			pos -= idx[d] * rt.stride[d]
			idx[d] = 0
		}
	}
	return t, nil
}

// SortedKeys returns the keys sorted (for messages).
func (sd *StateDict) SortedKeys() []string {
	k := append([]string(nil), sd.Keys...)
	sort.Strings(k)
	return k
}
