package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// TestGRPCInference calls an ONNX service through the KServe v2 gRPC API,
// the way Triton's gRPC clients do, with the token in the metadata.
func TestGRPCInference(t *testing.T) {
	client := teststack.Start(t, fmt.Sprintf(`{"name":"mlp","processor":"onnx_cpu","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`,
		filepath.Join(onnxTestdata, "mlp.onnx"))).GRPC(t)

	in := []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, make([]float32, 16))}
	req := kservegrpc.RequestFromTensors("mlp", "", "r1", in, nil)
	if _, err := client.ModelInfer(t.Context(), req); err == nil {
		t.Fatal("a call without the token succeeded")
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "T")
	resp, err := client.ModelInfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := kservegrpc.TensorsFromResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	// The same input over HTTP must give the same output.
	s := newStack(t, fmt.Sprintf(`{"name":"torch","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`,
		filepath.Join(onnxTestdata, "mlp.onnx")))
	want, err := s.infer(t, "torch", in, []string{"output"})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "grpc", outs, want)
}
