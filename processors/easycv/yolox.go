package easycv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
)

// EasyCV's YoloXPredictor (easycv/predictors/detector.py) on an export of
// EasyCV's YOLOX (easycv/apis/export.py, _export_yolox):
//
//   - export_type "onnx": torch.onnx.export of the network, whose output is
//     the decoded head, [N, anchors, 5 + classes] (cx, cy, w, h, objectness,
//     class scores). The predictor runs EasyCV's postprocess on it: corners
//     from centres, the best class, keep objectness * class score >=
//     test_conf, class-aware NMS at nms_thre (torchvision's batched_nms).
//     Here ONNX Runtime runs the network and the postprocess is in Go.
//   - export_type "jit": the network traced with that postprocess inside
//     (torchvision::nms in the graph): one [K, 7] tensor per image, (x1, y1,
//     x2, y2, objectness, class score, class). libtorch needs torchvision's
//     operators for it; torchscript.LoadOpsLibrary loads them.
//   - A TorchScript file whose output is the [N, anchors, 5 + classes]
//     prediction (a network traced without its postprocess, what EasyCV's
//     blade export holds) gets the Go postprocess, as the predictor does for
//     blade.
//
// Then, per image, YoloXOutputProcessor and DetOutputProcessor: boxes
// divided by the resize's scale factor (back to the original image),
// scores objectness * class score, the detections over score_thresh, and
// class names from the export's config.

// yoloxTypes are the model_config types served by the detector:
// TorchYoloXPredictor is EasyCV's deprecated name for the same predictor.
var yoloxTypes = map[string]bool{"YoloXPredictor": true, "TorchYoloXPredictor": true}

const yoloxAccepts = `{"type": "YoloXPredictor", "score_thresh", "nms_thresh", "test_conf", "max_image_pixels", "intra_op_threads"}`

// yoloxModelFile is what a YOLOX export may be: EasyCV names them
// <name>.onnx, <name>.jit, <name>.blade (or a raw checkpoint, refused).
var yoloxModelFile = processors.ModelFile{
	Kind: "EasyCV YOLOX export", Exts: []string{".onnx", ".jit", ".pt", ".torchscript", ".blade", ".pth"}, MaxDepth: 4,
}

// yoloxExportRecipe says how to make what this processor serves.
const yoloxExportRecipe = "export it with EasyCV's tools/export.py and a config whose export = dict(export_type='onnx') (or 'jit'), which writes <name>.onnx (or .jit) and <name>.onnx.config.json beside it"

// detector serves one YOLOX export.
type detector struct {
	cfg         Config
	threads     int
	file        string
	exportType  string // "onnx" or "jit"
	end2end     bool   // the TorchScript graph does its own postprocess
	pre         detPipeline
	classes     []string
	testConf    float32
	nmsThre     float64
	scoreThresh float32
	inH, inW    int    // the export's input size (from the ONNX model; 0 when dynamic)
	inName      string // the ONNX model's input (EasyCV names it "input")
	ort         *onnx.Model
	mod         *torchscript.Module
}

// detConfigFile is the JSON EasyCV writes beside a YOLOX export.
type detConfigFile struct {
	Model struct {
		TestConf *float64 `json:"test_conf"`
		NMSThre  *float64 `json:"nms_thre"`
	} `json:"model"`
	Export struct {
		ExportType         string `json:"export_type"`
		PreprocessJit      bool   `json:"preprocess_jit"`
		UseTrtEfficientNMS bool   `json:"use_trt_efficientnms"`
	} `json:"export"`
	TestPipeline json.RawMessage `json:"test_pipeline"`
	CLASSES      []string        `json:"CLASSES"`
	Classes      []string        `json:"classes"`
}

