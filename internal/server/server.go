// Package server is the HTTP front of eas-server: the gin router with the
// data plane (/api/predict, KServe v2), the control plane (/api/v2/services,
// behind the admin token), health, readiness and metrics. Handlers are thin:
// they bind the request, call the service's scheduler, and map every error to
// a status code in one helper (statusOf).
package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/decompress"
	"github.com/eas-server/eas-server/internal/history"
	"github.com/eas-server/eas-server/internal/httpstatus"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/queue"
)

// DefaultMaxBodyBytes is the default request body limit (64 MiB).
const DefaultMaxBodyBytes = 64 << 20

// DefaultBodyReadTimeout is the default bound on reading one request body:
// a 64 MiB body needs about 1.1 MiB/s to arrive in time.
const DefaultBodyReadTimeout = 60 * time.Second

// maxErrorBytes bounds the message of an error answer, so that a request
// with a huge name or shape is not echoed back whole.
const maxErrorBytes = 4 << 10

// Options configures the router.
type Options struct {
	Manager *service.Manager
	// Control, when set, is what the control plane drives instead of
	// Manager (eas-server controller: Kubernetes); see ControlHandler.
	Control      controlapi.ControlPlane
	Logger       *slog.Logger
	Metrics      *metrics.Metrics
	Gatherer     prometheus.Gatherer // serves /metrics; nil = no /metrics route
	MaxBodyBytes int64               // request body limit; 0 = DefaultMaxBodyBytes
	// QueueReadBytes caps one read of an asynchronous service's queue (the
	// entries' bytes as stored; at least one entry is answered); 0 =
	// queue.DefaultMaxReadBytes.
	QueueReadBytes int64
	// AdminToken guards the control plane (/api/v2/services); "" disables
	// it (every control request gets 401).
	AdminToken string
	// NoConsole leaves out the web console (/console/, and / sending
	// there); serve --console=false sets it.
	NoConsole bool
	Region    string // region shown in service objects; "" = "local"
	// Auth tunes the check of EAS-signed requests (Date window, client
	// zones); the zero value is auth's default.
	Auth auth.Options
	// BodyReadTimeout bounds the reading of a request body, from the
	// handler's start; a data-plane request gets at least its service's
	// rpc.keepalive. 0 = DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MetricsRequireAdmin puts /metrics behind the admin token: its labels
	// name every service.
	MetricsRequireAdmin bool
	// StrictReadiness makes a Failed service fail /readyz too; by default
	// only services still loading do (see service.Manager.Readiness).
	StrictReadiness bool
	// AccessLog, when set, gets one line per data-plane request (serve
	// --access-log): method, path, service, version, status, latency,
	// request id, remote address and body sizes; never tokens or bodies.
	AccessLog *slog.Logger
	// History, when set, answers GET /api/v2/metrics (the console's
	// charts); nil = that route answers 404.
	History *history.Sampler
}

// Server holds the router's state. It is safe for concurrent use.
type Server struct {
	opt      Options
	log      *slog.Logger
	draining atomic.Bool
	starting atomic.Bool // SetStarting until SetStarted: services still being registered
}

// New builds a Server.
func New(opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opt.Region == "" {
		opt.Region = "local"
	}
	if opt.BodyReadTimeout <= 0 {
		opt.BodyReadTimeout = DefaultBodyReadTimeout
	}
	opt.Metrics.BuildInfo(Version)
	return &Server{opt: opt, log: opt.Logger}
}

// SetDraining starts a drain: /readyz and the KServe readiness answer 503
// so load balancers take the process out of rotation, while requests are
// still served, each answer with Connection: close so that clients
// reconnect (to another instance) rather than reuse this one.
func (s *Server) SetDraining() { s.draining.Store(true) }

// SetStarting holds readiness back while the server registers the services
// it was started with (serve --deploy): until then an empty or partial
// service list would look ready. SetStarted ends it.
func (s *Server) SetStarting() { s.starting.Store(true) }

// SetStarted ends SetStarting.
func (s *Server) SetStarted() { s.starting.Store(false) }

// closeWhileDraining marks every answer of a draining server Connection:
// close, so keep-alive clients move to another instance instead of sending
// their next request to a listener about to close.
func (s *Server) closeWhileDraining(c *gin.Context) {
	if s.draining.Load() {
		c.Header("Connection", "close")
	}
}

