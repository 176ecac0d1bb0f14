package frame

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

func TestBatchRoundTrip(t *testing.T) {
	in := [][]tensor.Tensor{
		{{Name: "x", DType: tensor.Float32, Shape: []int64{1, 2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			{Name: "y", DType: tensor.Int64, Shape: []int64{}, Data: make([]byte, 8)}},
		{},
		{{Name: "", DType: tensor.Bool, Shape: []int64{0, 3}, Data: nil}},
	}
	b, err := AppendBatch(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d requests, want %d", len(out), len(in))
	}
	for i := range in {
		if len(out[i]) != len(in[i]) {
			t.Fatalf("request %d: %d tensors, want %d", i, len(out[i]), len(in[i]))
		}
		for j, w := range in[i] {
			g := out[i][j]
			if g.Name != w.Name || g.DType != w.DType || len(g.Shape) != len(w.Shape) || !bytes.Equal(g.Data, w.Data) {
				t.Fatalf("request %d tensor %d: got %+v, want %+v", i, j, g, w)
			}
			for k := range w.Shape {
				if g.Shape[k] != w.Shape[k] {
					t.Fatalf("request %d tensor %d: shape %v, want %v", i, j, g.Shape, w.Shape)
				}
			}
		}
	}
	again, _ := AppendBatch(nil, out)
	if !bytes.Equal(again, b) {
		t.Fatal("re-encoding differs")
	}
}

func TestBatchRefuses(t *testing.T) {
	if _, err := AppendBatch(nil, [][]tensor.Tensor{{{Name: "s", DType: tensor.String, Shape: []int64{1}, Strings: [][]byte{[]byte("a")}}}}); err == nil || !strings.Contains(err.Error(), "numeric") {
		t.Errorf("a BYTES tensor: %v", err)
	}
	if _, err := AppendBatch(nil, [][]tensor.Tensor{{{Name: "x", DType: tensor.Float32, Shape: []int64{2}, Data: make([]byte, 4)}}}); err == nil {
		t.Error("short data accepted")
	}
	good, _ := AppendBatch(nil, [][]tensor.Tensor{{{Name: "x", DType: tensor.Float32, Shape: []int64{2}, Data: make([]byte, 8)}}})
	for i := range len(good) {
		if _, err := ParseBatch(good[:i]); err == nil {
			t.Errorf("a payload cut at %d of %d bytes parsed", i, len(good))
		}
	}
	if _, err := ParseBatch(append(good, 0)); err == nil {
		t.Error("trailing byte accepted")
	}
}

// FuzzBatch holds ParseBatch to never panicking and to round-tripping
// whatever it accepts.
func FuzzBatch(f *testing.F) {
	seed, _ := AppendBatch(nil, [][]tensor.Tensor{{{Name: "x", DType: tensor.Float64, Shape: []int64{1, 1}, Data: make([]byte, 8)}}, {}})
	f.Add(seed)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := ParseBatch(b)
		if err != nil {
			return
		}
		again, err := AppendBatch(nil, reqs)
		if err != nil {
			t.Fatalf("accepted but cannot re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip differs:\n%x\n%x", b, again)
		}
	})
}
