package tensor

import (
	"slices"
	"strings"
	"testing"
)

// seq returns a float32 tensor holding 0..n-1 with the given shape.
func seq(name string, shape ...int64) Tensor {
	n, _ := Elements(shape)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return FromFloat32(name, shape, v)
}

func TestConcatSplit(t *testing.T) {
	a, b, c := seq("x", 1, 2, 3), seq("x", 3, 2, 3), seq("x", 0, 2, 3)
	got, err := Concat([]Tensor{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape, []int64{4, 2, 3}) {
		t.Fatalf("shape %v", got.Shape)
	}
	vals, _ := got.AsFloat32()
	// Row 0 is a's 6 values, rows 1-3 are b's 18 values.
	want := make([]float32, 0, 24)
	for i := range 6 {
		want = append(want, float32(i))
	}
	for i := range 18 {
		want = append(want, float32(i))
	}
	if !slices.Equal(vals, want) {
		t.Fatalf("values %v, want %v", vals, want)
	}
	parts, err := Split(got, []int64{1, 3, 0})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range parts {
		orig := []Tensor{a, b, c}[i]
		if !Equal(p, orig) {
			t.Errorf("part %d = %v %v, want %v %v", i, p.Shape, p.Data, orig.Shape, orig.Data)
		}
	}
	// Appending to a part must not overwrite its neighbour.
	_ = append(parts[0].Data, 0xff)
	if !Equal(parts[1], b) {
		t.Error("append to a split part changed the next part")
	}
	// Concat copies: changing the result leaves the inputs alone.
	got.Data[0] = 0xff
	if a.Data[0] == 0xff {
		t.Error("concat aliased its input")
	}
}

func TestConcatStrings(t *testing.T) {
	a := FromStrings("s", []int64{1, 2}, []string{"a", "b"})
	b := FromStrings("s", []int64{2, 2}, []string{"c", "d", "e", "f"})
	got, err := Concat([]Tensor{a, b})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := got.AsStrings()
	if !slices.Equal(s, []string{"a", "b", "c", "d", "e", "f"}) || !slices.Equal(got.Shape, []int64{3, 2}) {
		t.Fatalf("got %v %v", got.Shape, s)
	}
	parts, err := Split(got, []int64{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	s0, _ := parts[0].AsStrings()
	if !slices.Equal(s0, []string{"a", "b", "c", "d"}) {
		t.Fatalf("part 0 %v", s0)
	}
}

func TestConcatSplitErrors(t *testing.T) {
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"empty", func() error { _, err := Concat(nil); return err }, "no tensors"},
		{"scalar", func() error { _, err := Concat([]Tensor{seq("x"), seq("x")}); return err }, "scalar"},
		{"trailing", func() error { _, err := Concat([]Tensor{seq("x", 1, 2), seq("x", 1, 3)}); return err }, "does not match"},
		{"dtype", func() error {
			_, err := Concat([]Tensor{seq("x", 1), FromInt32("x", []int64{1}, []int32{1})})
			return err
		}, "INT32"},
		{"name", func() error { _, err := Concat([]Tensor{seq("x", 1), seq("y", 1)}); return err }, `"y"`},
		{"invalid", func() error {
			_, err := Concat([]Tensor{seq("x", 1), FromFloat32("x", []int64{2}, []float32{1})})
			return err
		}, "needs 8 bytes"},
		{"split sum", func() error { _, err := Split(seq("x", 3, 2), []int64{1, 1}); return err }, "do not sum to the first dim 3"},
		{"split negative", func() error { _, err := Split(seq("x", 3, 2), []int64{4, -1}); return err }, "must be >= 0"},
		{"split scalar", func() error { _, err := Split(seq("x"), []int64{1}); return err }, "scalar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPadSlice(t *testing.T) {
	src := seq("x", 2, 3)
	p, err := Pad(src, []int64{3, 5}, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := p.AsFloat32()
	// Element (i,j) of the padded 3x5 is src[i][j] = 3i+j inside the 2x3 corner, -1 elsewhere.
	for i := range 3 {
		for j := range 5 {
			want := float32(-1)
			if i < 2 && j < 3 {
				want = float32(3*i + j)
			}
			if got[i*5+j] != want {
				t.Fatalf("padded[%d][%d] = %v, want %v", i, j, got[i*5+j], want)
			}
		}
	}
	back, err := Slice(p, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	back, err = Slice(back, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(back, src) {
		t.Fatalf("unpadded %v %v, want %v", back.Shape, back.Data, src.Shape)
	}
}

func TestPadSliceRank3AllDTypes(t *testing.T) {
	for d := Bool; d < String; d++ {
		n := int64(2 * 1 * 3)
		data := make([]byte, n*int64(d.Size()))
		for i := range n {
			PutFloat64(d, data[i*int64(d.Size()):], float64(i%2))
		}
		src := FromBytes("x", d, []int64{2, 1, 3}, data)
		p, err := Pad(src, []int64{2, 4, 4}, 1)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		s1, err := Slice(p, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Slice(s1, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(s2, src) {
			t.Fatalf("%s: pad then slice gave %v %v, want %v %v", d, s2.Shape, s2.Data, src.Shape, src.Data)
		}
		f, _ := p.Float64s()
		var ones int
		for _, v := range f {
			if v == 1 {
				ones++
			}
		}
		// 32 elements: 3 ones from src, 26 padded ones.
		if ones != 3+26 {
			t.Fatalf("%s: %d ones, want 29", d, ones)
		}
	}
}

func TestPadStrings(t *testing.T) {
	src := FromStrings("s", []int64{1, 2}, []string{"a", "b"})
	p, err := Pad(src, []int64{2, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.AsStrings()
	if !slices.Equal(s, []string{"a", "b", "", "", "", ""}) {
		t.Fatalf("got %q", s)
	}
	back, _ := Slice(p, 1, 2)
	back, _ = Slice(back, 0, 1)
	if !Equal(back, src) {
		t.Fatalf("unpadded %q", back.Strings)
	}
}

func TestPadSliceErrors(t *testing.T) {
	x := seq("x", 2, 3)
	tests := []struct {
		name    string
		run     func() error
		wantErr string
	}{
		{"rank", func() error { _, err := Pad(x, []int64{2}, 0); return err }, "rank 2"},
		{"shrink", func() error { _, err := Pad(x, []int64{1, 3}, 0); return err }, "smaller"},
		{"axis", func() error { _, err := Slice(x, 2, 1); return err }, "axis 2 is out of range"},
		{"too many", func() error { _, err := Slice(x, 1, 4); return err }, "cannot keep 4 entries of axis 1, which has 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	same, err := Pad(x, []int64{2, 3}, 7)
	if err != nil || !Equal(same, x) {
		t.Fatal("pad to the same shape changed the tensor")
	}
}

func TestTrailingKeyAndBatchSize(t *testing.T) {
	a := []Tensor{seq("x", 1, 4), FromInt64("ids", []int64{1, 7}, make([]int64, 7))}
	b := []Tensor{seq("x", 5, 4), FromInt64("ids", []int64{5, 7}, make([]int64, 35))}
	if TrailingKey(a) != TrailingKey(b) {
		t.Fatalf("keys differ for different batch sizes: %q vs %q", TrailingKey(a), TrailingKey(b))
	}
	for name, other := range map[string][]Tensor{
		"trailing dim": {seq("x", 1, 4), FromInt64("ids", []int64{1, 8}, make([]int64, 8))},
		"dtype":        {seq("x", 1, 4), FromInt32("ids", []int64{1, 7}, make([]int32, 7))},
		"name":         {seq("y", 1, 4), FromInt64("ids", []int64{1, 7}, make([]int64, 7))},
		"order":        {FromInt64("ids", []int64{1, 7}, make([]int64, 7)), seq("x", 1, 4)},
		"rank":         {seq("x", 1, 4, 1), FromInt64("ids", []int64{1, 7}, make([]int64, 7))},
		"missing":      {seq("x", 1, 4)},
		"scalar":       {seq("x"), FromInt64("ids", []int64{1, 7}, make([]int64, 7))},
	} {
		if TrailingKey(other) == TrailingKey(a) {
			t.Errorf("%s: key %q equals %q", name, TrailingKey(other), TrailingKey(a))
		}
	}
	// A name that contains the separators cannot forge another key.
	if TrailingKey([]Tensor{seq(`a":FP32:[];"b`, 1)}) == TrailingKey([]Tensor{seq("a", 1), seq("b", 1)}) {
		t.Error("quoted names collide")
	}
	if n, err := BatchSize(b); err != nil || n != 5 {
		t.Fatalf("BatchSize = %d, %v", n, err)
	}
	if _, err := BatchSize([]Tensor{seq("x", 2, 4), seq("y", 3)}); err == nil || !strings.Contains(err.Error(), "share the batch dimension") {
		t.Fatalf("BatchSize mismatch err = %v", err)
	}
	if _, err := BatchSize([]Tensor{seq("x")}); err == nil {
		t.Fatal("BatchSize of a scalar succeeded")
	}
}

func nan() float64 { var z float64; return z / z }

func TestClone(t *testing.T) {
	x := seq("x", 2)
	c := x.Clone()
	c.Data[0] = 9
	c.Shape[0] = 5
	if x.Data[0] == 9 || x.Shape[0] == 5 {
		t.Fatal("clone aliases its source")
	}
}

// FuzzPadSlice checks, for arbitrary small shapes and data, that padding then
// slicing back returns the original and Concat/Split are inverses.
func FuzzPadSlice(f *testing.F) {
	f.Add([]byte{2, 3, 1}, []byte{1, 2, 0}, []byte("abcdefghijklmnop"))
	f.Add([]byte{1}, []byte{0}, []byte{})
	f.Fuzz(func(t *testing.T, dims, extra, data []byte) {
		if len(dims) == 0 || len(dims) > 4 {
			return
		}
		shape := make([]int64, len(dims))
		target := make([]int64, len(dims))
		n := int64(1)
		for i, d := range dims {
			shape[i] = int64(d % 5)
			e := int64(0)
			if i < len(extra) {
				e = int64(extra[i] % 4)
			}
			target[i] = shape[i] + e
			n *= shape[i]
		}
		buf := make([]byte, n*2)
		copy(buf, data)
		src := FromBytes("x", Int16, shape, buf)
		p, err := Pad(src, target, 3)
		if err != nil {
			t.Fatal(err)
		}
		back := p
		for ax := range shape {
			if back, err = Slice(back, ax, shape[ax]); err != nil {
				t.Fatal(err)
			}
		}
		if !Equal(back, src) {
			t.Fatalf("pad %v->%v then slice changed the data", shape, target)
		}
		parts, err := Split(p, []int64{target[0] / 2, target[0] - target[0]/2})
		if err != nil {
			t.Fatal(err)
		}
		joined, err := Concat(parts)
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(joined, p) {
			t.Fatal("concat(split(x)) != x")
		}
	})
}

func TestPadToCommon(t *testing.T) {
	a := seq("tok", 1, 2)
	b := seq("tok", 2, 4)
	c := seq("tok", 1, 3)
	if RankKey([]Tensor{a}) != RankKey([]Tensor{b}) || RankKey([]Tensor{a}) == RankKey([]Tensor{seq("tok", 1, 2, 1)}) {
		t.Fatal("RankKey ignores dims but must not ignore rank")
	}
	padded, common, err := PadToCommon([]Tensor{a, b, c}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(common, []int64{4}) {
		t.Fatalf("common %v, want [4]", common)
	}
	joined, err := Concat(padded)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := joined.AsFloat32()
	want := []float32{0, 1, 0, 0 /* a */, 0, 1, 2, 3, 4, 5, 6, 7 /* b */, 0, 1, 2, 0 /* c */}
	if !slices.Equal(got, want) || !slices.Equal(joined.Shape, []int64{4, 4}) {
		t.Fatalf("joined %v %v, want [4,4] %v", joined.Shape, got, want)
	}
	if !Equal(padded[1], b) {
		t.Error("a tensor already at the common shape changed")
	}
	// Unpadding a's row restores it.
	parts, _ := Split(joined, []int64{1, 2, 1})
	back, _ := Slice(parts[0], 1, 2)
	if !Equal(back, a) {
		t.Fatalf("unpadded %v", back)
	}
	if _, _, err := PadToCommon([]Tensor{a, seq("tok", 1, 2, 2)}, 0); err == nil || !strings.Contains(err.Error(), "rank") {
		t.Fatalf("rank mismatch err = %v", err)
	}
	if _, _, err := PadToCommon([]Tensor{seq("tok")}, 0); err == nil {
		t.Fatal("scalar padded")
	}
}
