package tensorflow_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// BenchmarkZoo times each model family of TestTensorFlowZoo through the
// router, one intra-op thread, its reference request (a few rows) one at a
// time, on three runtimes: the translator's ONNX (onnx), TensorFlow itself
// (libtensorflow), and the ONNX model the official converter, tf2onnx,
// makes of the same SavedModel (served as a .onnx in the model directory).
// A runtime that cannot serve a model is skipped saying why; each served
// model's first answer is checked against TensorFlow's before timing.
func BenchmarkZoo(b *testing.B) {
	env := libtftest.Setup(b)
	dir, refs := zooGenerate(b, env)
	for _, m := range zooModels {
		c := refs[m.dir]
		body, err := tfpb.EncodeRequest("", c.Sorted(), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, rt := range []string{"onnx", "libtensorflow", "tf2onnx"} {
			b.Run(m.dir+"/"+rt, func(b *testing.B) {
				path, runtime, tol := filepath.Join(dir, m.dir), rt, tensor.F32Reformulated
				switch rt {
				case "libtensorflow":
					tol = tensor.F32Accumulated
				case "tf2onnx":
					path, runtime = filepath.Join(dir, m.dir+"_tf2onnx"), "onnx"
					if err := tf2onnxConvert(env, filepath.Join(dir, m.dir), path); err != nil {
						b.Skipf("tf2onnx does not convert it: %v", err)
					}
				}
				st := teststack.New(b, teststack.Options{AllowFailedDeploys: true}, fmt.Sprintf(
					`{"name":"m","processor":"tensorflow_cpu_2.7","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1},"model_config":{"runtime":%q}}`,
					path, runtime))
				if err := st.DeployErrors["m"]; err != nil {
					b.Skipf("not served: %s", firstLine(err.Error()))
				}
				url := st.URL + "/api/predict/m"
				code, resp, _ := teststack.Do(b, http.MethodPost, url, "T", body)
				if code != http.StatusOK {
					b.Skipf("served, but answers %d %s", code, resp)
				}
				outs, err := tfpb.DecodeResponse(resp)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					if w, ok := c.Outputs[o.Name]; !ok || tensor.Close(o, w, tol.For(w.DType)) != nil {
						b.Skipf("served, but output %q differs from TensorFlow's", o.Name)
					}
				}
				for b.Loop() {
					if code, resp, _ := teststack.Do(b, http.MethodPost, url, "T", body); code != http.StatusOK {
						b.Fatalf("%d %s", code, resp)
					}
				}
			})
		}
	}
}

// tf2onnxConvert runs the venv's tf2onnx on the SavedModel at src, writing
// dst/model.onnx (opset 18), once.
func tf2onnxConvert(env libtftest.Env, src, dst string) error {
	out := filepath.Join(dst, "model.onnx")
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(env.Python, "-m", "tf2onnx.convert", "--saved-model", src, "--opset", "18", "--output", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dst)
		return fmt.Errorf("%v: %s", err, lastLine(string(msg)))
	}
	return nil
}

func lastLine(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
