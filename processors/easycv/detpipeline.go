package easycv

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// detPipeline is the test_pipeline of an EasyCV detection config, as far
// as it touches the pixels: MMResize (mmcv's imrescale or imresize, OpenCV
// bilinear), MMPad (mmcv's impad: bottom and right), MMNormalize (mmcv's
// imnormalize, with its BGR to RGB flip). EasyCV loads the image as BGR
// (LoadImage, mode BGR); decodeImage gives RGB, so the channels are mapped
// here instead of flipped.
type detPipeline struct {
	resize    bool
	scale     [2]int // img_scale as written: (w, h) for imresize; long and short edges for imrescale
	keepRatio bool
	pad       string // "", "square", "size", "divisor"
	padSize   [2]int // size: (h, w); divisor: [d, d]
	padVal    [3]float64
	mean, std [3]float32
	toRGB     bool
}

func parseDetPipeline(raw json.RawMessage) (detPipeline, error) {
	var steps []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &steps); err != nil {
		return detPipeline{}, fmt.Errorf("test_pipeline: %v; want a list of {\"type\": ...} objects", err)
	}
	p := detPipeline{padVal: [3]float64{0, 0, 0}}
	stage := 0 // 1 after MMResize, 2 after MMPad, 3 after MMNormalize
	for i, s := range steps {
		var typ string
		if err := json.Unmarshal(s["type"], &typ); err != nil || typ == "" {
			return p, fmt.Errorf("test_pipeline[%d]: no \"type\"", i)
		}
		allowed := map[string]bool{"type": true}
		at := func(k string) string { return fmt.Sprintf("test_pipeline[%d] %s.%s", i, typ, k) }
		switch typ {
		case "MMResize":
			for _, k := range []string{"img_scale", "keep_ratio", "backend", "bbox_clip_border", "multiscale_mode", "override"} {
				allowed[k] = true
			}
			if stage >= 1 {
				return p, fmt.Errorf("test_pipeline[%d]: MMResize after MMResize, MMPad or MMNormalize is not supported", i)
			}
			stage = 1
			p.resize, p.keepRatio = true, true
			var scale []json.RawMessage
			if err := json.Unmarshal(s["img_scale"], &scale); err != nil || len(scale) == 0 {
				return p, fmt.Errorf("%s: want [w, h], got %s", at("img_scale"), strings.TrimSpace(string(s["img_scale"])))
			}
			if len(scale) == 1 || scale[0][0] == '[' {
				if len(scale) != 1 {
					return p, fmt.Errorf("%s: several scales (random multi-scale) are a training setting; a test pipeline has one [w, h]", at("img_scale"))
				}
				raw := scale[0]
				scale = nil
				if err := json.Unmarshal(raw, &scale); err != nil {
					return p, fmt.Errorf("%s: want [w, h]", at("img_scale"))
				}
			}
			if len(scale) != 2 {
				return p, fmt.Errorf("%s: want [w, h]", at("img_scale"))
			}
			for j := range 2 {
				if err := json.Unmarshal(scale[j], &p.scale[j]); err != nil || p.scale[j] < 1 || p.scale[j] > 8192 {
					return p, fmt.Errorf("%s: want two sizes between 1 and 8192, got %s", at("img_scale"), strings.TrimSpace(string(s["img_scale"])))
				}
			}
			if v, ok := s["keep_ratio"]; ok {
				if err := json.Unmarshal(v, &p.keepRatio); err != nil {
					return p, fmt.Errorf("%s: want true or false", at("keep_ratio"))
				}
			}
			if v, ok := s["backend"]; ok {
				var b string
				if json.Unmarshal(v, &b) != nil || b != "cv2" {
					return p, fmt.Errorf("%s: only \"cv2\" (mmcv's default) is supported, got %s", at("backend"), strings.TrimSpace(string(v)))
				}
			}
			if v, ok := s["ratio_range"]; ok && string(v) != "null" {
				return p, fmt.Errorf("%s: a random scale is a training setting", at("ratio_range"))
			}
		case "MMPad":
			for _, k := range []string{"pad_to_square", "size", "size_divisor", "pad_val"} {
				allowed[k] = true
			}
			if stage >= 2 {
				return p, fmt.Errorf("test_pipeline[%d]: MMPad after MMPad or MMNormalize is not supported (the padding would be normalised values)", i)
			}
			stage = 2
			var square bool
			if v, ok := s["pad_to_square"]; ok {
				if err := json.Unmarshal(v, &square); err != nil {
					return p, fmt.Errorf("%s: want true or false", at("pad_to_square"))
				}
			}
			var size []int
			var div int
			if v, ok := s["size"]; ok && string(v) != "null" {
				if err := json.Unmarshal(v, &size); err != nil || len(size) != 2 || size[0] < 1 || size[1] < 1 || size[0] > 8192 || size[1] > 8192 {
					return p, fmt.Errorf("%s: want [h, w]", at("size"))
				}
			}
			if v, ok := s["size_divisor"]; ok && string(v) != "null" {
				if err := json.Unmarshal(v, &div); err != nil || div < 1 || div > 8192 {
					return p, fmt.Errorf("%s: want a positive int", at("size_divisor"))
				}
			}
			switch {
			case square && size == nil && div == 0:
				p.pad = "square"
			case !square && size != nil && div == 0:
				p.pad, p.padSize = "size", [2]int{size[0], size[1]}
			case !square && size == nil && div > 0:
				p.pad, p.padSize = "divisor", [2]int{div, div}
			default:
				return p, fmt.Errorf("test_pipeline[%d]: MMPad wants exactly one of pad_to_square, size, size_divisor", i)
			}
			if v, ok := s["pad_val"]; ok {
				val, err := parsePadVal(v)
				if err != nil {
					return p, fmt.Errorf("%s: %v", at("pad_val"), err)
				}
				p.padVal = val
			}
		case "MMNormalize":
			allowed["mean"], allowed["std"], allowed["to_rgb"] = true, true, true
			if stage >= 3 {
				return p, fmt.Errorf("test_pipeline[%d]: MMNormalize twice", i)
			}
			stage = 3
			var err error
			if p.mean, err = parseTriple(s["mean"], false); err != nil {
				return p, fmt.Errorf("%s: %v", at("mean"), err)
			}
			if p.std, err = parseTriple(s["std"], true); err != nil {
				return p, fmt.Errorf("%s: %v", at("std"), err)
			}
			p.toRGB = true
			if v, ok := s["to_rgb"]; ok {
				if err := json.Unmarshal(v, &p.toRGB); err != nil {
					return p, fmt.Errorf("%s: want true or false", at("to_rgb"))
				}
			}
		case "DefaultFormatBundle", "ImageToTensor", "Collect":
			continue // layout and bookkeeping: CHW float32 is what the network gets
		default:
			return p, fmt.Errorf("test_pipeline[%d]: transform %q is not supported; this processor implements MMResize, MMPad, MMNormalize (and DefaultFormatBundle, ImageToTensor, Collect)", i, typ)
		}
		for k := range s {
			if !allowed[k] {
				return p, fmt.Errorf("test_pipeline[%d]: %s option %q is not supported", i, typ, k)
			}
		}
	}
	if stage < 3 {
		return p, fmt.Errorf("test_pipeline: no MMNormalize; without it EasyCV hands the network uint8 pixels, which an export does not take")
	}
	return p, nil
}

