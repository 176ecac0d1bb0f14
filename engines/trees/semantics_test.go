package trees

import (
	"math"
	"testing"
)

// TestLightGBMDecisions scores testdata/lightgbm/handmade_v4.txt, a
// version=v4 model written by hand to pin LightGBM's decision rules, and
// the same model as a JSON dump (handmade_v4.json):
//
//	tree 0: a <= 1.5 (missing None, so NaN reads as 0) -> 1, else
//	        c <= 0.5 (missing NaN, default right) -> 2 : 3
//	tree 1: b categorical, {2, 5} left -> 10, else 20 (int truncation;
//	        NaN reads as category 0; negatives go right)
//	tree 2: a single leaf, 100
//	tree 3: c <= 1 (missing Zero, default right: 0 and NaN go right) -> 1000 : 2000
func TestLightGBMDecisions(t *testing.T) {
	for _, file := range []string{"testdata/lightgbm/handmade_v4.txt", "testdata/lightgbm/handmade_v4.json"} {
		t.Run(file, func(t *testing.T) { lgbDecisions(t, file) })
	}
}

func lgbDecisions(t *testing.T, file string) {
	m, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumTrees != 4 || m.Kind != Regression || m.FeatureNames[2] != "c" {
		t.Fatalf("model %+v", m)
	}
	nan := math.NaN()
	for _, c := range []struct {
		a, b, c float64
		want    float64
	}{
		{1, 2, 0.2, 1 + 10 + 100 + 1000},
		{nan, nan, nan, 1 + 20 + 100 + 2000},
		{3, 5, nan, 3 + 10 + 100 + 2000},
		{3, -0.5, 0.3, 2 + 20 + 100 + 1000}, // -0.5 truncates to category 0, not in {2, 5}
		{1.5, 2.9, 0, 1 + 10 + 100 + 2000},
		{math.Nextafter(1.5, 2), 1e10, 5, 3 + 20 + 100 + 2000},
		{3, -3, 0, 2 + 20 + 100 + 2000},
		{3, 5, 1e-36, 2 + 10 + 100 + 2000}, // |c| <= 1e-35 is zero
	} {
		got := make([]float64, 1)
		if err := m.Predict(got, []float64{c.a, c.b, c.c}); err != nil {
			t.Fatal(err)
		}
		if got[0] != c.want {
			t.Errorf("a=%v b=%v c=%v: %v, want %v", c.a, c.b, c.c, got[0], c.want)
		}
	}
}

// TestLightGBMLinearTree scores testdata/lightgbm/handmade_linear_v4.txt
// and its JSON dump, a hand-written linear tree (linear_tree=true, version=v4): a <= 1.5
// goes to leaf 0 (10 + 0.5c), else leaf 1 (20 + a - 2b); a leaf whose
// features include a missing value answers its plain leaf_value (1, 2).
func TestLightGBMLinearTree(t *testing.T) {
	for _, file := range []string{"testdata/lightgbm/handmade_linear_v4.txt", "testdata/lightgbm/handmade_linear_v4.json"} {
		t.Run(file, func(t *testing.T) { lgbLinear(t, file) })
	}
}

func lgbLinear(t *testing.T, file string) {
	m, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	cases := []struct{ a, b, c, want float64 }{
		{1, 3, 4, 12},
		{1, 3, nan, 1},
		{2, 3, nan, 16},
		{2, nan, 0, 2},
		{nan, 7, 4, 12}, // missing None: a reads as 0
	}
	var all []float64
	for _, c := range cases {
		got := make([]float64, 1)
		if err := m.Predict(got, []float64{c.a, c.b, c.c}); err != nil {
			t.Fatal(err)
		}
		if got[0] != c.want {
			t.Errorf("a=%v b=%v c=%v: %v, want %v", c.a, c.b, c.c, got[0], c.want)
		}
		all = append(all, c.a, c.b, c.c)
	}
	// All at once: the four-row lockstep walk takes the same path.
	got := make([]float64, len(cases))
	if err := m.Predict(got, all); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("batched record %d: %v, want %v", i, got[i], c.want)
		}
	}
}
