package tf2onnx

import (
	"os"

	"google.golang.org/protobuf/proto"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

// conformanceModels lists the saved_model.pb files of the conformance
// fixtures beside the repository (none when absent).
func conformanceModels() []string {
	base := filepath.Join(require.ConformanceRoot(), "tensorflow")
	dirs, _ := filepath.Glob(filepath.Join(base, "*", "saved_model.pb"))
	more, _ := filepath.Glob(filepath.Join(base, "*", "*", "saved_model.pb"))
	return append(dirs, more...)
}

// TestConformanceModelsWellFormed checks the structure of every signature
// of the conformance fixtures that translates, variables included.
func TestConformanceModelsWellFormed(t *testing.T) {
	require.ConformanceDir(t, "tensorflow")
	paths := conformanceModels()
	if len(paths) == 0 {
		t.Fatalf("no saved_model.pb in the conformance folder %s", filepath.Join(require.ConformanceRoot(), "tensorflow"))
	}
	converted := 0
	for _, p := range paths {
		m, err := savedmodel.Load(filepath.Dir(p))
		if err != nil {
			continue // fixtures savedmodel refuses are tested there
		}
		for _, name := range m.SignatureNames() {
			ts, err := Convert(m, name)
			if err != nil {
				continue
			}
			converted++
			if err := checkSignature(ts); err != nil {
				t.Errorf("%s signature %q: %v", filepath.Dir(p), name, err)
			}
		}
	}
	if converted == 0 {
		t.Error("no fixture signature translated")
	}
	t.Logf("%d signatures of %d fixtures checked", converted, len(paths))
}

// FuzzConvert translates every signature of arbitrary saved_model.pb bytes:
// it must fail cleanly or produce a well-formed ONNX model (checkSignature),
// never panic or loop. Inputs
// are whole protobufs, so run it with -fuzzminimizetime=2s: minimising
// each new interesting input takes long otherwise.
func FuzzConvert(f *testing.F) {
	for _, p := range conformanceModels() {
		// Small models only: the fuzzer minimises every interesting input,
		// which is slow for large ones.
		if b, err := os.ReadFile(p); err == nil && len(b) < 8<<10 {
			f.Add(b)
		}
	}
	f.Add(tableSeed(f))
	f.Add(controlSeed(f, false))
	f.Fuzz(func(t *testing.T, data []byte) {
		mg, err := savedmodel.ParseMetaGraph(data, savedmodel.ServeTag)
		if err != nil {
			return
		}
		m := &savedmodel.Model{MetaGraph: mg}
		for name := range mg.SignatureDef {
			ts, err := Convert(m, name)
			if err != nil {
				continue
			}
			if len(ts.Model) == 0 {
				t.Fatalf("signature %q: no error and no model", name)
			}
			if err := checkSignature(ts); err != nil {
				t.Fatalf("signature %q: %v", name, err)
			}
		}
	})
}

// FuzzParseVocabulary reads arbitrary vocabulary files (a SavedModel's
// asset, untrusted) with arbitrary column specs: it must fail cleanly or
// return keys and values of one length, of the table's dtypes, each
// element whole.
func FuzzParseVocabulary(f *testing.F) {
	f.Add([]byte("apple\npear\r\nh\xc3\xa9llo\n"), int64(-1), "\t", int64(0), int64(-2), int64(-1), uint8(0))
	f.Add([]byte("a\t1\t2.5\nb\t2\t-1e3\n"), int64(2), "\t", int64(3), int64(0), int64(1), uint8(1))
	f.Add([]byte("7,x\n-3,y\n"), int64(-1), ",", int64(0), int64(0), int64(2), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, size int64, delim string, offset, key, value int64, types uint8) {
		dts := []tensor.DType{tensor.String, tensor.Int64, tensor.Float32, tensor.Int32}
		kt, vt := dts[int(types)%len(dts)], dts[int(types/4)%len(dts)]
		keys, vals, err := parseVocabulary(data, kt, vt, vocabSpec{size: size, delim: delim, offset: offset, key: key, value: value})
		if err != nil {
			return
		}
		for _, x := range []struct {
			t  tensor.Tensor
			dt tensor.DType
		}{{keys, kt}, {vals, vt}} {
			n := x.t.Shape[0]
			if x.t.DType != x.dt || len(x.t.Shape) != 1 || n != keys.Shape[0] {
				t.Fatalf("%s %v, want %s [%d]", x.t.DType, x.t.Shape, x.dt, keys.Shape[0])
			}
			if x.dt == tensor.String && int64(len(x.t.Strings)) != n || x.dt != tensor.String && int64(len(x.t.Data)) != n*int64(x.dt.Size()) {
				t.Fatalf("%s [%d] holds %d strings, %d bytes", x.dt, n, len(x.t.Strings), len(x.t.Data))
			}
		}
	})
}

