package tensorflow

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// TestBadRequestFailsAlone: requests merged into one run of a GatherV2 over
// a table of 10 rows, one of them asking for row 99: the others get their
// rows (the ONNX runtime runs each alone after the merged run fails) and
// only that one fails, with its own 400.
func TestBadRequestFailsAlone(t *testing.T) {
	table := make([]float32, 10*4)
	for i := range table {
		table[i] = float32(i)
	}
	b := newBuilder()
	b.outShapes = map[string][]int64{"rows": {-1, 4}}
	ids := b.input(t, "ids", tensor.Int32, []int64{-1})
	g := b.node("GatherV2", []string{b.konst(t, tensor.FromFloat32("", []int64{10, 4}, table)), ids, b.i32Scalar(t, 0)},
		map[string]any{"Tparams": tfType(t, tensor.Float32), "Tindices": tfType(t, tensor.Int32), "Taxis": tfType(t, tensor.Int32)})
	m, err := loadModel(t, "tensorflow_cpu_1.15", b.save(t, map[string]string{"rows": g + ":0"}, map[string]tensor.DType{"rows": tensor.Float32}))
	if err != nil {
		t.Fatal(err)
	}
	asks := []int32{1, 99, 7}
	batch := make([]*request, len(asks))
	for i, id := range asks {
		if batch[i], err = decode(t, m, "serving_default", []tensor.Tensor{tensor.FromInt32("ids", []int64{1}, []int32{id})}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !batch[0].sig.batchable {
		t.Fatal("the signature is not batchable: Run would not merge")
	}
	res, err := m.Run(context.Background(), batch)
	var errs processors.PayloadErrors
	if !errors.As(err, &errs) || len(errs) != len(asks) {
		t.Fatalf("Run: %v, want a PayloadErrors of %d", err, len(asks))
	}
	if !badinput.Is(errs[1]) || !strings.Contains(errs[1].Error(), "idx=99") {
		t.Errorf("row 99: %v, want a bad input naming idx=99", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("row %d failed with its neighbour's error: %v", asks[i], errs[i])
		}
		r := asks[i]
		want := tensor.FromFloat32("rows", []int64{1, 4}, []float32{float32(4 * r), float32(4*r + 1), float32(4*r + 2), float32(4*r + 3)})
		if len(res[i].outputs) != 1 || tensor.Close(res[i].outputs[0], want, tensor.Exact) != nil {
			t.Errorf("row %d: %v", r, res[i].outputs)
		}
	}
}
