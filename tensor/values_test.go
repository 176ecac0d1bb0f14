package tensor

import "testing"

func TestOwnTakesTheSliceOver(t *testing.T) {
	v := []float32{1, 2, 3}
	x := Own("x", []int64{3}, v)
	got, err := x.AsFloat32()
	if err != nil || len(got) != 3 || got[2] != 3 {
		t.Fatalf("Own: %v %v", got, err)
	}
	if nativeLittleEndian {
		v[0] = 9 // the tensor aliases v: no copy was made
		if y, _ := x.AsFloat32(); y[0] != 9 {
			t.Fatal("Own copied the values")
		}
	}
	if e := Own[int64]("e", []int64{0}, nil); e.Data == nil || e.NumElements() != 0 {
		t.Fatalf("empty: %+v", e)
	}
}
