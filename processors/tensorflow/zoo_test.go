package tensorflow_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/tfpb"
)

var updateZoo = flag.Bool("update-zoo", false, "rewrite the model-zoo coverage table of README.md from what TestTensorFlowZoo measured")

// zooModels are the SavedModels testdata/gen_zoo.py writes, in the README
// table's order: the directory and how the table names the family.
var zooModels = []struct{ dir, family string }{
	{"keras_functional", "Keras 3 functional model (`model.export`)"},
	{"keras_subclassed", "Keras 3 subclassed `keras.Model` (`model.export`)"},
	{"keras_preprocessing", "Keras 3 preprocessing layers (`Hashing`, salted `Hashing`, `StringLookup`, `IntegerLookup`; `model.export`)"},
	{"wide_deep", "wide & deep on serialized `tf.Example` (hash buckets, vocabulary file, embeddings; `tf.Module`)"},
	{"deepfm", "DeepFM, EasyRec-style: one placeholder per feature, string inputs (`tf.Module`)"},
	{"sparse_rec", "EasyRec-style sparse features on `tf.Example` (split tags, VarLen strings and ids, `safe_embedding_lookup_sparse`; `tf.Module`)"},
	{"while_rnn", "RNN over `tf.while_loop` (`tf.Module`)"},
	{"bert", "BERT-shaped encoder, TF1 graph (`input_ids`, `input_mask`, `segment_ids`; `SavedModelBuilder`)"},
	{"keras_hub_bert", "keras-hub `BertBackbone` with a classifier head (`token_ids`, `segment_ids`, `padding_mask`; `model.export`)"},
}

const (
	zooBegin = "<!-- BEGIN zoo-coverage: checked by TestTensorFlowZoo (go test ./processors/tensorflow/ -run TestTensorFlowZoo -update-zoo rewrites it); do not edit -->"
	zooEnd   = "<!-- END zoo-coverage -->"
)

// TestTensorFlowZoo has the venv's TensorFlow write one SavedModel of each
// common model family (testdata/gen_zoo.py) with its outputs, serves each
// through the router with runtime "libtensorflow" and "onnx", and compares
// every answer, over the EAS TF protobuf and KServe v2, with TensorFlow's.
// Which families translate to ONNX, and the ops refused where not, is the
// coverage table of README.md: the test fails when what it measured differs
// from the table, so a translator change shows up there.
func TestTensorFlowZoo(t *testing.T) {
	env := libtftest.Setup(t)
	dir, refs := zooGenerate(t, env)

	svc := func(name, path, runtime string) string {
		return fmt.Sprintf(`{"name":%q,"processor":"tensorflow_cpu_2.7","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":2},"model_config":{"runtime":%q}}`,
			name, path, runtime)
	}
	var services []string
	for _, m := range zooModels {
		if _, ok := refs[m.dir]; !ok {
			t.Fatalf("gen_zoo.py wrote no reference for %s", m.dir)
		}
		services = append(services, svc(m.dir+"_libtf", filepath.Join(dir, m.dir), "libtensorflow"),
			svc(m.dir+"_onnx", filepath.Join(dir, m.dir), "onnx"))
	}
	st := teststack.New(t, teststack.Options{AllowFailedDeploys: true}, services...)

	// ask sends the case over the EAS TF protobuf and KServe v2 (binary) and
	// compares both answers; it returns whether every output was close.
	ask := func(service string, c libtftest.Case, tol tensor.Tolerance) bool {
		t.Helper()
		ok := true
		body, err := tfpb.EncodeRequest("", c.Sorted(), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, resp, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+service, "T", body)
		if code != http.StatusOK {
			t.Errorf("%s: tf protobuf: %d %s", service, code, resp)
			ok = false
		} else if outs, err := tfpb.DecodeResponse(resp); err != nil {
			t.Errorf("%s: tf protobuf: %v", service, err)
			ok = false
		} else {
			ok = zooCompare(t, service+" tf protobuf", outs, c.Outputs, tol) && ok
		}

		body, hl, err := kserve.EncodeRequest(&kserve.InferRequest{Inputs: c.Sorted()}, true)
		if err != nil {
			t.Fatal(err)
		}
		code, resp, hdr := teststack.Do(t, http.MethodPost, st.URL+"/v2/models/"+service+"/infer", "T", body,
			kserve.HeaderContentLength, strconv.Itoa(hl))
		if code != http.StatusOK {
			t.Errorf("%s: kserve: %d %s", service, code, resp)
			return false
		}
		kr, err := kserve.DecodeResponse(resp, hdr.Get(kserve.HeaderContentLength))
		if err != nil {
			t.Errorf("%s: kserve: %v", service, err)
			return false
		}
		return zooCompare(t, service+" kserve", kr.Outputs, c.Outputs, tol) && ok
	}

	var rows []zooRow
	for _, m := range zooModels {
		c := refs[m.dir]
		row := zooRow{family: m.family}
		// libtensorflow is the library the reference ran on: the same
		// kernels, summed in another order at most.
		if err := st.DeployErrors[m.dir+"_libtf"]; err != nil {
			t.Errorf("deploy %s on libtensorflow: %v", m.dir, err)
			row.libtf = "no: " + firstLine(err.Error())
		} else if ask(m.dir+"_libtf", c, tensor.F32Accumulated) {
			row.libtf = "yes"
		} else {
			row.libtf = "no: answers differ"
		}
		// ONNX Runtime computes the translated graph: another formulation.
		err := st.DeployErrors[m.dir+"_onnx"]
		var ue *tf2onnx.UnsupportedError
		switch {
		case err == nil:
			if ask(m.dir+"_onnx", c, tensor.F32Reformulated) {
				row.onnx = "yes"
			} else {
				row.onnx = "yes, but answers differ"
			}
		case errors.As(err, &ue):
			ops := make([]string, 0, len(ue.Ops))
			for op := range ue.Ops {
				if !strings.Contains(err.Error(), op) {
					t.Errorf("deploy %s on onnx: the error does not name the refused op %s: %v", m.dir, op, err)
				}
				if r := ue.Reasons[op]; r != "" && r != "not supported" {
					op += "` (" + r + ")"
				} else {
					op += "`"
				}
				ops = append(ops, "`"+op)
			}
			slices.Sort(ops)
			row.onnx = "no: " + strings.Join(ops, ", ")
		default:
			row.onnx = "no, deploy error: " + firstLine(err.Error())
		}
		rows = append(rows, row)
	}

	table := zooTable(rows)
	readme := filepath.Join("README.md")
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, zooBegin), strings.Index(text, zooEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q ... %q section", zooBegin, zooEnd)
	}
	have := text[i+len(zooBegin)+1 : j]
	if have == table {
		return
	}
	if *updateZoo && !t.Failed() {
		if err := os.WriteFile(readme, []byte(text[:i+len(zooBegin)+1]+table+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("README.md's coverage table rewritten:\n%s", table)
		return
	}
	t.Errorf("README.md's coverage table is not what was measured (go test ./processors/tensorflow/ -run TestTensorFlowZoo -update-zoo rewrites it); measured:\n%s\nREADME.md has:\n%s", table, have)
}

type zooRow struct{ family, onnx, libtf string }

func zooTable(rows []zooRow) string {
	var sb strings.Builder
	sb.WriteString("| model family | translates (`runtime` `onnx`): refused ops where not | `libtensorflow` equal to TensorFlow |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", r.family, r.onnx, r.libtf)
	}
	return sb.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, "|", `\|`)
}

