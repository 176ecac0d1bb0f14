package easycv

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// The YOLOX exports, images and references come from testdata/gen_yolox.py
// (Debian's python3-torch, python3-torchvision, python3-pil and
// python3-opencv), run once per test binary into a temporary directory.
var (
	yoloxOnce sync.Once
	yoloxDir  string
	yoloxErr  error
	yoloxSkip string
	yoloxRefs yoloxRefFile
)

type detRef struct {
	Boxes   *[][]float64 `json:"detection_boxes"`
	Scores  *[]float64   `json:"detection_scores"`
	Classes *[]int       `json:"detection_classes"`
	Names   *[]string    `json:"detection_class_names"`
	Ori     []int        `json:"ori_img_shape"`
}

type yoloxRefFile struct {
	Classes  []string `json:"classes"`
	ImgScale []int    `json:"img_scale"`
	Images   map[string]struct {
		ResizedW     int       `json:"resized_w"`
		ResizedH     int       `json:"resized_h"`
		ResizedRGB   string    `json:"resized_rgb"`
		TensorSHA256 string    `json:"tensor_sha256"`
		PredShape    []int     `json:"pred_shape"`
		Pred         []float64 `json:"pred"`
		ONNX         detRef    `json:"onnx"`
		Jit          detRef    `json:"jit"`
		ONNXAll      detRef    `json:"onnx_all"`
		JitAll       detRef    `json:"jit_all"`
	} `json:"images"`
	Resize []struct {
		Src string `json:"src"`
		W   int    `json:"w"`
		H   int    `json:"h"`
		Out string `json:"out"`
	} `json:"resize"`
	ResizeSrc map[string][]json.RawMessage `json:"resize_src"`
}

func yolox(t testing.TB) (string, yoloxRefFile) {
	t.Helper()
	yoloxOnce.Do(func() {
		if out, err := exec.Command("/usr/bin/python3", "-c", "import torch, torchvision, PIL, cv2").CombinedOutput(); err != nil {
			yoloxSkip = fmt.Sprintf("/usr/bin/python3 cannot import torch, torchvision, PIL and cv2 (run scripts/install-test-deps.sh): %v\n%s", err, out)
			return
		}
		yoloxDir, yoloxErr = os.MkdirTemp("", "easycv-yolox-")
		if yoloxErr != nil {
			return
		}
		out, err := exec.Command("/usr/bin/python3", "testdata/gen_yolox.py", yoloxDir).CombinedOutput()
		if err != nil {
			yoloxErr = fmt.Errorf("testdata/gen_yolox.py: %v\n%s", err, out)
			return
		}
		b, err := os.ReadFile(filepath.Join(yoloxDir, "yolox_refs.json"))
		if err == nil {
			err = json.Unmarshal(b, &yoloxRefs)
		}
		yoloxErr = err
	})
	if yoloxSkip != "" {
		require.Missing(t, require.Python, "%s", yoloxSkip)
	}
	if yoloxErr != nil {
		t.Fatal(yoloxErr)
	}
	return yoloxDir, yoloxRefs
}

