package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// RegisterGRPC adds the KServe v2 GRPCInferenceService (what Triton gRPC
// clients speak) to gs. It serves the same models as the /v2 HTTP routes:
// every tensor service by its name, and the models of Triton repositories;
// the service token travels in the "authorization" metadata.
func (s *Server) RegisterGRPC(gs *grpc.Server) {
	kservegrpc.RegisterGRPCInferenceServiceServer(gs, &grpcService{s: s})
}

// grpcService is the gRPC face of Server; handlers share its resolution,
// scheduling and error mapping with the HTTP routes.
type grpcService struct {
	kservegrpc.UnimplementedGRPCInferenceServiceServer
	s *Server
}

// grpcCode maps the HTTP status that statusOf chose to a gRPC code.
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestTimeout:
		return codes.DeadlineExceeded
	case http.StatusTooManyRequests, 450:
		return codes.ResourceExhausted
	case 499:
		return codes.Canceled
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

// resolve resolves and authorises a model as the KServe HTTP routes do;
// the token travels in the "authorization" metadata. The caller releases
// the target.
func (g *grpcService) resolve(ctx context.Context, name, version string) (target, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	hdr := http.Header{}
	if v := md.Get("authorization"); len(v) > 0 {
		hdr.Set("Authorization", v[0])
	}
	if isSigned(hdr) {
		return nil, status.Error(codes.Unauthenticated, "unauthorized: gRPC calls take the raw or Bearer token in the authorization metadata; EAS signatures cover HTTP requests only")
	}
	t, err := g.s.resolveModel(name, version, auth.Request{Method: http.MethodPost, Header: hdr})
	if err != nil {
		return nil, grpcError(err)
	}
	return t, nil
}

// grpcError maps err as statusOf maps it for HTTP, the message capped.
func grpcError(err error) error {
	return status.Error(grpcCode(statusOf(err)), capMsg(err.Error()))
}

func isSigned(h http.Header) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "EAS")
}

// GRPCTap refuses, from the headers alone and before any message is read,
// a call to the inference service whose authorization opens no service
// (grpc.InTapHandle). The model's own token is checked again when the
// call names it. Server health and metadata calls pass.
func (s *Server) GRPCTap(ctx context.Context, info *tap.Info) (context.Context, error) {
	const prefix = "/inference.GRPCInferenceService/"
	method, ok := strings.CutPrefix(info.FullMethodName, prefix)
	if !ok || strings.HasPrefix(method, "Server") {
		return ctx, nil
	}
	hdr := http.Header{}
	if v := info.Header.Get("authorization"); len(v) > 0 {
		hdr.Set("Authorization", v[0])
	}
	if isSigned(hdr) || !s.opensAny(auth.Request{Method: http.MethodPost, Header: hdr}) {
		return ctx, status.Error(codes.Unauthenticated, "unauthorized: missing or wrong token in the authorization metadata")
	}
	return ctx, nil
}

func (g *grpcService) ServerLive(context.Context, *kservegrpc.ServerLiveRequest) (*kservegrpc.ServerLiveResponse, error) {
	return &kservegrpc.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(ctx context.Context, _ *kservegrpc.ServerReadyRequest) (*kservegrpc.ServerReadyResponse, error) {
	ok, _ := g.s.ready()
	return &kservegrpc.ServerReadyResponse{Ready: ok && g.s.processorsHealthy(ctx)}, nil
}

func (g *grpcService) ServerMetadata(context.Context, *kservegrpc.ServerMetadataRequest) (*kservegrpc.ServerMetadataResponse, error) {
	return &kservegrpc.ServerMetadataResponse{Name: "eas-server", Version: Version, Extensions: kserve.Extensions}, nil
}

func (g *grpcService) ModelReady(ctx context.Context, r *kservegrpc.ModelReadyRequest) (*kservegrpc.ModelReadyResponse, error) {
	t, err := g.resolve(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		// A model that is not serving, or not there, is not ready (as
		// Triton answers); a wrong token stays an error.
		if c := status.Code(err); c == codes.Unavailable || c == codes.NotFound {
			return &kservegrpc.ModelReadyResponse{Ready: false}, nil
		}
		return nil, err
	}
	defer t.Release()
	return &kservegrpc.ModelReadyResponse{Ready: t.Healthy(ctx) == nil}, nil
}

func (g *grpcService) ModelMetadata(ctx context.Context, r *kservegrpc.ModelMetadataRequest) (*kservegrpc.ModelMetadataResponse, error) {
	t, err := g.resolve(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		return nil, err
	}
	defer t.Release()
	md := t.Metadata()
	out := &kservegrpc.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform}
	for _, t := range md.Inputs {
		out.Inputs = append(out.Inputs, &kservegrpc.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	for _, t := range md.Outputs {
		out.Outputs = append(out.Outputs, &kservegrpc.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	return out, nil
}

func (g *grpcService) ModelInfer(ctx context.Context, r *kservegrpc.ModelInferRequest) (*kservegrpc.ModelInferResponse, error) {
	start := time.Now()
	id := grpcRequestID(ctx)
	t, err := g.resolve(ctx, r.GetModelName(), r.GetModelVersion())
	if err != nil {
		g.s.accessGRPC(ctx, id, r.GetModelName(), 0, err, start, r)
		return nil, err
	}
	defer t.Release()
	flight := g.s.opt.Metrics.Start(t.Service())
	resp, code, err := g.infer(ctx, t, r)
	flight.Done()
	v := t.ServiceVersion()
	g.s.opt.Metrics.Request(t.Service(), versionLabel(v), code, time.Since(start))
	g.s.accessGRPC(ctx, id, t.Service(), v, err, start, r)
	return resp, err
}

// infer runs r on t. gRPC has unmarshalled the message already; a target
// whose scheduler would refuse it (429, 450) answers before its tensors
// are decoded.
func (g *grpcService) infer(ctx context.Context, t target, r *kservegrpc.ModelInferRequest) (*kservegrpc.ModelInferResponse, int, error) {
	if err := t.Admit(); err != nil {
		return nil, statusOf(err), grpcError(err)
	}
	ins, err := kservegrpc.TensorsFromRequest(r)
	if err != nil {
		return nil, http.StatusBadRequest, status.Error(codes.InvalidArgument, capMsg(err.Error()))
	}
	payload := &processors.TensorPayload{Inputs: ins}
	for _, o := range r.GetOutputs() {
		payload.Outputs = append(payload.Outputs, o.GetName())
	}
	tr, err := t.Infer(ctx, payload)
	if err != nil {
		return nil, statusOf(err), grpcError(err)
	}
	return kservegrpc.ResponseFromTensors(t.Name(), t.Version(), r.GetId(), tr.Outputs), http.StatusOK, nil
}