// configureDetector checks model_config for a YOLOX type: only the keys
// YoloXPredictor has (and the processor's own limits) are accepted.
func configureDetector(spec processors.Spec) (*detector, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(spec.ModelConfig, &raw); err == nil {
		for k := range raw {
			switch k {
			case "type", "score_thresh", "nms_thresh", "test_conf", "max_image_pixels", "intra_op_threads":
			default:
				return nil, fmt.Errorf("model_config.%s: not a YoloXPredictor setting; %s accepts %s", k, Code, yoloxAccepts)
			}
		}
	}
	var cfg Config
	if err := spec.DecodeConfig(&cfg, yoloxAccepts); err != nil {
		return nil, err
	}
	for name, v := range map[string]*float64{"score_thresh": cfg.ScoreThresh, "nms_thresh": cfg.NMSThresh, "test_conf": cfg.TestConf} {
		if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 1) {
			return nil, fmt.Errorf("model_config.%s: must be between 0 and 1, got %v", name, *v)
		}
	}
	if cfg.MaxImagePixels == 0 {
		cfg.MaxImagePixels = defaultMaxPixels
	}
	if cfg.MaxImagePixels < 0 {
		return nil, fmt.Errorf("model_config.max_image_pixels: must be > 0, got %d", cfg.MaxImagePixels)
	}
	if cfg.IntraOpThreads < 0 || cfg.IntraOpThreads > 1024 {
		return nil, fmt.Errorf("model_config.intra_op_threads: must be between 0 and 1024, got %d", cfg.IntraOpThreads)
	}
	return &detector{cfg: cfg, threads: spec.IntraOpThreads(cfg.IntraOpThreads)}, nil
}

// load finds the export and its config, and loads the network.
func (d *detector) load(ctx context.Context, spec processors.Spec, files processors.Files) error {
	file, err := yoloxModelFile.Find(files.ModelPath, spec.ModelEntry)
	if err != nil {
		return err
	}
	if _, err := processors.StatModel(file, spec.ModelLimit()); err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	base := filepath.Base(file)
	ext := strings.ToLower(filepath.Ext(file))
	ts, err := torchscript.IsTorchScript(file)
	if err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	switch {
	case ext == ".blade":
		return fmt.Errorf("model_path: %s is a PAI-Blade export, which needs the torch_blade runtime (TensorRT/PAI-Blade kernels) that this server does not have; %s", base, yoloxExportRecipe)
	case ext == ".onnx":
		d.exportType = "onnx"
	case ts:
		d.exportType = "jit"
	default:
		return fmt.Errorf("model_path: %s is neither an ONNX model nor a TorchScript archive; EasyCV's raw export (export_type 'raw') is a torch.save checkpoint that needs EasyCV's Python model code; %s", base, yoloxExportRecipe)
	}
	cfgPath := file + ".config.json"
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("model_path: %s has no %s beside it; YoloXPredictor reads the export's test_pipeline and classes from it (EasyCV's export writes it)", base, filepath.Base(cfgPath))
		}
		return fmt.Errorf("%s: %w", filepath.Base(cfgPath), err)
	}
	var ec detConfigFile
	if err := json.Unmarshal(b, &ec); err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(cfgPath), err)
	}
	switch {
	case ec.Export.UseTrtEfficientNMS:
		return fmt.Errorf("%s: export.use_trt_efficientnms is set: the export calls TensorRT's EfficientNMS plugin through torch_blade, which this server does not have; re-export with use_trt_efficientnms=False", filepath.Base(cfgPath))
	case ec.Export.PreprocessJit:
		return fmt.Errorf("%s: export.preprocess_jit is set: EasyCV then preprocesses with the exported %s.preprocess TorchScript (tensor resize, not mmcv's), which this server does not run; re-export with preprocess_jit=False", filepath.Base(cfgPath), strings.TrimSuffix(base, filepath.Ext(base)))
	}
	d.classes = ec.CLASSES
	if len(d.classes) == 0 {
		d.classes = ec.Classes
	}
	if len(d.classes) == 0 {
		return fmt.Errorf("%s: no CLASSES or classes; YoloXPredictor needs the class names", filepath.Base(cfgPath))
	}
	if ec.TestPipeline == nil || string(ec.TestPipeline) == "null" {
		return fmt.Errorf("%s: no test_pipeline", filepath.Base(cfgPath))
	}
	if d.pre, err = parseDetPipeline(ec.TestPipeline); err != nil {
		return fmt.Errorf("%s: %v", filepath.Base(cfgPath), err)
	}
	// YoloXPredictor: test_conf or cfg.model.test_conf or 0.01; nms_thresh
	// or cfg.model.nms_thre or 0.65 (a 0 setting falls through, as Python's
	// "or" does); score_thresh defaults to 0.5.
	pick := func(set *float64, file *float64, def float64) float64 {
		if set != nil && *set != 0 {
			return *set
		}
		if file != nil && *file != 0 {
			return *file
		}
		return def
	}
	d.testConf = float32(pick(d.cfg.TestConf, ec.Model.TestConf, 0.01))
	d.nmsThre = pick(d.cfg.NMSThresh, ec.Model.NMSThre, 0.65)
	d.scoreThresh = 0.5
	if d.cfg.ScoreThresh != nil {
		d.scoreThresh = float32(*d.cfg.ScoreThresh)
	}
	d.file = file
	if d.exportType == "onnx" {
		return d.loadONNX(ctx, spec, file)
	}
	return d.loadJit(ctx, file)
}

