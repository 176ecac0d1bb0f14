package easycv

import "image"

// PIL decodes JPEG with libjpeg(-turbo), which upsamples subsampled chroma
// with a triangle filter ("fancy upsampling", jdsample.c) and converts
// YCbCr to RGB with 16-bit fixed-point tables (jdcolor.c); Go's image/jpeg
// replicates chroma and rounds differently. Doing both libjpeg's way here
// leaves only the IDCT's rounding between Go's pixels and PIL's.

// libjpeg's YCbCr -> RGB tables.
var cRTab, cBTab, cRGTab, cBGTab [256]int32

func init() {
	const scale, half = 16, 1 << 15
	fix := func(x float64) int32 { return int32(x*(1<<scale) + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		cRTab[i] = (fix(1.40200)*x + half) >> scale
		cBTab[i] = (fix(1.77200)*x + half) >> scale
		cRGTab[i] = -fix(0.71414) * x
		cBGTab[i] = -fix(0.34414)*x + half
	}
}

func clamp255(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// upsampleRow is libjpeg's horizontal fancy upsampling of one chroma row
// pair: in0 is the nearer row (weight 3), in1 the other (weight 1); for
// h2v1 pass in1 == nil. out has 2*len(in0) values.
func upsampleRow(out []uint8, in0, in1 []uint8) {
	n := len(in0)
	if in1 == nil { // h2v1: (3*this + neighbour + 1 or 2) >> 2
		if n == 1 {
			out[0], out[1] = in0[0], in0[0]
			return
		}
		out[0] = in0[0]
		out[1] = uint8((int32(in0[0])*3 + int32(in0[1]) + 2) >> 2)
		for i := 1; i < n-1; i++ {
			v := int32(in0[i]) * 3
			out[2*i] = uint8((v + int32(in0[i-1]) + 1) >> 2)
			out[2*i+1] = uint8((v + int32(in0[i+1]) + 2) >> 2)
		}
		v := int32(in0[n-1])
		out[2*n-2] = uint8((v*3 + int32(in0[n-2]) + 1) >> 2)
		out[2*n-1] = uint8(v)
		return
	}
	col := func(i int) int32 { return int32(in0[i])*3 + int32(in1[i]) }
	if n == 1 {
		out[0] = uint8((col(0)*4 + 8) >> 4)
		out[1] = uint8((col(0)*4 + 7) >> 4)
		return
	}
	this, next := col(0), col(1)
	out[0] = uint8((this*4 + 8) >> 4)
	out[1] = uint8((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = col(i + 1)
		out[2*i] = uint8((this*3 + last + 8) >> 4)
		out[2*i+1] = uint8((this*3 + next + 7) >> 4)
		last, this = this, next
	}
	out[2*n-2] = uint8((this*3 + last + 8) >> 4)
	out[2*n-1] = uint8((this*4 + 7) >> 4)
}

// jpegRGB converts a decoded baseline JPEG the way libjpeg does for 4:4:4,
// 4:2:2 and 4:2:0; ok is false for other layouts (Go's conversion is used).
func jpegRGB(m *image.YCbCr) (rgb, bool) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	if m.Rect.Min != (image.Point{}) {
		return rgb{}, false
	}
	var hs, vs int // chroma subsampling factors
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
		hs, vs = 1, 1
	case image.YCbCrSubsampleRatio422:
		hs, vs = 2, 1
	case image.YCbCrSubsampleRatio420:
		hs, vs = 2, 2
	default:
		return rgb{}, false
	}
	cw, ch := (w+hs-1)/hs, (h+vs-1)/vs
	// libjpeg replicates chroma instead of filtering when the chroma
	// plane is at most 2 samples wide.
	replicate := hs == 2 && cw <= 2
	out := rgb{w: w, h: h, pix: make([]uint8, 3*w*h)}
	cbRow, crRow := make([]uint8, cw*hs), make([]uint8, cw*hs)
	chromaRow := func(plane []uint8, y int) []uint8 { return plane[y*m.CStride : y*m.CStride+cw] }
	for y := 0; y < h; y++ {
		for i, pl := range [][]uint8{m.Cb, m.Cr} {
			dst := cbRow
			if i == 1 {
				dst = crRow
			}
			cy := y / vs
			switch {
			case replicate:
				for x, v := range chromaRow(pl, cy) {
					dst[2*x], dst[2*x+1] = v, v
				}
			case hs == 1:
				copy(dst, chromaRow(pl, cy))
			case vs == 1:
				upsampleRow(dst, chromaRow(pl, cy), nil)
			default:
				// The upper output row of a pair leans on the chroma row
				// above, the lower on the one below; edges repeat.
				other := cy - 1
				if y%2 == 1 {
					other = cy + 1
				}
				other = min(max(other, 0), ch-1)
				upsampleRow(dst, chromaRow(pl, cy), chromaRow(pl, other))
			}
		}
		yRow := m.Y[y*m.YStride:]
		o := out.pix[3*w*y:]
		for x := 0; x < w; x++ {
			yy, cb, cr := int32(yRow[x]), cbRow[x], crRow[x]
			o[3*x] = clamp255(yy + cRTab[cr])
			o[3*x+1] = clamp255(yy + ((cBGTab[cb] + cRGTab[cr]) >> 16))
			o[3*x+2] = clamp255(yy + cBTab[cb])
		}
	}
	return out, true
}
