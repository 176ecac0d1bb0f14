// Package easycv serves the EAS "easycv" processor for EasyCV's
// TorchClassifier: an image classifier exported to TorchScript, run on
// libtorch (package torchscript), with EasyCV's preprocessing done in Go;
// and for its YoloXPredictor: a YOLOX detector exported to ONNX (run on
// ONNX Runtime, NMS in Go) or TorchScript (yolox.go).
//
// EasyCV's predictor opens each image with PIL, converts it to RGB, runs the
// config's test_pipeline (torchvision Resize, CenterCrop, ToTensor,
// Normalize) and stacks the images into one NCHW batch; its answer per image
// is {"class": [top-k indices], "class_name": [...], "class_probs":
// {name: prob, ...}}. This package does the same, with Pillow's resampling
// reimplemented so that a PNG reaches the model as the very floats
// EasyCV would feed it. The pipeline, class names and top-k come from the
// export's <model>.config.json (what EasyCV writes beside a jit export),
// then model_config.
//
// A request is {"image": "<base64 JPEG or PNG>"} or a list of them; with
// rpc.batching the images of concurrent requests share one forward.
package easycv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/processors"
)

// Code is the EAS processor code.
const Code = "easycv"

func init() {
	processors.Register(Code, "EasyCV TorchClassifier (an image classifier exported to TorchScript, on libtorch) and YoloXPredictor (a YOLOX onnx or jit export); JSON {\"image\": base64}",
		func() *processors.Engine { return processors.Adapt[*Payload, *Result](New()) })
}

// supportedType is the one EasyCV predictor type served.
const supportedType = "TorchClassifier"

// servedTypes lists the model_config types served, for messages.
const servedTypes = "TorchClassifier (image classification), YoloXPredictor (YOLOX detection, onnx or jit export)"

// zooNeeded is why the generic predictors are refused: they build the
// network in Python.
const zooNeeded = "it loads a raw EasyCV checkpoint (torch.save of the weights with the training config) and builds the network from EasyCV's Python model zoo (easycv.models, mmcv), which this server does not have; it runs exported graphs only"

// otherTypes are EasyCV predictor types (easycv/predictors, registered in
// PREDICTORS) that this build does not serve: Configure names them as
// known but unsupported rather than unknown.
var otherTypes = map[string]string{
	"ClassificationPredictor":      "EasyCV's newer name for the classifier; set \"type\": \"TorchClassifier\" (same request and response)",
	"DetectionPredictor":           "object detection: " + zooNeeded,
	"SegmentationPredictor":        "segmentation: " + zooNeeded,
	"Mask2formerPredictor":         "segmentation: " + zooNeeded,
	"VideoClassificationPredictor": "video classification: " + zooNeeded,
	"TorchFeatureExtractor":        "feature extraction",
	"TorchFaceDetector":            "face detection",
	"TorchFaceKeypointsPredictor":  "face keypoints",
	"FaceKeypointsPredictor":       "face keypoints",
	"HandKeypointsPredictor":       "hand keypoints",
	"WholeBodyKeypointsPredictor":  "whole-body keypoints",
	"PoseTopDownPredictor":         "pose estimation",
	"TorchPoseTopDownPredictor":    "pose estimation",
	"OCRDetPredictor":              "OCR detection",
	"OCRRecPredictor":              "OCR recognition",
	"OCRClsPredictor":              "OCR direction classification",
	"OCRPredictor":                 "OCR",
	"ReIDPredictor":                "re-identification",
	"MOTPredictor":                 "multi-object tracking",
	"STGCNPredictor":               "skeleton action recognition",
	"BEVFormerPredictor":           "3D detection",
}

