package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eas-server/eas-server/auth"
	"github.com/eas-server/eas-server/internal/service"
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

// resolve finds and authorises a model as kserveService does: a service
// by name, else a model of a routing processor. The caller releases live.
func (g *grpcService) resolve(ctx context.Context, name, version string) (live *service.Live, tm processors.TensorModel, rm processors.RoutedModel, err error) {
	md, _ := metadata.FromIncomingContext(ctx)
	hdr := http.Header{}
	if v := md.Get("authorization"); len(v) > 0 {
		hdr.Set("Authorization", v[0])
	}
	check := func(token string) error {
		if auth.Verify(token, auth.Request{Method: http.MethodPost, Service: name, Header: hdr}) != nil {
			return status.Errorf(codes.Unauthenticated, "missing or wrong token for model %q; send it in the authorization metadata", name)
		}
		return nil
	}
	svc, ok := g.s.opt.Manager.Get(name)
	if !ok {
		live, _, rm := g.s.lookupRouted(name, version)
		if live == nil {
			return nil, nil, nil, status.Errorf(codes.NotFound, "model %q not found", name)
		}
		if err := check(string(live.Token)); err != nil {
			live.Release()
			return nil, nil, nil, err
		}
		return live, nil, rm, nil
	}
	live, serving := svc.Acquire()
	token := svc.Token()
	if serving {
		token = string(live.Token)
	}
	if err := check(token); err != nil {
		if serving {
			live.Release()
		}
		return nil, nil, nil, err
	}
	if !serving {
		st, msg, _ := svc.State()
		return nil, nil, nil, status.Error(codes.Unavailable, notServing(name, st, msg))
	}
	tm, ok = live.Processor.(processors.TensorModel)
	if !ok {
		live.Release()
		return nil, nil, nil, status.Errorf(codes.InvalidArgument, "model %q is served by processor %s, which is not a tensor model", name, live.Spec.Processor)
	}
	return live, tm, nil, nil
}

func (g *grpcService) ServerLive(context.Context, *kservegrpc.ServerLiveRequest) (*kservegrpc.ServerLiveResponse, error) {
	return &kservegrpc.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(ctx context.Context, _ *kservegrpc.ServerReadyRequest) (*kservegrpc.ServerReadyResponse, error) {
	ok, _ := g.s.opt.Manager.Ready()
	return &kservegrpc.ServerReadyResponse{Ready: ok && !g.s.draining.Load() && g.s.processorsHealthy(ctx)}, nil
}

func (g *grpcService) ServerMetadata(context.Context, *kservegrpc.ServerMetadataRequest) (*kservegrpc.ServerMetadataResponse, error) {
	return &kservegrpc.ServerMetadataResponse{Name: "eas-server", Version: Version, Extensions: kserve.Extensions}, nil
}

func (g *grpcService) ModelReady(ctx context.Context, r *kservegrpc.ModelReadyRequest) (*kservegrpc.ModelReadyResponse, error) {
	live, _, rm, err := g.resolve(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		if status.Code(err) == codes.Unavailable {
			return &kservegrpc.ModelReadyResponse{Ready: false}, nil
		}
		return nil, err
	}
	defer live.Release()
	var h processors.Healther
	if rm != nil {
		h, _ = rm.(processors.Healther)
	} else {
		h, _ = live.Processor.(processors.Healther)
	}
	return &kservegrpc.ModelReadyResponse{Ready: h == nil || h.Healthy(ctx) == nil}, nil
}

func (g *grpcService) ModelMetadata(ctx context.Context, r *kservegrpc.ModelMetadataRequest) (*kservegrpc.ModelMetadataResponse, error) {
	live, tm, rm, err := g.resolve(ctx, r.GetName(), r.GetVersion())
	if err != nil {
		return nil, err
	}
	defer live.Release()
	var md kserve.ModelMetadata
	if rm != nil {
		md = kserve.ModelMetadataFrom(rm.Name(), rm.Platform(), rm.Versions(), rm.Metadata())
	} else {
		md = kserve.ModelMetadataFrom(live.Spec.Name, tm.Platform(), []string{strconv.Itoa(live.Version)}, tm.Metadata())
	}
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
	live, _, rm, err := g.resolve(ctx, r.GetModelName(), r.GetModelVersion())
	if err != nil {
		return nil, err
	}
	defer live.Release()
	resp, code, err := g.infer(ctx, live, rm, r)
	g.s.opt.Metrics.Request(live.Spec.Name, code, time.Since(start))
	return resp, err
}

func (g *grpcService) infer(ctx context.Context, live *service.Live, rm processors.RoutedModel, r *kservegrpc.ModelInferRequest) (*kservegrpc.ModelInferResponse, int, error) {
	ins, err := kservegrpc.TensorsFromRequest(r)
	if err != nil {
		return nil, http.StatusBadRequest, status.Error(codes.InvalidArgument, err.Error())
	}
	payload := &processors.TensorPayload{Inputs: ins}
	for _, o := range r.GetOutputs() {
		payload.Outputs = append(payload.Outputs, o.GetName())
	}
	name, version := live.Spec.Name, strconv.Itoa(live.Version)
	var result any
	if rm != nil {
		name, version = rm.Name(), rm.Version()
		rctx, cancel := context.WithTimeout(ctx, live.Spec.Metadata.RPC.Keepalive)
		result, err = rm.Do(rctx, payload)
		cancel()
	} else {
		result, err = live.Scheduler.Do(ctx, payload)
	}
	if err != nil {
		code := statusOf(err)
		return nil, code, status.Error(grpcCode(code), err.Error())
	}
	tr, ok := result.(*processors.TensorResult)
	if !ok || tr == nil {
		return nil, http.StatusInternalServerError, status.Error(codes.Internal, "processor returned no tensors")
	}
	return kservegrpc.ResponseFromTensors(name, version, r.GetId(), tr.Outputs), http.StatusOK, nil
}