// tableSeed is a saved_model.pb with what the fixtures lack: a constant
// string->int64 table (HashTableV2, LookupTableImportV2 run by the init
// op, LookupTableFindV2, LookupTableSizeV2), string hashing of an input
// and Bucketize.
func tableSeed(f *testing.F) []byte {
	attr := func(kv ...any) map[string]*attrpb.AttrValue {
		m := map[string]*attrpb.AttrValue{}
		for i := 0; i < len(kv); i += 2 {
			switch v := kv[i+1].(type) {
			case typespb.DataType:
				m[kv[i].(string)] = &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: v}}
			case int64:
				m[kv[i].(string)] = &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: v}}
			case *tensorpb.TensorProto:
				m[kv[i].(string)] = &attrpb.AttrValue{Value: &attrpb.AttrValue_Tensor{Tensor: v}}
			case []float32:
				m[kv[i].(string)] = &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{F: v}}}
			}
		}
		return m
	}
	vec := &shapepb.TensorShapeProto{Dim: []*shapepb.TensorShapeProto_Dim{{Size: 2}}}
	scalar := &shapepb.TensorShapeProto{}
	str, i64 := typespb.DataType_DT_STRING, typespb.DataType_DT_INT64
	g := &graphpb.GraphDef{Node: []*nodepb.NodeDef{
		{Name: "w", Op: "Placeholder", Attr: attr("dtype", str)},
		{Name: "t", Op: "HashTableV2", Attr: attr("key_dtype", str, "value_dtype", i64)},
		{Name: "k", Op: "Const", Attr: attr("dtype", str, "value", &tensorpb.TensorProto{Dtype: str, TensorShape: vec, StringVal: [][]byte{[]byte("a"), []byte("b")}})},
		{Name: "v", Op: "Const", Attr: attr("dtype", i64, "value", &tensorpb.TensorProto{Dtype: i64, TensorShape: vec, Int64Val: []int64{1, 2}})},
		{Name: "d", Op: "Const", Attr: attr("dtype", i64, "value", &tensorpb.TensorProto{Dtype: i64, TensorShape: scalar, Int64Val: []int64{-1}})},
		{Name: "imp", Op: "LookupTableImportV2", Input: []string{"t", "k", "v"}},
		{Name: "init", Op: "NoOp", Input: []string{"^imp"}},
		{Name: "find", Op: "LookupTableFindV2", Input: []string{"t", "w", "d"}},
		{Name: "size", Op: "LookupTableSizeV2", Input: []string{"t"}},
		{Name: "h", Op: "StringToHashBucketFast", Input: []string{"w"}, Attr: attr("num_buckets", int64(10))},
		{Name: "b", Op: "Bucketize", Input: []string{"h"}, Attr: attr("T", i64, "boundaries", []float32{2, 5})},
	}}
	ti := func(name string, dt typespb.DataType, s *shapepb.TensorShapeProto) *corepb.TensorInfo {
		return &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: name}, Dtype: dt, TensorShape: s}
	}
	dyn := &shapepb.TensorShapeProto{Dim: []*shapepb.TensorShapeProto_Dim{{Size: -1}}}
	sm := &corepb.SavedModel{MetaGraphs: []*corepb.MetaGraphDef{{
		MetaInfoDef: &corepb.MetaGraphDef_MetaInfoDef{Tags: []string{"serve"}},
		GraphDef:    g,
		SignatureDef: map[string]*corepb.SignatureDef{
			"serving_default": {Inputs: map[string]*corepb.TensorInfo{"w": ti("w:0", str, dyn)},
				Outputs: map[string]*corepb.TensorInfo{"id": ti("find:0", i64, dyn), "n": ti("size:0", i64, scalar), "b": ti("b:0", typespb.DataType_DT_INT32, dyn)}},
			"__saved_model_init_op": {Outputs: map[string]*corepb.TensorInfo{"__saved_model_init_op": ti("init", typespb.DataType_DT_INVALID, nil)}},
		},
	}}}
	b, err := proto.Marshal(sm)
	if err != nil {
		f.Fatal(err)
	}
	mg, err := savedmodel.ParseMetaGraph(b, savedmodel.ServeTag)
	if err != nil {
		f.Fatal(err)
	}
	ts, err := Convert(&savedmodel.Model{MetaGraph: mg}, "serving_default")
	if err != nil {
		f.Fatalf("the seed does not translate: %v", err)
	}
	if ts.Host == nil || len(ts.Host.Outputs) != 1 {
		f.Fatalf("the seed's host stage is %+v, want the hash", ts.Host)
	}
	return b
}
