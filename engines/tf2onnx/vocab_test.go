package tf2onnx_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/tensor"
)

func typeAttr(t typespb.DataType) *attrpb.AttrValue {
	return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: t}}
}

func intAttr(i int64) *attrpb.AttrValue { return &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: i}} }

func constT(name string, tp *tensorpb.TensorProto) *nodepb.NodeDef {
	n := nd(name, "Const")
	n.Attr["dtype"] = typeAttr(tp.Dtype)
	n.Attr["value"] = &attrpb.AttrValue{Value: &attrpb.AttrValue_Tensor{Tensor: tp}}
	return n
}

func vec(n int) *shapepb.TensorShapeProto {
	return &shapepb.TensorShapeProto{Dim: []*shapepb.TensorShapeProto_Dim{{Size: int64(n)}}}
}

// tableModel is a TF1-style SavedModel in dir: a string->int64 HashTableV2
// filled by init (a table_initializer) and looked up on input words
// (default -1), with the table's size as a second output.
func tableModel(dir string, init ...*nodepb.NodeDef) *savedmodel.Model {
	table := nd("table", "HashTableV2")
	table.Attr["key_dtype"] = typeAttr(typespb.DataType_DT_STRING)
	table.Attr["value_dtype"] = typeAttr(typespb.DataType_DT_INT64)
	g := &graphpb.GraphDef{Node: append([]*nodepb.NodeDef{
		nd("words", "Placeholder"), table,
		constT("default", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_INT64, TensorShape: &shapepb.TensorShapeProto{}, Int64Val: []int64{-1}}),
		nd("find", "LookupTableFindV2", "table", "words", "default"),
		nd("size", "LookupTableSizeV2", "table"),
	}, init...)}
	str := func(name string, dt typespb.DataType) *corepb.TensorInfo {
		return &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: name}, Dtype: dt, TensorShape: vec(-1)}
	}
	sig := &corepb.SignatureDef{
		Inputs: map[string]*corepb.TensorInfo{"words": str("words:0", typespb.DataType_DT_STRING)},
		Outputs: map[string]*corepb.TensorInfo{"ids": str("find:0", typespb.DataType_DT_INT64),
			"size": {Encoding: &corepb.TensorInfo_Name{Name: "size:0"}, Dtype: typespb.DataType_DT_INT64, TensorShape: &shapepb.TensorShapeProto{}}},
	}
	m := model(g, map[string]*corepb.SignatureDef{"serving_default": sig})
	m.Dir = dir
	m.MetaGraph.CollectionDef = map[string]*corepb.CollectionDef{"table_initializer": {Kind: &corepb.CollectionDef_NodeList_{NodeList: &corepb.CollectionDef_NodeList{Value: []string{"init"}}}}}
	return m
}

// textInit is an InitializeTableFromTextFileV2 reading asset file (named
// by constant fname, listed in the MetaGraph's assets) whole lines -> line
// numbers.
func textInit(attrs map[string]int64) *nodepb.NodeDef {
	n := nd("init", "InitializeTableFromTextFileV2", "table", "fname")
	n.Attr["key_index"] = intAttr(-2)
	n.Attr["value_index"] = intAttr(-1)
	for k, v := range attrs {
		n.Attr[k] = intAttr(v)
	}
	return n
}

func withAsset(m *savedmodel.Model, file string) *savedmodel.Model {
	m.MetaGraph.GraphDef.Node = append(m.MetaGraph.GraphDef.Node, constT("fname", &tensorpb.TensorProto{
		Dtype: typespb.DataType_DT_STRING, TensorShape: &shapepb.TensorShapeProto{}, StringVal: [][]byte{[]byte("/saved/at/" + file)}}))
	m.MetaGraph.AssetFileDef = []*corepb.AssetFileDef{{TensorInfo: &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: "fname:0"}}, Filename: file}}
	return m
}