// pngImages are the test images whose pixels Go decodes exactly as PIL.
func pngImages(r yoloxRefFile) []string {
	var names []string
	for n := range r.Images {
		if strings.HasSuffix(n, ".png") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// TestCVResizeMatchesOpenCV compares cvResizeLinear with cv2.resize
// (INTER_LINEAR) byte for byte: up, down, one axis, exactly half (OpenCV's
// area path), 1x1, sizes around its SIMD widths.
func TestCVResizeMatchesOpenCV(t *testing.T) {
	_, r := yolox(t)
	srcs := map[string]rgb{}
	for name, v := range r.ResizeSrc {
		var w, h int
		var b64 string
		if json.Unmarshal(v[0], &w) != nil || json.Unmarshal(v[1], &h) != nil || json.Unmarshal(v[2], &b64) != nil {
			t.Fatalf("resize_src %s: %s", name, v)
		}
		srcs[name] = rgb{w: w, h: h, pix: bgrToRGB(unb64(t, b64))}
	}
	for _, c := range r.Resize {
		src := srcs[c.Src]
		got := cvResizeLinear(src, c.W, c.H)
		want := bgrToRGB(unb64(t, c.Out))
		if n := diffCount(got.pix, want); n > 0 {
			t.Errorf("%dx%d -> %dx%d: %d of %d bytes differ from cv2.resize", src.w, src.h, c.W, c.H, n, len(want))
		}
	}
}

// bgrToRGB swaps the channels of packed 3-byte pixels (the references come
// from OpenCV, in BGR; the resize treats channels alike).
func bgrToRGB(b []byte) []byte {
	out := slices.Clone(b)
	for i := 0; i+2 < len(out); i += 3 {
		out[i], out[i+2] = out[i+2], out[i]
	}
	return out
}

func loadDetector(t testing.TB, file string, extra string) *Classifier {
	t.Helper()
	c := New()
	cfg := `{"type":"YoloXPredictor"` + extra + `}`
	spec := processors.Spec{Service: "t", Code: Code, ModelSource: file, ModelConfig: []byte(cfg), CPU: 2}
	if err := c.Configure(spec); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), processors.Files{ModelPath: file}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestYoloxPreprocess checks the network input made of each PNG against
// EasyCV's (PIL decode, mmcv's imrescale through cv2.resize, impad with
// 114, imnormalize): the resized pixels and the float32 tensor are equal
// bit for bit. The JPEG, decoded by Go's IDCT, is close.
func TestYoloxPreprocess(t *testing.T) {
	dir, r := yolox(t)
	c := loadDetector(t, filepath.Join(dir, "yolox.onnx"), "")
	for name, ref := range r.Images {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := decodeImage("image", b, defaultMaxPixels)
		if err != nil {
			t.Fatal(err)
		}
		rh, rw, _ := c.det.pre.resized(img.h, img.w)
		if rh != ref.ResizedH || rw != ref.ResizedW {
			t.Errorf("%s: resized to %dx%d, EasyCV %dx%d", name, rw, rh, ref.ResizedW, ref.ResizedH)
			continue
		}
		resized := cvResizeLinear(img, rw, rh)
		want := unb64(t, ref.ResizedRGB)
		if strings.HasSuffix(name, ".jpg") {
			sum := 0.0
			for i := range want {
				sum += math.Abs(float64(resized.pix[i]) - float64(want[i]))
			}
			if mean := sum / float64(len(want)); mean > 0.25 {
				t.Errorf("%s: resized pixels differ from EasyCV's by %.3f levels on average, want <= 0.25", name, mean)
			}
			continue
		}
		if n := diffCount(resized.pix, want); n > 0 {
			t.Errorf("%s: %d of %d resized bytes differ from EasyCV's", name, n, len(want))
		}
		x, h, w, _ := c.det.pre.apply(img)
		if h != r.ImgScale[1] || w != r.ImgScale[0] {
			t.Errorf("%s: input %dx%d, want %v", name, w, h, r.ImgScale)
		}
		buf := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		sum := sha256.Sum256(buf)
		if got := hex.EncodeToString(sum[:]); got != ref.TensorSHA256 {
			t.Errorf("%s: the input tensor differs from EasyCV's (sha256 %s, want %s)", name, got, ref.TensorSHA256)
		}
	}
}

// TestYoloxPostprocessMatchesEasyCV runs the Go postprocess (corners,
// best class, test_conf, class-aware NMS, scale, score_thresh) on the
// reference network's own predictions: the answer equals EasyCV's
// postprocess with torchvision's batched_nms exactly.
func TestYoloxPostprocessMatchesEasyCV(t *testing.T) {
	dir, r := yolox(t)
	c := loadDetector(t, filepath.Join(dir, "yolox.onnx"), "")
	for name, ref := range r.Images {
		pred := make([]float32, len(ref.Pred))
		for i, v := range ref.Pred {
			pred[i] = float32(v)
		}
		p := tensor.Own("output", []int64{int64(ref.PredShape[0]), int64(ref.PredShape[1]), int64(ref.PredShape[2])}, pred)
		dets, _, err := c.det.interpret([]tensor.Tensor{p})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := decodeImage("image", b, defaultMaxPixels)
		if err != nil {
			t.Fatal(err)
		}
		_, _, scale := c.det.pre.resized(img.h, img.w)
		for _, th := range []struct {
			thresh float32
			want   detRef
		}{{0.5, ref.ONNX}, {0, ref.ONNXAll}} {
			var sb strings.Builder
			c.det.scoreThresh = th.thresh
			c.det.encode(&sb, detAnswer{none: dets == nil, dets: dets, oriH: img.h, oriW: img.w}, scale)
			if err := compareDet([]byte(sb.String()), th.want, tensor.Exact); err != nil {
				t.Errorf("%s, score_thresh %v: %v", name, th.thresh, err)
			}
		}
		above := 0
		for i := 0; i < ref.PredShape[1]; i++ {
			row := pred[i*ref.PredShape[2]:]
			best := slices.Max(row[5 : 5+len(r.Classes)])
			if row[4]*best > 0.5 {
				above++
			}
		}
		t.Logf("%s: %d anchors score over 0.5, %d detections after NMS; %d of all scores after NMS", name, above, len(*ref.ONNX.Scores), len(*ref.ONNXAll.Scores))
	}
}

// compareDet checks a served answer against YoloXPredictor's: the same
// keys, classes and names exactly, boxes and scores under tol.
func compareDet(body []byte, want detRef, tol tensor.Tolerance) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil {
		return fmt.Errorf("answer %s: %v", body, err)
	}
	var got detRef
	if err := json.Unmarshal(body, &got); err != nil {
		return fmt.Errorf("answer %s: %v", body, err)
	}
	wantKeys := []string{"detection_boxes", "detection_scores", "detection_classes", "ori_img_shape"}
	if want.Names != nil {
		wantKeys = append(wantKeys, "detection_class_names")
	}
	if len(keys) != len(wantKeys) {
		return fmt.Errorf("answer has keys %v, want %v", slices.Sorted(mapKeys(keys)), wantKeys)
	}
	if !slices.Equal(got.Ori, want.Ori) {
		return fmt.Errorf("ori_img_shape %v, want %v", got.Ori, want.Ori)
	}
	if (want.Scores == nil) != (got.Scores == nil) || (want.Boxes == nil) != (got.Boxes == nil) || (want.Classes == nil) != (got.Classes == nil) {
		return fmt.Errorf("answer %s, want null arrays exactly where EasyCV's are None: %+v", body, want)
	}
	if want.Scores == nil {
		return nil
	}
	if len(*got.Scores) != len(*want.Scores) || len(*got.Boxes) != len(*want.Boxes) || len(*got.Classes) != len(*want.Classes) {
		return fmt.Errorf("%d/%d/%d boxes/scores/classes, want %d", len(*got.Boxes), len(*got.Scores), len(*got.Classes), len(*want.Scores))
	}
	if tol != tensor.Exact {
		// Scores a few ulps apart may swap places between two
		// formulations of the network: compare in a canonical order.
		canonical(&got)
		canonical(&want)
	}
	if !slices.Equal(*got.Classes, *want.Classes) {
		return fmt.Errorf("detection_classes %v, want %v", *got.Classes, *want.Classes)
	}
	if want.Names != nil && (got.Names == nil || !slices.Equal(*got.Names, *want.Names)) {
		return fmt.Errorf("detection_class_names %v, want %v", got.Names, *want.Names)
	}
	// The answer writes float32s in their shortest form; the reference
	// holds the float32 values widened: compare float32s.
	f32 := func(v []float64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(float32(x))
		}
		return out
	}
	if err := tensor.CloseValues("detection_scores", f32(*got.Scores), f32(*want.Scores), tol); err != nil {
		return err
	}
	var gb, wb []float64
	for _, b := range *got.Boxes {
		gb = append(gb, b...)
	}
	for _, b := range *want.Boxes {
		wb = append(wb, b...)
	}
	if len(gb) != 4*len(*got.Scores) {
		return fmt.Errorf("%d box numbers for %d scores", len(gb), len(*got.Scores))
	}
	return tensor.CloseValues("detection_boxes", f32(gb), f32(wb), tol)
}