func zooCompare(t *testing.T, what string, got []tensor.Tensor, want map[string]tensor.Tensor, tol tensor.Tolerance) bool {
	t.Helper()
	ok := len(got) == len(want)
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
		w, found := want[o.Name]
		if !found {
			t.Errorf("%s: unexpected output %q", what, o.Name)
			ok = false
			continue
		}
		if err := tensor.Close(o, w, tol.For(w.DType)); err != nil {
			t.Errorf("%s output %s: %v", what, o.Name, err)
			ok = false
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: outputs %v, want %d", what, names, len(want))
	}
	return ok
}

// zooGenerate runs testdata/gen_zoo.py once into a temporary directory and
// reads its references: model -> serving_default's case.
func zooGenerate(t testing.TB, env libtftest.Env) (string, map[string]libtftest.Case) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "processors", "tensorflow", "testdata", "gen_zoo.py")
	if out, err := exec.Command(env.Python, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_zoo.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	type jsonTensor struct {
		DType string          `json:"dtype"`
		Shape []int64         `json:"shape"`
		Data  json.RawMessage `json:"data"`
	}
	var raw map[string]struct{ Inputs, Outputs map[string]jsonTensor }
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	decode := func(name string, j jsonTensor) tensor.Tensor {
		vals := func(v any) {
			t.Helper()
			if err := json.Unmarshal(j.Data, v); err != nil {
				t.Fatalf("ref.json %s: %v", name, err)
			}
		}
		switch j.DType {
		case "FP32":
			var v []float32
			vals(&v)
			return tensor.FromFloat32(name, j.Shape, v)
		case "INT64":
			var v []int64
			vals(&v)
			return tensor.FromInt64(name, j.Shape, v)
		case "INT32":
			var v []int32
			vals(&v)
			return tensor.FromInt32(name, j.Shape, v)
		case "BOOL":
			var v []bool
			vals(&v)
			return tensor.FromBool(name, j.Shape, v)
		case "BYTES":
			var enc []string
			vals(&enc)
			v := make([]string, len(enc))
			for i, e := range enc {
				d, err := base64.StdEncoding.DecodeString(e)
				if err != nil {
					t.Fatalf("ref.json %s[%d]: %v", name, i, err)
				}
				v[i] = string(d)
			}
			return tensor.FromStrings(name, j.Shape, v)
		}
		t.Fatalf("ref.json %s: dtype %s", name, j.DType)
		return tensor.Tensor{}
	}
	refs := map[string]libtftest.Case{}
	for model, c := range raw {
		rc := libtftest.Case{Inputs: map[string]tensor.Tensor{}, Outputs: map[string]tensor.Tensor{}}
		for name, jt := range c.Inputs {
			rc.Inputs[name] = decode(name, jt)
		}
		for name, jt := range c.Outputs {
			rc.Outputs[name] = decode(name, jt)
		}
		refs[model] = rc
	}
	return dir, refs
}
