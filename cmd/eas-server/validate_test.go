package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := rootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		code = 1
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"name":"e","processor":"echo","metadata":{"instance":1}}`)
	gpu := write("gpu.json", `{"name":"m","processor":"tensorflow_gpu_1.15","metadata":{"instance":1,"gpu":0}}`)
	typo := write("typo.json", `{"name":"m","processor":"echo","metdata":{"instance":1}}`)
	caffe := write("caffe.json", `{"name":"m","processor":"caffe_cpu","metadata":{"instance":1}}`)
	// The processor's own Configure runs: a model_config key it does not
	// know is found without any download.
	badConfig := write("badconfig.json", `{"name":"m","processor":"pytorch_cpu_1.10","model_path":"oss://b/m.onnx","metadata":{"instance":1},"model_config":{"intra_op_thread":2}}`)

	if _, stderr, code := runCLI(t, "validate", good); code != 0 {
		t.Fatalf("valid file: exit %d, stderr %q", code, stderr)
	}
	examples, _ := filepath.Glob("../../examples/service-json/*.json")
	if len(examples) == 0 {
		t.Fatal("no examples found")
	}
	if _, stderr, code := runCLI(t, append([]string{"validate"}, examples...)...); code != 0 {
		t.Fatalf("examples: exit %d, stderr %q", code, stderr)
	}
	tests := []struct {
		file string
		want []string
	}{
		{gpu, []string{"metadata.gpu", "tensorflow_cpu_1.15"}},
		{typo, []string{"metdata", "did you mean metadata"}},
		{caffe, []string{"caffe_cpu", "does not serve", "onnx_cpu"}},
		{badConfig, []string{"model_config", `unknown field "intra_op_thread"`, "intra_op_threads"}},
	}
	for _, tc := range tests {
		_, stderr, code := runCLI(t, "validate", good, tc.file)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", tc.file, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", tc.file, stderr, w)
			}
		}
	}
}

func TestProcessorsListsEcho(t *testing.T) {
	out, _, code := runCLI(t, "processors")
	if code != 0 || !strings.Contains(out, "echo") || !strings.Contains(out, "pytorch_cpu_1.10") {
		t.Fatalf("processors: exit %d, out %q", code, out)
	}
}