// canonical orders an answer's detections by class, then box.
func canonical(a *detRef) {
	idx := make([]int, len(*a.Scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		i, j := idx[x], idx[y]
		if (*a.Classes)[i] != (*a.Classes)[j] {
			return (*a.Classes)[i] < (*a.Classes)[j]
		}
		return slices.Compare((*a.Boxes)[i], (*a.Boxes)[j]) < 0
	})
	boxes, scores, classes := make([][]float64, len(idx)), make([]float64, len(idx)), make([]int, len(idx))
	var names []string
	for k, i := range idx {
		boxes[k], scores[k], classes[k] = (*a.Boxes)[i], (*a.Scores)[i], (*a.Classes)[i]
		if a.Names != nil {
			names = append(names, (*a.Names)[i])
		}
	}
	a.Boxes, a.Scores, a.Classes = &boxes, &scores, &classes
	if a.Names != nil {
		a.Names = &names
	}
}

func mapKeys(m map[string]json.RawMessage) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestYoloxExportsMatchEasyCV serves each export on each PNG and compares
// the answer with YoloXPredictor's: the ONNX export on ONNX Runtime
// against PyTorch (another formulation of the same float32 network), the
// jit exports on libtorch (the same library as the reference): yolox.jit
// with NMS in its graph (torchvision's operators loaded into libtorch),
// yolox_raw.jit with NMS in Go.
func TestYoloxExportsMatchEasyCV(t *testing.T) {
	dir, r := yolox(t)
	for _, c := range []struct {
		file    string
		tol     tensor.Tolerance
		end2end bool
		jit     bool
	}{
		{"yolox.onnx", tensor.F32Reformulated, false, false},
		{"yolox.jit", tensor.F32Accumulated, true, true},
		{"yolox_raw.jit", tensor.F32Accumulated, false, false},
	} {
		t.Run(c.file, func(t *testing.T) {
			d := loadDetector(t, filepath.Join(dir, c.file), "")
			all := loadDetector(t, filepath.Join(dir, c.file), `,"score_thresh":0`)
			if d.det.end2end != c.end2end {
				t.Errorf("nms_in_graph %v, want %v", d.det.end2end, c.end2end)
			}
			for _, name := range pngImages(r) {
				want := r.Images[name].ONNX
				if c.jit {
					want = r.Images[name].Jit
				}
				wantAll := r.Images[name].ONNXAll
				if c.jit {
					wantAll = r.Images[name].JitAll
				}
				body := imageBody(t, filepath.Join(dir, name))
				if err := compareDet(predict(t, d, body), want, c.tol); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				if err := compareDet(predict(t, all, body), wantAll, c.tol); err != nil {
					t.Errorf("%s, score_thresh 0: %v", name, err)
				}
			}
		})
	}
}

