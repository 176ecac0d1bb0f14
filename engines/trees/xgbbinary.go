package trees

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ParseXGBoostBinary reads XGBoost's legacy binary model format (what
// save_model writes for a name not ending in .json or .ubj, and what
// XGBoost before 1.0 wrote), with or without its "binf" prefix.
func ParseXGBoostBinary(data []byte) (*Model, error) {
	m, err := parseXGBoostBinary(context.Background(), data)
	if err != nil {
		return nil, fmt.Errorf("xgboost binary: %w", err)
	}
	m.Format = "xgboost-binary"
	return m, nil
}

// binReader reads little-endian fields and remembers the first error.
type binReader struct {
	b   []byte
	pos int
	err error
}

func (r *binReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.err = fmt.Errorf("at byte %d: %w (want %d more bytes, %d left)", r.pos, errShort, n, len(r.b)-r.pos)
		return nil
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *binReader) i32() int32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return int32(binary.LittleEndian.Uint32(b))
}

func (r *binReader) u32() uint32 { return uint32(r.i32()) }

func (r *binReader) f32() float32 { return math.Float32frombits(r.u32()) }

func (r *binReader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// count reads a uint64 element count and checks elem-byte elements fit.
func (r *binReader) count(elem int) int {
	n := r.u64()
	if r.err == nil && n > uint64(len(r.b)-r.pos)/uint64(elem) {
		r.err = fmt.Errorf("at byte %d: count %d does not fit in the %d bytes left", r.pos, n, len(r.b)-r.pos)
		return 0
	}
	return int(n)
}

func (r *binReader) str() string { return string(r.bytes(r.count(1))) }

func (r *binReader) floats() []float32 {
	n := r.count(4)
	out := make([]float32, n)
	for i := range out {
		out[i] = r.f32()
	}
	return out
}

func parseXGBoostBinary(ctx context.Context, data []byte) (*Model, error) {
	r := &binReader{b: data}
	if len(data) >= 4 && string(data[:4]) == "binf" {
		r.pos = 4
	}
	// LearnerModelParamLegacy: 136 bytes.
	var h xgbHeader
	h.baseScore = r.f32()
	numFeature := r.u32()
	numClass := r.i32()
	r.bytes(136 - 12)
	h.objective = r.str()
	h.booster = r.str()
	if r.err != nil {
		return nil, r.err
	}
	if numFeature == 0 || numFeature > maxFeatures {
		return nil, fmt.Errorf("num_feature %d out of range [1, %d]", numFeature, maxFeatures)
	}
	if numClass < 0 || numClass > maxFeatures {
		return nil, fmt.Errorf("num_class %d out of range", numClass)
	}
	h.numFeature, h.numClass = int(numFeature), int(numClass)
	switch h.booster {
	case "gblinear":
		r.bytes(136) // GBLinearModelParam
		w := r.floats()
		if r.err != nil {
			return nil, r.err
		}
		return buildXGBoost(ctx, h, nil, w)
	case "gbtree", "dart":
	default:
		return nil, fmt.Errorf("booster %q is not supported (or this is not an XGBoost model); want gbtree, dart or gblinear", h.booster)
	}
	// GBTreeModelParam: 160 bytes.
	numTrees := r.i32()
	r.bytes(160 - 4)
	if r.err != nil {
		return nil, r.err
	}
	// A tree takes at least its 148-byte header and one 36-byte node.
	if numTrees < 0 || int(numTrees) > (len(data)-r.pos)/(148+36) {
		return nil, fmt.Errorf("num_trees %d does not fit in the %d bytes left", numTrees, len(data)-r.pos)
	}
	trees := make([]xgbTree, numTrees)
	for i := range trees {
		if err := trees[i].readBinary(r); err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
	}
	h.treeInfo = make([]int, numTrees)
	for i := range h.treeInfo {
		h.treeInfo[i] = int(r.i32())
	}
	if h.booster == "dart" {
		h.weightDrop = r.floats()
	}
	if r.err != nil {
		return nil, r.err
	}
	return buildXGBoost(ctx, h, trees, nil)
}

// readBinary reads a RegTree: TreeParam (148 bytes), nodes (20 bytes:
// parent, left, right, split index with the default-left bit on top,
// leaf value or threshold), node statistics (16 bytes each, unused) and
// the leaf vector.
func (t *xgbTree) readBinary(r *binReader) error {
	hdr := r.bytes(148)
	if r.err != nil {
		return r.err
	}
	n := int(int32(binary.LittleEndian.Uint32(hdr[4:])))
	leafVector := int32(binary.LittleEndian.Uint32(hdr[20:]))
	if n <= 0 || n > (len(r.b)-r.pos)/36 {
		return fmt.Errorf("num_nodes %d does not fit in the %d bytes left", n, len(r.b)-r.pos)
	}
	t.Left, t.Right = make([]int, n), make([]int, n)
	t.SplitIndices, t.SplitConditions = make([]int, n), make([]f32, n)
	t.DefaultLeft = make([]boolish, n)
	for i := 0; i < n; i++ {
		r.i32() // parent
		t.Left[i] = int(r.i32())
		t.Right[i] = int(r.i32())
		s := r.u32()
		t.SplitIndices[i] = int(s & (1<<31 - 1))
		t.DefaultLeft[i] = s>>31 != 0
		t.SplitConditions[i] = f32(r.f32())
	}
	r.bytes(16 * n)
	if r.err != nil {
		return r.err
	}
	if leafVector != 0 {
		if v := r.floats(); len(v) > 0 {
			return errors.New("vector leaves (multi-target trees) are not supported")
		}
	}
	return r.err
}
