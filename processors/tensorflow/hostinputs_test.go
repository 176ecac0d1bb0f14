package tensorflow

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	examplepb "github.com/wamuir/graft/tensorflow/core/example/example_protos_go_proto"

	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

// TestHostInputsServed serves the string-feature SavedModels of
// engines/tf2onnx/testdata/gen_strings.py (hashed string features, a scalar
// string input, lookup tables, Bucketize; every host string op; VarLen
// tf.Example features), written by the tensorflow venv's TensorFlow, on
// the default ONNX runtime: the request's strings are worked on in Go
// before the model (prepare), and every output equals TensorFlow's.
func TestHostInputsServed(t *testing.T) {
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tf2onnx", "testdata", "gen_strings.py")
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_strings.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]map[string]struct{ Inputs, Outputs map[string]refJSON }
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	conv := func(name string, j refJSON) tensor.Tensor { return j.tensor(t, name) }
	// features: hashed strings, tables, Bucketize; strops: every op of
	// the host string stage; varlen: tf.Example VarLen features (int64
	// ids, hashed strings, floats) in safe_embedding_lookup_sparse; fc:
	// TensorFlow's feature columns in a TF1 graph.
	// varlen_empty: the VarLen model on examples without VarLen values.
	for _, model := range []string{"features", "strops", "varlen", "varlen_empty", "fc"} {
		c := ref[model]["serving_default"]
		m, err := loadModel(t, "tensorflow_cpu_2.7", filepath.Join(dir, strings.TrimSuffix(model, "_empty")))
		if err != nil {
			t.Fatal(err)
		}
		var inputs []tensor.Tensor
		for name, j := range c.Inputs {
			inputs = append(inputs, conv(name, j))
		}
		got, err := predict(t, m, "serving_default", inputs, nil)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if len(got) != len(c.Outputs) {
			t.Errorf("%s: %d outputs, TensorFlow has %d", model, len(got), len(c.Outputs))
		}
		for name, j := range c.Outputs {
			want := conv(name, j)
			tol := tensor.Exact
			if want.DType == tensor.Float32 || want.DType == tensor.Float64 {
				tol = tensor.F32Accumulated
			}
			if err := tensor.Close(got[name], want, tol); err != nil {
				t.Errorf("%s output %s: %v", model, name, err)
			}
		}
	}
}

// refJSON is a tensor as the tf2onnx test scripts write them.
type refJSON struct {
	DType string
	Shape []int64
	Data  []float64
	B64   []string
}

func (j refJSON) tensor(t *testing.T, name string) tensor.Tensor {
	t.Helper()
	switch j.DType {
	case "BYTES":
		out := tensor.Tensor{Name: name, DType: tensor.String, Shape: j.Shape}
		for _, s := range j.B64 {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			out.Strings = append(out.Strings, raw)
		}
		return out
	case "FP32":
		v := make([]float32, len(j.Data))
		for i, x := range j.Data {
			v[i] = float32(x)
		}
		return tensor.FromFloat32(name, j.Shape, v)
	case "INT64":
		v := make([]int64, len(j.Data))
		for i, x := range j.Data {
			v[i] = int64(x) // the tests' integers are exact in float64
		}
		return tensor.FromInt64(name, j.Shape, v)
	case "INT32":
		v := make([]int32, len(j.Data))
		for i, x := range j.Data {
			v[i] = int32(x)
		}
		return tensor.FromInt32(name, j.Shape, v)
	case "FP64":
		return tensor.FromFloat64(name, j.Shape, j.Data)
	}
	t.Fatalf("%s: dtype %s", name, j.DType)
	return tensor.Tensor{}
}