// ready is the process readiness every door reports: not draining, every
// service meant to serve serving (see Options.StrictReadiness).
func (s *Server) ready() (bool, []service.ServiceReadiness) {
	ok, svcs := true, []service.ServiceReadiness(nil)
	if s.opt.Manager != nil {
		ok, svcs = s.opt.Manager.Readiness(s.opt.StrictReadiness)
	}
	return ok && !s.draining.Load() && !s.starting.Load(), svcs
}

// ControlHandler returns a router with only the control plane
// (/api/v2/services on Options.Control), /healthz, /readyz and /metrics:
// what eas-server controller serves, where no model runs.
func (s *Server) ControlHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(s.recoverer(), s.closeWhileDraining)
	r.HandleMethodNotAllowed = true
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	r.GET("/readyz", s.readyz)
	if s.opt.Gatherer != nil {
		r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.opt.Gatherer, promhttp.HandlerOpts{})))
	}
	s.controlRoutes(r)
	s.consoleRoutes(r)
	r.NoRoute(func(c *gin.Context) {
		controlFail(c, http.StatusNotFound, "NotFound", "no route for "+c.Request.Method+" "+c.Request.URL.Path+"; the controller serves /api/v2/services (predict through the gateway)")
	})
	r.NoMethod(func(c *gin.Context) {
		controlFail(c, http.StatusMethodNotAllowed, "MethodNotAllowed", "method "+c.Request.Method+" not allowed on "+c.Request.URL.Path)
	})
	return r
}

// Handler returns the router.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(s.recoverer(), s.closeWhileDraining, s.bodyGuard)
	r.HandleMethodNotAllowed = true

	r.Any("/api/predict/*rest", s.tagRequest, s.predict)
	r.Any("/v1/*rest", s.tagRequest, s.openaiRoot) // generative services (generation.go)
	r.GET("/api/v1/servicediscovery/upstreams/:name", s.upstreams)
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	r.GET("/readyz", s.readyz)
	if s.opt.Gatherer != nil {
		h := gin.WrapH(promhttp.HandlerFor(s.opt.Gatherer, promhttp.HandlerOpts{}))
		if s.opt.MetricsRequireAdmin {
			r.GET("/metrics", s.adminAuth, h)
		} else {
			r.GET("/metrics", h)
		}
	}
	s.kserveRoutes(r)
	s.controlRoutes(r)
	s.consoleRoutes(r)
	r.NoRoute(func(c *gin.Context) {
		if isV2Path(c.Request.URL.Path) {
			kserveNoRoute(c)
			return
		}
		s.fail(c, http.StatusNotFound, "no route for "+c.Request.Method+" "+c.Request.URL.Path)
	})
	r.NoMethod(func(c *gin.Context) {
		if isV2Path(c.Request.URL.Path) {
			kserveFail(c, http.StatusMethodNotAllowed, "method "+c.Request.Method+" not allowed on "+c.Request.URL.Path)
			return
		}
		s.fail(c, http.StatusMethodNotAllowed, "method "+c.Request.Method+" not allowed on "+c.Request.URL.Path)
	})
	return r
}

// guardedBody is a request body under a read deadline. The deadline is
// lifted at EOF: net/http then reads the connection in the background to
// notice a client going away, and a deadline passing there would cancel
// the request's context while the model runs.
type guardedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	eof   bool
	n     int64 // bytes read, for the access log
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err == io.EOF && !b.eof {
		b.eof = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyGuard puts the body of every request that has one under a read
// deadline of BodyReadTimeout from now, so a client that announces a body
// and sends it slowly cannot hold a connection (docs/protocol.md
// "Connections"). The server's own ReadTimeout is left unset: it would
// also cancel requests that compute longer than it.
func (s *Server) bodyGuard(c *gin.Context) {
	if c.Request.ContentLength != 0 && c.Request.Body != nil && c.Request.Body != http.NoBody {
		rc := http.NewResponseController(c.Writer)
		now := time.Now()
		rc.SetReadDeadline(now.Add(s.opt.BodyReadTimeout)) // not supported by test recorders: ignored
		c.Request.Body = &guardedBody{ReadCloser: c.Request.Body, rc: rc, start: now}
	}
	c.Next()
}

// allowBody gives a data-plane body at least the service's keepalive to
// arrive, counted from the request's start: a service that may take
// minutes to answer may take as long to receive.
func (s *Server) allowBody(c *gin.Context, keepalive time.Duration) {
	if gb, ok := c.Request.Body.(*guardedBody); ok && !gb.eof && keepalive > s.opt.BodyReadTimeout {
		gb.rc.SetReadDeadline(gb.start.Add(keepalive))
	}
}

// closeIfUnread is called before an error answer. When the request
// announced a body that was not read to its end, the answer carries
// "Connection: close" and the read deadline is set to now, so the
// connection closes after the answer: net/http would otherwise read up to
// 256 KiB of the body, at the client's pace, before answering and again
// before closing.
func closeIfUnread(c *gin.Context) {
	if c.Request.ContentLength == 0 {
		return
	}
	gb, ok := c.Request.Body.(*guardedBody)
	if ok && gb.eof {
		return
	}
	c.Header("Connection", "close")
	if ok {
		gb.rc.SetReadDeadline(time.Now())
	}
}

// capMsg cuts an error message to maxErrorBytes, on a UTF-8 boundary,
// ending it with "...".
func capMsg(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	cut := maxErrorBytes - 3
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// recoverer turns a panic in a handler into a 500 and a log line with the
// stack, so one bad request never takes the server down.
func (s *Server) recoverer() gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, err any) {
		s.log.Error("handler panic recovered", "path", c.Request.URL.Path, "panic", err)
		c.String(http.StatusInternalServerError, "internal error\n")
		c.Abort()
	})
}