// TestVocabularyFile: a table filled from a vocabulary asset is read as
// TensorFlow reads it (\r\n endings, vocab_size, offset) and runs as a
// LabelEncoder; files and names it cannot read the same way are refused.
func TestVocabularyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, "assets", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("vocab.txt", "apple\npear\r\nh\u00e9llo\n")
	write("holes.txt", "apple\n\npear\n")
	words := tensor.FromStrings("words", []int64{5}, []string{"pear", "kiwi", "apple", "h\u00e9llo", "pear\r"})
	for _, tc := range []struct {
		name  string
		file  string
		attrs map[string]int64
		ids   []int64
		size  int64
	}{
		{"whole file", "vocab.txt", nil, []int64{1, -1, 0, 2, -1}, 3},
		{"vocab_size", "vocab.txt", map[string]int64{"vocab_size": 2}, []int64{1, -1, 0, -1, -1}, 2},
		{"offset", "vocab.txt", map[string]int64{"offset": 10}, []int64{11, -1, 10, 12, -1}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := withAsset(tableModel(dir), tc.file)
			m.MetaGraph.GraphDef.Node = append(m.MetaGraph.GraphDef.Node, textInit(tc.attrs))
			ts, err := tf2onnx.Convert(m, "serving_default")
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, ts.Model, words)
			if len(got) != 2 || got[0].Name != "ids" || got[1].Name != "size" {
				t.Fatalf("outputs %v, want ids and size", got)
			}
			for _, g := range got {
				switch g.Name {
				case "ids":
					if err := tensor.Close(g, tensor.FromInt64("ids", []int64{5}, tc.ids), tensor.Exact); err != nil {
						t.Error(err)
					}
				case "size":
					if err := tensor.Close(g, tensor.FromInt64("size", []int64{1}, []int64{tc.size}), tensor.Exact); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	for _, tc := range []struct {
		name, asset, why string
	}{
		{"empty line", "holes.txt", "empty line"},
		{"missing file", "none.txt", "vocabulary file"},
		{"path in the asset name", "../assets/vocab.txt", "not a plain file name"},
		{"vocab_size above the file", "vocab.txt", "vocab_size is 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := withAsset(tableModel(dir), tc.asset)
			var attrs map[string]int64
			if strings.HasPrefix(tc.why, "vocab_size") {
				attrs = map[string]int64{"vocab_size": 9}
			}
			m.MetaGraph.GraphDef.Node = append(m.MetaGraph.GraphDef.Node, textInit(attrs))
			_, err := tf2onnx.Convert(m, "serving_default")
			var ue *tf2onnx.UnsupportedError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "LookupTableFindV2 (find)") || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("err = %v, want LookupTableFindV2 refused for %q", err, tc.why)
			}
		})
	}
}

// TestConstantTableDuplicates: a key imported twice with one value is
// kept once (size counts it once); with two values the table is refused,
// as TensorFlow fails to fill it.
func TestConstantTableDuplicates(t *testing.T) {
	imp := func(vals ...int64) []*nodepb.NodeDef {
		return []*nodepb.NodeDef{
			constT("keys", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_STRING, TensorShape: vec(3), StringVal: [][]byte{[]byte("a"), []byte("b"), []byte("a")}}),
			constT("vals", &tensorpb.TensorProto{Dtype: typespb.DataType_DT_INT64, TensorShape: vec(3), Int64Val: vals}),
			nd("init", "LookupTableImportV2", "table", "keys", "vals"),
		}
	}
	ts, err := tf2onnx.Convert(tableModel("", imp(1, 2, 1)...), "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	words := tensor.FromStrings("words", []int64{3}, []string{"b", "a", "c"})
	got := run(t, ts.Model, words)
	if len(got) != 2 {
		t.Fatalf("outputs %v, want ids and size", got)
	}
	for _, g := range got {
		want, ok := map[string]tensor.Tensor{"ids": tensor.FromInt64("ids", []int64{3}, []int64{2, 1, -1}), "size": tensor.FromInt64("size", []int64{1}, []int64{2})}[g.Name]
		if !ok {
			t.Fatalf("output %q", g.Name)
		}
		if err := tensor.Close(g, want, tensor.Exact); err != nil {
			t.Error(err)
		}
	}
	if _, err := tf2onnx.Convert(tableModel("", imp(1, 2, 3)...), "serving_default"); err == nil || !strings.Contains(err.Error(), "a key with two values") {
		t.Errorf("err = %v, want the table refused for a key with two values", err)
	}
}