// TestTablesServed serves the SavedModels of
// engines/tf2onnx/testdata/gen_tables.py on the default ONNX runtime:
// mutable lookup tables whose contents are restored from the checkpoint
// (TF2 and TF1) and a signature parsing one serialized tf.Example
// (ParseSingleExample; features present, missing ones taking their
// defaults or empty, a missing required feature a 400), and one parsing a
// scalar with tf.io.parse_single_example (TensorFlow 2 writes it as
// ParseExampleV2 of one example).
func TestTablesServed(t *testing.T) {
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tf2onnx", "testdata", "gen_tables.py")
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_tables.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"mutable", "mutable_v1", "single", "single_missing", "single_v2"} {
		var c map[string]struct{ Inputs, Outputs map[string]refJSON }
		if err := json.Unmarshal(ref[model], &c); err != nil {
			t.Fatal(err)
		}
		m, err := loadModel(t, "tensorflow_cpu_2.7", filepath.Join(dir, strings.TrimSuffix(model, "_missing")))
		if err != nil {
			t.Fatal(err)
		}
		var inputs []tensor.Tensor
		for name, j := range c["serving_default"].Inputs {
			inputs = append(inputs, j.tensor(t, name))
		}
		got, err := predict(t, m, "serving_default", inputs, nil)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		outs := c["serving_default"].Outputs
		if len(got) != len(outs) {
			t.Errorf("%s: %d outputs, TensorFlow has %d", model, len(got), len(outs))
		}
		for name, j := range outs {
			want := j.tensor(t, name)
			tol := tensor.Exact
			if want.DType == tensor.Float32 {
				tol = tensor.F32Accumulated
			}
			if err := tensor.Close(got[name], want, tol); err != nil {
				t.Errorf("%s output %s: %v", model, name, err)
			}
		}
	}
	// A missing required feature: TensorFlow's error, a 400 here.
	var tfErr string
	if err := json.Unmarshal(ref["single_required"], &tfErr); err != nil || !strings.Contains(tfErr, "name") {
		t.Fatalf("TensorFlow did not refuse the example without its required feature: %q %v", tfErr, err)
	}
	m, err := loadModel(t, "tensorflow_cpu_2.7", filepath.Join(dir, "single"))
	if err != nil {
		t.Fatal(err)
	}
	ex := tensor.FromStrings("example", []int64{}, []string{example(t, map[string]*examplepb.Feature{"x": floatFeature(1, 2)})})
	if _, err := predict(t, m, "serving_default", []tensor.Tensor{ex}, nil); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), `no feature "name"`) {
		t.Errorf("an example without its required feature: err %v, want a 400 naming it (TensorFlow: %s)", err, tfErr)
	}
	_, err = loadModel(t, "tensorflow_cpu_2.7", filepath.Join(dir, "writes"))
	if err == nil || !strings.Contains(err.Error(), "LookupTableInsertV2") || !strings.Contains(err.Error(), "writes lookup tables") {
		t.Errorf("a signature writing a table deployed, or failed otherwise: %v", err)
	}
}

