package triton

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
)

// Proxy tuning. metadataTTL is how long an upstream model's metadata is
// trusted before it is asked again; probeTimeout bounds health and
// metadata calls, which must never hold a request for long.
const (
	metadataTTL      = 30 * time.Second
	probeTimeout     = 3 * time.Second
	maxUpstreamBody  = 256 << 20
	idleConnsPerHost = 64
)

// proxy forwards to one KServe v2 server over HTTP or gRPC.
type proxy struct {
	display string // the URL without credentials, for messages
	service string
	log     *slog.Logger

	base   string // http(s)://host:port, no trailing slash
	client *http.Client
	token  string // --upstream-token; "" = none

	conn *grpc.ClientConn
	grpc kservegrpc.GRPCInferenceServiceClient

	mu    sync.Mutex
	cache map[string]cached // by name + "\x00" + version
}

type cached struct {
	md      kserve.ModelMetadata
	fetched time.Time
}

func newProxy(raw, token, service string, log *slog.Logger) (*proxy, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	u.User = nil
	p := &proxy{display: u.String(), service: service, log: log, cache: map[string]cached{}, token: token}
	if u.Scheme == "grpc" {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxUpstreamBody), grpc.MaxCallSendMsgSize(maxUpstreamBody))}
		if token != "" {
			opts = append(opts, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, co ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", token), method, req, reply, cc, co...)
			}))
		}
		p.conn, err = grpc.NewClient(u.Host, opts...)
		if err != nil {
			return nil, fmt.Errorf("--url %s: %w", p.display, err)
		}
		p.grpc = kservegrpc.NewGRPCInferenceServiceClient(p.conn)
		return p, nil
	}
	p.base = strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * idleConnsPerHost
	tr.MaxIdleConnsPerHost = idleConnsPerHost
	tr.IdleConnTimeout = 90 * time.Second
	tr.DialContext = (&net.Dialer{Timeout: probeTimeout, KeepAlive: 30 * time.Second}).DialContext
	// No overall client timeout: every call carries the request's deadline.
	p.client = &http.Client{Transport: tr}
	return p, nil
}

// check is run at Load: an upstream that is not up yet is logged, not
// fatal, since a proxy commonly starts before its upstream; readiness
// (Healthy) says so until it answers.
func (p *proxy) check(ctx context.Context) error {
	if err := p.ready(ctx); err != nil {
		p.log.Warn("triton upstream not ready yet; the service reports not ready until it is", "upstream", p.display, "err", err)
	}
	return nil
}

// ready asks the upstream's server readiness.
func (p *proxy) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if p.grpc != nil {
		r, err := p.grpc.ServerReady(ctx, &kservegrpc.ServerReadyRequest{})
		if err != nil {
			return p.grpcError(ctx, err)
		}
		if !r.GetReady() {
			return fmt.Errorf("upstream %s is not ready", p.display)
		}
		return nil
	}
	_, err := p.get(ctx, "/v2/health/ready")
	return err
}

func (p *proxy) close() {
	if p.conn != nil {
		p.conn.Close()
	}
	if p.client != nil {
		p.client.CloseIdleConnections()
	}
}

