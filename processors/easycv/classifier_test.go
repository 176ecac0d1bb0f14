package easycv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// Tolerances against PyTorch's probabilities: a PNG reaches the model as the
// same floats, so only libtorch's summation order differs
// (tensor.F32Accumulated); a JPEG is decoded by Go's IDCT, not libjpeg's, so
// a few pixels differ by a level: the input differs, not only the rounding,
// and the probabilities may be 2e-3 apart (the argmax must still agree;
// seen: 4e-4).
var (
	pngTol  = tensor.F32Accumulated
	jpegTol = tensor.Tolerance{Name: "JPEG decoded by Go, not libjpeg", Atol: 2e-3}
)

// clsNames are cls.pt's classes; a config may repeat a name.
var clsNames = []string{"cat", "dog", "bird", "fish", "cat"}

// probs returns an answer's class_probs in the order of names.
func probs(a answer, names []string) ([]float64, error) {
	v := make([]float64, len(names))
	for i, n := range names {
		p, ok := a.ClassProbs[n]
		if !ok {
			return nil, fmt.Errorf("class_probs has no %q: %v", n, a.ClassProbs)
		}
		v[i] = p
	}
	return v, nil
}

// closeProbs compares an answer's class_probs with want, the probabilities
// of the classes names, under tol (tensor.Close), and returns the worst
// difference over the bound. A repeated name keeps the last value, as a
// Python dict does.
func closeProbs(a answer, names []string, want []float64, tol tensor.Tolerance) (float64, error) {
	if len(want) != len(names) {
		return 0, fmt.Errorf("%d probabilities for %d classes", len(want), len(names))
	}
	got, err := probs(a, names)
	if err != nil {
		return 0, err
	}
	w := make([]float64, len(names))
	for i, n := range names {
		for j := i; j < len(names); j++ {
			if names[j] == n {
				w[i] = want[j]
			}
		}
	}
	gt, wt := tensor.FromFloat64("class_probs", []int64{int64(len(names))}, got), tensor.FromFloat64("class_probs", []int64{int64(len(names))}, w)
	return tensor.Ratio(gt, wt, tol), tensor.Close(gt, wt, tol)
}

type answer struct {
	Class      []int              `json:"class"`
	ClassName  []string           `json:"class_name"`
	ClassProbs map[string]float64 `json:"class_probs"`
}

