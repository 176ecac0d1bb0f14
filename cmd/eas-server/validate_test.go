package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/cli"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/teststack"
)

// runCLI runs the binary's root command with args, in this process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Run(t.Context(), rootCmd(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestVersionFlag: --version says the build.
func TestVersionFlag(t *testing.T) {
	out, _, code := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "eas-server "+server.Version+" (") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("--version: exit %d %q", code, out)
	}
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
	caffe := write("caffe.json", `{"name":"m","processor":"caffe_cpu","model_path":"oss://b/m.zip","metadata":{"instance":1},"model_config":{"weights":"m.caffemodel"}}`)
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
	if _, stderr, code := runCLI(t, append([]string{"validate", "--target", "any"}, examples...)...); code != 0 {
		t.Fatalf("examples: exit %d, stderr %q", code, stderr)
	}
	// Issue 34: a local model file that does not exist was "ok". With
	// --target local it is checked where a server started here would look.
	missing := write("missing.json", `{"name":"m","processor":"pmml","model_path":"no/such/model.pmml","metadata":{"instance":1}}`)
	wd, _ := os.Getwd()
	if _, stderr, code := runCLI(t, "validate", missing); code == 0 ||
		!strings.Contains(stderr, "model_path: no file or directory at "+filepath.Join(wd, "no/such/model.pmml")) || !strings.Contains(stderr, "here "+wd) {
		t.Errorf("a missing local model: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "validate", "--target", "any", missing); code != 0 {
		t.Errorf("a missing local model with --target any: exit %d, stderr %q", code, stderr)
	}
	tests := []struct {
		file string
		want []string
	}{
		{gpu, []string{"metadata.gpu", "tensorflow_cpu_1.15"}},
		{typo, []string{"metdata", "did you mean metadata"}},
		{caffe, []string{"model_config", `unknown field "weights"`, `"weight"`}},
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
	if code != 0 || !strings.Contains(out, "echo") || !strings.Contains(out, "pytorch_cpu_1.10") || !strings.Contains(out, "processor_type python") {
		t.Fatalf("processors: exit %d, out %q", code, out)
	}
}

// TestValidateTellsTheTruth: validate fails what deploy refuses (a Java
// processor, a custom processor's bad entry, a GPU service on a machine without one), passes files whose
// only findings are no-effect keys, and says which keys those are.
func TestValidateTellsTheTruth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noGPU := detectGPUs
	t.Cleanup(func() { detectGPUs = noGPU })
	detectGPUs = func() gpus { return gpus{seen: "no /proc/driver/nvidia/gpus and no /dev/nvidia0"} }

	java := write("java.json", `{"name":"c","processor_path":"oss://b/p.jar","processor_type":"java","processor_mainclass":"com.example.P","metadata":{"instance":1}}`)
	_, stderr, code := runCLI(t, "validate", java)
	if code != 1 || !strings.Contains(stderr, "processor_type java: Java processors are not run here") {
		t.Errorf("java processor: exit %d, stderr %q", code, stderr)
	}
	badEntry := write("entry.json", `{"name":"c","processor_path":"oss://b/p.tar.gz","processor_type":"python","processor_entry":"app.so","metadata":{"instance":1}}`)
	_, stderr, code = runCLI(t, "validate", badEntry)
	if code != 1 || !strings.Contains(stderr, `processor_entry: "app.so" is not a Python file`) {
		t.Errorf("python processor with a .so entry: exit %d, stderr %q", code, stderr)
	}

	gpu := write("gpu.json", `{"name":"g","processor":"onnx_cu100","model_path":"oss://b/m.onnx","metadata":{"instance":1,"gpu":1}}`)
	_, stderr, code = runCLI(t, "validate", gpu)
	for _, w := range []string{"metadata.gpu is 1", "0 NVIDIA GPUs", "/dev/nvidia0", "use onnx_cpu", "--target any"} {
		if code != 1 || !strings.Contains(stderr, w) {
			t.Errorf("gpu service on a machine without one: exit %d, stderr %q lacks %q", code, stderr, w)
		}
	}
	if _, stderr, code := runCLI(t, "validate", "--target", "any", gpu); code != 0 {
		t.Errorf("--target any: exit %d, stderr %q", code, stderr)
	}
	detectGPUs = func() gpus { return gpus{count: 1, seen: "/proc/driver/nvidia/gpus"} }
	if _, stderr, code := runCLI(t, "validate", gpu); code != 0 {
		t.Errorf("gpu service on a machine with one: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "validate", "--target", "cloud", gpu); code != 1 || !strings.Contains(stderr, "--target") {
		t.Errorf("--target cloud: exit %d, stderr %q", code, stderr)
	}

	noop := write("noop.json", `{"name":"n","processor":"echo","autoscaler":{"min":1,"max":4},
		"cloud":{"computing":{"instance_type":"ecs.c6.xlarge"}},"metadata":{"instance":1,"memory":4000}}`)
	stdout, stderr, code := runCLI(t, "validate", noop)
	if code != 0 || !strings.Contains(stdout, "ok") {
		t.Fatalf("warnings only: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, w := range []string{"warning: autoscaler: accepted for EAS compatibility; this server does not autoscale", "warning: cloud:", "warning: metadata.memory:"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q lacks %q", stderr, w)
		}
	}
}

// TestNvidiaGPUs reads the driver's /proc entries, else the device nodes.
func TestNvidiaGPUs(t *testing.T) {
	root := t.TempDir()
	if g := nvidiaGPUs(root); g.count != 0 || !strings.Contains(g.seen, "no ") {
		t.Errorf("empty root: %+v", g)
	}
	for _, d := range []string{"dev/nvidia0", "dev/nvidia1", "dev/nvidiactl"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(d)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if g := nvidiaGPUs(root); g.count != 2 {
		t.Errorf("two device nodes: %+v", g)
	}
	for _, bus := range []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"} {
		if err := os.MkdirAll(filepath.Join(root, "proc/driver/nvidia/gpus", bus), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if g := nvidiaGPUs(root); g.count != 3 {
		t.Errorf("three /proc entries: %+v", g)
	}
}

// TestK8sRenderWarnsOfLocalPaths: k8s render says when a model file is a
// path on this machine, which the pods will not have (issue 34), and says
// nothing for a URL the pods can fetch.
func TestK8sRenderWarnsOfLocalPaths(t *testing.T) {
	dir := t.TempDir()
	local := teststack.WriteFile(t, dir, "local.json", `{"name":"m","processor":"pmml","model_path":"models/m.pmml","metadata":{"instance":1}}`)
	remote := teststack.WriteFile(t, dir, "remote.json", `{"name":"m","processor":"pmml","model_path":"oss://b/m.pmml","metadata":{"instance":1}}`)
	out, errOut, code := runCLI(t, "k8s", "render", local)
	if code != 0 || !strings.Contains(out, "kind: Deployment") || !strings.Contains(errOut, `warning: model_path "models/m.pmml" is a path on this machine`) {
		t.Errorf("render of a local model_path: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "k8s", "render", remote); code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("render of an oss:// model_path: exit %d, stderr %q", code, errOut)
	}
}
