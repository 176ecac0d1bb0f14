package savedmodel

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// conformanceSeeds adds files named name from the conformance fixtures.
func conformanceSeeds(f *testing.F, name string) {
	matches, _ := filepath.Glob(filepath.Join(conformanceDir, "*", name))
	more, _ := filepath.Glob(filepath.Join(conformanceDir, "*", "*", name))
	for _, p := range append(matches, more...) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
}

// FuzzParseBundleIndex: any bytes either parse into entries or fail with an
// error; reading entries back from the parsed index never panics.
func FuzzParseBundleIndex(f *testing.F) {
	for _, c := range []bool{false, true} {
		idx, _, err := EncodeBundle(sampleTensors(), c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(idx)
	}
	conformanceSeeds(f, "variables/variables.index")
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundleIndex(data)
		if err != nil {
			return
		}
		for _, k := range b.Keys() {
			if !b.Has(k) {
				t.Fatalf("key %q listed but not found", k)
			}
		}
	})
}

// FuzzDecodeEntry decodes arbitrary entry bytes against each dtype, as a
// corrupt data shard would present them.
func FuzzDecodeEntry(f *testing.F) {
	_, data, _ := EncodeBundle(sampleTensors()[6:7], false) // the strings
	f.Add(int32(7), int64(3), data)
	f.Add(int32(1), int64(2), []byte{0, 0, 128, 63, 0, 0, 0, 64})
	f.Fuzz(func(t *testing.T, dtype int32, n int64, buf []byte) {
		e := &corepb.BundleEntryProto{Dtype: typesDType(dtype), Shape: nil}
		if n >= 0 && n < 1<<20 {
			e.Shape = shapeOf(n)
		}
		tt, err := DecodeEntry("x", e, buf)
		if err != nil {
			return
		}
		if err := tt.Validate(); err != nil {
			t.Fatalf("decoded tensor is invalid: %v", err)
		}
	})
}

// FuzzParseMetaGraph parses arbitrary saved_model.pb bytes.
func FuzzParseMetaGraph(f *testing.F) {
	conformanceSeeds(f, "saved_model.pb")
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		mg, err := ParseMetaGraph(data, ServeTag)
		if err != nil {
			return
		}
		if mg.GraphDef == nil || len(mg.SignatureDef) == 0 {
			t.Fatal("accepted a metagraph without graph or signatures")
		}
	})
}

// FuzzTensorFromProto converts arbitrary TensorProto bytes (a Const node's
// value): the result is a valid tensor or an error, never a panic or a huge
// allocation.
func FuzzTensorFromProto(f *testing.F) {
	for _, t := range sampleTensors() {
		dt, _ := TFDType(t.DType)
		tp := &tensorpb.TensorProto{Dtype: dt, TensorShape: shapeOf(t.Shape...), TensorContent: t.Data}
		if t.DType == tensor.String {
			tp.TensorContent, tp.StringVal = nil, t.Strings
		}
		b, _ := proto.Marshal(tp)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var tp tensorpb.TensorProto
		if proto.Unmarshal(data, &tp) != nil {
			return
		}
		tt, err := TensorFromProto(&tp)
		if err != nil {
			return
		}
		if err := tt.Validate(); err != nil {
			t.Fatalf("converted tensor is invalid: %v", err)
		}
	})
}
