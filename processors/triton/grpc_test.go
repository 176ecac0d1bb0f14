package triton_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// TestNativeOverGRPC calls a Triton repository served natively through the
// server's GRPCInferenceService, as a Triton gRPC client would.
func TestNativeOverGRPC(t *testing.T) {
	s := newStack(t, nativeService(t, "tri"))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	s.srv.RegisterGRPC(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := kservegrpc.NewGRPCInferenceServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", token)

	if r, err := client.ServerReady(ctx, &kservegrpc.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Fatalf("server ready: %v %v", r, err)
	}
	if r, err := client.ModelReady(ctx, &kservegrpc.ModelReadyRequest{Name: "multi_io", Version: "2"}); err != nil || !r.GetReady() {
		t.Fatalf("model ready: %v %v", r, err)
	}
	md, err := client.ModelMetadata(ctx, &kservegrpc.ModelMetadataRequest{Name: "mlp"})
	if err != nil || md.GetPlatform() != "onnxruntime_onnx" || len(md.GetInputs()) != 1 || md.GetInputs()[0].GetShape()[1] != 16 {
		t.Fatalf("metadata: %v %v", md, err)
	}
	for _, c := range loadCases(t, "multi_io") {
		ir, err := kserve.DecodeRequest(c.req, "")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.ModelInfer(ctx, kservegrpc.RequestFromTensors("multi_io", "1", "id-"+c.name, ir.Inputs, nil))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.GetModelName() != "multi_io" || resp.GetModelVersion() != "1" || resp.GetId() != "id-"+c.name {
			t.Errorf("response header %v", resp)
		}
		outs, err := kservegrpc.TensorsFromResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		checkOutputs(t, outs, c.want)
	}

	bad := kservegrpc.RequestFromTensors("mlp", "", "", []tensor.Tensor{tensor.FromFloat32("x", []int64{1, 1}, []float32{1})}, nil)
	cases := []struct {
		name string
		ctx  context.Context
		req  *kservegrpc.ModelInferRequest
		code codes.Code
	}{
		{"bad input", ctx, bad, codes.InvalidArgument},
		{"unknown model", ctx, kservegrpc.RequestFromTensors("nope", "", "", nil, nil), codes.NotFound},
		{"wrong token", metadata.AppendToOutgoingContext(t.Context(), "authorization", "wrong"), bad, codes.Unauthenticated},
		{"no token", t.Context(), bad, codes.Unauthenticated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := client.ModelInfer(c.ctx, c.req)
			if status.Code(err) != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
		})
	}
}