func (d *detector) loadONNX(ctx context.Context, spec processors.Spec, file string) error {
	rt := onnx.NewRuntime(Code, false, Code)
	s := spec
	s.ModelSource, s.ModelEntry = file, ""
	s.ModelConfig = []byte(fmt.Sprintf(`{"intra_op_threads": %d}`, d.threads))
	if err := rt.Configure(s); err != nil {
		return err
	}
	if err := rt.Load(ctx, processors.Files{ModelPath: file}); err != nil {
		return fmt.Errorf("load %s: %w", filepath.Base(file), err)
	}
	md := rt.Metadata()
	if len(md.Inputs) != 1 || len(md.Inputs[0].Shape) != 4 || len(md.Outputs) < 1 {
		rt.Close()
		return fmt.Errorf("load %s: the model takes %d inputs and gives %d outputs; an EasyCV YOLOX export takes one image [N, 3, H, W] and gives [N, anchors, 5 + classes]", filepath.Base(file), len(md.Inputs), len(md.Outputs))
	}
	shape := md.Inputs[0].Shape
	if shape[1] != 3 && shape[1] != -1 {
		rt.Close()
		return fmt.Errorf("load %s: the input is %v; an EasyCV YOLOX export takes [N, 3, H, W]", filepath.Base(file), shape)
	}
	if shape[2] > 0 && shape[3] > 0 {
		d.inH, d.inW = int(shape[2]), int(shape[3])
	}
	d.inName = md.Inputs[0].Name
	d.ort = rt
	return d.probe(ctx)
}

func (d *detector) loadJit(ctx context.Context, file string) error {
	opts := torchscript.Options{Threads: d.threads, Device: "cpu"}
	mod, err := torchscript.Load(file, opts)
	if err != nil && strings.Contains(err.Error(), "torchvision::") {
		// EasyCV's jit export traces its NMS (torchvision's batched_nms)
		// into the graph: load torchvision's operators into libtorch, only
		// for a module that needs them, and try again.
		var opsErr error
		if path, where := torchscript.FindTorchVision(); path != "" {
			opsErr = torchscript.LoadOpsLibrary(path)
		} else {
			opsErr = fmt.Errorf("torchvision's operator library was not found in %s (install python3-torchvision, or set %s)", strings.Join(where, ", "), torchscript.EnvTorchVisionLib)
		}
		if opsErr != nil {
			return fmt.Errorf("load %s: the graph calls torchvision's operators (EasyCV's jit export traces its NMS, torchvision's batched_nms, into the model) and %v; export with export_type 'onnx' instead, whose NMS this server runs: %w", filepath.Base(file), opsErr, err)
		}
		mod, err = torchscript.Load(file, opts)
	}
	if err != nil {
		return fmt.Errorf("load %s: %w", filepath.Base(file), err)
	}
	if args := mod.Inputs(); len(args) != 1 {
		mod.Close()
		return fmt.Errorf("load %s: forward takes %v; an EasyCV YOLOX export takes one image tensor [N, 3, H, W]", filepath.Base(file), args)
	}
	d.mod = mod
	return d.probe(ctx)
}

// probe runs a padded grey image through the network to check its output
// and to learn whether the graph does its own postprocess.
func (d *detector) probe(ctx context.Context) error {
	h, w := d.pre.outShape(480, 640)
	if d.inH > 0 {
		if h != d.inH || w != d.inW {
			return fmt.Errorf("load %s: the test_pipeline makes %dx%d images but the export takes %dx%d (EasyCV's exports have a fixed input size)", filepath.Base(d.file), w, h, d.inW, d.inH)
		}
	}
	x := make([]float32, 3*h*w)
	outs, err := d.forward(ctx, x, h, w)
	if err != nil {
		return fmt.Errorf("load %s: a test forward on a %dx%d image failed: %v", filepath.Base(d.file), w, h, err)
	}
	_, end2end, err := d.interpret(outs)
	if err != nil {
		return fmt.Errorf("load %s: %v", filepath.Base(d.file), err)
	}
	d.end2end = end2end
	return ctx.Err()
}

