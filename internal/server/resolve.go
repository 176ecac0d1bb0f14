package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/kserve"
)

// This file is the one front door behind the four wire doors (EAS HTTP,
// KServe v2 HTTP, KServe v2 gRPC, GraphPipe): each door turns its request into a name
// and an auth.Request, calls admit or resolveModel, and maps the error it
// gets with statusOf (and grpcCode). Lookup, token check and "not serving"
// are written only here.

// frontError is a request that fails before it reaches a model: unknown
// name, wrong token, nothing serving, a model of the wrong kind. statusOf
// maps it to its code like any other error.
type frontError struct {
	code int
	msg  string
	// known is set when the name is a service: its refusals are counted in
	// the metrics under that name, an unknown name's are not (bounded
	// labels).
	known bool
}

func (e *frontError) Error() string { return e.msg }

func refuse(code int, msg string) error { return &frontError{code: code, msg: msg} }

// knownService marks err, a refusal of a request for an existing service,
// as such (see frontError.known).
func knownService(err error) error {
	if fe, ok := err.(*frontError); ok {
		fe.known = true
	}
	return err
}

// isKnown reports whether err refused a request for an existing service.
func isKnown(err error) bool {
	fe, ok := err.(*frontError)
	return ok && fe.known
}

// admit finds the service called name, checks the request's token and holds
// its serving version; the caller releases it and runs the BodyCheck on the
// body it reads. It is the one lookup of an EAS request: svc is the service
// (nil when name is none), for the queue API and the metrics. The token of
// a serving version is the one it was loaded with; when nothing serves,
// the service's published token is checked first, so that only a caller
// with the token learns why the service does not serve. A name that is no service answers 404 only to a caller whose
// token opens some service; to anyone else it answers the same 401 as a
// wrong token (docs/protocol.md "Token handling"). Nothing here takes a
// lock that a lifecycle operation holds.
func (s *Server) admit(name string, ar auth.Request) (*service.Service, *service.Live, auth.BodyCheck, error) {
	ar.Service = name
	svc, ok := s.opt.Manager.Get(name)
	if !ok {
		return nil, nil, auth.BodyCheck{}, s.unknown(ar, "service \""+name+"\" not found")
	}
	live, check, err := s.admitService(svc, ar)
	return svc, live, check, err
}

// admitService is admit for a service already found; its errors are
// marked known.
func (s *Server) admitService(svc *service.Service, ar auth.Request) (*service.Live, auth.BodyCheck, error) {
	name := svc.Name
	ar.Service = name
	live, serving := svc.Acquire()
	token := ""
	if serving {
		token = string(live.Token)
	} else {
		token = svc.Token()
	}
	check, err := s.opt.Auth.Verify(token, ar)
	if err != nil {
		if serving {
			live.Release()
		}
		return nil, auth.BodyCheck{}, knownService(unauthorized(name, err))
	}
	if !serving {
		st, msg, _ := svc.State()
		return nil, auth.BodyCheck{}, knownService(refuse(http.StatusServiceUnavailable, notServing(name, st, msg)))
	}
	return live, check, nil
}

// unauthorized is the 401 of a request for name: the reason auth gave and
// the name, nothing that tells whether name exists.
func unauthorized(name string, err error) error {
	return refuse(http.StatusUnauthorized, err.Error()+" (for \""+name+"\": a missing or wrong token, or no such service)")
}

// decoyToken stands in for the token of a name that is no service, so that
// such a request gets the reason a wrong token would get, at its cost.
var decoyToken = func() string {
	t, err := auth.GenerateToken()
	if err != nil {
		return "decoy-token-for-unknown-names"
	}
	return t
}()

// unknown answers a request for a name that is no service: notFound (404)
// when its token opens some service, else the 401 of a wrong token.
func (s *Server) unknown(ar auth.Request, notFound string) error {
	if s.opensAny(ar) {
		return refuse(http.StatusNotFound, notFound)
	}
	_, err := s.opt.Auth.Verify(decoyToken, ar)
	if err == nil { // cannot happen: nobody holds the decoy
		err = auth.ErrUnauthorized
	}
	return unauthorized(ar.Service, err)
}

// opensAny reports whether ar's Authorization opens any service: it is
// the published or serving token of one of them. It costs one comparison
// per service for a raw token, one signature check per service for a
// signed one (after the Date check, which fails alike for all).
func (s *Server) opensAny(ar auth.Request) bool {
	for _, svc := range s.opt.Manager.List() {
		if _, err := s.opt.Auth.Verify(svc.Token(), ar); err == nil {
			return true
		}
		if live, ok := svc.Acquire(); ok {
			_, err := s.opt.Auth.Verify(string(live.Token), ar)
			live.Release()
			if err == nil {
				return true
			}
		}
	}
	return false
}