// TestHostInputsBatched: requests to a batchable signature that hashes its
// string input are merged into one run, their host inputs with them, and
// each gets its own buckets back.
func TestHostInputsBatched(t *testing.T) {
	b := newBuilder()
	w := b.input(t, "words", tensor.String, []int64{-1})
	h := b.node("StringToHashBucketFast", []string{w}, map[string]any{"num_buckets": int64(1000)})
	b.outShapes = map[string][]int64{"h": {-1}}
	m, err := loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"h": h + ":0"}, map[string]tensor.DType{"h": tensor.Int64}))
	if err != nil {
		t.Fatal(err)
	}
	asks := [][]string{{"apple", ""}, {"h\u00e9llo"}, {"pear", "plum", "kiwi"}}
	batch := make([]*request, len(asks))
	for i, words := range asks {
		if batch[i], err = decode(t, m, "serving_default", []tensor.Tensor{tensor.FromStrings("words", []int64{int64(len(words))}, words)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !batch[0].sig.batchable {
		t.Fatal("the signature is not batchable: Run would not merge")
	}
	res, err := m.Run(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, words := range asks {
		want := make([]int64, len(words))
		for j, s := range words {
			want[j] = int64(tf2onnx.Fingerprint64([]byte(s)) % 1000)
		}
		if len(res[i].outputs) != 1 {
			t.Fatalf("request %d: outputs %v", i, res[i].outputs)
		}
		if err := tensor.Close(res[i].outputs[0], tensor.FromInt64("h", []int64{int64(len(words))}, want), tensor.Exact); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
}

// TestHostInputsShapes: a hashed string input of unknown rank (it travels
// flattened, with its shape beside it) and a scalar one come back with
// their own shapes.
func TestHostInputsShapes(t *testing.T) {
	b := newBuilder()
	w := b.input(t, "words", tensor.String, nil)
	s := b.input(t, "one", tensor.String, []int64{})
	hw := b.node("StringToHashBucketFast", []string{w}, map[string]any{"num_buckets": int64(77)})
	hs := b.node("StringToHashBucketFast", []string{s}, map[string]any{"num_buckets": int64(5)})
	b.outShapes = map[string][]int64{"hs": {}}
	m, err := loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"hw": hw + ":0", "hs": hs + ":0"}, map[string]tensor.DType{"hw": tensor.Int64, "hs": tensor.Int64}))
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"a", "bb", "", "h\u00e9llo", "e", "f"}
	bucket := func(s string, n uint64) int64 { return int64(tf2onnx.Fingerprint64([]byte(s)) % n) }
	want := make([]int64, len(words))
	for i, w := range words {
		want[i] = bucket(w, 77)
	}
	got, err := predict(t, m, "serving_default", []tensor.Tensor{
		tensor.FromStrings("words", []int64{2, 1, 3}, words), tensor.FromStrings("one", []int64{}, []string{"plum"})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Close(got["hw"], tensor.FromInt64("hw", []int64{2, 1, 3}, want), tensor.Exact); err != nil {
		t.Error(err)
	}
	if err := tensor.Close(got["hs"], tensor.FromInt64("hs", []int64{}, []int64{bucket("plum", 5)}), tensor.Exact); err != nil {
		t.Error(err)
	}
}

// TestHostStageBatched: requests to a signature joining two string inputs
// and hashing the result (the host stage keeps the batch dimension) are
// merged into one run, and each gets its own buckets back.
func TestHostStageBatched(t *testing.T) {
	b := newBuilder()
	u := b.input(t, "user", tensor.String, []int64{-1})
	i := b.input(t, "item", tensor.String, []int64{-1})
	j := b.node("StringJoin", []string{u, i}, map[string]any{"N": int64(2), "separator": "_x_"})
	h := b.node("StringToHashBucketFast", []string{j}, map[string]any{"num_buckets": int64(64)})
	b.outShapes = map[string][]int64{"h": {-1}}
	m, err := loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"h": h + ":0"}, map[string]tensor.DType{"h": tensor.Int64}))
	if err != nil {
		t.Fatal(err)
	}
	asks := [][2][]string{{{"alice", "bob"}, {"i1", ""}}, {{"h\u00e9llo"}, {"i9"}}}
	batch := make([]*request, len(asks))
	for k, a := range asks {
		in := []tensor.Tensor{tensor.FromStrings("user", []int64{int64(len(a[0]))}, a[0]), tensor.FromStrings("item", []int64{int64(len(a[1]))}, a[1])}
		if batch[k], err = decode(t, m, "serving_default", in, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !batch[0].sig.batchable {
		t.Fatal("the signature is not batchable: Run would not merge")
	}
	res, err := m.Run(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range asks {
		want := make([]int64, len(a[0]))
		for x := range want {
			want[x] = int64(tf2onnx.Fingerprint64([]byte(a[0][x]+"_x_"+a[1][x])) % 64)
		}
		if err := tensor.Close(res[k].outputs[0], tensor.FromInt64("h", []int64{int64(len(want))}, want), tensor.Exact); err != nil {
			t.Errorf("request %d: %v", k, err)
		}
	}
}

// TestHostStageErrors: what TensorFlow's string kernels refuse (a string
// that is not a number, a substring position outside the string, inputs
// of different shapes joined) is the request's error, a 400.
func TestHostStageErrors(t *testing.T) {
	b := newBuilder()
	s := b.input(t, "s", tensor.String, []int64{-1})
	s2 := b.input(t, "s2", tensor.String, []int64{-1})
	num := b.node("StringToNumber", []string{s}, map[string]any{"out_type": tfType(t, tensor.Int64)})
	pos := b.i32Scalar(t, 3)
	ln := b.i32Scalar(t, 1)
	sub := b.node("Substr", []string{s2, pos, ln}, map[string]any{"T": tfType(t, tensor.Int32)})
	j := b.node("StringJoin", []string{s, s2}, map[string]any{"N": int64(2)})
	m, err := loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"n": num + ":0", "sub": sub + ":0", "j": j + ":0"},
		map[string]tensor.DType{"n": tensor.Int64, "sub": tensor.String, "j": tensor.String}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := predict(t, m, "serving_default", []tensor.Tensor{tensor.FromStrings("s", []int64{2}, []string{" 12", "-3"}), tensor.FromStrings("s2", []int64{2}, []string{"abcd", "wxyz"})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Close(got["n"], tensor.FromInt64("n", []int64{2}, []int64{12, -3}), tensor.Exact); err != nil {
		t.Error(err)
	}
	if err := tensor.Close(got["sub"], tensor.FromStrings("sub", []int64{2}, []string{"d", "z"}), tensor.Exact); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		s, s2 []string
		want  string
	}{
		{[]string{"12", "x"}, []string{"abcd", "wxyz"}, "could not correctly convert string"},
		{[]string{"1", "2"}, []string{"abcd", "ab"}, "pos 3 out of range"},
		{[]string{"1", "2"}, []string{"abcd"}, "input shapes do not match"},
	} {
		_, err := predict(t, m, "serving_default", []tensor.Tensor{tensor.FromStrings("s", []int64{int64(len(c.s))}, c.s), tensor.FromStrings("s2", []int64{int64(len(c.s2))}, c.s2)}, nil)
		if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: err %v, want an input error containing %q", c.s, c.s2, err, c.want)
		}
	}
}
