package tf2onnx_test

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

// TestFingerprint64Known checks Fingerprint64 and SipHash24 on values
// TensorFlow 2.21 computed (tf.strings.to_hash_bucket_fast / _strong with
// 2**62 buckets), one per length class of farmhash's code paths; the venv
// test below checks many more against TensorFlow itself.
func TestFingerprint64Known(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want uint64
	}{
		{"", 1936946117179621455}, {"a", 3694432073954588131}, {"ab", 3066228220894225694},
		{"abc", 2640714258260161385}, {"abcd", 1897425971756105985}, {"h\u00e9llo", 3262255192197256439},
		{strings.Repeat("x", 17), 2082709914559524773}, {strings.Repeat("y", 33), 3999049019338133246},
		{strings.Repeat("z", 65), 3688229565335330613}, {strings.Repeat("q", 1000), 4178784377876605292},
	} {
		if got := tf2onnx.Fingerprint64([]byte(tc.s)) % (1 << 62); got != tc.want {
			t.Errorf("Fingerprint64(%q) %% 2**62 = %d, TensorFlow %d", tc.s, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		want uint64
	}{
		{"", 443797209252341627}, {"abcdefg", 957890530879302020}, {"abcdefgh", 2649018002260510108},
		{"abcdefghi", 545485191183657959}, {strings.Repeat("z", 65), 1522482378448811398},
	} {
		if got := tf2onnx.SipHash24([2]uint64{1, 2}, []byte(tc.s)) % (1 << 62); got != tc.want {
			t.Errorf("SipHash24({1,2}, %q) %% 2**62 = %d, TensorFlow %d", tc.s, got, tc.want)
		}
	}
}

// genStrings has the tensorflow venv's TensorFlow write the string-feature
// SavedModel and its references (testdata/gen_strings.py).
func genStrings(t *testing.T) string {
	t.Helper()
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tf2onnx", "testdata", "gen_strings.py")
	args := []string{script, dir}
	if _, err := os.Stat(fixtureTable()); err == nil {
		args = append(args, fixtureTable())
	}
	if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
		t.Fatalf("gen_strings.py: %v\n%s", err, out)
	}
	return dir
}

// fixtureTable is the conformance SavedModel whose table is filled from a
// vocabulary asset file.
func fixtureTable() string {
	return filepath.Join(require.ConformanceRoot(), "tensorflow", "StaticHashTableModule")
}

// refCase is one signature's inputs and TensorFlow's outputs.
type refCase struct{ Inputs, Outputs map[string]refTensor }

