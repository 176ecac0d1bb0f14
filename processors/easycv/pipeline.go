package easycv

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// pipeline is EasyCV's classification test_pipeline as far as it touches
// the pixels: PIL-image transforms in order (Resize, CenterCrop), then
// ToTensor (/255) and Normalize ((x-mean)/std), all as torchvision does them.
type pipeline struct {
	ops       []op
	mean, std [3]float32
}

// op is a Resize or a CenterCrop on a PIL image.
type op struct {
	kind   string // "Resize" or "CenterCrop"
	size   []int  // Resize: [short side] or [h, w]; CenterCrop: [h, w]
	interp string // Resize: a key of filters
}

// ImageNet's statistics: EasyCV's img_norm_cfg in every classification
// config and the default of its classification export.
var (
	defaultMean = [3]float32{0.485, 0.456, 0.406}
	defaultStd  = [3]float32{0.229, 0.224, 0.225}
)

// defaultPipeline is the test_pipeline of EasyCV's ImageNet classification
// configs: Resize(256) on the shorter side, CenterCrop(224), ToTensor,
// Normalize with ImageNet's mean and std.
func defaultPipeline() pipeline {
	return pipeline{
		ops:  []op{{kind: "Resize", size: []int{256}, interp: "bilinear"}, {kind: "CenterCrop", size: []int{224, 224}}},
		mean: defaultMean, std: defaultStd,
	}
}

// pilInterp maps torchvision's InterpolationMode names and PIL's integer
// constants to the filters implemented here.
var pilInterp = map[string]string{
	"bilinear": "bilinear", "2": "bilinear", "bicubic": "bicubic", "3": "bicubic", "box": "box", "4": "box",
}

// parsePipeline reads an EasyCV test_pipeline (a JSON list of
// {"type": ..., ...}). Collect is ignored; a transform not implemented here
// is an error naming it.
func parsePipeline(raw json.RawMessage) (pipeline, error) {
	var steps []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &steps); err != nil {
		return pipeline{}, fmt.Errorf("test_pipeline: %v; want a list of {\"type\": ...} objects", err)
	}
	p := pipeline{mean: [3]float32{0, 0, 0}, std: [3]float32{1, 1, 1}}
	tensor := false
	for i, s := range steps {
		var typ string
		if err := json.Unmarshal(s["type"], &typ); err != nil || typ == "" {
			return pipeline{}, fmt.Errorf("test_pipeline[%d]: no \"type\"", i)
		}
		allowed := map[string]bool{"type": true}
		switch typ {
		case "Resize":
			allowed["size"], allowed["interpolation"] = true, true
			if tensor {
				return pipeline{}, fmt.Errorf("test_pipeline[%d]: Resize after ToTensor is not supported (PIL-image transforms come first)", i)
			}
			size, err := parseSize(s["size"], false)
			if err != nil {
				return pipeline{}, fmt.Errorf("test_pipeline[%d] Resize.size: %v", i, err)
			}
			interp, err := parseInterp(s["interpolation"])
			if err != nil {
				return pipeline{}, fmt.Errorf("test_pipeline[%d] Resize.interpolation: %v", i, err)
			}
			p.ops = append(p.ops, op{kind: typ, size: size, interp: interp})
		case "CenterCrop":
			allowed["size"] = true
			if tensor {
				return pipeline{}, fmt.Errorf("test_pipeline[%d]: CenterCrop after ToTensor is not supported (PIL-image transforms come first)", i)
			}
			size, err := parseSize(s["size"], true)
			if err != nil {
				return pipeline{}, fmt.Errorf("test_pipeline[%d] CenterCrop.size: %v", i, err)
			}
			p.ops = append(p.ops, op{kind: typ, size: size})
		case "ToTensor":
			tensor = true
		case "Normalize":
			allowed["mean"], allowed["std"], allowed["inplace"] = true, true, true
			if !tensor {
				return pipeline{}, fmt.Errorf("test_pipeline[%d]: Normalize before ToTensor is not supported", i)
			}
			var err error
			if p.mean, err = parseTriple(s["mean"], false); err != nil {
				return pipeline{}, fmt.Errorf("test_pipeline[%d] Normalize.mean: %v", i, err)
			}
			if p.std, err = parseTriple(s["std"], true); err != nil {
				return pipeline{}, fmt.Errorf("test_pipeline[%d] Normalize.std: %v", i, err)
			}
		case "Collect":
			continue
		default:
			return pipeline{}, fmt.Errorf("test_pipeline[%d]: transform %q is not supported; this processor implements Resize, CenterCrop, ToTensor, Normalize (and ignores Collect)", i, typ)
		}
		for k := range s {
			if !allowed[k] {
				return pipeline{}, fmt.Errorf("test_pipeline[%d]: %s option %q is not supported", i, typ, k)
			}
		}
	}
	if !tensor {
		return pipeline{}, fmt.Errorf("test_pipeline: no ToTensor step; a classifier takes a float tensor")
	}
	return p, nil
}

// parseSize reads a torchvision size: an int or [int] (Resize: the shorter
// side; CenterCrop: a square) or [h, w].
func parseSize(raw json.RawMessage, square bool) ([]int, error) {
	var n int
	var list []int
	if err := json.Unmarshal(raw, &n); err == nil && raw != nil {
		list = []int{n}
	} else if err := json.Unmarshal(raw, &list); err != nil || len(list) < 1 || len(list) > 2 {
		return nil, fmt.Errorf("%s: want an int or [h, w]", strings.TrimSpace(string(raw)))
	}
	for _, v := range list {
		if v < 1 || v > 8192 {
			return nil, fmt.Errorf("%d: sizes must be between 1 and 8192", v)
		}
	}
	if square && len(list) == 1 {
		list = []int{list[0], list[0]}
	}
	return list, nil
}