// forward runs the network on one preprocessed CHW image.
func (d *detector) forward(ctx context.Context, x []float32, h, w int) ([]tensor.Tensor, error) {
	name := d.inName
	if name == "" {
		name = "input"
	}
	in := tensor.Own(name, []int64{1, 3, int64(h), int64(w)}, x)
	forwards.Add(1)
	if d.ort != nil {
		p, err := d.ort.FromTensors(ctx, &processors.TensorPayload{Inputs: []tensor.Tensor{in}})
		if err != nil {
			return nil, err
		}
		res, err := d.ort.Run(ctx, []*onnx.Payload{p})
		if err != nil {
			return nil, err
		}
		return res[0].Outputs, nil
	}
	if d.mod == nil {
		return nil, ErrNotLoaded
	}
	outs, err := d.mod.Forward([]tensor.Tensor{in})
	if errors.Is(err, torchscript.ErrClosed) {
		return nil, ErrNotLoaded
	}
	return outs, err
}

// interpret turns the outputs of one image's forward into its detections
// (nil: EasyCV's None, nothing passed test_conf), and says whether the
// graph did the postprocess itself.
func (d *detector) interpret(outs []tensor.Tensor) ([]detection, bool, error) {
	if len(outs) != 1 {
		return nil, false, fmt.Errorf("the model gives %d outputs (%s); an EasyCV YOLOX export gives one: [1, anchors, 5 + classes] predictions, or (a jit export) one [K, 7] tensor of detections per image", len(outs), describeOutputs(outs))
	}
	o := outs[0]
	vals, err := toFloat32(o)
	if err != nil {
		return nil, false, fmt.Errorf("output %q: %v", o.Name, err)
	}
	nc := len(d.classes)
	switch {
	case len(o.Shape) == 3 && o.Shape[0] == 1 && o.Shape[2] >= 5:
		if o.Shape[2] < int64(5+nc) {
			return nil, false, fmt.Errorf("the model's predictions are %s: %d class scores, but the export's config names %d classes", tensor.FormatShape(o.Shape), o.Shape[2]-5, nc)
		}
		return yoloxPostprocess(vals, int(o.Shape[1]), int(o.Shape[2]), nc, d.testConf, d.nmsThre), false, nil
	case len(o.Shape) == 2 && o.Shape[1] == 7 && d.mod != nil:
		dets := make([]detection, o.Shape[0])
		for i := range dets {
			r := vals[7*i : 7*i+7]
			dets[i] = detection{box: [4]float32{r[0], r[1], r[2], r[3]}, obj: r[4], cls: r[5], class: int(r[6])}
			if dets[i].class < 0 || dets[i].class >= nc {
				return nil, false, fmt.Errorf("detection %d has class %v; the export's config names %d classes", i, r[6], nc)
			}
		}
		return dets, true, nil
	}
	return nil, false, fmt.Errorf("the model's output is %s; an EasyCV YOLOX export gives [1, anchors, 5 + classes] predictions (onnx, or jit without postprocess) or one [K, 7] tensor of detections (jit)", describeOutputs(outs))
}

// detImage is one decoded, preprocessed request image.
type detImage struct {
	x          []float32 // CHW
	h, w       int       // the network input's size
	oriH, oriW int
	scale      float32 // scale_factor[0]: boxes are divided by it
}

// detAnswer is YoloXPredictor's answer for one image.
type detAnswer struct {
	none bool // no detection passed test_conf: EasyCV's None
	dets []detection
	oriH int
	oriW int
}

func (d *detector) preprocess(field string, raw *json.RawMessage) (*detImage, error) {
	if raw == nil || string(*raw) == "null" {
		return nil, badinput.Errorf("%s: missing; send {\"image\": \"<base64 JPEG or PNG>\"}", field)
	}
	var s string
	if err := json.Unmarshal(*raw, &s); err != nil {
		return nil, badinput.Errorf("%s: must be a base64 string, got %s", field, jsonKind(*raw))
	}
	b, err := decodeBase64(field, s)
	if err != nil {
		return nil, err
	}
	img, err := decodeImage(field, b, d.cfg.MaxImagePixels)
	if err != nil {
		return nil, err
	}
	if rh, rw, _ := d.pre.resized(img.h, img.w); rh < 1 || rw < 1 {
		return nil, badinput.Errorf("%s: the %dx%d image would be resized to %dx%d; its aspect ratio is too extreme for img_scale %v (EasyCV's cv2.resize fails on it too)", field, img.w, img.h, rw, rh, d.pre.scale)
	}
	x, h, w, scale := d.pre.apply(img)
	return &detImage{x: x, h: h, w: w, oriH: img.h, oriW: img.w, scale: scale}, nil
}