// Config is model_config. Only type is required.
type Config struct {
	Type string `json:"type"`
	// TopK is how many classes "class" and "class_name" list (EasyCV's
	// topk, default 1, at most the number of classes).
	TopK int `json:"topk"`
	// ClassList names the classes in index order; LabelMapPath is a text
	// file with one name a line, relative to model_path's directory
	// (EasyCV's label_map_path). Either overrides the export's config.
	ClassList    []string `json:"class_list"`
	LabelMapPath string   `json:"label_map_path"`
	// TestPipeline replaces the export's test_pipeline (EasyCV's syntax);
	// Resize, CropSize, Mean, Std and Interpolation then override single
	// steps. CropSize 0 removes the centre crop.
	TestPipeline  json.RawMessage `json:"test_pipeline"`
	Resize        json.RawMessage `json:"resize"`
	CropSize      json.RawMessage `json:"crop_size"`
	Mean          json.RawMessage `json:"mean"`
	Std           json.RawMessage `json:"std"`
	Interpolation json.RawMessage `json:"interpolation"`
	// Activation turns the model's output into probabilities: "auto" (the
	// default: a "prob" output, as EasyCV's forward_test returns, is used
	// as it is; any other output is logits and gets softmax), "softmax",
	// "sigmoid" or "none".
	Activation string `json:"activation"`
	// MaxImagePixels bounds width x height of one image (default PIL's
	// decompression-bomb limit, 89478485).
	MaxImagePixels int64 `json:"max_image_pixels"`
	// IntraOpThreads overrides metadata.cpu for libtorch's (process-wide)
	// intra-op pool; Device is "cpu" (default) or "cuda:N".
	IntraOpThreads int    `json:"intra_op_threads"`
	Device         string `json:"device"`
	// TorchScriptOptimize is torchscript.Options.Optimize: none (default),
	// freeze or inference (BatchNorm folded into the convolutions, several
	// times faster, results equal to the last float digits).
	TorchScriptOptimize string `json:"torchscript_optimize"`
	// ScoreThresh, NMSThresh and TestConf are YoloXPredictor's: the score
	// a detection must exceed to be answered (default 0.5), NMS's IoU
	// threshold and the score a candidate needs to enter NMS (defaults:
	// the export config's model.nms_thre and model.test_conf, else 0.65
	// and 0.01).
	ScoreThresh *float64 `json:"score_thresh"`
	NMSThresh   *float64 `json:"nms_thresh"`
	TestConf    *float64 `json:"test_conf"`
}

const accepts = `{"type": "TorchClassifier", "topk", "class_list", "label_map_path", "test_pipeline", "resize", "crop_size", "mean", "std", "interpolation", "activation", "max_image_pixels", "intra_op_threads", "device", "torchscript_optimize"}`

// defaultMaxPixels is PIL's Image.MAX_IMAGE_PIXELS.
const defaultMaxPixels = 89478485

// Classifier is one easycv service. Decode, Run and Encode are safe for
// concurrent use after Load.
type Classifier struct {
	spec    processors.Spec
	cfg     Config
	threads int
	pipe    pipeline
	classes []string // names by index; nil until Load (then the fallback "0", "1", ... when none given)
	mod     *torchscript.Module
	file    string
	det     *detector // a YoloXPredictor service; nil for TorchClassifier
	out     string    // the output used: "prob" or the logits output's name
	act     string    // the activation applied to it
	nclass  int
}

// New returns an unconfigured classifier.
func New() *Classifier { return &Classifier{} }

