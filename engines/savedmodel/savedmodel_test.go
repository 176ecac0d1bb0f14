package savedmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

var conformanceDir = filepath.Join(require.ConformanceRoot(), "tensorflow")

func sampleTensors() []tensor.Tensor {
	return []tensor.Tensor{
		tensor.FromFloat32("dense/kernel", []int64{2, 3}, []float32{1, -2, 3.5, 4, 5, 6}),
		tensor.FromFloat64("f64", []int64{2}, []float64{1e300, -0.25}),
		tensor.FromInt32("step", []int64{}, []int32{42}),
		tensor.FromInt64("i64", []int64{3}, []int64{-1, 0, 1 << 40}),
		tensor.FromBool("flags", []int64{2}, []bool{true, false}),
		tensor.FromUint8("bytes", []int64{2, 2}, []uint8{0, 1, 254, 255}),
		tensor.FromStrings("words", []int64{3}, []string{"a", "", "héllo"}),
		tensor.FromFloat32("empty", []int64{0, 4}, nil),
	}
}

func TestBundleRoundTrip(t *testing.T) {
	for _, compress := range []bool{false, true} {
		prefix := filepath.Join(t.TempDir(), "variables")
		in := sampleTensors()
		if err := WriteBundle(prefix, in, compress); err != nil {
			t.Fatal(err)
		}
		b, err := OpenBundle(prefix)
		if err != nil {
			t.Fatalf("snappy=%v: %v", compress, err)
		}
		if got := len(b.Keys()); got != len(in) {
			t.Fatalf("snappy=%v: %d keys, want %d", compress, got, len(in))
		}
		for _, want := range in {
			got, err := b.Read(want.Name)
			if err != nil {
				t.Fatalf("snappy=%v: read %q: %v", compress, want.Name, err)
			}
			if !tensor.Equal(got, want) {
				t.Errorf("snappy=%v: %q = %v, want %v", compress, want.Name, got, want)
			}
		}
		if _, err := b.Read("missing"); err == nil {
			t.Error("reading a missing key succeeded")
		}
	}
}

func TestBundleDetectsCorruption(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "variables")
	if err := WriteBundle(prefix, sampleTensors(), false); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(prefix + ".data-00000-of-00001")
	data[0] ^= 0x40 // first byte of "bytes" (keys are sorted)
	os.WriteFile(prefix+".data-00000-of-00001", data, 0o644)
	b, err := OpenBundle(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read("bytes"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("flipped data bit: err %v, want a checksum error", err)
	}
	if _, err := b.Read("dense/kernel"); err != nil {
		t.Errorf("untouched tensor: %v", err)
	}

	index, _ := os.ReadFile(prefix + ".index")
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
		want string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }, "magic"},
		{"short", func(b []byte) []byte { return b[:20] }, "footer"},
		{"block bit", func(b []byte) []byte { b[3] ^= 1; return b }, "checksum"},
	} {
		_, err := ParseBundleIndex(tc.mut(append([]byte(nil), index...)))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrCorrupt mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestTensorFromProto(t *testing.T) {
	shape := func(d ...int64) *shapepb.TensorShapeProto {
		s := &shapepb.TensorShapeProto{}
		for _, x := range d {
			s.Dim = append(s.Dim, &shapepb.TensorShapeProto_Dim{Size: x})
		}
		return s
	}
	tests := []struct {
		name string
		tp   *tensorpb.TensorProto
		want tensor.Tensor
	}{
		{"filled", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_FLOAT, TensorShape: shape(2, 2), FloatVal: []float32{0.5}},
			tensor.FromFloat32("", []int64{2, 2}, []float32{0.5, 0.5, 0.5, 0.5})},
		{"repeat last", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_INT32, TensorShape: shape(3), IntVal: []int32{1, 2}},
			tensor.FromInt32("", []int64{3}, []int32{1, 2, 2})},
		{"zeros", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_INT64, TensorShape: shape(2)},
			tensor.FromInt64("", []int64{2}, []int64{0, 0})},
		{"content", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_INT32, TensorShape: shape(2), TensorContent: []byte{1, 0, 0, 0, 255, 255, 255, 255}},
			tensor.FromInt32("", []int64{2}, []int32{1, -1})},
		{"scalar bool", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_BOOL, TensorShape: shape(), BoolVal: []bool{true}},
			tensor.FromBool("", []int64{}, []bool{true})},
		{"strings", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_STRING, TensorShape: shape(2), StringVal: [][]byte{[]byte("a"), []byte("b")}},
			tensor.FromStrings("", []int64{2}, []string{"a", "b"})},
	}
	for _, tc := range tests {
		got, err := TensorFromProto(tc.tp)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !tensor.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, bad := range []*tensorpb.TensorProto{
		{Dtype: typespb.DataType_DT_FLOAT, TensorShape: shape(1), FloatVal: []float32{1, 2}},
		{Dtype: typespb.DataType_DT_FLOAT, TensorShape: shape(2), TensorContent: []byte{1, 2, 3}},
		{Dtype: typespb.DataType_DT_FLOAT, TensorShape: shape(1<<20, 1<<20)},
		{Dtype: typespb.DataType_DT_COMPLEX64, TensorShape: shape(1)},
	} {
		if _, err := TensorFromProto(bad); err == nil {
			t.Errorf("TensorFromProto(%v) succeeded", bad)
		}
	}
}

