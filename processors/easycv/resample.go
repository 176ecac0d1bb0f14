package easycv

import "math"

// Resampling the way Pillow's Image.resize does it (libImaging/Resample.c),
// because EasyCV's classification pipeline runs torchvision transforms on
// PIL images: a separable convolution, horizontal pass first, whose filter
// support widens by the downscale factor; weights normalised to sum 1 and
// turned into 22-bit fixed point; every pass rounds and clips to uint8. Done
// the same way here, a PNG preprocesses to the very bytes PIL produces.
//
// The arithmetic keeps Pillow's order of operations in float64, with
// explicit float64 conversions so that no multiply-add is fused (Go may
// fuse x*y+z on some architectures; C on x86-64 does not).

// precisionBits is Pillow's fixed-point precision for 8-bit images.
const precisionBits = 32 - 8 - 2

// filter is one of Pillow's resampling filters.
type filter struct {
	support float64
	weight  func(x float64) float64
}

var filters = map[string]filter{
	"bilinear": {1, func(x float64) float64 {
		if x < 0 {
			x = -x
		}
		if x < 1 {
			return 1 - x
		}
		return 0
	}},
	"bicubic": {2, func(x float64) float64 {
		const a = -0.5
		if x < 0 {
			x = -x
		}
		if x < 1 {
			return float64(float64(float64(float64((a+2)*x)-(a+3))*x)*x) + 1
		}
		if x < 2 {
			return float64(float64(float64(float64(float64(x-5)*x)+8)*x)-4) * a
		}
		return 0
	}},
	"box": {0.5, func(x float64) float64 {
		if x > -0.5 && x <= 0.5 {
			return 1
		}
		return 0
	}},
}

// coeffs are one axis's fixed-point weights: for output i, the inputs
// bounds[2i] .. bounds[2i]+bounds[2i+1]-1 weighted by k[i*ksize:].
type coeffs struct {
	ksize  int
	bounds []int
	k      []int32
}

// precompute is Resample.c's precompute_coeffs followed by
// normalize_coeffs_8bpc, for the whole input range [0, inSize).
func precompute(inSize, outSize int, f filter) coeffs {
	scale := float64(inSize) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := f.support * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{ksize: ksize, bounds: make([]int, outSize*2), k: make([]int32, outSize*ksize)}
	pre := make([]float64, ksize)
	for xx := 0; xx < outSize; xx++ {
		center := float64(float64(float64(xx)+0.5) * scale)
		ss := 1 / filterscale
		xmin := int(center - support + 0.5) // C's (int) truncates toward zero
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w := f.weight(float64(float64(float64(float64(x+xmin)-center)+0.5) * ss))
			pre[x] = w
			ww += w
		}
		for x := 0; x < xmax; x++ {
			if ww != 0 {
				pre[x] /= ww
			}
		}
		k := c.k[xx*ksize : (xx+1)*ksize]
		for x := 0; x < ksize; x++ {
			v := 0.0
			if x < xmax {
				v = pre[x]
			}
			if v < 0 {
				k[x] = int32(-0.5 + float64(v*(1<<precisionBits)))
			} else {
				k[x] = int32(0.5 + float64(v*(1<<precisionBits)))
			}
		}
		c.bounds[2*xx], c.bounds[2*xx+1] = xmin, xmax
	}
	return c
}

// clip8 turns a fixed-point sum into a byte as Pillow's clip8 does.
func clip8(in int32) uint8 {
	if in >= 1<<precisionBits<<8 {
		return 255
	}
	if in <= 0 {
		return 0
	}
	return uint8(in >> precisionBits)
}

// rgb is an 8-bit, 3-channel, row-major image.
type rgb struct {
	w, h int
	pix  []uint8 // len 3*w*h
}

// resize scales img to w x h with the named Pillow filter; like Pillow,
// an axis that keeps its size is not resampled.
func resize(img rgb, w, h int, f filter) rgb {
	if w == img.w && h == img.h {
		return img
	}
	needH, needV := w != img.w, h != img.h
	cv := precompute(img.h, h, f)
	src := img
	if needH {
		ch := precompute(img.w, w, f)
		// Only the rows the vertical pass reads.
		first := cv.bounds[0]
		last := cv.bounds[2*h-2] + cv.bounds[2*h-1]
		if !needV {
			first, last = 0, img.h
		}
		tmp := rgb{w: w, h: last - first, pix: make([]uint8, 3*w*(last-first))}
		for y := 0; y < tmp.h; y++ {
			in := img.pix[3*img.w*(y+first) : 3*img.w*(y+first+1)]
			out := tmp.pix[3*w*y : 3*w*(y+1)]
			for xx := 0; xx < w; xx++ {
				xmin, n := ch.bounds[2*xx], ch.bounds[2*xx+1]
				k := ch.k[xx*ch.ksize:]
				for c := 0; c < 3; c++ {
					ss := int32(1 << (precisionBits - 1))
					for x := 0; x < n; x++ {
						ss += int32(in[3*(x+xmin)+c]) * k[x]
					}
					out[3*xx+c] = clip8(ss)
				}
			}
		}
		if needV {
			for i := 0; i < h; i++ {
				cv.bounds[2*i] -= first
			}
		}
		src = tmp
	}
	if !needV {
		return src
	}
	out := rgb{w: src.w, h: h, pix: make([]uint8, 3*src.w*h)}
	row := 3 * src.w
	for yy := 0; yy < h; yy++ {
		ymin, n := cv.bounds[2*yy], cv.bounds[2*yy+1]
		k := cv.k[yy*cv.ksize:]
		o := out.pix[row*yy : row*(yy+1)]
		for i := 0; i < row; i++ {
			ss := int32(1 << (precisionBits - 1))
			for y := 0; y < n; y++ {
				ss += int32(src.pix[row*(y+ymin)+i]) * k[y]
			}
			o[i] = clip8(ss)
		}
	}
	return out
}