// run answers one image.
func (d *detector) run(ctx context.Context, im *detImage) (detAnswer, error) {
	if err := ctx.Err(); err != nil {
		return detAnswer{}, err
	}
	outs, err := d.forward(ctx, im.x, im.h, im.w)
	if err != nil {
		if errors.Is(err, ErrNotLoaded) {
			return detAnswer{}, err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return detAnswer{}, ctxErr
		}
		return detAnswer{}, fmt.Errorf("easycv: forward on a %dx%d image: %w", im.w, im.h, err)
	}
	dets, end2end, err := d.interpret(outs)
	if err != nil {
		return detAnswer{}, fmt.Errorf("easycv: %w", err)
	}
	return detAnswer{none: dets == nil && !end2end, dets: dets, oriH: im.oriH, oriW: im.oriW}, nil
}

// encode writes YoloXPredictor's dict for one image: detection_boxes
// ([K, 4] float32, x1 y1 x2 y2 in the original image), detection_scores
// ([K] float32), detection_classes ([K] int32), detection_class_names
// (absent when nothing came out of NMS, as DetOutputProcessor returns
// early then), ori_img_shape ([h, w]). When nothing passed test_conf the
// three arrays are null (EasyCV's None).
func (d *detector) encode(b *strings.Builder, a detAnswer, scale float32) {
	if a.none {
		fmt.Fprintf(b, `{"detection_boxes":null,"detection_scores":null,"detection_classes":null,"ori_img_shape":[%d,%d]}`, a.oriH, a.oriW)
		return
	}
	var kept []detection
	for _, det := range a.dets {
		if !(d.scoreThresh > 0) || det.obj*det.cls > d.scoreThresh {
			kept = append(kept, det)
		}
	}
	b.WriteString(`{"detection_boxes":[`)
	for i, det := range kept {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j, v := range det.box {
			if j > 0 {
				b.WriteByte(',')
			}
			writeFloat32(b, v/scale)
		}
		b.WriteByte(']')
	}
	b.WriteString(`],"detection_scores":[`)
	for i, det := range kept {
		if i > 0 {
			b.WriteByte(',')
		}
		writeFloat32(b, det.obj*det.cls)
	}
	b.WriteString(`],"detection_classes":[`)
	for i, det := range kept {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(b, det.class)
	}
	b.WriteString(`]`)
	if len(a.dets) > 0 {
		b.WriteString(`,"detection_class_names":[`)
		for i, det := range kept {
			if i > 0 {
				b.WriteByte(',')
			}
			enc, _ := json.Marshal(d.classes[det.class])
			b.Write(enc)
		}
		b.WriteString(`]`)
	}
	fmt.Fprintf(b, `,"ori_img_shape":[%d,%d]}`, a.oriH, a.oriW)
}

func writeFloat32(b *strings.Builder, f float32) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		b.WriteString("null")
		return
	}
	b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
}

func (d *detector) close() error {
	var errs []error
	if d.ort != nil {
		errs = append(errs, d.ort.Close())
	}
	if d.mod != nil {
		errs = append(errs, d.mod.Close())
	}
	return errors.Join(errs...)
}

func (d *detector) metadata() processors.Metadata {
	h, w := d.pre.outShape(480, 640)
	return processors.Metadata{
		Processor: Code,
		Inputs:    []processors.IOSpec{{Name: "image", DType: "BYTES", Shape: []int64{-1}}},
		Outputs: []processors.IOSpec{
			{Name: "detection_boxes", DType: "FP32", Shape: []int64{-1, 4}},
			{Name: "detection_scores", DType: "FP32", Shape: []int64{-1}},
			{Name: "detection_classes", DType: "INT32", Shape: []int64{-1}},
			{Name: "detection_class_names", DType: "BYTES", Shape: []int64{-1}},
			{Name: "ori_img_shape", DType: "INT64", Shape: []int64{2}},
		},
		Extra: map[string]any{
			"type":         "YoloXPredictor",
			"model_file":   filepath.Base(d.file),
			"export_type":  d.exportType,
			"nms_in_graph": d.end2end,
			"classes":      d.classes,
			"score_thresh": d.scoreThresh,
			"nms_thresh":   d.nmsThre,
			"test_conf":    d.testConf,
			"pipeline":     d.pre.describe(),
			"input_shape":  []int{3, h, w},
		},
	}
}