// predict runs one request body through Decode, Run and Encode.
func predict(t *testing.T, c *Classifier, body []byte) []byte {
	t.Helper()
	p, err := c.Decode(t.Context(), &processors.Request{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.Run(context.Background(), []*Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Encode(t.Context(), p, rs[0])
	if err != nil {
		t.Fatal(err)
	}
	return resp.Body
}

func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// TestClassifierReferences serves the EasyCV-style export (a "prob" output,
// with its config.json's pipeline and classes) under each pipeline variant,
// and the plain logits export under the defaults, and compares every
// image's probabilities with PyTorch's.
func TestClassifierReferences(t *testing.T) {
	r := loadRefs(t)
	dir := generated(t)
	type setup struct {
		model, cfg, variant string
		want                func(refCase) []float64
		names               []string
	}
	idxNames := []string{"0", "1", "2", "3", "4"}
	var setups []setup
	for v, vr := range r.Variants {
		cfg := `{"type":"TorchClassifier","topk":3}`
		if v != "default" {
			cfg = `{"type":"TorchClassifier","topk":3,"test_pipeline":` + string(vr.TestPipeline) + `}`
		}
		setups = append(setups, setup{"cls.pt", cfg, v, func(c refCase) []float64 { return c.ClsProb }, clsNames})
	}
	setups = append(setups, setup{"logits.pt", `{"type":"TorchClassifier","topk":9}`, "default",
		func(c refCase) []float64 { return c.LogitsProb }, idxNames})
	for _, s := range setups {
		t.Run(s.model+"/"+s.variant, func(t *testing.T) {
			c := load(t, filepath.Join(dir, s.model), s.cfg)
			for name, rc := range r.Variants[s.variant].Images {
				want := s.want(rc)
				var got answer
				if err := json.Unmarshal(predict(t, c, imageBody(t, filepath.Join(dir, name))), &got); err != nil {
					t.Fatal(err)
				}
				tol := pngTol
				if strings.HasSuffix(name, ".jpg") {
					tol = jpegTol
				}
				if got.Class[0] != argmax(want) {
					t.Errorf("%s: class %v, PyTorch's argmax %d (%v)", name, got.Class, argmax(want), want)
				}
				k := min(len(want), len(got.Class))
				if k != min(3, 5) && s.model == "cls.pt" || len(got.ClassName) != len(got.Class) {
					t.Errorf("%s: topk: %v %v", name, got.Class, got.ClassName)
				}
				for i, ci := range got.Class {
					if got.ClassName[i] != s.names[ci] {
						t.Errorf("%s: class_name[%d] = %q, want %q", name, i, got.ClassName[i], s.names[ci])
					}
				}
				ratio, err := closeProbs(got, s.names, want, tol)
				if err != nil {
					t.Errorf("%s: against PyTorch: %v", name, err)
				}
				if tol == jpegTol {
					t.Logf("%s: worst probability difference from PIL+PyTorch %.2g of the bound", name, ratio)
				}
			}
		})
	}
}

// TestListRequestBatches sends every image of the default variant in one
// list request: one forward, one answer per image, in order, equal to the
// single-image answers.
func TestListRequestBatches(t *testing.T) {
	r := loadRefs(t)
	dir := generated(t)
	c := load(t, filepath.Join(dir, "cls.pt"), `{"type":"TorchClassifier"}`)
	var names []string
	for n := range r.Variants["default"].Images {
		names = append(names, n)
	}
	slices.Sort(names)
	var items []string
	for _, n := range names {
		items = append(items, string(imageBody(t, filepath.Join(dir, n))))
	}
	before := forwards.Load()
	body := predict(t, c, []byte("["+strings.Join(items, ",")+"]"))
	if n := forwards.Load() - before; n != 1 {
		t.Errorf("%d forwards for one list request, want 1", n)
	}
	var got []answer
	if err := json.Unmarshal(body, &got); err != nil || len(got) != len(names) {
		t.Fatalf("list answer %s: %v", body, err)
	}
	for i, n := range names {
		want := r.Variants["default"].Images[n].ClsProb
		tol := pngTol
		if strings.HasSuffix(n, ".jpg") {
			tol = jpegTol
		}
		if got[i].Class[0] != argmax(want) {
			t.Errorf("%s: %+v, want argmax %d", n, got[i], argmax(want))
		}
		if _, err := closeProbs(got[i], clsNames, want, tol); err != nil {
			t.Errorf("%s: against PyTorch: %v", n, err)
		}
	}
	if !strings.HasPrefix(string(body), `[{"class":[`) || !strings.Contains(string(body), `"class_probs":{"cat":`) {
		t.Errorf("answer is not in EasyCV's shape: %.200s", body)
	}
}

func TestBadRequests(t *testing.T) {
	dir := generated(t)
	c := load(t, filepath.Join(dir, "cls.pt"), `{"type":"TorchClassifier"}`)
	png := string(imageBody(t, filepath.Join(dir, "rgb_90x100.png")))
	for _, tc := range []struct{ body, want string }{
		{``, "not a JSON object or list"},
		{`"x"`, "not a JSON object or list"},
		{`{}`, "image: missing"},
		{`{"image": 3}`, "image: must be a base64 string"},
		{`{"image": ""}`, "image: empty"},
		{`{"image": "@@@"}`, "image: not valid base64"},
		{`{"image": "aGVsbG8gd29ybGQ="}`, "not a JPEG or PNG"},
		{`{"image": "iVBORw0KGgoAAAANSUhEUgAA"}`, "cannot decode the png"},
		{`[]`, "empty list"},
		{`[` + png + `, {"image": null}]`, "[1].image: missing"},
		{`{"image": [1]}`, "must be a base64 string, got a list"},
		{`{"image": "x"`, "request body"},
		{`[{"image": "x"}, "y"]`, "[1]: must be an object"},
	} {
		_, err := c.Decode(t.Context(), &processors.Request{Body: []byte(tc.body)})
		if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: err = %v, want a 400 containing %q", tc.body, err, tc.want)
		}
	}
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{``, "model_config.type: required; valid values: TorchClassifier"},
		{`{"type":"YoloXPredictor","topk":1}`, "model_config.topk: not a YoloXPredictor setting"},
		{`{"type":"DetectionPredictor"}`, "DetectionPredictor (object detection: it loads a raw EasyCV checkpoint"},
		{`{"type":"SegmentationPredictor"}`, "not served here"},
		{`{"type":"VideoClassificationPredictor"}`, "not served here"},
		{`{"type":"ClassificationPredictor"}`, "set \"type\": \"TorchClassifier\""},
		{`{"type":"Nope"}`, "unknown EasyCV predictor \"Nope\"; valid values: TorchClassifier"},
		{`{"type":"TorchClassifier","topk":-1}`, "topk"},
		{`{"type":"TorchClassifier","bogus":1}`, "unknown field"},
		{`{"type":"TorchClassifier","mean":[1,2]}`, "model_config.mean"},
		{`{"type":"TorchClassifier","std":[1,0,1]}`, "model_config.std"},
		{`{"type":"TorchClassifier","interpolation":"lanczos"}`, "interpolation"},
		{`{"type":"TorchClassifier","test_pipeline":[{"type":"RandomFlip"},{"type":"ToTensor"}]}`, "\"RandomFlip\" is not supported"},
		{`{"type":"TorchClassifier","label_map_path":"../x"}`, "label_map_path"},
		{`{"type":"TorchClassifier","activation":"relu"}`, "activation"},
	} {
		err := New().Configure(processors.Spec{Code: Code, ModelSource: "/m.pt", ModelConfig: []byte(tc.cfg)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	ok := `{"type":"TorchClassifier","topk":2,"resize":[64,64],"crop_size":0,"mean":[0,0,0],"std":[1,1,1],"interpolation":"bicubic"}`
	if err := New().Configure(processors.Spec{Code: Code, ModelSource: "/m.pt", ModelConfig: []byte(ok)}); err != nil {
		t.Error(err)
	}
	if err := New().Configure(processors.Spec{Code: Code, ModelConfig: []byte(ok)}); err == nil {
		t.Error("no model_path: accepted")
	}
}

// TestLoadRefusals: class names that do not match the model, and a file
// that is not TorchScript (EasyCV's raw export is a torch.save checkpoint).
func TestLoadRefusals(t *testing.T) {
	dir := generated(t)
	c := New()
	if err := c.Configure(processors.Spec{Code: Code, ModelSource: "m", ModelConfig: []byte(`{"type":"TorchClassifier","class_list":["a","b"]}`)}); err != nil {
		t.Fatal(err)
	}
	err := c.Load(context.Background(), processors.Files{ModelPath: filepath.Join(dir, "cls.pt")})
	if err == nil || !strings.Contains(err.Error(), "5 classes but 2 class names") {
		t.Errorf("class_list of 2: %v", err)
	}
	ckpt := filepath.Join(t.TempDir(), "epoch_10_export.pt")
	if out, err := exec.Command("/usr/bin/python3", "-c", `import sys, torch; torch.save({"state_dict": {}, "meta": {"config": "{}"}}, sys.argv[1])`, ckpt).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	c = New()
	if err := c.Configure(processors.Spec{Code: Code, ModelSource: ckpt, ModelConfig: []byte(`{"type":"TorchClassifier"}`)}); err != nil {
		t.Fatal(err)
	}
	err = c.Load(context.Background(), processors.Files{ModelPath: ckpt})
	if err == nil || !strings.Contains(err.Error(), "not a TorchScript archive") || !strings.Contains(err.Error(), "torch.jit.trace") {
		t.Errorf("raw checkpoint: %v", err)
	}
	// A folder holding the model and a label map.
	folder := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(dir, "logits.pt"))
	os.WriteFile(filepath.Join(folder, "model.jit"), b, 0o644)
	os.WriteFile(filepath.Join(folder, "labels.txt"), []byte("a\nb\nc\nd\ne\n"), 0o644)
	c = New()
	if err := c.Configure(processors.Spec{Code: Code, ModelSource: folder, ModelConfig: []byte(`{"type":"TorchClassifier","label_map_path":"labels.txt"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), processors.Files{ModelPath: folder}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !slices.Equal(c.classes, []string{"a", "b", "c", "d", "e"}) || c.out != "output__0" || c.act != "softmax" {
		t.Errorf("folder: classes %v, output %s, activation %s", c.classes, c.out, c.act)
	}
}

// TestMissingShim loads with EAS_TORCHSHIM_LIB pointing nowhere, in a
// child process (the shim, once opened, stays open in this one).
func TestMissingShim(t *testing.T) {
	if os.Getenv("EASYCV_MISSING_SHIM_CHILD") == "1" {
		c := New()
		if err := c.Configure(processors.Spec{Code: Code, ModelSource: "m", ModelConfig: []byte(`{"type":"TorchClassifier"}`)}); err != nil {
			t.Fatal(err)
		}
		err := c.Load(context.Background(), processors.Files{ModelPath: os.Getenv("EASYCV_MODEL")})
		if !errors.Is(err, torchscript.ErrLibrary) || !strings.Contains(err.Error(), "build-torchshim.sh") {
			t.Fatalf("err = %v, want one wrapping torchscript.ErrLibrary that says what to install", err)
		}
		return
	}
	dir := generated(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingShim$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EASYCV_MISSING_SHIM_CHILD=1", "EAS_TORCHSHIM_LIB=/nonexistent/libeas_torchshim.so",
		"EASYCV_MODEL="+filepath.Join(dir, "cls.pt"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
