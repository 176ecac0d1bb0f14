package tensorflow

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/eas-server/eas-server/tensor"
)

// nd is a float64 n-dimensional array for computing reference results in
// Go, independently of ONNX Runtime.
type nd struct {
	s []int64
	v []float64
}

func size(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

func zeros(s ...int64) nd { return nd{s: slices.Clone(s), v: make([]float64, size(s))} }

// rnd fills a shape with values in [lo, hi) from a fixed seed.
func rnd(seed uint64, lo, hi float64, s ...int64) nd {
	r := rand.New(rand.NewPCG(seed, 7))
	a := zeros(s...)
	for i := range a.v {
		a.v[i] = lo + (hi-lo)*r.Float64()
		a.v[i] = float64(float32(a.v[i])) // exactly representable as float32
	}
	return a
}

func vals(s []int64, v ...float64) nd { return nd{s: s, v: v} }

func (a nd) as(name string, dt tensor.DType) tensor.Tensor {
	switch dt {
	case tensor.Float32:
		f := make([]float32, len(a.v))
		for i, x := range a.v {
			f[i] = float32(x)
		}
		return tensor.FromFloat32(name, a.s, f)
	case tensor.Float64:
		return tensor.FromFloat64(name, a.s, a.v)
	case tensor.Int32:
		f := make([]int32, len(a.v))
		for i, x := range a.v {
			f[i] = int32(x)
		}
		return tensor.FromInt32(name, a.s, f)
	case tensor.Int64:
		f := make([]int64, len(a.v))
		for i, x := range a.v {
			f[i] = int64(x)
		}
		return tensor.FromInt64(name, a.s, f)
	case tensor.Bool:
		f := make([]bool, len(a.v))
		for i, x := range a.v {
			f[i] = x != 0
		}
		return tensor.FromBool(name, a.s, f)
	}
	panic("dtype")
}

func (a nd) f32(name string) tensor.Tensor { return a.as(name, tensor.Float32) }

func strides(s []int64) []int64 {
	st := make([]int64, len(s))
	acc := int64(1)
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

func unravel(i int, s []int64) []int64 {
	idx := make([]int64, len(s))
	for d := len(s) - 1; d >= 0; d-- {
		if s[d] > 0 {
			idx[d] = int64(i) % s[d]
			i /= int(s[d])
		}
	}
	return idx
}

func (a nd) at(idx []int64) float64 {
	st := strides(a.s)
	off := int64(0)
	for d, x := range idx {
		off += x * st[d]
	}
	return a.v[off]
}

func (a nd) map1(f func(float64) float64) nd {
	out := zeros(a.s...)
	for i, x := range a.v {
		out.v[i] = f(x)
	}
	return out
}

// bcast applies f elementwise with numpy broadcasting.
func bcast(a, b nd, f func(x, y float64) float64) nd {
	r := max(len(a.s), len(b.s))
	pad := func(s []int64) []int64 {
		return append(slices.Repeat([]int64{1}, r-len(s)), s...)
	}
	as, bs := pad(a.s), pad(b.s)
	os := make([]int64, r)
	for i := range os {
		os[i] = max(as[i], bs[i])
	}
	out := zeros(os...)
	pa, pb := nd{as, a.v}, nd{bs, b.v}
	for i := range out.v {
		idx := unravel(i, os)
		ia, ib := make([]int64, r), make([]int64, r)
		for d := range idx {
			ia[d], ib[d] = idx[d]%as[d], idx[d]%bs[d]
		}
		out.v[i] = f(pa.at(ia), pb.at(ib))
	}
	return out
}

func matmul(a, b nd) nd {
	m, k, n := a.s[0], a.s[1], b.s[1]
	out := zeros(m, n)
	for i := range m {
		for j := range n {
			var s float64
			for x := range k {
				s += a.v[i*k+x] * b.v[x*n+j]
			}
			out.v[i*n+j] = s
		}
	}
	return out
}

func transpose(a nd, perm ...int) nd {
	os := make([]int64, len(perm))
	for i, p := range perm {
		os[i] = a.s[p]
	}
	out := zeros(os...)
	for i := range out.v {
		idx := unravel(i, os)
		src := make([]int64, len(perm))
		for d, p := range perm {
			src[p] = idx[d]
		}
		out.v[i] = a.at(src)
	}
	return out
}

// reduce folds axes with f starting from init.
func reduce(a nd, axes []int, keep bool, init float64, f func(acc, x float64) float64) nd {
	red := map[int]bool{}
	for _, ax := range axes {
		red[(ax+len(a.s))%len(a.s)] = true
	}
	var os, ks []int64
	for d, n := range a.s {
		if red[d] {
			ks = append(ks, 1)
		} else {
			os = append(os, n)
			ks = append(ks, n)
		}
	}
	out := zeros(ks...)
	for i := range out.v {
		out.v[i] = init
	}
	for i, x := range a.v {
		idx := unravel(i, a.s)
		for d := range idx {
			if red[d] {
				idx[d] = 0
			}
		}
		o := nd{ks, out.v}
		st := strides(ks)
		off := int64(0)
		for d, v := range idx {
			off += v * st[d]
		}
		o.v[off] = f(o.v[off], x)
	}
	if !keep {
		out.s = os
		if os == nil {
			out.s = []int64{}
		}
	}
	return out
}

// samePad returns TF's SAME padding before for one spatial dim.
func samePad(in, k, s, d int64) (out, before int64) {
	ke := (k-1)*d + 1
	out = (in + s - 1) / s
	total := max((out-1)*s+ke-in, 0)
	return out, total / 2
}

// conv2d is a direct NHWC convolution with an HWIO filter; depthwise treats
// the filter as [H, W, C, M].
func conv2d(x, w nd, stride, dil int64, same, depthwise bool) nd {
	n, h, wd, c := x.s[0], x.s[1], x.s[2], x.s[3]
	kh, kw := w.s[0], w.s[1]
	var oh, ow, ph, pw int64
	if same {
		oh, ph = samePad(h, kh, stride, dil)
		ow, pw = samePad(wd, kw, stride, dil)
	} else {
		oh = (h-(kh-1)*dil-1)/stride + 1
		ow = (wd-(kw-1)*dil-1)/stride + 1
	}
	oc := w.s[3]
	if depthwise {
		oc = c * w.s[3]
	}
	out := zeros(n, oh, ow, oc)
	for b := range n {
		for i := range oh {
			for j := range ow {
				for o := range oc {
					var s float64
					for p := range kh {
						for q := range kw {
							y, xx := i*stride+p*dil-ph, j*stride+q*dil-pw
							if y < 0 || y >= h || xx < 0 || xx >= wd {
								continue
							}
							if depthwise {
								ci, m := o/w.s[3], o%w.s[3]
								s += x.at([]int64{b, y, xx, ci}) * w.at([]int64{p, q, ci, m})
								continue
							}
							for ci := range c {
								s += x.at([]int64{b, y, xx, ci}) * w.at([]int64{p, q, ci, o})
							}
						}
					}
					out.v[((b*oh+i)*ow+j)*oc+o] = s
				}
			}
		}
	}
	return out
}

// pool2d is NHWC max or average pooling; averages count only real cells.
func pool2d(x nd, k, stride int64, same, isMax bool) nd {
	n, h, w, c := x.s[0], x.s[1], x.s[2], x.s[3]
	var oh, ow, ph, pw int64
	if same {
		oh, ph = samePad(h, k, stride, 1)
		ow, pw = samePad(w, k, stride, 1)
	} else {
		oh, ow = (h-k)/stride+1, (w-k)/stride+1
	}
	out := zeros(n, oh, ow, c)
	for b := range n {
		for i := range oh {
			for j := range ow {
				for ch := range c {
					acc, cnt := math.Inf(-1), 0.0
					if !isMax {
						acc = 0
					}
					for p := range k {
						for q := range k {
							y, xx := i*stride+p-ph, j*stride+q-pw
							if y < 0 || y >= h || xx < 0 || xx >= w {
								continue
							}
							v := x.at([]int64{b, y, xx, ch})
							if isMax {
								acc = math.Max(acc, v)
							} else {
								acc += v
								cnt++
							}
						}
					}
					if !isMax {
						acc /= cnt
					}
					out.v[((b*oh+i)*ow+j)*c+ch] = acc
				}
			}
		}
	}
	return out
}

// gatherIdx builds an output of shape s whose element at idx is a at
// src(idx): the reference for slicing, padding, tiling and concatenation.
func gatherIdx(s []int64, src func(idx []int64) float64) nd {
	out := zeros(s...)
	for i := range out.v {
		out.v[i] = src(unravel(i, s))
	}
	return out
}
