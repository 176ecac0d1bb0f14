package trees

import (
	"errors"
	"fmt"
	"math"
)

// maxNodes bounds one model's total node count so a corrupt count cannot
// ask for gigabytes.
const maxNodes = 1 << 28

// maxClasses bounds a model's outputs per record; maxCategory bounds a category value (XGBoost's own limit is 2^24 too,
// the largest integer a float32 holds exactly) and maxCatWords the
// bitsets of one model, so a corrupt model cannot ask for gigabytes.
const (
	maxClasses  = 1 << 16
	maxCategory = 1 << 24
	maxCatWords = 1 << 24
)

// rnode is one node of a tree as a reader found it, before compiling.
type rnode[T number] struct {
	leaf        bool
	value       T // leaf value
	thr         T // numerical threshold, already in "x < thr goes left" form
	feat        int
	flags       uint32
	left, right int         // source indexes of the children
	cats        []uint32    // categorical bitset
	lin         *linLeaf[T] // LightGBM linear leaf; nil for a constant leaf
}

var errCycle = errors.New("a node is reached twice (the children do not form a tree)")

// addTree compiles the tree rooted at src[0] into e, laying nodes out in
// preorder so every child follows its parent: walking a compiled tree
// always ends. It checks every index.
func (e *ensemble[T, K]) addTree(src []rnode[T], group int, nFeatures int) error {
	if len(src) == 0 {
		return errors.New("tree has no nodes")
	}
	if len(e.nodes)+len(src) > maxNodes {
		return fmt.Errorf("more than %d nodes", maxNodes)
	}
	seen := make([]bool, len(src))
	type item struct {
		src    int
		parent int32 // compiled index of the parent; -1 for the root
		left   bool
	}
	stack := []item{{0, -1, false}}
	var root int32
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.src < 0 || it.src >= len(src) {
			return fmt.Errorf("child index %d out of range [0, %d)", it.src, len(src))
		}
		if seen[it.src] {
			return fmt.Errorf("node %d: %w", it.src, errCycle)
		}
		seen[it.src] = true
		s := &src[it.src]
		var code int32
		if s.leaf {
			if math.IsNaN(float64(s.value)) {
				return fmt.Errorf("node %d: leaf value is NaN", it.src)
			}
			code = ^int32(len(e.leaves))
			if s.lin != nil && e.lin == nil {
				e.lin = make([]linLeaf[T], len(e.leaves), cap(e.leaves))
			}
			if e.lin != nil {
				var l linLeaf[T]
				if s.lin != nil {
					for _, f := range s.lin.feat {
						if f < 0 || int(f) >= nFeatures {
							return fmt.Errorf("node %d: linear leaf feature %d out of range [0, %d)", it.src, f, nFeatures)
						}
					}
					l = *s.lin
				}
				e.lin = append(e.lin, l)
			}
			e.leaves = append(e.leaves, s.value)
		} else {
			if s.feat < 0 || s.feat >= nFeatures || s.feat > maxFeatures {
				return fmt.Errorf("node %d: split feature %d out of range [0, %d)", it.src, s.feat, nFeatures)
			}
			if s.flags&flagCat == 0 && math.IsNaN(float64(s.thr)) {
				return fmt.Errorf("node %d: split threshold is NaN", it.src)
			}
			code = int32(len(e.nodes))
			n := node[K]{thr: toKey[T, K](s.thr), feat: uint32(s.feat) | s.flags}
			if s.flags&flagCat != 0 {
				if e.catWords += len(s.cats); e.catWords > maxCatWords {
					return fmt.Errorf("categorical splits hold more than %d bitset words", maxCatWords)
				}
				n.thr = K(len(e.cats))
				e.cats = append(e.cats, s.cats)
			}
			e.nodes = append(e.nodes, n)
			stack = append(stack, item{s.right, code, false}, item{s.left, code, true})
		}
		switch {
		case it.parent < 0:
			root = code
		case it.left:
			e.nodes[it.parent].left = code
		default:
			e.nodes[it.parent].right = code
		}
	}
	e.roots = append(e.roots, root)
	e.group = append(e.group, int32(group))
	return nil
}

// bitset builds a category bitset from category values, taking its words
// from budget (the words a model may still use).
func bitset(cats []int, budget *int) ([]uint32, error) {
	maxc := -1
	for _, c := range cats {
		if c < 0 || c >= maxCategory {
			return nil, fmt.Errorf("category %d out of range [0, %d)", c, maxCategory)
		}
		maxc = max(maxc, c)
	}
	words := maxc/32 + 1
	if *budget -= words; *budget < 0 {
		return nil, fmt.Errorf("categorical splits hold more than %d bitset words", maxCatWords)
	}
	s := make([]uint32, words)
	for _, c := range cats {
		s[c/32] |= 1 << (uint(c) % 32)
	}
	return s, nil
}
