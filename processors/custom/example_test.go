package custom_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/onnx" // pytorch_cpu_*
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/torchpb"
)

const root = "../.."

// example reads examples/service-json/<name>.json with its paths taken
// from the repository root; replace swaps in other values first.
func example(t *testing.T, name string, replace map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "examples/service-json", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	rebase := func(m map[string]any, key string) {
		if p, ok := m[key].(string); ok && !filepath.IsAbs(p) {
			m[key] = filepath.Join(root, p)
		}
	}
	for k, v := range replace {
		doc[k] = v
	}
	rebase(doc, "model_path")
	rebase(doc, "processor_path")
	for _, h := range []string{"pre_process", "post_process"} {
		if m, ok := doc[h].(map[string]any); ok {
			rebase(m, "processor_path")
		}
	}
	doc["token"] = token
	out, _ := json.Marshal(doc)
	return string(out)
}

// TestEchoExamples deploys the C and Python echo examples as make run
// does (the C one compiled here, as make examples compiles it).
func TestEchoExamples(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libecho.so")
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", lib, filepath.Join(root, "examples/custom/cpp_echo/echo.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	st := teststack.Start(t, example(t, "cpp_echo", map[string]any{"processor_path": lib}), example(t, "python_echo", nil))
	var wg sync.WaitGroup
	for _, name := range []string{"cpp_echo", "python_echo"} {
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf("%s %d \x00\xff", name, i)
				if code, got := post(t, st, name, body); code != 200 || got != body {
					t.Errorf("%s: %d %q, want %q", name, code, got, body)
				}
			}()
		}
	}
	wg.Wait()
	if code, got := post(t, st, "cpp_echo", ""); code != 200 || got != "" {
		t.Errorf("cpp_echo of an empty body: %d %q", code, got)
	}
}

// TestMLPHooksExample: the MLP behind Python pre- and post-processing
// answers JSON with what the same model answers over its protobuf door.
func TestMLPHooksExample(t *testing.T) {
	st := teststack.Start(t, example(t, "pytorch_mlp_json", nil), example(t, "pytorch_mlp", nil))
	var wg sync.WaitGroup
	for i := range 12 { // at once: the model step batches
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1 + i%3
			rng := rand.New(rand.NewPCG(1, uint64(i)))
			rows := make([][]float32, n)
			var flat []float32
			for r := range rows {
				rows[r] = make([]float32, 16)
				for c := range rows[r] {
					rows[r][c] = float32(rng.NormFloat64())
				}
				flat = append(flat, rows[r]...)
			}
			body, _ := json.Marshal(map[string]any{"inputs": rows})
			code, got := post(t, st, "pytorch_mlp_json", string(body))
			if code != 200 {
				t.Errorf("json: %d %s", code, got)
				return
			}
			var out struct{ Outputs [][]float64 }
			if err := json.Unmarshal([]byte(got), &out); err != nil {
				t.Errorf("json answer %q: %v", got, err)
				return
			}
			pb, err := torchpb.EncodeRequest([]tensor.Tensor{tensor.FromFloat32("input", []int64{int64(n), 16}, flat)}, false, nil)
			if err != nil {
				t.Error(err)
				return
			}
			code, ref, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/pytorch_mlp", token, pb)
			outs, err := torchpb.DecodeResponse(ref, []string{"output"})
			if code != 200 || err != nil || len(outs) != 1 {
				t.Errorf("protobuf: %d %v", code, err)
				return
			}
			want, _ := outs[0].AsFloat32()
			if len(out.Outputs) != n || len(out.Outputs)*len(out.Outputs[0]) != len(want) {
				t.Errorf("json answer has %d rows for %d, %d values in all for %d", len(out.Outputs), n, len(out.Outputs)*len(out.Outputs[0]), len(want))
				return
			}
			// The same model in the same runtime, in batches of other sizes.
			want64 := make([]float64, len(want))
			for i, v := range want {
				want64[i] = float64(v)
			}
			if err := tensor.CloseValues("output", slices.Concat(out.Outputs...), want64, tensor.F32Accumulated); err != nil {
				t.Errorf("over JSON vs over protobuf: %v", err)
			}
		}()
	}
	wg.Wait()
	// The pre hook's own refusal is the answer, for a short row and for a
	// body that is not JSON or is nested too deep to parse.
	if code, got := post(t, st, "pytorch_mlp_json", `{"inputs": [[1, 2]]}`); code != 400 || got != "pre_process: each row of inputs must hold 16 numbers\n" {
		t.Errorf("a short row: %d %q", code, got)
	}
	deep := `{"inputs": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}"
	for _, body := range []string{"not json", `{"inputs": [[1, 2]`, deep} {
		if code, got := post(t, st, "pytorch_mlp_json", body); code != 400 || !strings.HasPrefix(got, `pre_process: want {"inputs": [[16 numbers], ...]}: `) {
			t.Errorf("%.40q: %d %q, want 400 from the hook", body, code, got)
		}
	}
}