// check translates signature serving_default of the SavedModel at dir,
// runs it on c's inputs (host inputs computed as the serving process
// does) and compares every output with TensorFlow's.
func check(t *testing.T, dir string, c refCase) *tf2onnx.Signature {
	t.Helper()
	m, err := savedmodel.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tf2onnx.Convert(m, "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	var feeds []tensor.Tensor
	leaves := map[string]tensor.Tensor{}
	for _, p := range ts.Inputs {
		in := c.Inputs[p.Key].tensor(t, p.Key)
		leaves[p.Key] = in
		switch p.Kind {
		case tf2onnx.Scalar:
			in.Shape = []int64{1}
		case tf2onnx.AnyRank:
			feeds = append(feeds, tensor.FromInt64(p.Key+tf2onnx.ShapeSuffix, []int64{int64(len(in.Shape))}, in.Shape))
			in.Shape = []int64{in.NumElements()}
		}
		feeds = append(feeds, in)
	}
	host, err := ts.Host.Run(leaves)
	if err != nil {
		t.Fatal(err)
	}
	feeds = append(feeds, host...)
	got := run(t, ts.Model, feeds...)
	if len(ts.Outputs) != len(c.Outputs) {
		t.Fatalf("signature has %d outputs, TensorFlow %d", len(ts.Outputs), len(c.Outputs))
	}
	for _, p := range ts.Outputs {
		i := slices.IndexFunc(got, func(g tensor.Tensor) bool { return g.Name == p.Value })
		if i < 0 {
			t.Errorf("no output %q", p.Value)
			continue
		}
		g := got[i]
		switch p.Kind {
		case tf2onnx.Scalar:
			g.Shape = []int64{}
		case tf2onnx.AnyRank:
			j := slices.IndexFunc(got, func(g tensor.Tensor) bool { return g.Name == p.Value+tf2onnx.ShapeSuffix })
			if j < 0 {
				t.Fatalf("no output %q", p.Value+tf2onnx.ShapeSuffix)
			}
			shape, err := got[j].AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			g.Shape = shape
		}
		want := c.Outputs[p.Key].tensor(t, p.Key)
		g.Name = want.Name
		tol := tensor.Exact
		if want.DType == tensor.Float32 {
			tol = tensor.F32Accumulated
		}
		if err := tensor.Close(g, want, tol); err != nil {
			t.Errorf("output %s: %v", p.Key, err)
		}
	}
	return ts
}

type refTensor struct {
	DType string            `json:"dtype"`
	Shape []int64           `json:"shape"`
	Data  []json.RawMessage `json:"data"`
	B64   []string          `json:"b64"`
}

func (r refTensor) tensor(t *testing.T, name string) tensor.Tensor {
	t.Helper()
	var out tensor.Tensor
	var err error
	switch r.DType {
	case "BYTES":
		out = tensor.Tensor{Name: name, DType: tensor.String, Shape: r.Shape}
		for _, s := range r.B64 {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			out.Strings = append(out.Strings, b)
		}
		return out
	case "FP32":
		v := make([]float32, len(r.Data))
		for i := range v {
			err = json.Unmarshal(r.Data[i], &v[i])
		}
		out = tensor.FromFloat32(name, r.Shape, v)
	case "FP64":
		v := make([]float64, len(r.Data))
		for i := range v {
			err = json.Unmarshal(r.Data[i], &v[i])
		}
		out = tensor.FromFloat64(name, r.Shape, v)
	case "INT64":
		v := make([]int64, len(r.Data))
		for i := range v {
			err = json.Unmarshal(r.Data[i], &v[i])
		}
		out = tensor.FromInt64(name, r.Shape, v)
	case "INT32":
		v := make([]int32, len(r.Data))
		for i := range v {
			err = json.Unmarshal(r.Data[i], &v[i])
		}
		out = tensor.FromInt32(name, r.Shape, v)
	default:
		t.Fatalf("%s: dtype %s", name, r.DType)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// TestStringFeaturesAgainstTensorFlow: Fingerprint64 agrees with
// TensorFlow's to_hash_bucket_fast on many strings (empty, every length to
// 139, long, non-ASCII, invalid UTF-8), and a SavedModel with hashed
// string features, string->int64 and int64->int64 tables, a table's size
// and Bucketize, written by TensorFlow, translates and computes what
// TensorFlow computed, host inputs included.
func TestStringFeaturesAgainstTensorFlow(t *testing.T) {
	dir := genStrings(t)

	t.Run("Fingerprint64", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "fingerprint.json"))
		if err != nil {
			t.Fatal(err)
		}
		var fp struct {
			Strings []string
			Buckets map[string][]uint64
		}
		if err := json.Unmarshal(b, &fp); err != nil {
			t.Fatal(err)
		}
		if len(fp.Strings) < 100 || len(fp.Buckets) == 0 {
			t.Fatalf("fingerprint.json has %d strings, %d bucket counts", len(fp.Strings), len(fp.Buckets))
		}
		for nb, want := range fp.Buckets {
			var n uint64
			if err := json.Unmarshal([]byte(nb), &n); err != nil {
				t.Fatal(err)
			}
			for i, s := range fp.Strings {
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatal(err)
				}
				if got := tf2onnx.Fingerprint64(raw) % n; got != want[i] {
					t.Errorf("string %d (%d bytes) into %d buckets: %d, TensorFlow %d", i, len(raw), n, got, want[i])
				}
			}
		}
	})

	t.Run("Hash64", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "fingerprint.json"))
		if err != nil {
			t.Fatal(err)
		}
		var fp struct {
			Strings []string
			Legacy  map[string][]uint64
		}
		if err := json.Unmarshal(b, &fp); err != nil {
			t.Fatal(err)
		}
		if len(fp.Legacy) == 0 {
			t.Fatal("fingerprint.json has no legacy hashes")
		}
		for nb, want := range fp.Legacy {
			n, err := strconv.ParseUint(nb, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range fp.Strings {
				raw, _ := base64.StdEncoding.DecodeString(s)
				if got := tf2onnx.Hash64(raw) % n; got != want[i] {
					t.Errorf("string %d (%d bytes) into %d buckets: %d, TensorFlow %d", i, len(raw), n, got, want[i])
				}
			}
		}
	})

	// StringToNumber: each odd string parses to TensorFlow's bits, or
	// is refused where TensorFlow refuses it.
	t.Run("StringToNumber", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "numbers.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]*string
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			raw, _ := base64.StdEncoding.DecodeString(*r["s"])
			for _, k := range []string{"f32", "f64", "i32", "i64"} {
				var got string
				var ok bool
				switch k {
				case "f32":
					var f float64
					f, ok = tf2onnx.ParseTFFloat(raw, 32)
					bits := math.Float32bits(float32(f))
					if math.IsNaN(f) {
						bits = 0x7FC00000 | uint32(math.Float64bits(f)>>63)<<31
					}
					got = strconv.FormatUint(uint64(bits), 10)
				case "f64":
					var f float64
					f, ok = tf2onnx.ParseTFFloat(raw, 64)
					got = strconv.FormatUint(math.Float64bits(f), 10)
				default:
					var v int64
					v, ok = tf2onnx.ParseTFInt(raw, map[string]int{"i32": 32, "i64": 64}[k])
					got = strconv.FormatInt(v, 10)
				}
				switch want := r[k]; {
				case want == nil && ok:
					t.Errorf("%q as %s: %s, TensorFlow refuses it", raw, k, got)
				case want != nil && !ok:
					t.Errorf("%q as %s: refused, TensorFlow gives %s", raw, k, *want)
				case want != nil && got != *want:
					t.Errorf("%q as %s: %s, TensorFlow %s", raw, k, got, *want)
				}
			}
		}
	})

	// Every op of the host string stage, in one SavedModel.
	t.Run("strops", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref map[string]map[string]refCase
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		ts := check(t, filepath.Join(dir, "strops"), ref["strops"]["serving_default"])
		if ts.Batchable {
			t.Error("a signature with split strings (no batch dimension) is batchable")
		}
	})

	// Sparse embedding lookups and the sparse ops under them.
	t.Run("sparse", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref map[string]map[string]refCase
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		check(t, filepath.Join(dir, "sparse"), ref["sparse"]["serving_default"])
	})

	// TensorFlow's feature columns (a TF1 graph): the sparse ids they
	// make (ExpandDims, NotEqual, Where, GatherNd, AsString) run on the
	// host before hashing.
	t.Run("feature_columns", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref map[string]map[string]refCase
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		check(t, filepath.Join(dir, "fc"), ref["fc"]["serving_default"])
	})

	t.Run("features", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref map[string]map[string]refCase
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		ts := check(t, filepath.Join(dir, "features"), ref["features"]["serving_default"])
		if ts.Host == nil || len(ts.Host.Outputs) != 4 {
			t.Errorf("the host stage should feed four inputs (words hashed fast into 1000 and 3 buckets and strong, w hashed): %+v", ts.Host)
		}
	})

	// The conformance fixture's table is filled from an asset file by a
	// TF 2.4 export (the asset path held in a resource variable).
	t.Run("StaticHashTableModule", func(t *testing.T) {
		require.ConformanceDir(t, "tensorflow")
		b, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
		if err != nil {
			t.Fatal(err)
		}
		var c refCase
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		check(t, fixtureTable(), c)
	})
}