// resolveModel resolves a model name of the tensor doors (KServe v2 over
// HTTP or gRPC, GraphPipe): a service of that name whose processor serves tensors, or
// else a model of a service whose processor routes models (a Triton
// repository), authorised with that service's token.
func (s *Server) resolveModel(name, version string, ar auth.Request) (target, error) {
	svc, ok := s.opt.Manager.Get(name)
	if !ok {
		ar.Service = name
		live, svcName, rm := s.lookupRouted(name, version)
		if live == nil {
			return nil, s.unknown(ar, "model \""+name+"\" not found")
		}
		check, err := s.opt.Auth.Verify(string(live.Token), ar)
		if err != nil {
			live.Release()
			return nil, unauthorized(name+"\" of service \""+svcName, err)
		}
		return &routedTarget{held{live, check}, rm}, nil
	}
	live, check, err := s.admitService(svc, ar)
	if err != nil {
		return nil, err
	}
	if !live.Engine.ServesTensors() {
		live.Release()
		return nil, knownService(refuse(http.StatusBadRequest, "model \""+name+"\" is served by processor "+live.Spec.ProcessorName()+", which is not a tensor model; call POST /api/predict/"+name+" instead"))
	}
	// A service serves one version at a time: a path naming another one
	// (an older version, one that never existed, not a number) is not
	// answered by the serving one.
	if version != "" && version != strconv.Itoa(live.Version) {
		live.Release()
		return nil, knownService(refuse(http.StatusNotFound, "request for unknown model: '"+name+"' version "+version+" is not found; version "+strconv.Itoa(live.Version)+" serves (call /v2/models/"+name+"/infer, or name version "+strconv.Itoa(live.Version)+")"))
	}
	return &serviceTarget{held{live, check}}, nil
}

// routedIn returns the model of live's processor that the extra path of
// /api/predict/<service> names, when the processor routes models.
// op is the operation the path names and version the version it names
// ("" for the model's default) (see routedPath).
func routedIn(live *service.Live, check auth.BodyCheck, extra string) (t target, op, version string, ok bool) {
	mr, ok := live.Engine.Processor().(processors.ModelRouter)
	if !ok {
		return nil, "", "", false
	}
	model, version, op, ok := routedPath(extra)
	if !ok {
		return nil, "", "", false
	}
	rm, ok := mr.Model(model, version)
	if !ok {
		return nil, "", "", false
	}
	return &routedTarget{held{live, check}, rm}, op, version, true
}

// lookupRouted finds name among the models of the serving services whose
// processor routes models, in service name order, and holds that service's
// serving version; nil when none has it.
func (s *Server) lookupRouted(name, version string) (*service.Live, string, processors.RoutedModel) {
	for _, svc := range s.opt.Manager.List() {
		live, serving := svc.Acquire()
		if !serving {
			continue
		}
		if mr, ok := live.Engine.Processor().(processors.ModelRouter); ok {
			if rm, ok := mr.Model(name, version); ok {
				return live, svc.Name, rm
			}
		}
		live.Release()
	}
	return nil, "", nil
}

// target is what a tensor request runs on: the serving version of a
// service, or one model of a routing processor. It holds the service's
// serving version until Release, so an update never swaps it mid-request.
type target interface {
	// Service is the name of the service that owns the target, for
	// metrics and logs; ServiceVersion is its version that serves.
	Service() string
	ServiceVersion() int
	// Decompressor is the owning service's metadata.rpc.decompressor.
	Decompressor() string
	// Keepalive is the owning service's metadata.rpc.keepalive.
	Keepalive() time.Duration
	// BodyCheck is what the request's signature asks of its body.
	BodyCheck() auth.BodyCheck
	Name() string
	Version() string
	Metadata() kserve.ModelMetadata
	// Healthy is nil unless the model can tell it is not (a proxy whose
	// upstream went away).
	Healthy(ctx context.Context) error
	// Admit is the scheduler's refusal of a request arriving now (429,
	// 450), asked before the body is read and decoded; nil when the
	// target's scheduler would take it or cannot tell. Infer decides again.
	Admit() error
	// Infer runs one payload, queued and batched as the target's own
	// scheduler decides, under the service's rpc.keepalive.
	Infer(ctx context.Context, p *processors.TensorPayload) (*processors.TensorResult, error)
	Release()
}

// held is the serving version a target holds, with the body check of the
// request that resolved it; both kinds of target share its methods.
type held struct {
	live  *service.Live
	check auth.BodyCheck
}

func (h held) Service() string      { return h.live.Spec.Name }
func (h held) ServiceVersion() int  { return h.live.Version }
func (h held) Decompressor() string { return h.live.Spec.Metadata.RPC.Decompressor }
func (h held) Release()             { h.live.Release() }

