package easycv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// forwards counts the forward calls of every classifier in the process,
// for tests that check that batching merged requests.
var forwards atomic.Int64

// ErrNotLoaded is returned by Run before Load or after Close.
var ErrNotLoaded = errors.New("easycv model is not loaded")

// Payload is one request, decoded and preprocessed on the caller's
// goroutine: one CHW float32 row per image.
type Payload struct {
	list bool // the body was a JSON list: answer a list
	h, w int  // every row's height and width (see Decode)
	rows [][]float32
	dets []*detImage // YoloXPredictor: the images, preprocessed
}

// Result is the model's probabilities, one slice per image.
type Result struct {
	probs [][]float32
	dets  []detAnswer // YoloXPredictor
}

// imageRequest is one {"image": "<base64>"} object; other keys are ignored,
// as EasyCV's processor ignores them.
type imageRequest struct {
	Image *json.RawMessage `json:"image"`
}

// maxImages bounds the images of one request.
const maxImages = 1024

// Decode parses {"image": base64} or a list of them, decodes each image,
// and preprocesses it as EasyCV's pipeline does.
func (c *Classifier) Decode(_ context.Context, req *processors.Request) (*Payload, error) {
	body := bytes.TrimSpace(req.Body)
	var reqs []imageRequest
	p := &Payload{}
	switch {
	case len(body) > 0 && body[0] == '[':
		p.list = true
		var items []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return nil, badinput.Errorf("request body: %v; send {\"image\": \"<base64 JPEG or PNG>\"} or a list of such objects", err)
		}
		reqs = make([]imageRequest, len(items))
		for i, it := range items {
			if len(it) == 0 || it[0] != '{' || json.Unmarshal(it, &reqs[i]) != nil {
				return nil, badinput.Errorf("[%d]: must be an object {\"image\": \"<base64 JPEG or PNG>\"}, got %s", i, jsonKind(it))
			}
		}
		if len(reqs) == 0 {
			return nil, badinput.Errorf("request body: an empty list; send at least one {\"image\": \"<base64>\"}")
		}
		if len(reqs) > maxImages {
			return nil, badinput.Errorf("request body: %d images, more than %d in one request", len(reqs), maxImages)
		}
	case len(body) > 0 && body[0] == '{':
		var one imageRequest
		if err := json.Unmarshal(body, &one); err != nil {
			return nil, badinput.Errorf("request body: %v; send {\"image\": \"<base64 JPEG or PNG>\"}", err)
		}
		reqs = []imageRequest{one}
	default:
		return nil, badinput.Errorf("request body: not a JSON object or list; send {\"image\": \"<base64 JPEG or PNG>\"} or a list of such objects")
	}
	for i, r := range reqs {
		field := "image"
		if p.list {
			field = fmt.Sprintf("[%d].image", i)
		}
		if c.det != nil {
			im, err := c.det.preprocess(field, r.Image)
			if err != nil {
				return nil, err
			}
			p.dets = append(p.dets, im)
			continue
		}
		row, h, w, err := c.preprocess(field, r.Image)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			p.h, p.w = h, w
		} else if h != p.h || w != p.w {
			return nil, badinput.Errorf("%s: preprocessed to %dx%d but %s to %dx%d; without a centre crop, the images of one request must come out at one size (send them separately, or set model_config.crop_size)",
				field, w, h, "[0].image", p.w, p.h)
		}
		p.rows = append(p.rows, row)
	}
	return p, nil
}

// preprocess decodes one image field and runs the pipeline on it.
func (c *Classifier) preprocess(field string, raw *json.RawMessage) ([]float32, int, int, error) {
	if raw == nil || string(*raw) == "null" {
		return nil, 0, 0, badinput.Errorf("%s: missing; send {\"image\": \"<base64 JPEG or PNG>\"}", field)
	}
	var s string
	if err := json.Unmarshal(*raw, &s); err != nil {
		return nil, 0, 0, badinput.Errorf("%s: must be a base64 string, got %s", field, jsonKind(*raw))
	}
	b, err := decodeBase64(field, s)
	if err != nil {
		return nil, 0, 0, err
	}
	img, err := decodeImage(field, b, c.cfg.MaxImagePixels)
	if err != nil {
		return nil, 0, 0, err
	}
	if n := c.pipe.largest(img.h, img.w); n > c.cfg.MaxImagePixels {
		return nil, 0, 0, badinput.Errorf("%s: the %dx%d image would be resized to %d pixels, over the %d-pixel limit (model_config.max_image_pixels); its aspect ratio is too extreme",
			field, img.w, img.h, n, c.cfg.MaxImagePixels)
	}
	img = c.pipe.apply(img)
	row := make([]float32, 3*img.w*img.h)
	c.pipe.toCHW(img, row)
	return row, img.h, img.w, nil
}

func jsonKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// BatchKey lets requests whose images come out at one size share a
// forward; with a centre crop, that is every request.
func (c *Classifier) BatchKey(p *Payload) (string, bool) {
	if c.det != nil {
		// An export has a fixed batch size (1 by default): images run one
		// forward each, so batching only gathers requests.
		return "yolox", true
	}
	return strconv.Itoa(p.h) + "x" + strconv.Itoa(p.w), true
}

// Run stacks the images of every payload into one NCHW batch per size,
// runs forward once per size, and splits the probabilities back.
func (c *Classifier) Run(ctx context.Context, batch []*Payload) ([]*Result, error) {
	if c.det != nil {
		results := make([]*Result, len(batch))
		for i, p := range batch {
			r := &Result{}
			for _, im := range p.dets {
				a, err := c.det.run(ctx, im)
				if err != nil {
					return nil, err
				}
				r.dets = append(r.dets, a)
			}
			results[i] = r
		}
		return results, nil
	}
	if c.mod == nil {
		return nil, ErrNotLoaded
	}
	results := make([]*Result, len(batch))
	done := make([]bool, len(batch))
	for i := range batch {
		if done[i] {
			continue
		}
		// The payloads of this size, from i on.
		var group []int
		var rows [][]float32
		for j := i; j < len(batch); j++ {
			if !done[j] && batch[j].h == batch[i].h && batch[j].w == batch[i].w {
				group = append(group, j)
				rows = append(rows, batch[j].rows...)
				done[j] = true
			}
		}
		probs, err := c.forward(ctx, rows, batch[i].h, batch[i].w)
		if err != nil {
			return nil, err
		}
		for _, j := range group {
			n := len(batch[j].rows)
			results[j] = &Result{probs: probs[:n:n]}
			probs = probs[n:]
		}
	}
	return results, nil
}

// rowsTensor stacks CHW rows into one [N, 3, H, W] float32 tensor.
func rowsTensor(rows [][]float32, h, w int) []tensor.Tensor {
	flat := make([]float32, 0, len(rows)*3*h*w)
	for _, r := range rows {
		flat = append(flat, r...)
	}
	return []tensor.Tensor{tensor.Own("img", []int64{int64(len(rows)), 3, int64(h), int64(w)}, flat)}
}

// forward runs one batch and returns each row's probabilities.
func (c *Classifier) forward(ctx context.Context, rows [][]float32, h, w int) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	forwards.Add(1)
	outs, err := c.mod.Forward(rowsTensor(rows, h, w))
	if err != nil {
		if errors.Is(err, torchscript.ErrClosed) {
			return nil, ErrNotLoaded
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("easycv: forward on %d images of %dx%d: %w", len(rows), w, h, err)
	}
	var out *tensor.Tensor
	for i := range outs {
		if outs[i].Name == c.out {
			out = &outs[i]
		}
	}
	if out == nil || len(out.Shape) != 2 || out.Shape[0] != int64(len(rows)) || out.Shape[1] != int64(c.nclass) {
		return nil, fmt.Errorf("easycv: the model's output %q is not [%d, %d] for %d images: %s", c.out, len(rows), c.nclass, len(rows), describeOutputs(outs))
	}
	vals, err := toFloat32(*out)
	if err != nil {
		return nil, fmt.Errorf("easycv: output %q: %w", c.out, err)
	}
	res := make([][]float32, len(rows))
	for i := range res {
		res[i] = activate(vals[i*c.nclass:(i+1)*c.nclass:(i+1)*c.nclass], c.act)
	}
	return res, nil
}

func toFloat32(t tensor.Tensor) ([]float32, error) {
	switch t.DType {
	case tensor.Float32:
		return t.AsFloat32()
	case tensor.Float64:
		v, err := t.AsFloat64()
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out, err
	case tensor.Float16, tensor.BFloat16:
		raw := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(t.Data))), len(t.Data)/2)
		out := make([]float32, len(raw))
		for i, h := range raw {
			if t.DType == tensor.Float16 {
				out[i] = tensor.Float16ToFloat32(h)
			} else {
				out[i] = tensor.BFloat16ToFloat32(h)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %s; a classifier returns floating-point scores", t.DType)
}

func describeOutputs(outs []tensor.Tensor) string {
	var b bytes.Buffer
	for i, o := range outs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q %s %s", o.Name, o.DType, tensor.FormatShape(o.Shape))
	}
	if len(outs) == 0 {
		return "no outputs"
	}
	return b.String()
}