func parseInterp(raw json.RawMessage) (string, error) {
	if raw == nil {
		return "bilinear", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		s = strings.TrimSpace(string(raw))
	}
	if f, ok := pilInterp[strings.ToLower(s)]; ok {
		return f, nil
	}
	return "", fmt.Errorf("%s is not supported; use bilinear (2), bicubic (3) or box (4)", s)
}

func parseTriple(raw json.RawMessage, positive bool) ([3]float32, error) {
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil || len(v) != 3 {
		return [3]float32{}, fmt.Errorf("want 3 numbers (one per RGB channel), got %s", strings.TrimSpace(string(raw)))
	}
	var out [3]float32
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || (positive && x <= 0) {
			return out, fmt.Errorf("%v is not allowed", x)
		}
		out[i] = float32(x)
	}
	return out, nil
}

// outShape is the (h, w) an image of the given size comes out at, and
// whether every image comes out at that size (the pipeline ends in a fixed
// size): requests then batch together.
func (p pipeline) outShape(h, w int) (int, int) {
	for _, o := range p.ops {
		switch {
		case o.kind == "CenterCrop":
			h, w = o.size[0], o.size[1]
		case len(o.size) == 2:
			h, w = o.size[0], o.size[1]
		default:
			h, w = resizedShort(h, w, o.size[0])
		}
	}
	return h, w
}

// largest is the pixel count of the largest image the transforms make
// from an h x w input: a resize of a very thin image's shorter side
// multiplies its longer one.
func (p pipeline) largest(h, w int) int64 {
	n := int64(h) * int64(w)
	for _, o := range p.ops {
		switch {
		case o.kind == "CenterCrop":
			h, w = max(h, o.size[0]), max(w, o.size[1]) // padded first
			n = max(n, int64(h)*int64(w))
			h, w = o.size[0], o.size[1]
		case len(o.size) == 2:
			h, w = o.size[0], o.size[1]
		default:
			h, w = resizedShort(h, w, o.size[0])
		}
		n = max(n, int64(h)*int64(w))
	}
	return n
}

// resizedShort is torchvision's output size for Resize(int): the shorter
// side becomes size, the longer int(size * long / short).
func resizedShort(h, w, size int) (int, int) {
	if w <= h {
		return int(float64(size*h) / float64(w)), size
	}
	return size, int(float64(size*w) / float64(h))
}

// apply runs the PIL-image transforms.
func (p pipeline) apply(img rgb) rgb {
	for _, o := range p.ops {
		if o.kind == "CenterCrop" {
			img = centerCrop(img, o.size[0], o.size[1])
			continue
		}
		h, w := img.h, img.w
		if len(o.size) == 2 {
			h, w = o.size[0], o.size[1]
		} else {
			h, w = resizedShort(img.h, img.w, o.size[0])
		}
		img = resize(img, w, h, filters[o.interp])
	}
	return img
}

// centerCrop is torchvision's center_crop: zero-pad an image smaller than
// the crop (the odd pixel on the right/bottom), then cut at
// round((size - crop) / 2) with Python's round-half-to-even.
func centerCrop(img rgb, ch, cw int) rgb {
	if cw > img.w || ch > img.h {
		left, top := max(0, (cw-img.w)/2), max(0, (ch-img.h)/2)
		right, bottom := max(0, (cw-img.w+1)/2), max(0, (ch-img.h+1)/2)
		padded := rgb{w: img.w + left + right, h: img.h + top + bottom}
		padded.pix = make([]uint8, 3*padded.w*padded.h)
		for y := 0; y < img.h; y++ {
			copy(padded.pix[3*((y+top)*padded.w+left):], img.pix[3*y*img.w:3*(y+1)*img.w])
		}
		img = padded
		if img.w == cw && img.h == ch {
			return img
		}
	}
	top := int(math.RoundToEven(float64(img.h-ch) / 2))
	left := int(math.RoundToEven(float64(img.w-cw) / 2))
	out := rgb{w: cw, h: ch, pix: make([]uint8, 3*cw*ch)}
	for y := 0; y < ch; y++ {
		copy(out.pix[3*y*cw:3*(y+1)*cw], img.pix[3*((y+top)*img.w+left):])
	}
	return out
}

// toCHW is ToTensor then Normalize: float32(v)/255, then (x-mean)/std per
// channel, in float32 as torch computes it, laid out channel-first.
func (p pipeline) toCHW(img rgb, dst []float32) {
	n := img.w * img.h
	for c := 0; c < 3; c++ {
		m, s := p.mean[c], p.std[c]
		plane := dst[c*n : (c+1)*n]
		for i := range plane {
			x := float32(img.pix[3*i+c]) / 255
			plane[i] = (x - m) / s
		}
	}
}

// describe renders the pipeline for logs and metadata.
func (p pipeline) describe() string {
	var parts []string
	for _, o := range p.ops {
		if o.kind == "CenterCrop" {
			parts = append(parts, fmt.Sprintf("CenterCrop(%dx%d)", o.size[0], o.size[1]))
		} else {
			parts = append(parts, fmt.Sprintf("Resize(%v, %s)", o.size, o.interp))
		}
	}
	parts = append(parts, "ToTensor", fmt.Sprintf("Normalize(mean=%v, std=%v)", p.mean, p.std))
	return strings.Join(parts, ", ")
}
