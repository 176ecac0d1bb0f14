package tensorflow

import (
	"strings"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

// mutableTable adds a TF1 MutableHashTableV2 whose keys and values the
// saver's restore op puts in from the bundle (RestoreV2 ->
// LookupTableImportV2, which the restore op waits for), as
// TensorFlow's saver writes a table's saveable.
func (b *graphBuilder) mutableTable(t *testing.T, op string, keys, values tensor.Tensor, attrs map[string]any, inputs ...string) string {
	name := b.name("table")
	if attrs == nil {
		attrs = map[string]any{}
	}
	attrs["key_dtype"], attrs["value_dtype"] = tfType(t, keys.DType), tfType(t, values.DType)
	table := b.node(op, inputs, attrs)
	keys.Name, values.Name = name+"-keys", name+"-values"
	b.vars = append(b.vars, keys, values)
	names := b.konst(t, tensor.FromStrings("", []int64{2}, []string{keys.Name, values.Name}))
	slices := b.konst(t, tensor.FromStrings("", []int64{2}, []string{"", ""}))
	prefix := b.konst(t, tensor.FromStrings("", []int64{}, []string{"variables/variables"}))
	restore := b.node("RestoreV2", []string{prefix, names, slices}, nil)
	imp := b.node("LookupTableImportV2", []string{table, restore, restore + ":1"}, nil)
	b.restores = append(b.restores, imp)
	return table
}

// TestMutableTableFromCheckpoint: mutable tables' contents come from the
// variables bundle through the saver's restore op (no TensorFlow needed;
// TestTablesServed checks TensorFlow's own SavedModels): lookups of present
// and absent keys, a computed default, rows of values (a table of
// tensors), a dense table's free buckets dropped, the size and the export.
// A table the restore op does not fill, and one written in the serving
// graph, are refused with the reason.
func TestMutableTableFromCheckpoint(t *testing.T) {
	b := newBuilder()
	s := b.input(t, "s", tensor.String, []int64{-1})
	i := b.input(t, "i", tensor.Int64, []int64{-1})
	d := b.input(t, "d", tensor.Int64, []int64{})
	words := b.mutableTable(t, "MutableHashTableV2", tensor.FromStrings("", []int64{3}, []string{"b", "a", ""}),
		tensor.FromInt64("", []int64{3}, []int64{20, 10, 30}), nil)
	vecs := b.mutableTable(t, "MutableHashTableOfTensorsV2", tensor.FromStrings("", []int64{2}, []string{"a", "b"}),
		tensor.FromFloat32("", []int64{2, 2}, []float32{1, 2, 3, 4}), nil)
	// Buckets: 0 is the empty key, -1 the deleted one.
	dense := b.mutableTable(t, "MutableDenseHashTableV2", tensor.FromInt64("", []int64{4, 1}, []int64{0, 7, -1, 9}),
		tensor.FromInt64("", []int64{4, 1}, []int64{0, 70, 5, 90}), nil,
		b.konst(t, tensor.FromInt64("", []int64{}, []int64{0})), b.konst(t, tensor.FromInt64("", []int64{}, []int64{-1})))
	ids := b.node("LookupTableFindV2", []string{words, s, b.konst(t, tensor.FromInt64("", []int64{}, []int64{-1}))}, nil)
	computed := b.node("LookupTableFindV2", []string{words, s, d}, nil)
	rows := b.node("LookupTableFindV2", []string{vecs, s, b.konst(t, tensor.FromFloat32("", []int64{2}, []float32{-1, -2}))}, nil)
	dl := b.node("LookupTableFindV2", []string{dense, i, b.konst(t, tensor.FromInt64("", []int64{}, []int64{-7}))}, nil)
	size := b.node("LookupTableSizeV2", []string{dense}, nil)
	export := b.node("LookupTableExportV2", []string{words}, nil)
	dir := b.save(t, map[string]string{"ids": ids + ":0", "computed": computed + ":0", "rows": rows + ":0", "dense": dl + ":0",
		"size": size + ":0", "keys": export + ":0", "values": export + ":1"},
		map[string]tensor.DType{"ids": tensor.Int64, "computed": tensor.Int64, "rows": tensor.Float32, "dense": tensor.Int64,
			"size": tensor.Int64, "keys": tensor.String, "values": tensor.Int64})
	m, err := loadModel(t, "tensorflow_cpu_1.15", dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := predict(t, m, "serving_default", []tensor.Tensor{
		tensor.FromStrings("s", []int64{4}, []string{"a", "z", "", "b"}),
		tensor.FromInt64("i", []int64{5}, []int64{7, 0, -1, 9, 8}),
		tensor.FromInt64("d", []int64{}, []int64{-5}),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []tensor.Tensor{
		tensor.FromInt64("ids", []int64{4}, []int64{10, -1, 30, 20}),
		tensor.FromInt64("computed", []int64{4}, []int64{10, -5, 30, 20}),
		tensor.FromFloat32("rows", []int64{4, 2}, []float32{1, 2, -1, -2, -1, -2, 3, 4}),
		tensor.FromInt64("dense", []int64{5}, []int64{70, -7, -7, 90, -7}),
		tensor.FromInt64("size", []int64{}, []int64{2}),
		tensor.FromStrings("keys", []int64{3}, []string{"b", "a", ""}),
		tensor.FromInt64("values", []int64{3}, []int64{20, 10, 30}),
	} {
		if err := tensor.Close(got[want.Name], want, tensor.Exact); err != nil {
			t.Errorf("%s: %v", want.Name, err)
		}
	}

	// Not restored: the restore op fills another table.
	b = newBuilder()
	s = b.input(t, "s", tensor.String, []int64{-1})
	lone := b.node("MutableHashTableV2", nil, map[string]any{"key_dtype": tfType(t, tensor.String), "value_dtype": tfType(t, tensor.Int64)})
	b.mutableTable(t, "MutableHashTableV2", tensor.FromStrings("", []int64{1}, []string{"a"}), tensor.FromInt64("", []int64{1}, []int64{1}), nil)
	ids = b.node("LookupTableFindV2", []string{lone, s, b.konst(t, tensor.FromInt64("", []int64{}, []int64{-1}))}, nil)
	_, err = loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"ids": ids + ":0"}, map[string]tensor.DType{"ids": tensor.Int64}))
	if err == nil || !strings.Contains(err.Error(), "not restored from the checkpoint") {
		t.Errorf("a table nothing fills: err %v", err)
	}

	// Written when served: the insert is refused by name.
	b = newBuilder()
	s = b.input(t, "s", tensor.String, []int64{-1})
	words = b.mutableTable(t, "MutableHashTableV2", tensor.FromStrings("", []int64{1}, []string{"a"}), tensor.FromInt64("", []int64{1}, []int64{1}), nil)
	ins := b.node("LookupTableInsertV2", []string{words, s, b.konst(t, tensor.FromInt64("", []int64{1}, []int64{5}))}, nil)
	ids = b.node("LookupTableFindV2", []string{words, s, b.konst(t, tensor.FromInt64("", []int64{}, []int64{-1})), "^" + ins}, nil)
	_, err = loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"ids": ids + ":0"}, map[string]tensor.DType{"ids": tensor.Int64}))
	if err == nil || !strings.Contains(err.Error(), "LookupTableInsertV2") || !strings.Contains(err.Error(), "writes lookup tables") {
		t.Errorf("a table written when served: err %v", err)
	}
}
