package decoding

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortedTopP is top-p by a full sort (value descending, id ascending), the
// definition topP's selection must agree with.
func sortedTopP(l []float32, p float64) {
	var idx []int32
	for i, v := range l {
		if !math.IsInf(float64(v), -1) {
			idx = append(idx, int32(i))
		}
	}
	slices.SortFunc(idx, func(a, b int32) int {
		switch {
		case l[a] > l[b]:
			return -1
		case l[a] < l[b]:
			return 1
		}
		return int(a - b)
	})
	mx, lse := logSumExp(l)
	total := math.Exp(lse)
	var cum float64
	for n, id := range idx {
		if cum/total >= p {
			for _, r := range idx[n:] {
				l[r] = float32(math.Inf(-1))
			}
			return
		}
		cum += math.Exp(float64(l[id]) - mx)
	}
}

// TestTopPSelectionEqualsSort checks the selection against the full sort
// on peaked, flat, tied and partly masked logits of many sizes.
func TestTopPSelectionEqualsSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := range 3000 {
		n := 1 + rng.IntN(300)
		if trial%100 == 0 {
			n = 20000
		}
		l := make([]float32, n)
		for i := range l {
			switch trial % 4 {
			case 0:
				l[i] = float32(rng.NormFloat64())
			case 1:
				l[i] = float32(rng.NormFloat64() * 8) // peaked
			case 2:
				l[i] = float32(rng.IntN(4)) // many ties
			default:
				l[i] = float32(rng.NormFloat64())
				if rng.IntN(3) == 0 {
					l[i] = float32(math.Inf(-1))
				}
			}
		}
		p := []float64{0.01, 0.3, 0.5, 0.9, 0.99, 0.999999}[trial%6]
		want := slices.Clone(l)
		sortedTopP(want, p)
		got := slices.Clone(l)
		s := &Sampler{p: Params{TopP: p}}
		s.topP(got)
		for i := range got {
			if math.IsInf(float64(got[i]), -1) != math.IsInf(float64(want[i]), -1) {
				t.Fatalf("trial %d (n %d, p %g): token %d (logit %g) kept %v, the sort keeps it %v",
					trial, n, p, i, l[i], !math.IsInf(float64(got[i]), -1), !math.IsInf(float64(want[i]), -1))
			}
		}
	}
}