// Configure checks model_config without I/O.
func (c *Classifier) Configure(spec processors.Spec) error {
	c.spec = spec
	if spec.ModelSource == "" {
		return fmt.Errorf("model_path: required for processor %q; point it at the TorchScript export (.pt/.jit) or a directory holding it", Code)
	}
	if spec.ModelEntry != "" && !filepath.IsLocal(spec.ModelEntry) {
		return fmt.Errorf("model_entry: %q must be a relative path inside model_path without ..", spec.ModelEntry)
	}
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(spec.ModelConfig, &probe) == nil && yoloxTypes[probe.Type] {
		d, err := configureDetector(spec)
		if err != nil {
			return err
		}
		c.det = d
		return nil
	}
	var cfg Config
	if err := spec.DecodeConfig(&cfg, accepts); err != nil {
		return err
	}
	if cfg.ScoreThresh != nil || cfg.NMSThresh != nil || cfg.TestConf != nil {
		return fmt.Errorf("model_config: score_thresh, nms_thresh and test_conf are YoloXPredictor settings; %s accepts %s", cfg.Type, accepts)
	}
	switch {
	case cfg.Type == supportedType:
	case cfg.Type == "":
		return fmt.Errorf("model_config.type: required; valid values: %s", servedTypes)
	case otherTypes[cfg.Type] != "":
		return fmt.Errorf("model_config.type: EasyCV's %s (%s) is not served here; this processor serves %s",
			cfg.Type, otherTypes[cfg.Type], servedTypes)
	default:
		return fmt.Errorf("model_config.type: unknown EasyCV predictor %q; valid values: %s", cfg.Type, servedTypes)
	}
	if cfg.TopK == 0 {
		cfg.TopK = 1
	}
	if cfg.TopK < 0 {
		return fmt.Errorf("model_config.topk: must be >= 1, got %d", cfg.TopK)
	}
	switch cfg.Activation {
	case "":
		cfg.Activation = "auto"
	case "auto", "softmax", "sigmoid", "none":
	default:
		return fmt.Errorf("model_config.activation: must be one of auto, softmax, sigmoid, none, got %q", cfg.Activation)
	}
	if cfg.MaxImagePixels == 0 {
		cfg.MaxImagePixels = defaultMaxPixels
	}
	if cfg.MaxImagePixels < 0 {
		return fmt.Errorf("model_config.max_image_pixels: must be > 0, got %d", cfg.MaxImagePixels)
	}
	if cfg.LabelMapPath != "" && !filepath.IsLocal(cfg.LabelMapPath) {
		return fmt.Errorf("model_config.label_map_path: %q must be a relative path inside model_path without ..", cfg.LabelMapPath)
	}
	if cfg.LabelMapPath != "" && cfg.ClassList != nil {
		return fmt.Errorf("model_config: set class_list or label_map_path, not both")
	}
	if cfg.IntraOpThreads < 0 || cfg.IntraOpThreads > 1024 {
		return fmt.Errorf("model_config.intra_op_threads: must be between 0 and 1024, got %d", cfg.IntraOpThreads)
	}
	if cfg.Device != "" && cfg.Device != "cpu" && !strings.HasPrefix(cfg.Device, "cuda:") {
		return fmt.Errorf("model_config.device: must be \"cpu\" or \"cuda:N\", got %q", cfg.Device)
	}
	if err := torchscript.CheckOptimize(cfg.TorchScriptOptimize); err != nil {
		return fmt.Errorf("model_config.torchscript_optimize: %w", err)
	}
	c.cfg = cfg
	// Check the pipeline settings now, on the default pipeline.
	if _, err := c.buildPipeline(defaultPipeline()); err != nil {
		return err
	}
	c.threads = spec.IntraOpThreads(cfg.IntraOpThreads)
	return nil
}

// buildPipeline applies model_config's pipeline settings to base.
func (c *Classifier) buildPipeline(base pipeline) (pipeline, error) {
	p := base
	if c.cfg.TestPipeline != nil {
		var err error
		if p, err = parsePipeline(c.cfg.TestPipeline); err != nil {
			return p, fmt.Errorf("model_config.%v", err)
		}
	}
	p.ops = append([]op(nil), p.ops...)
	find := func(kind string) int {
		for i, o := range p.ops {
			if o.kind == kind {
				return i
			}
		}
		return -1
	}
	if c.cfg.Resize != nil {
		size, err := parseSize(c.cfg.Resize, false)
		if err != nil {
			return p, fmt.Errorf("model_config.resize: %v", err)
		}
		if i := find("Resize"); i >= 0 {
			p.ops[i].size = size
		} else {
			p.ops = append([]op{{kind: "Resize", size: size, interp: "bilinear"}}, p.ops...)
		}
	}
	if c.cfg.Interpolation != nil {
		interp, err := parseInterp(c.cfg.Interpolation)
		if err != nil {
			return p, fmt.Errorf("model_config.interpolation: %v", err)
		}
		for i := range p.ops {
			if p.ops[i].kind == "Resize" {
				p.ops[i].interp = interp
			}
		}
	}
	if c.cfg.CropSize != nil {
		i := find("CenterCrop")
		if strings.TrimSpace(string(c.cfg.CropSize)) == "0" {
			if i >= 0 {
				p.ops = append(p.ops[:i], p.ops[i+1:]...)
			}
		} else {
			size, err := parseSize(c.cfg.CropSize, true)
			if err != nil {
				return p, fmt.Errorf("model_config.crop_size: %v (0 removes the crop)", err)
			}
			if i >= 0 {
				p.ops[i].size = size
			} else {
				p.ops = append(p.ops, op{kind: "CenterCrop", size: size})
			}
		}
	}
	var err error
	if c.cfg.Mean != nil {
		if p.mean, err = parseTriple(c.cfg.Mean, false); err != nil {
			return p, fmt.Errorf("model_config.mean: %v", err)
		}
	}
	if c.cfg.Std != nil {
		if p.std, err = parseTriple(c.cfg.Std, true); err != nil {
			return p, fmt.Errorf("model_config.std: %v", err)
		}
	}
	return p, nil
}