// readyz answers 200 "ready" or 503 "not ready", then one line per
// service: name, state, whether it serves, and why it holds readiness back.
// Under MetricsRequireAdmin a caller without the admin token gets names and
// states only: the reasons may hold failure messages, tracebacks and worker
// output, which are the operator's.
func (s *Server) readyz(c *gin.Context) {
	ok, svcs := s.ready()
	detail := !s.opt.MetricsRequireAdmin || s.isAdmin(c)
	var b strings.Builder
	code := http.StatusOK
	switch {
	case s.draining.Load():
		code = http.StatusServiceUnavailable
		b.WriteString("not ready: shutting down\n")
	case s.starting.Load():
		code = http.StatusServiceUnavailable
		b.WriteString("not ready: deploying the services given at start\n")
	case !ok:
		code = http.StatusServiceUnavailable
		b.WriteString("not ready\n")
	default:
		b.WriteString("ready\n")
	}
	for _, r := range svcs {
		fmt.Fprintf(&b, "%s: %s", r.Name, r.Status)
		if r.Serving {
			b.WriteString(", serving")
			if svc, ok := s.opt.Manager.Get(r.Name); ok {
				if err := serviceHealth(c.Request.Context(), svc); err != nil {
					b.WriteString(", degraded")
					if detail {
						fmt.Fprintf(&b, " (%s)", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
					}
				}
			}
		} else {
			b.WriteString(", not serving")
		}
		if r.Blocks {
			b.WriteString(", holds readiness")
		}
		if r.Message != "" && detail {
			fmt.Fprintf(&b, ": %s", r.Message)
		}
		b.WriteByte('\n')
	}
	c.Header("Cache-Control", "no-store")
	c.String(code, "%s", b.String())
}

// splitPredictPath splits "/<name>[/<extra>]" into the name and the extra
// path ("" or starting with "/"). A trailing "/" on the name is ignored.
func splitPredictPath(rest string) (name, extra string) {
	rest = strings.TrimPrefix(rest, "/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		name, extra = rest[:i], rest[i:]
		if extra == "/" {
			extra = ""
		}
		return name, extra
	}
	return rest, ""
}

// predict serves POST (and GET for metadata) /api/predict/<name>[/<path>].
func (s *Server) predict(c *gin.Context) {
	start := time.Now()
	name, extra := splitPredictPath(c.Param("rest"))
	if s.graphpipe(c, name, extra) { // a model's GraphPipe door (graphpipe.go)
		return
	}
	var a answered
	code := s.servePredict(c, name, extra, &a)
	if a.known { // an unknown name is no metrics label
		s.opt.Metrics.Request(name, versionLabel(a.version), code, time.Since(start))
	}
	s.note(c, name, a.version, code)
}

// answered is what servePredict tells predict about the request it
// answered, for the metrics and the access log.
type answered struct {
	known   bool // the name is a service
	version int  // the service version that answered; 0 = none
}

// servePredict answers one data-plane request and returns the status sent.
// The service is resolved once (admit) and routed once: an asynchronous
// version to the queue API, a synchronous one to its scheduler, which is
// asked whether it would refuse (429, 450) before the body is read.
func (s *Server) servePredict(c *gin.Context, name, extra string, a *answered) int {
	req := c.Request
	if name == "" {
		if req.Method != http.MethodPost && req.Method != http.MethodGet {
			return s.methodNotAllowed(c)
		}
		return s.fail(c, http.StatusNotFound, "no service name in the path; use /api/predict/<service>")
	}
	if isV2Path(extra) {
		// A Triton client pointed at the service's EAS endpoint: its
		// errors, the token's included, in KServe's JSON.
		c.Set(kserveErrorsKey, true)
	}
	// The request runs entirely on the version serving now; an update
	// swaps versions only between requests.
	svc, live, check, err := s.admit(name, auth.Request{Method: req.Method, ExtraPath: extra, RawQuery: req.URL.RawQuery, Header: req.Header, Path: req.URL.Path})
	a.known = svc != nil
	if err != nil {
		return s.failErr(c, err)
	}
	defer live.Release()
	a.version = live.Version
	if svc.Queues() != nil && live.Spec.IsAsync() {
		c.Set(kserveErrorsKey, false)
		return s.serveQueue(c, svc, live, check, extra)
	}
	if req.Method != http.MethodPost && req.Method != http.MethodGet {
		return s.methodNotAllowed(c)
	}
	flight := s.opt.Metrics.Start(name)
	defer flight.Done()
	s.allowBody(c, live.Spec.Metadata.RPC.Keepalive)
	if live.Sequences != nil && (extra != "" || req.Method == http.MethodPost) {
		return s.serveGeneration(c, name, live, check, extra) // generation.go
	}
	// A processor serving several models (a Triton repository) gets
	// /api/predict/<service>/<model> straight to that model's own queue.
	if t, op, v, ok := routedIn(live, check, extra); ok {
		return s.serveRouted(c, t, op, v)
	}
	if _, ok := live.Engine.Processor().(processors.ModelRouter); ok && isV2Path(extra) {
		// A Triton client pointed at the service: the service answers as
		// a Triton server would.
		if code, done := s.serveRepositoryV2(c, live, check, extra); done {
			return code
		}
	}
	if req.Method == http.MethodGet && (req.ContentLength <= 0) {
		if err := check.Body(nil); err != nil {
			return s.fail(c, http.StatusUnauthorized, err.Error())
		}
		if d, ok := live.Engine.Processor().(processors.MetadataJSONer); ok {
			c.JSON(http.StatusOK, d.MetadataJSON()) // the family's own GET body (TF signatures)
		} else {
			c.JSON(http.StatusOK, live.Engine.Processor().Metadata())
		}
		return http.StatusOK
	}
	// Refuse an overloaded service before reading and decoding the body:
	// decoding (an image resized, a pre_process hook) is most of a cheap
	// request's cost. Do decides again after Decode.
	if err := live.Scheduler.Admit(); err != nil {
		return s.failErr(c, err)
	}

	body, status, err := s.readBody(c, live.Spec.Metadata.RPC.Decompressor, check)
	if err != nil {
		return s.fail(c, status, err.Error())
	}
	ctx := req.Context()
	payload, err := live.Engine.Decode(ctx, &processors.Request{Body: body, Path: extra, Query: req.URL.RawQuery, Header: req.Header})
	if err != nil {
		return s.failErr(c, err)
	}
	result, err := live.Scheduler.Do(ctx, payload)
	if err != nil {
		return s.failErr(c, err)
	}
	resp, err := live.Engine.Encode(ctx, payload, result)
	if err != nil {
		return s.failErr(c, err)
	}
	ct := resp.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	for k, v := range resp.Header {
		c.Writer.Header()[k] = v
	}
	if resp.Header.Get(processors.UnknownFieldsHeader) != "" {
		s.opt.Metrics.UnknownFields(name)
	}
	code := http.StatusOK
	if resp.Status != 0 { // a custom processor's own status, body and all
		code = resp.Status
	}
	c.Data(code, ct, resp.Body)
	return code
}

// readBody reads the body under the size limit and the read deadline,
// runs the signature's body check on it as received, and decompresses it
// per metadata.rpc.decompressor (kind; "" = none).
func (s *Server) readBody(c *gin.Context, kind string, check auth.BodyCheck) ([]byte, int, error) {
	limit := s.opt.MaxBodyBytes
	body, err := readAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit), c.Request.ContentLength, limit)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, errors.New("request body larger than the server's limit of " + humanBytes(limit) + "; send a smaller body or raise --max-body-size")
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, http.StatusRequestTimeout, errors.New("the request body did not arrive in time (--body-read-timeout, or the service's rpc.keepalive when longer); send it faster or in smaller requests")
		}
		return nil, http.StatusBadRequest, errors.New("reading the request body: " + err.Error())
	}
	if err := check.Body(body); err != nil {
		return nil, http.StatusUnauthorized, err
	}
	if kind != "" {
		out, err := decompress.Decompress(kind, body, limit)
		if err != nil {
			if errors.Is(err, decompress.ErrTooLarge) {
				return nil, http.StatusRequestEntityTooLarge, err
			}
			return nil, http.StatusBadRequest, err
		}
		body = out
	}
	return body, 0, nil
}