// parsePadVal reads mmcv's pad_val: a number, a list of 3 (per channel,
// BGR) or {"img": either}.
func parsePadVal(raw json.RawMessage) ([3]float64, error) {
	var d map[string]json.RawMessage
	if json.Unmarshal(raw, &d) == nil {
		v, ok := d["img"]
		if !ok {
			return [3]float64{}, nil // mmcv's dict default: img=0
		}
		raw = v
	}
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		return [3]float64{n, n, n}, nil
	}
	var l []float64
	if json.Unmarshal(raw, &l) == nil && len(l) == 3 {
		return [3]float64{l[0], l[1], l[2]}, nil
	}
	return [3]float64{}, fmt.Errorf("want a number, 3 numbers or {\"img\": ...}, got %s", strings.TrimSpace(string(raw)))
}

// resized is the size MMResize makes of an h x w image, and its
// scale_factor[0] (w_scale, float32 as EasyCV keeps it).
func (p detPipeline) resized(h, w int) (int, int, float32) {
	if !p.resize {
		return h, w, 1
	}
	var nw, nh int
	if p.keepRatio {
		// mmcv.rescale_size: the largest factor fitting the long edge in
		// max(scale) and the short in min(scale); int(x * f + 0.5).
		long, short := float64(max(p.scale[0], p.scale[1])), float64(min(p.scale[0], p.scale[1]))
		f := math.Min(long/float64(max(h, w)), short/float64(min(h, w)))
		nw, nh = int(float64(w)*f+0.5), int(float64(h)*f+0.5)
	} else {
		nw, nh = p.scale[0], p.scale[1]
	}
	return nh, nw, float32(float64(nw) / float64(w))
}

