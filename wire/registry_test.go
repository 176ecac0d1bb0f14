package wire_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/eas-server/eas-server/wire/caffepb"
	_ "github.com/eas-server/eas-server/wire/hiepb"
	_ "github.com/eas-server/eas-server/wire/tfpb"
	_ "github.com/eas-server/eas-server/wire/torchpb"
)

// TestRegistry checks that the four generated packages load together and
// that their field numbers and types are the ones docs/protocol.md gives ("Wire formats"), so
// an edit of a .proto that changes the wire format fails here.
func TestRegistry(t *testing.T) {
	for _, path := range []string{"wire/tfpb/tf_predict.proto", "wire/torchpb/torch_predict.proto", "wire/hiepb/hie_data.proto", "wire/caffepb/caffe_predict.proto"} {
		if _, err := protoregistry.GlobalFiles.FindFileByPath(path); err != nil {
			t.Errorf("file %s: %v", path, err)
		}
	}
	type field struct {
		msg, name string
		num       int32
		kind      protoreflect.Kind
		repeated  bool
	}
	fields := []field{
		{"tensorflow.eas.ArrayShape", "dim", 1, protoreflect.Int64Kind, true},
		{"tensorflow.eas.ArrayProto", "dtype", 1, protoreflect.EnumKind, false},
		{"tensorflow.eas.ArrayProto", "array_shape", 2, protoreflect.MessageKind, false},
		{"tensorflow.eas.ArrayProto", "float_val", 3, protoreflect.FloatKind, true},
		{"tensorflow.eas.ArrayProto", "double_val", 4, protoreflect.DoubleKind, true},
		{"tensorflow.eas.ArrayProto", "int_val", 5, protoreflect.Int32Kind, true},
		{"tensorflow.eas.ArrayProto", "string_val", 6, protoreflect.BytesKind, true},
		{"tensorflow.eas.ArrayProto", "int64_val", 7, protoreflect.Int64Kind, true},
		{"tensorflow.eas.ArrayProto", "bool_val", 8, protoreflect.BoolKind, true},
		{"tensorflow.eas.PredictRequest", "signature_name", 1, protoreflect.StringKind, false},
		{"tensorflow.eas.PredictRequest", "inputs", 2, protoreflect.MessageKind, true},
		{"tensorflow.eas.PredictRequest", "output_filter", 3, protoreflect.StringKind, true},
		{"tensorflow.eas.PredictResponse", "outputs", 1, protoreflect.MessageKind, true},
		{"pytorch.eas.ArrayProto", "int64_val", 7, protoreflect.Int64Kind, true},
		{"pytorch.eas.PredictRequest", "inputs", 1, protoreflect.MessageKind, true},
		{"pytorch.eas.PredictRequest", "output_filter", 2, protoreflect.Int32Kind, true},
		{"pytorch.eas.PredictRequest", "map_inputs", 3, protoreflect.MessageKind, true},
		{"pytorch.eas.PredictRequest", "debug_level", 100, protoreflect.Int32Kind, false},
		{"pytorch.eas.PredictResponse", "outputs", 1, protoreflect.MessageKind, true},
		{"pytorch.eas.PredictResponse", "map_outputs", 2, protoreflect.MessageKind, true},
		{"hie.processor.TensorProto", "name", 1, protoreflect.StringKind, false},
		{"hie.processor.TensorProto", "dims", 2, protoreflect.Int64Kind, true},
		{"hie.processor.TensorProto", "data_type", 3, protoreflect.Int32Kind, false},
		{"hie.processor.TensorProto", "raw_data", 5, protoreflect.BytesKind, false},
		{"hie.processor.DataProto", "tensors", 1, protoreflect.MessageKind, true},
		{"caffe.eas.ArrayShape", "dim", 1, protoreflect.Int64Kind, true},
		{"caffe.eas.ArrayProto", "shape", 1, protoreflect.MessageKind, false},
		{"caffe.eas.ArrayProto", "data", 2, protoreflect.FloatKind, true},
		{"caffe.eas.PredictRequest", "input_name", 1, protoreflect.StringKind, true},
		{"caffe.eas.PredictRequest", "input_data", 2, protoreflect.MessageKind, true},
		{"caffe.eas.PredictRequest", "output_filter", 3, protoreflect.StringKind, true},
		{"caffe.eas.PredictResponse", "output_name", 1, protoreflect.StringKind, true},
		{"caffe.eas.PredictResponse", "output_data", 2, protoreflect.MessageKind, true},
	}
	for _, f := range fields {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(f.msg))
		if err != nil {
			t.Errorf("%s: %v", f.msg, err)
			continue
		}
		fd := mt.Descriptor().Fields().ByName(protoreflect.Name(f.name))
		if fd == nil {
			t.Errorf("%s has no field %s", f.msg, f.name)
			continue
		}
		if fd.Number() != protoreflect.FieldNumber(f.num) || fd.Kind() != f.kind || (fd.Cardinality() == protoreflect.Repeated) != f.repeated {
			t.Errorf("%s.%s: number %d kind %v repeated %v; want %d %v %v", f.msg, f.name, fd.Number(), fd.Kind(),
				fd.Cardinality() == protoreflect.Repeated, f.num, f.kind, f.repeated)
		}
	}
	// Both ArrayDataType enums carry the numbers of docs/protocol.md "Tensor data types".
	names := []string{"DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16", "DT_INT8",
		"DT_STRING", "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8", "DT_QUINT8", "DT_QINT32", "DT_BFLOAT16",
		"DT_QINT16", "DT_QUINT16", "DT_UINT16", "DT_COMPLEX128", "DT_HALF", "DT_RESOURCE", "DT_VARIANT"}
	for _, enum := range []string{"tensorflow.eas.ArrayDataType", "pytorch.eas.ArrayDataType"} {
		et, err := protoregistry.GlobalTypes.FindEnumByName(protoreflect.FullName(enum))
		if err != nil {
			t.Errorf("%s: %v", enum, err)
			continue
		}
		for num, name := range names {
			v := et.Descriptor().Values().ByName(protoreflect.Name(name))
			if v == nil || v.Number() != protoreflect.EnumNumber(num) {
				t.Errorf("%s.%s is not %d", enum, name, num)
			}
		}
	}
	// The PyTorch ArrayProto has no bool_val.
	mt, _ := protoregistry.GlobalTypes.FindMessageByName("pytorch.eas.ArrayProto")
	if mt != nil && mt.Descriptor().Fields().ByName("bool_val") != nil {
		t.Error("pytorch.eas.ArrayProto has a bool_val")
	}
	// map_inputs is a map<string, ArrayProto>.
	mt, _ = protoregistry.GlobalTypes.FindMessageByName("pytorch.eas.PredictRequest")
	if mt != nil {
		fd := mt.Descriptor().Fields().ByName("map_inputs")
		if !fd.IsMap() || fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Message().FullName() != "pytorch.eas.ArrayProto" {
			t.Error("pytorch.eas.PredictRequest.map_inputs is not map<string, ArrayProto>")
		}
	}
}