// readAll reads r to the end. With a declared length within the limit it
// reads into one buffer of that size, where io.ReadAll would grow and copy
// its buffer about a dozen times for a large tensor body.
func readAll(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared <= 0 || declared > limit {
		return io.ReadAll(r)
	}
	buf := make([]byte, declared, declared+1) // +1: room to see a longer body
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("body shorter than its Content-Length of %d bytes: %w", declared, err)
		}
		return nil, err
	}
	rest, err := io.ReadAll(r) // a body longer than declared: net/http refuses it, keep the check anyway
	if err != nil {
		return nil, err
	}
	return append(buf, rest...), nil
}

// notServing says why a service has no serving version and what to do.
func notServing(name string, st service.Status, msg string) string {
	out := "service \"" + name + "\" is not ready: " + string(st)
	if msg != "" {
		out += " (" + msg + ")"
	}
	switch st {
	case service.Stopped:
		out += "; start it with: eas-server start " + name
	case service.Creating:
		out += "; retry when it is Running"
	}
	return out
}

// statusOf maps an error from a processor or the scheduler to a status code:
// the front's own refusals, then httpstatus.Of, the one map.
func statusOf(err error) int {
	var fe *frontError
	if errors.As(err, &fe) {
		return fe.code
	}
	return httpstatus.Of(err)
}

