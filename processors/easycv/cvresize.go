package easycv

import "math"

// OpenCV's cv::resize with INTER_LINEAR on a 3-channel uint8 image
// (imgproc/src/resize.cpp, OpenCV 4.x), which mmcv's imrescale calls for
// EasyCV's detection pipelines (MMResize, backend cv2): reimplemented so
// that an image reaches a YOLOX export as the very floats EasyCV feeds it.
//
//   - Equal sizes copy.
//   - An exact halving of both sides takes OpenCV's INTER_AREA fast path:
//     each output is (a + b + c + d + 2) >> 2 of its 2x2 block.
//   - Otherwise each output coordinate maps to src = (dst + 0.5) * scale - 0.5
//     (in double, then float), the integer part picks two neighbours and the
//     fraction becomes 11-bit fixed-point weights (rounded half to even); a
//     source index outside the image is clamped. The horizontal pass keeps
//     int sums (value * 2048); the vertical pass combines two of them as
//     OpenCV's bit-exact specialisation for uchar does:
//     ((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16) + 2) >> 2.

const (
	cvCoefBits  = 11
	cvCoefScale = 1 << cvCoefBits
)

// cvRoundShort is saturate_cast<short>(float): round half to even.
func cvRoundShort(v float32) int32 {
	r := math.RoundToEven(float64(v))
	return int32(max(math.MinInt16, min(math.MaxInt16, r)))
}

// cvLinearTab is one axis's source indices and fixed-point weights.
func cvLinearTab(in, out int) (ofs []int, a []int32) {
	inv := float64(out) / float64(in)
	scale := 1 / inv
	ofs = make([]int, out)
	a = make([]int32, 2*out)
	for d := 0; d < out; d++ {
		f := float32(float64(float64(d)+0.5)*scale - 0.5)
		s := int(math.Floor(float64(f)))
		f -= float32(s)
		if s < 0 {
			f, s = 0, 0
		}
		if s >= in-1 {
			f, s = 0, in-1
		}
		ofs[d] = s
		a[2*d] = cvRoundShort((1 - f) * cvCoefScale)
		a[2*d+1] = cvRoundShort(f * cvCoefScale)
	}
	return ofs, a
}

// cvResizeLinear resizes img to w x h as cv2.resize(img, (w, h),
// interpolation=cv2.INTER_LINEAR) does.
func cvResizeLinear(img rgb, w, h int) rgb {
	out := rgb{w: w, h: h, pix: make([]uint8, 3*w*h)}
	if w == img.w && h == img.h {
		copy(out.pix, img.pix)
		return out
	}
	scaleX := 1 / (float64(w) / float64(img.w))
	scaleY := 1 / (float64(h) / float64(img.h))
	if math.Abs(scaleX-2) < 2.220446049250313e-16 && math.Abs(scaleY-2) < 2.220446049250313e-16 {
		// INTER_LINEAR at exactly 1/2 is INTER_AREA's fast path.
		row := 3 * img.w
		for y := 0; y < h; y++ {
			s0 := img.pix[2*y*row:]
			s1 := img.pix[(2*y+1)*row:]
			d := out.pix[3*w*y:]
			for x := 0; x < w; x++ {
				for c := 0; c < 3; c++ {
					i := 6*x + c
					d[3*x+c] = uint8((int(s0[i]) + int(s0[i+3]) + int(s1[i]) + int(s1[i+3]) + 2) >> 2)
				}
			}
		}
		return out
	}
	xofs, alpha := cvLinearTab(img.w, w)
	// The vertical table keeps OpenCV's unclamped weights: only the rows
	// are clamped (a row above the image is row 0, below it the last).
	beta := make([]int32, 2*h)
	yofs := make([]int, h)
	for d := 0; d < h; d++ {
		f := float32(float64(float64(d)+0.5)*scaleY - 0.5)
		s := int(math.Floor(float64(f)))
		f -= float32(s)
		yofs[d] = s
		beta[2*d] = cvRoundShort((1 - f) * cvCoefScale)
		beta[2*d+1] = cvRoundShort(f * cvCoefScale)
	}
	clip := func(y int) int { return max(0, min(img.h-1, y)) }
	// Horizontal pass, one source row at a time, cached.
	hrows := make(map[int][]int32)
	hrow := func(y int) []int32 {
		if r, ok := hrows[y]; ok {
			return r
		}
		src := img.pix[3*img.w*y : 3*img.w*(y+1)]
		r := make([]int32, 3*w)
		for x := 0; x < w; x++ {
			sx, a0, a1 := xofs[x], alpha[2*x], alpha[2*x+1]
			for c := 0; c < 3; c++ {
				v := int32(src[3*sx+c]) * a0
				if sx+1 < img.w {
					v += int32(src[3*(sx+1)+c]) * a1
				}
				r[3*x+c] = v
			}
		}
		hrows[y] = r
		return r
	}
	for y := 0; y < h; y++ {
		s0, s1 := hrow(clip(yofs[y])), hrow(clip(yofs[y]+1))
		b0, b1 := beta[2*y], beta[2*y+1]
		d := out.pix[3*w*y : 3*w*(y+1)]
		for i := range d {
			v := ((b0*(s0[i]>>4))>>16 + (b1*(s1[i]>>4))>>16 + 2) >> 2
			d[i] = uint8(max(0, min(255, v)))
		}
		if y > 0 {
			delete(hrows, yofs[y-1]-1) // rows are visited in order; drop those left behind
		}
	}
	return out
}