// TestYoloxThresholds checks model_config's score_thresh, and that a
// test_conf nothing passes answers EasyCV's None form.
func TestYoloxThresholds(t *testing.T) {
	dir, r := yolox(t)
	name := pngImages(r)[0]
	body := imageBody(t, filepath.Join(dir, name))
	all := loadDetector(t, filepath.Join(dir, "yolox.onnx"), `,"score_thresh":0.3`)
	var low detRef
	if err := json.Unmarshal(predict(t, all, body), &low); err != nil {
		t.Fatal(err)
	}
	if want := len(*r.Images[name].ONNX.Scores); low.Scores == nil || len(*low.Scores) <= want {
		t.Errorf("score_thresh 0.3 answers %v detections, want more than the default's %d", low.Scores, want)
	}
	for _, s := range *low.Scores {
		if s <= 0.3 {
			t.Errorf("score %v answered under score_thresh 0.3", s)
		}
	}
	none := loadDetector(t, filepath.Join(dir, "yolox.onnx"), `,"test_conf":0.9999`)
	got := predict(t, none, body)
	want := fmt.Sprintf(`{"detection_boxes":null,"detection_scores":null,"detection_classes":null,"ori_img_shape":[%d,%d]}`, r.Images[name].ONNX.Ori[0], r.Images[name].ONNX.Ori[1])
	if string(got) != want {
		t.Errorf("nothing over test_conf: %s, want %s", got, want)
	}
}

