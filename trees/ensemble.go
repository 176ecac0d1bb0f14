package trees

import (
	"math"
)

// Node flags live in the top bits of node.feat; the low bits index the
// feature. Packing keeps a node at 16 bytes for float32 thresholds.
const (
	featMask     = 1<<24 - 1
	flagDefLeft  = 1 << 31 // a missing value goes left
	flagCat      = 1 << 30 // categorical split: thr holds the bitset index
	flagZeroMiss = 1 << 29 // LightGBM missing_type=Zero: |x| <= 1e-35 is missing
	flagCatLeft  = 1 << 28 // categorical: a category in the set goes left (LightGBM); else right (XGBoost)
	flagCatNaN   = 1 << 27 // categorical: NaN goes to the default child (else NaN is category 0)
	flagMask     = flagDefLeft | flagCat | flagZeroMiss | flagCatLeft | flagCatNaN
	maxFeatures  = featMask
)

// kZeroThreshold is LightGBM's bound under which a value counts as zero for
// missing_type=Zero: the float 1e-35f, compared in double.
var kZeroThreshold = float64(float32(1e-35))

// number is the arithmetic of an ensemble: float32 for XGBoost (it casts its
// inputs and sums leaves in float32), float64 for LightGBM.
type number interface{ ~float32 | ~float64 }

// node is one split. A child >= 0 is a node index inside the same tree's
// slice; a child < 0 is ^(leaf index) into ensemble.leaves. A numerical
// split sends x < thr left, x >= thr right and NaN to the default side;
// LightGBM's x <= t is stored as x < nextafter(t, +inf).
type node[T number] struct {
	thr         T
	feat        uint32
	left, right int32
}

// ensemble is a compiled forest: every tree's nodes in one slice, every
// leaf value in another, so evaluation touches two arrays and allocates
// nothing.
type ensemble[T number] struct {
	nodes  []node[T]
	leaves []T
	roots  []int32 // per tree: node index of the root, or ^leaf for a single-leaf tree
	group  []int32 // per tree: output group (class) it adds to
	cats   [][]uint32
	nGroup int

	catWords int // total bitset words, bounded by maxCatWords
}

// catBit reports whether category c is in bitset s.
func catBit(s []uint32, c int) bool {
	w := c >> 5
	return c >= 0 && w < len(s) && s[w]>>(uint(c)&31)&1 == 1
}

// leaf walks tree t for row x and returns its leaf value.
func (e *ensemble[T]) leaf(t int, x []T) T {
	i := e.roots[t]
	nodes := e.nodes
	for i >= 0 {
		n := &nodes[i]
		v := x[n.feat&featMask]
		if n.feat&flagMask == 0 {
			// The hot path: numeric split, NaN goes right.
			if v < n.thr {
				i = n.left
			} else {
				i = n.right
			}
			continue
		}
		if n.feat&flagDefLeft != 0 && n.feat&(flagCat|flagZeroMiss) == 0 {
			if v >= n.thr {
				i = n.right
			} else {
				i = n.left // v < thr or NaN
			}
			continue
		}
		i = e.slow(n, v)
	}
	return e.leaves[^i]
}

// slow decides the splits that are not plain numeric comparisons.
func (e *ensemble[T]) slow(n *node[T], v T) int32 {
	def := n.right
	if n.feat&flagDefLeft != 0 {
		def = n.left
	}
	if n.feat&flagCat == 0 {
		switch {
		case v != v:
			return def
		case n.feat&flagZeroMiss != 0 && float64(v) >= -kZeroThreshold && float64(v) <= kZeroThreshold:
			return def
		case v < n.thr:
			return n.left
		default:
			return n.right
		}
	}
	set := e.cats[int(n.thr)]
	inLeft := n.feat&flagCatLeft != 0
	if v != v {
		if n.feat&flagCatNaN != 0 {
			return def
		}
		v = 0
	}
	if inLeft {
		// LightGBM: negative (after truncation to int) or absent
		// categories go right.
		if v <= -1 || float64(v) >= float64(len(set))*32 || !catBit(set, int(v)) {
			return n.right
		}
		return n.left
	}
	// XGBoost: a category outside the bitset's range is missing; a
	// category in the set goes right.
	if v < 0 || float64(v) >= float64(len(set))*32 {
		return def
	}
	if catBit(set, int(v)) {
		return n.right
	}
	return n.left
}

// nextUp is the smallest float64 above t: LightGBM's "x <= t" as "x < nextUp(t)".
func nextUp(t float64) float64 { return math.Nextafter(t, math.Inf(1)) }
