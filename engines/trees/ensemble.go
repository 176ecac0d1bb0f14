package trees

import (
	"math"
	"unsafe"
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

// key is the integer form a threshold and a feature value are compared
// in: int32 for float32, int64 for float64.
type key interface{ ~int32 | ~int64 }

// Keys order like the floats they come from, so a split compares two
// integers, which compiles to a conditional move where a float comparison
// compiles to a branch: tree splits are coin flips a branch predictor
// cannot learn. -0 becomes +0 (they compare equal as floats) and every
// NaN becomes the largest key, which no float maps to, so NaN fails
// "x < thr" and goes right unless the node sends missing values left.
func toKey[T number, K key](v T) K {
	if v != v {
		return nanKey[K]()
	}
	if v == 0 {
		v = 0
	}
	if unsafe.Sizeof(v) == 4 {
		b := int32(math.Float32bits(float32(v)))
		return K(b ^ (b >> 31 & 0x7fffffff))
	}
	b := int64(math.Float64bits(float64(v)))
	return K(b ^ (b >> 63 & 0x7fffffffffffffff))
}

// fromKey inverts toKey.
func fromKey[T number, K key](k K) T {
	if k == nanKey[K]() {
		return T(math.NaN())
	}
	if unsafe.Sizeof(k) == 4 {
		b := int32(k)
		return T(math.Float32frombits(uint32(b ^ (b >> 31 & 0x7fffffff))))
	}
	b := int64(k)
	return T(math.Float64frombits(uint64(b ^ (b >> 63 & 0x7fffffffffffffff))))
}

// nanKey is the key of every NaN: the largest value of K.
func nanKey[K key]() K {
	var k K
	if unsafe.Sizeof(k) == 4 {
		return K(math.MaxInt32)
	}
	m := int64(math.MaxInt64)
	return K(m)
}

// node is one split. A child >= 0 is a node index inside the same tree's
// slice; a child < 0 is ^(leaf index) into ensemble.leaves. A numerical
// split sends key(x) < thr left, the rest right and NaN to the default
// side; LightGBM's x <= t is stored as x < nextafter(t, +inf).
type node[K key] struct {
	thr         K
	feat        uint32
	left, right int32
}

// ensemble is a compiled forest: every tree's nodes in one slice, every
// leaf value in another, so evaluation touches two arrays and allocates
// nothing. T is the arithmetic of the leaves, K the key type of T.
type ensemble[T number, K key] struct {
	nodes  []node[K]
	leaves []T
	roots  []int32 // per tree: node index of the root, or ^leaf for a single-leaf tree
	group  []int32 // per tree: output group (class) it adds to
	cats   [][]uint32

	catWords int // total bitset words, bounded by maxCatWords

	// lin holds, per leaf, LightGBM's linear model (linear_tree=true);
	// nil when no tree is linear.
	lin []linLeaf[T]
}

// linLeaf is a leaf's linear model: c + sum coeff[j]*x[feat[j]], or the
// plain leaf value when one of its features is missing.
type linLeaf[T number] struct {
	c     T
	feat  []int32
	coeff []T
}

// linear is leaf l's output for the row of keys x, as LightGBM computes it.
func (e *ensemble[T, K]) linear(l int32, x []K) T {
	m := &e.lin[l]
	if m.feat == nil {
		return e.leaves[l]
	}
	out := m.c
	nan := nanKey[K]()
	for j, f := range m.feat {
		k := x[f]
		if k == nan {
			return e.leaves[l]
		}
		out += m.coeff[j] * fromKey[T](k)
	}
	return out
}

// catBit reports whether category c is in bitset s.
func catBit(s []uint32, c int) bool {
	w := c >> 5
	return c >= 0 && w < len(s) && s[w]>>(uint(c)&31)&1 == 1
}

// slowFlags mark the splits the walkers hand to slow.
const slowFlags = flagCat | flagZeroMiss

// leaf walks tree t for the row of keys x and returns its leaf value.
func (e *ensemble[T, K]) leaf(t int, x []K) T {
	i := e.roots[t]
	nodes := e.nodes
	nan := nanKey[K]()
	for i >= 0 {
		n := &nodes[i]
		f := n.feat
		k := x[f&featMask]
		if f&slowFlags != 0 {
			i = e.slow(n, k)
			continue
		}
		// Both children are loaded first: a select between two loaded
		// values compiles to CMOV, a load under a condition to a branch.
		l, next := n.left, n.right
		if k < n.thr {
			next = l
		}
		if k == nan && f&flagDefLeft != 0 {
			next = l
		}
		i = next
	}
	if e.lin != nil {
		return e.linear(^i, x)
	}
	return e.leaves[^i]
}

// walk4 walks four (root, row) pairs in lockstep and writes their leaf
// values to out: four independent chains of loads keep the core busy
// while each waits on memory. Pairs may share a tree (a block of rows) or
// a row (the next four trees).
func (e *ensemble[T, K]) walk4(idx *[4]int32, xs *[4][]K, out *[4]T) {
	nodes := e.nodes
	nan := nanKey[K]()
	for {
		done := 0
		for j := range 4 {
			i := idx[j]
			if i < 0 {
				done++
				continue
			}
			n := &nodes[i]
			f := n.feat
			k := xs[j][f&featMask]
			if f&slowFlags != 0 {
				idx[j] = e.slow(n, k)
				continue
			}
			l, next := n.left, n.right
			if k < n.thr {
				next = l
			}
			if k == nan && f&flagDefLeft != 0 {
				next = l
			}
			idx[j] = next
		}
		if done == 4 {
			break
		}
	}
	for j := range 4 {
		if e.lin != nil {
			out[j] = e.linear(^idx[j], xs[j])
			continue
		}
		out[j] = e.leaves[^idx[j]]
	}
}

// addBlock adds every tree's leaf, in tree order, to the margins acc of
// the nb rows of keys in x (F keys each, G margins each).
func (e *ensemble[T, K]) addBlock(acc []T, x []K, nb, F, G int) {
	roots, group := e.roots, e.group
	if nb < 4 {
		// Few rows: walk four trees of one row at once, then add their
		// leaves in tree order.
		for r := 0; r < nb; r++ {
			row := x[r*F : r*F+F]
			a := acc[r*G : r*G+G]
			t := 0
			for ; t+4 <= len(roots); t += 4 {
				idx := [4]int32{roots[t], roots[t+1], roots[t+2], roots[t+3]}
				xs := [4][]K{row, row, row, row}
				var l [4]T
				e.walk4(&idx, &xs, &l)
				a[group[t]] += l[0]
				a[group[t+1]] += l[1]
				a[group[t+2]] += l[2]
				a[group[t+3]] += l[3]
			}
			for ; t < len(roots); t++ {
				a[group[t]] += e.leaf(t, row)
			}
		}
		return
	}
	for t, root := range roots {
		g := int(group[t])
		r := 0
		for ; r+4 <= nb; r += 4 {
			idx := [4]int32{root, root, root, root}
			xs := [4][]K{x[r*F : r*F+F], x[(r+1)*F : (r+1)*F+F], x[(r+2)*F : (r+2)*F+F], x[(r+3)*F : (r+3)*F+F]}
			var l [4]T
			e.walk4(&idx, &xs, &l)
			acc[r*G+g] += l[0]
			acc[(r+1)*G+g] += l[1]
			acc[(r+2)*G+g] += l[2]
			acc[(r+3)*G+g] += l[3]
		}
		for ; r < nb; r++ {
			acc[r*G+g] += e.leaf(t, x[r*F:r*F+F])
		}
	}
}

// slow decides the splits that are not plain numeric comparisons.
func (e *ensemble[T, K]) slow(n *node[K], k K) int32 {
	def := n.right
	if n.feat&flagDefLeft != 0 {
		def = n.left
	}
	v := fromKey[T](k)
	if n.feat&flagCat == 0 {
		switch {
		case v != v:
			return def
		case n.feat&flagZeroMiss != 0 && float64(v) >= -kZeroThreshold && float64(v) <= kZeroThreshold:
			return def
		case k < n.thr:
			return n.left
		default:
			return n.right
		}
	}
	set := e.cats[int(n.thr)]
	if v != v {
		if n.feat&flagCatNaN != 0 {
			return def
		}
		v = 0
	}
	if n.feat&flagCatLeft != 0 {
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
