package onnx_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// TestTorchScriptExample deploys examples/service-json/torchscript_mlp.json
// as it is (its model path taken from the repository root) through the real
// service manager and router, posts examples/requests/torchscript_mlp.pb
// a few times at once (the service batches) and compares each answer with
// PyTorch's output for that request, examples/requests/
// torchscript_mlp_expected.json, written with the example by
// engines/torchscript/testdata/gen_models.py --examples.
func TestTorchScriptExample(t *testing.T) {
	const root = "../.."
	raw, err := os.ReadFile(filepath.Join(root, "examples/service-json/torchscript_mlp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["model_path"] = filepath.Join(root, doc["model_path"].(string))
	raw, _ = json.Marshal(doc)
	spec, err := servicejson.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !spec.Metadata.RPC.Batching {
		t.Error("the example does not batch")
	}
	token, _ := doc["token"].(string)
	body, err := os.ReadFile(filepath.Join(root, "examples/requests/torchscript_mlp.pb"))
	if err != nil {
		t.Fatal(err)
	}
	ref := exampleRef(t, filepath.Join(root, "examples/requests/torchscript_mlp_expected.json"))
	want := tensor.FromFloat32("output__0", ref.Output.Shape, ref.Output.Data)

	// The committed request is the reference's input.
	ins, err := torchpb.DecodeRequest(body, []string{"input"})
	if err != nil {
		t.Fatalf("examples/requests/torchscript_mlp.pb: %v", err)
	}
	if len(ins.Inputs) != 1 {
		t.Fatalf("request has %d inputs, want 1", len(ins.Inputs))
	}
	if err := tensor.Close(ins.Inputs[0], tensor.FromFloat32("", ref.Input.Shape, ref.Input.Data), tensor.Exact); err != nil {
		t.Fatalf("request vs reference input: %v", err)
	}

	st := teststack.Start(t, string(raw))

	post := func() error {
		code, out, _ := teststack.Do(t, "POST", st.URL+"/api/predict/"+spec.Name, token, body)
		if code != 200 {
			return fmt.Errorf("status %d: %s", code, out)
		}
		outs, err := torchpb.DecodeResponse(out, []string{"output__0"})
		if err != nil {
			return err
		}
		if len(outs) != 1 {
			return fmt.Errorf("%d outputs, want 1", len(outs))
		}
		return tensor.Close(outs[0], want, tensor.F32Accumulated)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = post() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
}

type tsExampleRef struct {
	Input, Output struct {
		Shape []int64   `json:"shape"`
		Data  []float32 `json:"data"`
	}
}

func exampleRef(t *testing.T, path string) tsExampleRef {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ref tsExampleRef
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ref
}

// TestTorchScriptExampleReproduces runs the generator again: the request
// body is the same bytes, and the regenerated model's answer to it is the
// committed reference.
func TestTorchScriptExampleReproduces(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "expected.json")
	out, err := exec.Command("/usr/bin/python3", "../../engines/torchscript/testdata/gen_models.py", "--examples", dir, ref).CombinedOutput()
	if err != nil {
		t.Fatalf("gen_models.py --examples: %v\n%s\n(it needs Debian's python3-torch: run scripts/install-test-deps.sh)", err, out)
	}
	for _, f := range []string{"requests/torchscript_mlp.pb"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("../../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("examples/%s differs from what the generator writes; regenerate with /usr/bin/python3 engines/torchscript/testdata/gen_models.py --examples examples examples/requests/torchscript_mlp_expected.json", f)
		}
	}
	got, want := exampleRef(t, ref), exampleRef(t, "../../examples/requests/torchscript_mlp_expected.json")
	if err := tensor.Close(tensor.FromFloat32("", got.Output.Shape, got.Output.Data), tensor.FromFloat32("", want.Output.Shape, want.Output.Data), tensor.F32Accumulated); err != nil {
		t.Errorf("regenerated model's output vs the committed reference: %v", err)
	}
}