func (h held) Keepalive() time.Duration  { return h.live.Spec.Metadata.RPC.Keepalive }
func (h held) BodyCheck() auth.BodyCheck { return h.check }

// serviceTarget is a service whose processor serves tensors.
type serviceTarget struct{ held }

func (t *serviceTarget) Name() string    { return t.live.Spec.Name }
func (t *serviceTarget) Version() string { return strconv.Itoa(t.live.Version) }

func (t *serviceTarget) Metadata() kserve.ModelMetadata {
	e := t.live.Engine
	return modelMetadata(t.Name(), e.Platform(), []string{t.Version()}, e.Processor().Metadata())
}

func (t *serviceTarget) Healthy(ctx context.Context) error {
	return healthOf(ctx, t.live.Engine.Processor())
}

func (t *serviceTarget) Admit() error { return t.live.Scheduler.Admit() }

func (t *serviceTarget) Infer(ctx context.Context, p *processors.TensorPayload) (*processors.TensorResult, error) {
	e := t.live.Engine
	payload, err := e.FromTensors(ctx, p)
	if err != nil {
		return nil, err
	}
	out, err := t.live.Scheduler.Do(ctx, payload)
	if err != nil {
		return nil, err
	}
	return e.ToTensors(ctx, payload, out)
}

// routedTarget is one model of a service whose processor routes models; it
// runs on the model's own scheduler.
type routedTarget struct {
	held
	rm processors.RoutedModel
}

func (t *routedTarget) Name() string    { return t.rm.Name() }
func (t *routedTarget) Version() string { return t.rm.Version() }

func (t *routedTarget) Metadata() kserve.ModelMetadata {
	return modelMetadata(t.rm.Name(), t.rm.Platform(), t.rm.Versions(), t.rm.Metadata())
}

func (t *routedTarget) Healthy(ctx context.Context) error { return healthOf(ctx, t.rm) }

func (t *routedTarget) Admit() error {
	if a, ok := t.rm.(processors.Admitter); ok {
		return a.Admit()
	}
	return nil
}

func (t *routedTarget) Infer(ctx context.Context, p *processors.TensorPayload) (*processors.TensorResult, error) {
	ctx, cancel := context.WithTimeout(ctx, t.live.Spec.Metadata.RPC.Keepalive)
	defer cancel()
	return t.rm.Do(ctx, p)
}

// stats returns the KServe statistics of a target that keeps them: of its
// version, or with allVersions of every version of its model that the
// owning processor lists.
func stats(t target, allVersions bool) ([]any, bool) {
	rt, ok := t.(*routedTarget)
	if !ok {
		return nil, false
	}
	sr, ok := rt.rm.(processors.StatsReporter)
	if !ok {
		return nil, false
	}
	if allVersions {
		if all := listedStats(rt.live.Engine.Processor(), rt.rm.Name()); len(all) > 0 {
			return all, true
		}
	}
	return []any{sr.Stats()}, true
}

// listedStats returns the statistics of every model version that proc
// lists (those of the model called name, when name is not ""); nothing when
// proc cannot list its models.
func listedStats(proc processors.Processor, name string) []any {
	out := []any{}
	ml, ok := proc.(processors.ModelLister)
	if !ok {
		return out
	}
	models, _ := ml.Models()
	for _, m := range models {
		if sr, ok := m.(processors.StatsReporter); ok && (name == "" || m.Name() == name) {
			out = append(out, sr.Stats())
		}
	}
	return out
}

// modelConfig returns the Triton model configuration of a target that has
// one.
func modelConfig(t target) (any, bool) {
	if rt, ok := t.(*routedTarget); ok {
		if cr, ok := rt.rm.(processors.ConfigReporter); ok {
			return cr.Config(), true
		}
	}
	return nil, false
}

// healthOf asks x whether it is healthy, when it can tell.
func healthOf(ctx context.Context, x any) error {
	if h, ok := x.(processors.Healther); ok {
		return h.Healthy(ctx)
	}
	return nil
}

// modelMetadata describes a model in KServe's terms. Shapes are never null
// in the output: a scalar is [].
func modelMetadata(name, platform string, versions []string, md processors.Metadata) kserve.ModelMetadata {
	conv := func(specs []processors.IOSpec) []kserve.TensorMetadata {
		out := make([]kserve.TensorMetadata, len(specs))
		for i, s := range specs {
			shape := s.Shape
			if shape == nil {
				shape = []int64{}
			}
			out[i] = kserve.TensorMetadata{Name: s.Name, Datatype: s.DType, Shape: shape}
		}
		return out
	}
	return kserve.ModelMetadata{Name: name, Versions: versions, Platform: platform, Inputs: conv(md.Inputs), Outputs: conv(md.Outputs)}
}