// exportConfig is the JSON EasyCV writes beside a jit/onnx/blade export
// (<model file>.config.json): its test_pipeline and class names.
type exportConfig struct {
	TestPipeline json.RawMessage `json:"test_pipeline"`
	ClassList    []string        `json:"class_list"`
	CLASSES      []string        `json:"CLASSES"`
	Classes      []string        `json:"classes"`
}

var modelFile = processors.ModelFile{
	Kind: "TorchScript", Exts: []string{".pt", ".pth", ".jit", ".torchscript", ".ptl"}, MaxDepth: 4,
}

// jitRecipe is how to make a file this processor serves from an EasyCV
// classifier.
const jitRecipe = "trace the model's test forward: model.forward = model.forward_test; torch.jit.save(torch.jit.trace(model.eval(), torch.rand(1, 3, 224, 224), strict=False), \"model.pt\")"

// Load finds and loads the TorchScript file, reads the export's config
// and class names, and runs one forward on a blank image to learn the
// model's output and class count.
func (c *Classifier) Load(ctx context.Context, files processors.Files) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.det != nil {
		if err := c.det.load(ctx, c.spec, files); err != nil {
			c.det.close()
			return err
		}
		if c.spec.Logger != nil {
			c.spec.Logger.Info("easycv YOLOX loaded", "file", c.det.file, "export_type", c.det.exportType, "nms_in_graph", c.det.end2end,
				"classes", len(c.det.classes), "pipeline", c.det.pre.describe())
		}
		return nil
	}
	file, err := modelFile.Find(files.ModelPath, c.spec.ModelEntry)
	if err != nil {
		return err
	}
	if _, err := processors.StatModel(file, c.spec.ModelLimit()); err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	ts, err := torchscript.IsTorchScript(file)
	if err != nil {
		return fmt.Errorf("model_path: %w", err)
	}
	if !ts {
		return fmt.Errorf("model_path: %s is not a TorchScript archive; this processor serves TorchScript only (EasyCV's raw export is a torch.save checkpoint, which needs EasyCV's Python model code; an ONNX export is served by onnx_cpu); %s",
			filepath.Base(file), jitRecipe)
	}
	base := defaultPipeline()
	var fileClasses []string
	if b, err := os.ReadFile(file + ".config.json"); err == nil {
		var ec exportConfig
		if err := json.Unmarshal(b, &ec); err != nil {
			return fmt.Errorf("%s.config.json: %v", filepath.Base(file), err)
		}
		if ec.TestPipeline != nil && string(ec.TestPipeline) != "null" {
			if base, err = parsePipeline(ec.TestPipeline); err != nil {
				return fmt.Errorf("%s.config.json: %v", filepath.Base(file), err)
			}
		}
		for _, l := range [][]string{ec.ClassList, ec.CLASSES, ec.Classes} {
			if len(l) > 0 && fileClasses == nil {
				fileClasses = l
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s.config.json: %w", filepath.Base(file), err)
	}
	if c.pipe, err = c.buildPipeline(base); err != nil {
		return err
	}
	classes := slices.Clone(fileClasses)
	switch {
	case c.cfg.ClassList != nil:
		classes = slices.Clone(c.cfg.ClassList)
	case c.cfg.LabelMapPath != "":
		dir := files.ModelPath
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			dir = filepath.Dir(dir)
		}
		b, err := os.ReadFile(filepath.Join(dir, c.cfg.LabelMapPath))
		if err != nil {
			return fmt.Errorf("model_config.label_map_path: %w", err)
		}
		// Python's readlines: a final newline ends the last line, it
		// does not start an empty one.
		classes = strings.SplitAfter(string(b), "\n")
		if classes[len(classes)-1] == "" {
			classes = classes[:len(classes)-1]
		}
	}
	for i := range classes {
		classes[i] = strings.TrimSpace(classes[i]) // EasyCV strips each name
	}

	device := c.cfg.Device
	if device == "" {
		device = "cpu"
	}
	mod, err := torchscript.Load(file, torchscript.Options{Threads: c.threads, Device: device, Optimize: c.cfg.TorchScriptOptimize})
	if err != nil {
		return fmt.Errorf("load %s: %w", filepath.Base(file), err)
	}
	args := mod.Inputs()
	if len(args) != 1 || (args[0].Type != "Tensor" && args[0].Type != "Optional[Tensor]") {
		mod.Close()
		return fmt.Errorf("load %s: forward takes %v; an EasyCV classifier's takes one image tensor [N, 3, H, W]; %s", filepath.Base(file), args, jitRecipe)
	}
	c.mod, c.file = mod, file
	if err := c.probe(ctx, classes); err != nil {
		mod.Close()
		c.mod = nil
		return fmt.Errorf("load %s: %w", filepath.Base(file), err)
	}
	if c.spec.Logger != nil {
		path, version := torchscript.LoadedLibrary()
		c.spec.Logger.Info("easycv classifier loaded", "file", file, "shim", path, "libtorch", version, "threads", c.threads,
			"classes", c.nclass, "output", c.out, "activation", c.act, "pipeline", c.pipe.describe())
	}
	return nil
}