func (s *Server) failErr(c *gin.Context, err error) int {
	code := statusOf(err)
	msg := err.Error()
	if code == http.StatusInternalServerError {
		s.log.Error("request failed", "path", c.Request.URL.Path, "err", err)
	}
	if code == http.StatusRequestTimeout {
		// EAS closes the connection of a timed-out request.
		c.Header("Connection", "close")
	}
	return s.fail(c, code, msg)
}

// kserveErrorsKey marks a request (gin context key) whose errors fail
// answers in KServe's {"error": ...}: a Triton client's /v2 path under
// /api/predict/<service>.
const kserveErrorsKey = "eas.kserve_errors"

// fail writes a plain-text error body, as EAS does for every non-200,
// capped at maxErrorBytes. An answer to a request whose body was not read
// closes the connection instead of reading the body first.
func (s *Server) fail(c *gin.Context, code int, msg string) int {
	if c.GetBool(kserveErrorsKey) {
		return kserveFail(c, code, msg)
	}
	if code == 499 {
		c.Abort() // the client is gone; nothing to write
		return code
	}
	closeIfUnread(c)
	c.String(code, "%s\n", capMsg(msg))
	return code
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return itoa(n>>30) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// methodNotAllowed answers 405 for a method a synchronous service's
// /api/predict does not take.
func (s *Server) methodNotAllowed(c *gin.Context) int {
	c.Header("Allow", "GET, POST")
	return s.fail(c, http.StatusMethodNotAllowed, "method "+c.Request.Method+" not allowed; use POST to predict or GET for the model's metadata")
}

// serveQueue answers the queue API of an asynchronous service, admitted
// and held by servePredict: its input queue at /api/predict/<name>, its
// sink at /api/predict/<name>/sink.
func (s *Server) serveQueue(c *gin.Context, svc *service.Service, live *service.Live, check auth.BodyCheck, extra string) int {
	req := c.Request
	name := svc.Name
	// The body is read here, under the size limit, so that a signed
	// request's Content-MD5 is checked before the queue takes it.
	body, status, err := s.readBody(c, "", check)
	if err != nil {
		return s.fail(c, status, err.Error())
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	qs := svc.Queues()
	api := queue.API{Queue: qs.Input, Name: name, MaxBody: s.opt.MaxBodyBytes, MaxReadBytes: s.opt.QueueReadBytes}
	switch extra {
	case "":
	case "/sink":
		api.Queue, api.Name = qs.Sink, name+"/sink"
	default:
		return s.fail(c, http.StatusNotFound, "an asynchronous service has two queues: /api/predict/"+name+" (requests) and /api/predict/"+name+"/sink (answers)")
	}
	return api.Serve(c.Writer, req)
}