// model returns a handle for an upstream model whose metadata the upstream
// serves; ok is false when it does not know the model.
func (p *proxy) model(name, version string) (processors.RoutedModel, bool) {
	if !validModelName(name) || (version != "" && !validModelName(version)) {
		return nil, false
	}
	key := name + "\x00" + version
	p.mu.Lock()
	c, ok := p.cache[key]
	p.mu.Unlock()
	if ok && time.Since(c.fetched) < metadataTTL {
		return &upstreamModel{p: p, name: name, version: version, md: c.md}, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	md, err := p.metadata(ctx, name, version)
	if err != nil {
		var se *processors.StatusError
		if errors.As(err, &se) && se.Code >= 400 && se.Code < 500 {
			return nil, false // the upstream does not serve it
		}
		// The upstream is down or failing: hand out the model anyway, so
		// that its requests answer 502/503/408 rather than a misleading 404.
		p.log.Debug("upstream model metadata", "model", name, "err", err)
		return &upstreamModel{p: p, name: name, version: version, md: kserve.ModelMetadata{Name: name}}, true
	}
	p.mu.Lock()
	p.cache[key] = cached{md: md, fetched: time.Now()}
	p.mu.Unlock()
	return &upstreamModel{p: p, name: name, version: version, md: md}, true
}

func modelPath(name, version string) string {
	path := "/v2/models/" + url.PathEscape(name)
	if version != "" {
		path += "/versions/" + url.PathEscape(version)
	}
	return path
}

func (p *proxy) metadata(ctx context.Context, name, version string) (kserve.ModelMetadata, error) {
	var md kserve.ModelMetadata
	if p.grpc != nil {
		r, err := p.grpc.ModelMetadata(ctx, &kservegrpc.ModelMetadataRequest{Name: name, Version: version})
		if err != nil {
			return md, p.grpcError(ctx, err)
		}
		md = kserve.ModelMetadata{Name: r.GetName(), Versions: r.GetVersions(), Platform: r.GetPlatform()}
		for _, t := range r.GetInputs() {
			md.Inputs = append(md.Inputs, kserve.TensorMetadata{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
		}
		for _, t := range r.GetOutputs() {
			md.Outputs = append(md.Outputs, kserve.TensorMetadata{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
		}
		return md, nil
	}
	body, err := p.get(ctx, modelPath(name, version))
	if err != nil {
		return md, err
	}
	if err := json.Unmarshal(body, &md); err != nil {
		return md, fmt.Errorf("upstream %s: model metadata is not KServe v2 JSON: %w", p.display, err)
	}
	return md, nil
}

func (p *proxy) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return nil, err
	}
	p.authorize(req)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, p.transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		return nil, p.transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, p.statusError(resp.StatusCode, body)
	}
	return body, nil
}

// post sends body to path and returns the upstream's answer on 200.
func (p *proxy) post(ctx context.Context, path, query string, body []byte, hdr http.Header) (*http.Response, []byte, error) {
	u := p.base + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for _, k := range []string{"Content-Type", kserve.HeaderContentLength, "Accept"} {
		if v := hdr.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	p.authorize(req)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, nil, p.transportError(ctx, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		return nil, nil, p.transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, p.statusError(resp.StatusCode, out)
	}
	return resp, out, nil
}

// authorize adds --upstream-token. The caller's own Authorization is never
// forwarded: it is this service's token, not the upstream's.
func (p *proxy) authorize(req *http.Request) {
	if p.token != "" {
		req.Header.Set("Authorization", p.token)
	}
}

// transportError maps a failed exchange: the request's own deadline or
// cancellation first (408, 499), else an unreachable upstream (502).
func (p *proxy) transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("upstream %s did not answer in time: %w", p.display, scheduler.ErrDeadline)
	case errors.Is(ctx.Err(), context.Canceled):
		return scheduler.ErrCanceled
	}
	return &processors.StatusError{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream %s is unreachable: %v", p.display, unwrapURLError(err))}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError maps an upstream's non-200 answer: 4xx pass through with the
// upstream's message, 503 stays 503 (not ready), other 5xx become 502.
func (p *proxy) statusError(code int, body []byte) error {
	msg := strings.TrimSpace(string(body))
	var e kserve.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if len(msg) > 2048 {
		msg = msg[:2048] + "..."
	}
	switch {
	case code >= 400 && code < 500:
		return &processors.StatusError{Code: code, Err: errors.New(msg)}
	case code == http.StatusServiceUnavailable:
		return &processors.StatusError{Code: code, Err: fmt.Errorf("upstream %s is not ready: %s", p.display, msg)}
	}
	return &processors.StatusError{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream %s answered %d: %s", p.display, code, msg)}
}

// grpcError maps a gRPC status the same way as statusError.
func (p *proxy) grpcError(ctx context.Context, err error) error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Errorf("upstream %s did not answer in time: %w", p.display, scheduler.ErrDeadline)
	case codes.Canceled:
		if ctx.Err() != nil {
			return scheduler.ErrCanceled
		}
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition:
		return &processors.StatusError{Code: http.StatusBadRequest, Err: errors.New(st.Message())}
	case codes.NotFound:
		return &processors.StatusError{Code: http.StatusNotFound, Err: errors.New(st.Message())}
	case codes.Unauthenticated:
		return &processors.StatusError{Code: http.StatusUnauthorized, Err: errors.New(st.Message())}
	case codes.PermissionDenied:
		return &processors.StatusError{Code: http.StatusForbidden, Err: errors.New(st.Message())}
	case codes.ResourceExhausted:
		return &processors.StatusError{Code: http.StatusTooManyRequests, Err: errors.New(st.Message())}
	case codes.Unimplemented:
		return &processors.StatusError{Code: http.StatusNotImplemented, Err: errors.New(st.Message())}
	case codes.Unavailable:
		return &processors.StatusError{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream %s is unreachable: %s", p.display, st.Message())}
	}
	return &processors.StatusError{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream %s: %s: %s", p.display, st.Code(), st.Message())}
}

// passthrough forwards a request under /api/predict/<service> that names
// no model as it came: the EAS string form, the repository API.
func (p *proxy) passthrough(ctx context.Context, req *processors.Request) (*reply, error) {
	if p.grpc != nil {
		return nil, &processors.StatusError{Code: http.StatusNotImplemented, Err: fmt.Errorf("the gRPC upstream %s only serves inference; call /api/predict/%s/<model> or use an http:// upstream for %s", p.display, p.service, req.Path)}
	}
	path := req.Path
	if path == "" {
		path = "/"
	}
	resp, body, err := p.post(ctx, path, req.Query, req.Body, req.Header)
	if err != nil {
		return nil, err
	}
	return &reply{body: body, contentType: resp.Header.Get("Content-Type")}, nil
}

// upstreamModel is one model of the upstream, as a processors.RoutedModel.
type upstreamModel struct {
	p       *proxy
	name    string
	version string
	md      kserve.ModelMetadata
}

func (m *upstreamModel) Name() string       { return m.name }
func (m *upstreamModel) Version() string    { return m.version }
func (m *upstreamModel) Versions() []string { return m.md.Versions }
func (m *upstreamModel) Platform() string   { return m.md.Platform }

func (m *upstreamModel) Metadata() processors.Metadata {
	spec := func(ts []kserve.TensorMetadata) []processors.IOSpec {
		out := make([]processors.IOSpec, len(ts))
		for i, t := range ts {
			out[i] = processors.IOSpec{Name: t.Name, DType: t.Datatype, Shape: t.Shape}
		}
		return out
	}
	return processors.Metadata{Processor: Code, Inputs: spec(m.md.Inputs), Outputs: spec(m.md.Outputs),
		Extra: map[string]any{"upstream": m.p.display, "platform": m.md.Platform}}
}

// Healthy asks the upstream whether this model is ready.
func (m *upstreamModel) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if m.p.grpc != nil {
		r, err := m.p.grpc.ModelReady(ctx, &kservegrpc.ModelReadyRequest{Name: m.name, Version: m.version})
		if err != nil {
			return m.p.grpcError(ctx, err)
		}
		if !r.GetReady() {
			return &processors.StatusError{Code: http.StatusServiceUnavailable, Err: fmt.Errorf("model %s is not ready upstream", m.name)}
		}
		return nil
	}
	_, err := m.p.get(ctx, modelPath(m.name, m.version)+"/ready")
	return err
}

// Do forwards one inference: binary tensors over HTTP, raw contents over
// gRPC, so no value is reformatted on the way.
func (m *upstreamModel) Do(ctx context.Context, tp *processors.TensorPayload) (*processors.TensorResult, error) {
	if m.p.grpc != nil {
		resp, err := m.p.grpc.ModelInfer(ctx, kservegrpc.RequestFromTensors(m.name, m.version, "", tp.Inputs, tp.Outputs))
		if err != nil {
			return nil, m.p.grpcError(ctx, err)
		}
		outs, err := kservegrpc.TensorsFromResponse(resp)
		if err != nil {
			return nil, &processors.StatusError{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream %s: %w", m.p.display, err)}
		}
		return &processors.TensorResult{Outputs: outs}, nil
	}
	ir := &kserve.InferRequest{Inputs: tp.Inputs, BinaryDataOutput: true}
	for _, name := range tp.Outputs {
		ir.Outputs = append(ir.Outputs, kserve.RequestedOutput{Name: name})
	}
	body, hlen, err := kserve.EncodeRequest(ir, true)
	if err != nil {
		return nil, badinput.Errorf("%v", err)
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/octet-stream")
	if hlen > 0 {
		hdr.Set(kserve.HeaderContentLength, strconv.Itoa(hlen))
	}
	resp, out, err := m.p.post(ctx, modelPath(m.name, m.version)+"/infer", "", body, hdr)
	if err != nil {
		return nil, err
	}
	r, err := kserve.DecodeResponse(out, resp.Header.Get(kserve.HeaderContentLength))
	if err != nil {
		return nil, &processors.StatusError{Code: http.StatusBadGateway, Err: fmt.Errorf("upstream %s: %w", m.p.display, err)}
	}
	return &processors.TensorResult{Outputs: r.Outputs}, nil
}

var (
	_ processors.RoutedModel = (*upstreamModel)(nil)
	_ processors.Healther    = (*upstreamModel)(nil)
)