// probe runs a black image through the model to find its probability
// output and the number of classes, and checks the class names against it.
func (c *Classifier) probe(ctx context.Context, classes []string) error {
	h, w := c.pipe.outShape(256, 256)
	row := make([]float32, 3*h*w)
	c.pipe.toCHW(rgb{w: w, h: h, pix: make([]uint8, 3*w*h)}, row)
	outs, err := c.mod.Forward(rowsTensor([][]float32{row}, h, w))
	if err != nil {
		return fmt.Errorf("a test forward on a %dx%d image failed: %v", w, h, err)
	}
	name, act, err := pickOutput(outs, c.cfg.Activation)
	if err != nil {
		return err
	}
	for _, o := range outs {
		if o.Name == name {
			c.nclass = int(o.Shape[1])
		}
	}
	c.out, c.act = name, act
	if classes != nil && len(classes) != c.nclass {
		return fmt.Errorf("the model has %d classes but %d class names are given (class_list, label_map_path or the export's config)", c.nclass, len(classes))
	}
	if classes == nil {
		classes = make([]string, c.nclass)
		for i := range classes {
			classes[i] = fmt.Sprint(i)
		}
	}
	c.classes = classes
	return ctx.Err()
}

// Metadata describes the request and response fields.
func (c *Classifier) Metadata() processors.Metadata {
	if c.det != nil {
		return c.det.metadata()
	}
	h, w := c.pipe.outShape(300, 200)
	if h2, w2 := c.pipe.outShape(200, 300); h2 != h || w2 != w {
		h, w = -1, -1 // the size follows the image's
	}
	return processors.Metadata{
		Processor: Code,
		Inputs:    []processors.IOSpec{{Name: "image", DType: "BYTES", Shape: []int64{-1}}},
		Outputs: []processors.IOSpec{
			{Name: "class", DType: "INT64", Shape: []int64{int64(min(c.cfg.TopK, max(c.nclass, 1)))}},
			{Name: "class_name", DType: "BYTES", Shape: []int64{int64(min(c.cfg.TopK, max(c.nclass, 1)))}},
			{Name: "class_probs", DType: "FP32", Shape: []int64{int64(c.nclass)}},
		},
		Extra: map[string]any{
			"type":        supportedType,
			"model_file":  filepath.Base(c.file),
			"classes":     c.classes,
			"topk":        c.cfg.TopK,
			"pipeline":    c.pipe.describe(),
			"input_shape": []int{3, h, w},
			"output":      c.out,
			"activation":  c.act,
		},
	}
}

// Close releases the module.
func (c *Classifier) Close() error {
	if c.det != nil {
		return c.det.close()
	}
	if c.mod == nil {
		return nil
	}
	return c.mod.Close()
}

var (
	_ processors.Typed[*Payload, *Result] = (*Classifier)(nil)
	_ processors.Batcher[*Payload]        = (*Classifier)(nil)
	_ processors.Closer                   = (*Classifier)(nil)
)