// TestYoloxRefusals checks what is refused at deploy, and why.
func TestYoloxRefusals(t *testing.T) {
	dir, _ := yolox(t)
	configure := func(cfg string) error {
		return New().Configure(processors.Spec{Service: "t", Code: Code, ModelSource: "m", ModelConfig: []byte(cfg)})
	}
	for _, c := range []struct{ cfg, want string }{
		{`{"type":"DetectionPredictor"}`, "builds the network from EasyCV's Python model zoo"},
		{`{"type":"SegmentationPredictor"}`, "raw EasyCV checkpoint"},
		{`{"type":"VideoClassificationPredictor"}`, "EasyCV's Python model zoo"},
		{`{"type":"YoloXPredictor","topk":2}`, "model_config.topk: not a YoloXPredictor setting"},
		{`{"type":"YoloXPredictor","score_thresh":2}`, "model_config.score_thresh: must be between 0 and 1"},
		{`{"type":"TorchClassifier","score_thresh":0.5}`, "YoloXPredictor settings"},
	} {
		err := configure(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	if err := configure(`{"type":"TorchYoloXPredictor","score_thresh":0.4}`); err != nil {
		t.Errorf("TorchYoloXPredictor, EasyCV's old name: %v", err)
	}

	load := func(files map[string]string) error {
		d := t.TempDir()
		for n, src := range files {
			b := []byte(src)
			if strings.HasPrefix(src, "@") {
				var err error
				if b, err = os.ReadFile(filepath.Join(dir, src[1:])); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(d, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c := New()
		if err := c.Configure(processors.Spec{Service: "t", Code: Code, ModelSource: d, ModelConfig: []byte(`{"type":"YoloXPredictor"}`)}); err != nil {
			return err
		}
		err := c.Load(context.Background(), processors.Files{ModelPath: d})
		c.Close()
		return err
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "yolox.onnx.config.json"))
	if err != nil {
		t.Fatal(err)
	}
	with := func(old, new string) string { return strings.Replace(string(cfg), old, new, 1) }
	for _, c := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"m.blade": "x"}, "PAI-Blade export, which needs the torch_blade runtime"},
		{map[string]string{"epoch_300.pth": "not a zip"}, "EasyCV's raw export (export_type 'raw') is a torch.save checkpoint"},
		{map[string]string{"m.onnx": "@yolox.onnx"}, "m.onnx has no m.onnx.config.json beside it"},
		{map[string]string{"m.onnx": "@yolox.onnx", "m.onnx.config.json": with(`"preprocess_jit": false`, `"preprocess_jit": true`)}, "export.preprocess_jit is set"},
		{map[string]string{"m.onnx": "@yolox.onnx", "m.onnx.config.json": with(`"use_trt_efficientnms": false`, `"use_trt_efficientnms": true`)}, "TensorRT's EfficientNMS plugin"},
		{map[string]string{"m.onnx": "@yolox.onnx", "m.onnx.config.json": with(`"classes": [`, `"other": [`)}, "no CLASSES or classes"},
		{map[string]string{"m.onnx": "@yolox.onnx", "m.onnx.config.json": with(`"classes": ["person", `, `"classes": ["x", "person", `)}, "3 class scores, but the export's config names 4"},
		{map[string]string{"m.onnx": "@yolox.onnx", "m.onnx.config.json": with(`"img_scale": [160, 160]`, `"img_scale": [320, 320]`)}, "makes 320x320 images but the export takes 160x160"},
		{map[string]string{"m.onnx": "@yolox.onnx", "m.onnx.config.json": with(`"type": "MMNormalize"`, `"type": "MMRandomFlip"`)}, `transform "MMRandomFlip" is not supported`},
	} {
		err := load(c.files)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", slices.Sorted(func(y func(string) bool) {
				for k := range c.files {
					if !y(k) {
						return
					}
				}
			}), err, c.want)
		}
	}
}

