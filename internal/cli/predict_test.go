package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
)

type jsonTensor struct {
	Name     string    `json:"name"`
	Shape    []int64   `json:"shape"`
	Datatype string    `json:"datatype"`
	Data     []float64 `json:"data"`
}

// TestCLIPredict: predict sends raw bytes (a file or stdin) with the token
// fetched through the control plane or given, and, with --tensors, encodes
// a JSON tensor list in each service's own wire format (EAS Torch protobuf,
// HIE DataProto, KServe v2) and prints the answer's tensors, the same
// numbers every way.
func TestCLIPredict(t *testing.T) {
	t.Setenv("EAS_ADMIN_TOKEN", "")
	t.Setenv("EAS_ENDPOINT", "")
	url := startServer(t)
	dir := t.TempDir()
	model, _ := filepath.Abs("../../examples/models/mlp.onnx")
	echo := teststack.WriteFile(t, dir, "echo.json", `{"name":"e","processor":"echo","token":"ET","metadata":{"instance":1}}`)
	if _, errOut, code := ctl(t, url, "create", echo); code != 0 {
		t.Fatalf("create echo: %s", errOut)
	}
	req := teststack.WriteFile(t, dir, "req.bin", "raw \x00 bytes")
	if out, errOut, code := ctl(t, url, "predict", "e", req); code != 0 || out != "raw \x00 bytes" {
		t.Fatalf("predict a file: exit %d %q\n%s", code, out, errOut)
	}
	if out, errOut, code := runCLIStdin(t, "from stdin", "predict", "e", "-", "--endpoint", url, "--service-token", "ET"); code != 0 || out != "from stdin" {
		t.Fatalf("predict stdin with --service-token and no admin token: exit %d %q\n%s", code, out, errOut)
	}
	if _, errOut, code := runCLIStdin(t, "x", "predict", "e", "-", "--endpoint", url, "--service-token", "wrong"); code == 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("predict with a wrong token: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := runCLIStdin(t, "x", "predict", "e", "-", "--endpoint", url); code == 0 || !strings.Contains(errOut, "--service-token") {
		t.Fatalf("predict with no token at all: exit %d\n%s", code, errOut)
	}

	if runtime.GOOS != "linux" {
		t.Skip("the ONNX Runtime of third_party is a Linux library")
	}
	lenet, _ := filepath.Abs("../../examples/models/caffe_lenet")
	for _, svc := range []string{
		`{"name":"hie","processor":"onnx_cpu","model_path":"` + model + `","metadata":{"instance":1}}`,
		`{"name":"torch","processor":"pytorch_cpu_1.10","model_path":"` + model + `","metadata":{"instance":1}}`,
		`{"name":"lenet","processor":"caffe_cpu","model_path":"` + lenet + `","metadata":{"instance":1}}`,
	} {
		var head struct{ Name string }
		json.Unmarshal([]byte(svc), &head)
		if _, errOut, code := ctl(t, url, "create", teststack.WriteFile(t, dir, head.Name+".json", svc)); code != 0 {
			t.Fatalf("create %s: %s", head.Name, errOut)
		}
	}
	tensors := teststack.WriteFile(t, dir, "in.json", `[{"name":"input","shape":[1,16],"datatype":"FP32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]`)
	var first []jsonTensor
	for _, c := range []struct{ name, format string }{
		{"hie", ""},        // onnx_cpu: HIE DataProto
		{"torch", ""},      // pytorch_cpu_1.10: the EAS Torch protobuf
		{"hie", "kserve"},  // KServe v2 JSON on /v2/models/hie/infer
		{"torch", "torch"}, // the format given, no look-up needed
	} {
		args := []string{"predict", c.name, tensors, "--tensors"}
		if c.format != "" {
			args = append(args, "--format", c.format)
		}
		out, errOut, code := ctl(t, url, args...)
		var got []jsonTensor
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || len(got[0].Data) != 8 || got[0].Datatype != "FP32" {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
		if first == nil {
			first = got
			continue
		}
		// The same model on the same ONNX Runtime, through other doors.
		if err := tensor.CloseValues("output", got[0].Data, first[0].Data, tensor.F32Accumulated); err != nil {
			t.Fatalf("%v: against the first service's answer: %v", args, err)
		}
	}
	// The Caffe protobuf for caffe_*, the same numbers as KServe v2.
	digit := teststack.WriteFile(t, dir, "digit.json", `[{"name":"data","shape":[1,1,28,28],"datatype":"FP32","data":[`+strings.Repeat("0.5,", 783)+`1]}]`)
	var caffeOut string
	for _, format := range []string{"", "kserve"} {
		args := []string{"predict", "lenet", digit, "--tensors"}
		if format != "" {
			args = append(args, "--format", format)
		}
		out, errOut, code := ctl(t, url, args...)
		var got []jsonTensor
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0].Name != "prob" || len(got[0].Data) != 10 {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
		if caffeOut == "" {
			caffeOut = out
		} else if out != caffeOut {
			t.Fatalf("caffe and kserve answers differ:\n%s\n%s", caffeOut, out)
		}
	}
	if _, errOut, code := ctl(t, url, "predict", "hie", teststack.WriteFile(t, dir, "bad.json", `[{"name":"input","shape":[1,16],"datatype":"FP32","data":[1]}]`), "--tensors"); code == 0 || !strings.Contains(errOut, "--tensors") {
		t.Fatalf("predict with a bad tensor: exit %d\n%s", code, errOut)
	}
}

// TestCLIDefinesInstancesVersion: -D overrides keys of the service.json on
// create and modify; instances lists the instances.
func TestCLIDefinesInstancesVersion(t *testing.T) {
	t.Setenv("EAS_ADMIN_TOKEN", "")
	t.Setenv("EAS_ENDPOINT", "")
	url := startServer(t)
	dir := t.TempDir()
	f := teststack.WriteFile(t, dir, "s.json", `{"name":"d","processor":"echo","model_config":"{\"sleep_ms\": 1}","metadata":{"instance":1}}`)
	if _, errOut, code := ctl(t, url, "create", f, "-D", "metadata.instance=2", "-D", "model_config.sleep_ms=2", "-D", "token=tok"); code != 0 {
		t.Fatalf("create -D: %s", errOut)
	}
	var obj controlapi.ServiceObject
	out, _, _ := ctl(t, url, "desc", "d", "-o", "json")
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.TotalInstance != 2 || obj.AccessToken != "tok" ||
		!strings.Contains(obj.ServiceConfig, `"model_config":"{\"sleep_ms\":2}"`) {
		t.Fatalf("after create -D: %v %+v", err, obj)
	}
	if _, errOut, code := ctl(t, url, "modify", "d", "-s", f, "-D", "metadata.instance=3", "-D", "metadata.rpc={\"keepalive\": 5000}"); code != 0 {
		t.Fatalf("modify -D: %s", errOut)
	}
	out, _, _ = ctl(t, url, "desc", "d", "-o", "json")
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.TotalInstance != 3 || !strings.Contains(obj.ServiceConfig, `"rpc":{"keepalive":5000}`) {
		t.Fatalf("after modify -D: %v %+v", err, obj)
	}
	for _, c := range []struct{ d, want string }{
		{"metadata.instance", "want key=value"},
		{"metadata..instance=2", "want key=value"},
		{"=2", "want key=value"},
		{"metadata.instance.x=2", `-D "metadata.instance.x=2": metadata.instance is a number, not an object: cannot set x in it`},
	} {
		if _, errOut, code := ctl(t, url, "modify", "d", "-s", f, "-D", c.d); code == 0 || !strings.Contains(errOut, c.want) {
			t.Fatalf("-D %s: exit %d, want %q:\n%s", c.d, code, c.want, errOut)
		}
	}

	out, errOut, code := ctl(t, url, "instances", "d")
	if code != 0 || !strings.HasPrefix(out, "INSTANCE") || strings.Count(out, "d-v2-") != 3 || !strings.Contains(out, "Running") {
		t.Fatalf("instances: exit %d\n%s%s", code, out, errOut)
	}
	var il controlapi.InstanceList
	out, _, code = ctl(t, url, "instances", "d", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &il) != nil || il.TotalCount != 3 || il.Instances[0].Version != 2 {
		t.Fatalf("instances -o json: exit %d\n%s", code, out)
	}
	// Issue 34: eascmd's in-place modify: -D alone changes those keys of
	// the serving service.json.
	if _, errOut, code := ctl(t, url, "modify", "d", "-D", "model_config.sleep_ms=3"); code != 0 {
		t.Fatalf("modify -D in place: %s", errOut)
	}
	out, _, _ = ctl(t, url, "desc", "d", "-o", "json")
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj.TotalInstance != 3 || !strings.Contains(obj.ServiceConfig, `"model_config":"{\"sleep_ms\":3}"`) || !strings.Contains(obj.ServiceConfig, `"rpc":{"keepalive":5000}`) ||
		obj.AccessToken != "tok" {
		t.Fatalf("after modify -D in place: %v %+v", err, obj)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"modify", "d", f}, "modify takes the service.json with -s: eas-server modify d -s " + f},
		{[]string{"modify", "d"}, "give the new service.json with -s FILE, or the keys to change with -D KEY=VALUE"},
		{[]string{"version"}, "this binary's own version is 'eas-server --version'"},
	} {
		if _, errOut, code := ctl(t, url, c.args...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want an error saying %q:\n%s", c.args, code, c.want, errOut)
		}
	}
}