// pickOutput chooses the output holding the scores and how to turn them
// into probabilities: EasyCV's forward_test returns {"prob": softmax,
// "class": argmax}; a plainly traced network returns logits.
func pickOutput(outs []tensor.Tensor, activation string) (string, string, error) {
	rank2 := func(o tensor.Tensor) bool {
		return len(o.Shape) == 2 && o.Shape[1] > 0 && (o.DType == tensor.Float32 || o.DType == tensor.Float64 || o.DType == tensor.Float16 || o.DType == tensor.BFloat16)
	}
	for _, o := range outs {
		if o.Name == "prob" && rank2(o) {
			if activation == "auto" {
				activation = "none"
			}
			return o.Name, activation, nil
		}
	}
	var cands []string
	for _, o := range outs {
		if rank2(o) {
			cands = append(cands, o.Name)
		}
	}
	if len(cands) != 1 {
		return "", "", fmt.Errorf("cannot tell which output holds the class scores (want a \"prob\" output, as EasyCV's forward_test returns, or one [N, classes] tensor): %s", describeOutputs(outs))
	}
	if activation == "auto" {
		activation = "softmax"
	}
	return cands[0], activation, nil
}

// activate turns one row of scores into probabilities.
func activate(v []float32, act string) []float32 {
	switch act {
	case "softmax":
		m := math.Inf(-1)
		for _, x := range v {
			m = math.Max(m, float64(x))
		}
		sum := 0.0
		e := make([]float64, len(v))
		for i, x := range v {
			e[i] = math.Exp(float64(x) - m)
			sum += e[i]
		}
		out := make([]float32, len(v))
		for i := range v {
			out[i] = float32(e[i] / sum)
		}
		return out
	case "sigmoid":
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(1 / (1 + math.Exp(-float64(x))))
		}
		return out
	}
	return v
}

// Encode answers EasyCV's result for each image: {"class": [top-k
// indices], "class_name": [their names], "class_probs": {name: prob} in
// class order}; an object for an object request, a list for a list.
func (c *Classifier) Encode(_ context.Context, p *Payload, r *Result) (*processors.Response, error) {
	if c.det != nil {
		var b strings.Builder
		if p.list {
			b.WriteByte('[')
		}
		for i, a := range r.dets {
			if i > 0 {
				b.WriteByte(',')
			}
			c.det.encode(&b, a, p.dets[i].scale)
		}
		if p.list {
			b.WriteByte(']')
		}
		return &processors.Response{Body: []byte(b.String()), ContentType: "application/json"}, nil
	}
	var b bytes.Buffer
	if p.list {
		b.WriteByte('[')
	}
	for i, probs := range r.probs {
		if i > 0 {
			b.WriteByte(',')
		}
		c.encodeOne(&b, probs)
	}
	if p.list {
		b.WriteByte(']')
	}
	return &processors.Response{Body: b.Bytes(), ContentType: "application/json"}, nil
}

func (c *Classifier) encodeOne(b *bytes.Buffer, probs []float32) {
	k := min(c.cfg.TopK, len(probs))
	idx := topK(probs, k)
	b.WriteString(`{"class":[`)
	for i, x := range idx {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	b.WriteString(`],"class_name":[`)
	for i, x := range idx {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, c.classes[x])
	}
	b.WriteString(`],"class_probs":{`)
	// Python dict semantics: a repeated name keeps its first position and
	// its last value.
	last := make(map[string]int, len(c.classes))
	for i, n := range c.classes {
		last[n] = i
	}
	seen := make(map[string]bool, len(c.classes))
	first := true
	for _, n := range c.classes {
		if seen[n] {
			continue
		}
		seen[n] = true
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeString(b, n)
		b.WriteByte(':')
		writeFloat(b, probs[last[n]])
	}
	b.WriteString("}}")
}

// topK returns the indices of the k largest probabilities, largest first;
// ties go to the lower index.
func topK(p []float32, k int) []int {
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
	return idx[:k]
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}

// writeFloat writes a float32 in its shortest form; NaN and infinities,
// which JSON lacks, are null.
func writeFloat(b *bytes.Buffer, f float32) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		b.WriteString("null")
		return
	}
	b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
}