// TestYoloxHTTP deploys the ONNX export through the real loader and router
// in the service.json form EAS documents, with rpc.batching, and sends a
// list request, concurrent single requests and a bad one.
func TestYoloxHTTP(t *testing.T) {
	dir, r := yolox(t)
	model := filepath.Join(dir, "yolox.onnx")
	srv := teststack.Start(t,
		fmt.Sprintf(`{"name":"yolox","processor":"easycv","model_path":%q,"model_config":{"type":"YoloXPredictor"},"token":"T",
			"metadata":{"instance":1,"cpu":1,"rpc":{"batching":true,"max_batch_size":8,"max_batch_timeout":20}}}`, model),
		fmt.Sprintf(`{"name":"yolox_str","processor":"easycv","model_path":%q,"model_config":"{\"type\":\"YoloXPredictor\",\"score_thresh\":0}","token":"T","metadata":{"instance":1,"cpu":1}}`, model))
	post := func(svc string, body []byte) (int, []byte) {
		code, b, _ := teststack.Do(t, "POST", srv.URL+"/api/predict/"+svc, "T", body)
		return code, b
	}
	names := pngImages(r)
	items := make([]string, len(names))
	for i, n := range names {
		items[i] = string(imageBody(t, filepath.Join(dir, n)))
	}
	code, out := post("yolox", []byte("["+strings.Join(items, ",")+"]"))
	if code != 200 {
		t.Fatalf("list request: %d %s", code, out)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil || len(list) != len(names) {
		t.Fatalf("list answer %s: %v", out, err)
	}
	for i, n := range names {
		if err := compareDet(list[i], r.Images[n].ONNX, tensor.F32Reformulated); err != nil {
			t.Errorf("list %s: %v", n, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out := post("yolox_str", []byte(items[i]))
			if code != 200 {
				errs <- fmt.Sprintf("%s: %d %s", n, code, out)
				return
			}
			if err := compareDet(out, r.Images[n].ONNXAll, tensor.F32Reformulated); err != nil {
				errs <- fmt.Sprintf("%s, score_thresh 0: %v", n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if code, out := post("yolox", []byte(`{"image":"not base64!"}`)); code != 400 || !strings.Contains(string(out), "image: not valid base64") {
		t.Errorf("bad base64: %d %s", code, out)
	}
	code, b, _ := teststack.Do(t, "GET", srv.URL+"/api/predict/yolox", "T", nil)
	if code != 200 || !strings.Contains(string(b), "detection_boxes") {
		t.Errorf("GET metadata: %d %s", code, b)
	}
}

// TestYoloxJitWithoutTorchVision loads the jit export (NMS in its graph) in
// a process that cannot find torchvision's operators: the deploy fails
// saying so and what to export instead. A subprocess, because operators
// once loaded stay loaded.
func TestYoloxJitWithoutTorchVision(t *testing.T) {
	if dir := os.Getenv("EASYCV_TEST_YOLOX_DIR"); dir != "" {
		c := New()
		spec := processors.Spec{Service: "t", Code: Code, ModelSource: filepath.Join(dir, "yolox.jit"), ModelConfig: []byte(`{"type":"YoloXPredictor"}`)}
		if err := c.Configure(spec); err != nil {
			t.Fatal(err)
		}
		err := c.Load(context.Background(), processors.Files{ModelPath: spec.ModelSource})
		for _, want := range []string{"the graph calls torchvision's operators", "/nonexistent/_C.so", "export with export_type 'onnx' instead", "torchvision::nms"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("load: %v, want an error containing %q", err, want)
			}
		}
		return
	}
	dir, _ := yolox(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestYoloxJitWithoutTorchVision$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EASYCV_TEST_YOLOX_DIR="+dir, torchscript.EnvTorchVisionLib+"=/nonexistent/_C.so")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Errorf("subprocess: %v\n%s", err, out)
	}
}