// padded is the size MMPad makes of an h x w image.
func (p detPipeline) padded(h, w int) (int, int) {
	switch p.pad {
	case "square":
		s := max(h, w)
		return s, s
	case "size":
		return max(h, p.padSize[0]), max(w, p.padSize[1])
	case "divisor":
		d := p.padSize[0]
		return (h + d - 1) / d * d, (w + d - 1) / d * d
	}
	return h, w
}

// outShape is the network input's (h, w) for an h x w image.
func (p detPipeline) outShape(h, w int) (int, int) {
	h, w, _ = p.resized(h, w)
	return p.padded(h, w)
}

// apply runs the pipeline on an RGB image: the CHW float32 input, its
// size, and the scale factor boxes are divided by.
func (p detPipeline) apply(img rgb) ([]float32, int, int, float32) {
	rh, rw, scale := p.resized(img.h, img.w)
	if p.resize {
		img = cvResizeLinear(img, rw, rh)
	}
	ph, pw := p.padded(rh, rw)
	n := ph * pw
	x := make([]float32, 3*n)
	// Channel c of the network input: after to_rgb the image is RGB, else
	// it stays BGR; pad_val is given per BGR channel.
	for c := 0; c < 3; c++ {
		src := c // index into our RGB pixels
		if !p.toRGB {
			src = 2 - c
		}
		mean := float64(p.mean[c])
		stdinv := 1 / float64(p.std[c])
		padv := math.RoundToEven(p.padVal[2-src])
		padv = math.Max(0, math.Min(255, padv))
		padOut := float32((padv - mean) * stdinv)
		plane := x[c*n : (c+1)*n]
		for y := 0; y < ph; y++ {
			row := plane[y*pw : (y+1)*pw]
			for xx := range row {
				if y >= rh || xx >= rw {
					row[xx] = padOut
					continue
				}
				// imnormalize: cv2.subtract and cv2.multiply with double
				// scalars, rounded to float32 once.
				row[xx] = float32((float64(img.pix[3*(y*rw+xx)+src]) - mean) * stdinv)
			}
		}
	}
	return x, ph, pw, scale
}

func (p detPipeline) describe() string {
	var parts []string
	if p.resize {
		if p.keepRatio {
			parts = append(parts, fmt.Sprintf("MMResize(img_scale=%v, keep_ratio, cv2 bilinear)", p.scale))
		} else {
			parts = append(parts, fmt.Sprintf("MMResize(img_scale=%v, cv2 bilinear)", p.scale))
		}
	}
	switch p.pad {
	case "square":
		parts = append(parts, fmt.Sprintf("MMPad(pad_to_square, pad_val=%v)", p.padVal))
	case "size":
		parts = append(parts, fmt.Sprintf("MMPad(size=%v, pad_val=%v)", p.padSize, p.padVal))
	case "divisor":
		parts = append(parts, fmt.Sprintf("MMPad(size_divisor=%d, pad_val=%v)", p.padSize[0], p.padVal))
	}
	parts = append(parts, fmt.Sprintf("MMNormalize(mean=%v, std=%v, to_rgb=%v)", p.mean, p.std, p.toRGB))
	return strings.Join(parts, ", ")
}