// Issue 34: predict on an asynchronous service said it failed (it parsed
// the queue's index as the answer); --tensors without --format blamed the
// token; --tensors errors spoke of a "kserve request".
func TestCLIPredictAsyncAndItsErrors(t *testing.T) {
	t.Setenv("EAS_ADMIN_TOKEN", "")
	t.Setenv("EAS_ENDPOINT", "")
	url := startServer(t)
	dir := t.TempDir()
	async := teststack.WriteFile(t, dir, "a.json", `{"name":"a","processor":"echo","token":"AT","metadata":{"instance":1,"type":"Async"}}`)
	if _, errOut, code := ctl(t, url, "create", async); code != 0 {
		t.Fatalf("create async: %s", errOut)
	}
	out, errOut, code := runCLIStdin(t, "queued body", "predict", "a", "-", "--endpoint", url, "--service-token", "AT")
	if code != 0 || out != "" || !regexp.MustCompile(`queued: index \d+, request id [0-9a-f]{32}`).MatchString(errOut) {
		t.Fatalf("predict on an async service: exit %d %q\n%s", code, out, errOut)
	}
	out, errOut, code = runCLIStdin(t, "waited body", "predict", "a", "-", "--endpoint", url, "--service-token", "AT", "--wait", "20s")
	if code != 0 || out != "waited body" {
		t.Fatalf("predict --wait on an async service: exit %d %q\n%s", code, out, errOut)
	}

	tensors := teststack.WriteFile(t, dir, "t.json", `[{"name":"input","shape":[1],"datatype":"FP32","data":[1]}]`)
	if _, errOut, code := runCLI(t, "predict", "a", tensors, "--tensors", "--endpoint", url, "--service-token", "AT"); code == 0 ||
		!strings.Contains(errOut, "give --format") || strings.Contains(errOut, "give --service-token") {
		t.Errorf("--tensors with a token and no format: exit %d\n%s", code, errOut)
	}
	bad := teststack.WriteFile(t, dir, "bad.json", `[{"name":"input","shape":[2],"datatype":"FP32","data":[1]}]`)
	if _, errOut, code := runCLI(t, "predict", "a", bad, "--tensors", "--format", "kserve", "--endpoint", url, "--service-token", "AT"); code == 0 ||
		strings.Contains(errOut, "kserve request") {
		t.Errorf("a bad tensor list: exit %d\n%s", code, errOut)
	}
}
