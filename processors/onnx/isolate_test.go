package onnx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// GatherModelForTest writes an ONNX model that looks ids up in a table of
// 10 rows and returns its path: input "ids" INT64 [-1], output "rows" FP32
// [-1, 4], where row r is [4r, 4r+1, 4r+2, 4r+3]. An id outside [-10, 9]
// makes ONNX Runtime's Gather fail on that request's values.
func GatherModelForTest(t testing.TB) string {
	t.Helper()
	table := make([]float32, 10*4)
	for i := range table {
		table[i] = float32(i)
	}
	g := &onnxbuild.Graph{Prefix: "g_"}
	tbl := g.F32Const(table, []int64{10, 4})
	g.Emit("Gather", []string{tbl, "ids"}, []string{"rows"}, onnxbuild.AttrInt("axis", 0))
	b, err := onnxbuild.Model(&onnxpb.GraphProto{
		Name: "gather", Node: g.Nodes, Initializer: g.Inits,
		Input:  []*onnxpb.ValueInfoProto{onnxbuild.ValueInfo("ids", tensor.Int64, []int64{-1})},
		Output: []*onnxpb.ValueInfoProto{onnxbuild.ValueInfo("rows", tensor.Float32, []int64{-1, 4})},
	}, "eas-server test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gather.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// GatherRowsForTest is what the gather model answers for good ids.
func GatherRowsForTest(ids ...int64) []float32 {
	var out []float32
	for _, id := range ids {
		if id < 0 {
			id += 10
		}
		for c := range int64(4) {
			out = append(out, float32(4*id+c))
		}
	}
	return out
}

func idsPayload(ids ...int64) *processors.TensorPayload {
	return &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromInt64("ids", []int64{int64(len(ids))}, ids)}}
}

// TestBadPayloadFailsAlone: a merged run that fails on one payload's values
// runs each payload alone, so the others get their rows and only the bad
// ones fail, each with its own 400.
func TestBadPayloadFailsAlone(t *testing.T) {
	m := load(t, "onnx_cpu", GatherModelForTest(t))
	ids := [][]int64{{1}, {99}, {3, 4}, {-11}, {9, -1}}
	bad := map[int]string{1: "idx=99", 3: "idx=-11"}
	tps := make([]*processors.TensorPayload, len(ids))
	for i, v := range ids {
		tps[i] = idsPayload(v...)
	}
	before := m.runs.Load()
	res, err := m.Run(t.Context(), checked(t, m, tps...))
	var errs processors.PayloadErrors
	if !errors.As(err, &errs) || len(errs) != len(ids) {
		t.Fatalf("Run: %v, want a PayloadErrors of %d", err, len(ids))
	}
	if n := m.runs.Load() - before; n != 1+int64(len(ids)) {
		t.Errorf("%d session runs, want the failed merged run and %d alone", n, len(ids))
	}
	for i, v := range ids {
		if want, isBad := bad[i]; isBad {
			if !badinput.Is(errs[i]) || !strings.Contains(errs[i].Error(), want) || !strings.Contains(errs[i].Error(), "model run failed on this input") {
				t.Errorf("ids %v: err = %v, want a bad input naming %s", v, errs[i], want)
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("ids %v failed with its neighbour's error: %v", v, errs[i])
			continue
		}
		got := res[i].Outputs[0]
		if err := tensor.Close(got, tensor.FromFloat32("rows", []int64{int64(len(v)), 4}, GatherRowsForTest(v...)), tensor.Exact); err != nil {
			t.Errorf("ids %v: %v", v, err)
		}
	}

	// A batch of good payloads still takes one run.
	before = m.runs.Load()
	if _, err := m.Run(t.Context(), checked(t, m, idsPayload(0), idsPayload(5, 6))); err != nil {
		t.Fatal(err)
	}
	if n := m.runs.Load() - before; n != 1 {
		t.Errorf("a good batch took %d runs, want 1", n)
	}

	// A batch of one fails as a whole, with its own error.
	if _, err := m.Run(t.Context(), checked(t, m, idsPayload(10))); !badinput.Is(err) || errors.As(err, new(processors.PayloadErrors)) {
		t.Errorf("a batch of one: %v, want its own bad input", err)
	}

	// A done context fails the batch without running its payloads alone.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before = m.runs.Load()
	if _, err := m.Run(ctx, checked(t, m, idsPayload(1), idsPayload(99))); !errors.Is(err, context.Canceled) || errors.As(err, new(processors.PayloadErrors)) {
		t.Errorf("a cancelled batch: %v, want context.Canceled for the batch", err)
	}
	if n := m.runs.Load() - before; n != 0 {
		t.Errorf("a cancelled batch made %d runs", n)
	}
}

// TestTorchScriptBadPayloadFailsAlone is TestBadPayloadFailsAlone on
// libtorch: an embedding of 10 rows asked for row 99.
func TestTorchScriptBadPayloadFailsAlone(t *testing.T) {
	m := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), "embed.pt"))
	ids := [][]int64{{1, 2, 3}, {9, 0, 99}, {9, 0, 4}}
	tps := make([]*processors.TensorPayload, len(ids))
	for i, v := range ids {
		tps[i] = &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromInt64("ids", []int64{1, 3}, v)}}
	}
	res, err := m.Run(t.Context(), checked(t, m, tps...))
	var errs processors.PayloadErrors
	if !errors.As(err, &errs) {
		t.Fatalf("Run: %v, want a PayloadErrors", err)
	}
	if !badinput.Is(errs[1]) || !strings.Contains(errs[1].Error(), "index out of range") {
		t.Errorf("ids %v: err = %v, want libtorch's index out of range as a bad input", ids[1], errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("ids %v failed with its neighbour's error: %v", ids[i], errs[i])
		}
		alone, err := m.Run(t.Context(), checked(t, m, tps[i]))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.Close(res[i].Outputs[0], alone[0].Outputs[0], tensor.Exact); err != nil {
			t.Errorf("ids %v: %v", ids[i], err)
		}
	}
}

// TestRunFailureClassification: a run that fails on the request's values
// is the client's (400); the engine's own failures are the server's (500).
func TestRunFailureClassification(t *testing.T) {
	for _, tc := range []struct {
		msg    string
		client bool
	}{
		{"Error running network: Non-zero status code returned while running Gather node. Name:'g_Gather_2' Status Message: indices element out of data bounds, idx=99 must be within the inclusive range [-10,9]", true},
		{"Error running network: Non-zero status code returned while running Reshape node. Name:'r' Status Message: The input tensor cannot be reshaped to the requested shape. Input shape:{3}, requested shape:{2,2}", true},
		{"The following operation failed in the TorchScript interpreter.\nRuntimeError: index out of range in self", true},
		{"Error running network: Non-zero status code returned while running MatMul node. Name:'m' Status Message: Failed to allocate memory for requested buffer of size 4294967296", false},
		{"Error running network: Available memory of 0 is smaller than requested bytes of 1048576", false},
		{"Error running network: CUDA failure 2: out of memory ; GPU=0 ; hostname=h ; expr=cudaMalloc((void**)&p, size);", false},
		{"Error running network: CUDNN failure 4: CUDNN_STATUS_INTERNAL_ERROR ; GPU=0", false},
		{"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", false},
		{"RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 1099511627776 bytes.", false},
		{"std::bad_alloc", false},
	} {
		err := runFailure(errors.New(tc.msg))
		if badinput.Is(err) != tc.client {
			t.Errorf("%q: badinput %v, want %v", tc.msg, badinput.Is(err), tc.client)
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: the runtime's message is lost: %v", tc.msg, err)
		}
	}
}