func TestFindDirAndMetaGraph(t *testing.T) {
	dir := t.TempDir()
	mg := &corepb.MetaGraphDef{
		MetaInfoDef:  &corepb.MetaGraphDef_MetaInfoDef{Tags: []string{"serve"}},
		GraphDef:     nil,
		SignatureDef: map[string]*corepb.SignatureDef{"serving_default": {}},
	}
	train := &corepb.MetaGraphDef{MetaInfoDef: &corepb.MetaGraphDef_MetaInfoDef{Tags: []string{"train"}}}
	b, _ := proto.Marshal(&corepb.SavedModel{MetaGraphs: []*corepb.MetaGraphDef{train, mg}})
	if _, err := ParseMetaGraph(b, ServeTag); err == nil || !strings.Contains(err.Error(), "no graph") {
		t.Errorf("graphless metagraph: err %v", err)
	}
	b, _ = proto.Marshal(&corepb.SavedModel{MetaGraphs: []*corepb.MetaGraphDef{train, train}})
	if _, err := ParseMetaGraph(b, ServeTag); err == nil || !strings.Contains(err.Error(), `tagged "serve"`) {
		t.Errorf("no serve tag: err %v", err)
	}
	if _, err := ParseMetaGraph([]byte("not a proto\xff"), ServeTag); err == nil {
		t.Error("garbage parsed")
	}
	for _, v := range []string{"1", "20", "3"} {
		os.MkdirAll(filepath.Join(dir, v), 0o755)
		os.WriteFile(filepath.Join(dir, v, "saved_model.pb"), nil, 0o644)
	}
	os.MkdirAll(filepath.Join(dir, "999"), 0o755) // no saved_model.pb: not a version
	got, err := FindDir(dir)
	if err != nil || got != filepath.Join(dir, "20") {
		t.Errorf("FindDir = %q, %v; want the highest version 20", got, err)
	}
	if _, err := FindDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no saved_model.pb") {
		t.Errorf("empty dir: err %v", err)
	}
	// An extracted archive: top/model/7/saved_model.pb.
	arch := t.TempDir()
	os.MkdirAll(filepath.Join(arch, "top", "model", "7"), 0o755)
	os.WriteFile(filepath.Join(arch, "top", "model", "7", "saved_model.pb"), nil, 0o644)
	if got, err := FindDir(arch); err != nil || got != filepath.Join(arch, "top", "model", "7") {
		t.Errorf("archive layout: FindDir = %q, %v", got, err)
	}
}

// TestConformanceVariables reads the variables of every real SavedModel in
// the conformance set and checks the values the SOURCE.md formulas imply.
func TestConformanceVariables(t *testing.T) {
	require.ConformanceDir(t, "tensorflow")
	tests := []struct {
		dir  string
		want map[string]float32 // variable node -> value
	}{
		{"saved_model_half_plus_two_cpu/00000123", map[string]float32{"a": 0.5, "b": 2, "c": 3}},
		{"saved_model_half_plus_two_tf2_cpu/00000123", map[string]float32{"a": 0.5, "b": 2, "c": 3}},
		{"saved_model_half_plus_three/00000123", map[string]float32{"a": 0.5, "b": 3}},
		{"tftrt_2.0_saved_model", nil}, // two data shards
	}
	for _, tc := range tests {
		m, err := Load(filepath.Join(conformanceDir, tc.dir))
		if err != nil {
			t.Errorf("%s: %v", tc.dir, err)
			continue
		}
		keys, err := m.VariableKeys()
		if err != nil {
			t.Errorf("%s: %v", tc.dir, err)
			continue
		}
		for _, k := range m.Variables.Keys() {
			if _, err := m.Variables.Read(k); err != nil {
				t.Errorf("%s: read %q: %v", tc.dir, k, err)
			}
		}
		for name, want := range tc.want {
			v, err := m.ReadVariable(name, keys)
			if err != nil {
				t.Errorf("%s: %v", tc.dir, err)
				continue
			}
			f, _ := v.AsFloat32()
			if len(f) != 1 || f[0] != want {
				t.Errorf("%s: %s = %v, want %v", tc.dir, name, f, want)
			}
		}
	}
}
