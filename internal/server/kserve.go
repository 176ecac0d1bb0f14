package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/kserve"
)

// Version is the server version reported by GET /v2.
var Version = "0.1.0"

// kserveRoutes adds the KServe v2 / Open Inference Protocol routes. Every
// tensor service answers them, behind the same service token as
// /api/predict (raw Authorization header).
func (s *Server) kserveRoutes(r *gin.Engine) {
	r.GET("/v2", func(c *gin.Context) {
		c.JSON(http.StatusOK, kserve.ServerMetadata{Name: "eas-server", Version: Version, Extensions: kserve.Extensions})
	})
	r.GET("/v2/health/live", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/v2/health/ready", func(c *gin.Context) {
		if ok, _ := s.ready(); !ok || !s.processorsHealthy(c.Request.Context()) {
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.Status(http.StatusOK)
	})
	for _, prefix := range []string{"/v2/models/:model", "/v2/models/:model/versions/:version"} {
		r.GET(prefix, s.tagRequest, s.kserveMetadata)
		r.GET(prefix+"/ready", s.tagRequest, s.kserveReady)
		r.POST(prefix+"/infer", s.tagRequest, s.kserveInfer)
		r.GET(prefix+"/stats", s.tagRequest, s.kserveStats)
		r.GET(prefix+"/config", s.tagRequest, s.kserveConfig)
	}
	// Triton's statistics of every model, as its clients ask for them
	// (get_inference_statistics() with no model name).
	r.GET("/v2/models/stats", s.tagRequest, s.kserveAllStats)
}

// kserveNoRoute answers a path under /v2 that no route serves with KServe's
// {"error": ...}, so that Triton clients report the reason instead of
// failing to decode the body. The repository API is served per service.
func kserveNoRoute(c *gin.Context) {
	msg := "no route for " + c.Request.Method + " " + c.Request.URL.Path
	if strings.HasPrefix(c.Request.URL.Path, "/v2/repository") {
		msg += "; the model repository extension is served per triton service: point the client at <host>/api/predict/<service> (POST /api/predict/<service>/v2/repository/index, .../v2/repository/models/<model>/load)"
	}
	kserveFail(c, http.StatusNotFound, msg)
}

// isV2Path reports whether a path is a KServe v2 / Triton one.
func isV2Path(p string) bool { return p == "/v2" || strings.HasPrefix(p, "/v2/") }

// processorsHealthy asks every serving processor that can become unhealthy
// after load (a Triton proxy whose upstream went away); KServe server
// readiness is false while one is not.
func (s *Server) processorsHealthy(ctx context.Context) bool {
	for _, svc := range s.opt.Manager.List() {
		if serviceHealth(ctx, svc) != nil {
			return false
		}
	}
	return true
}

// serviceHealth is the serving version's processor's own health (a custom
// processor with no live worker process, a Triton proxy whose upstream
// went away); nil when nothing serves or the processor reports none.
func serviceHealth(ctx context.Context, svc *service.Service) error {
	live, ok := svc.Acquire()
	if !ok {
		return nil
	}
	defer live.Release()
	if h, ok := live.Engine.Processor().(processors.Healther); ok {
		return h.Healthy(ctx)
	}
	return nil
}

// kserveTarget resolves and authorises the model of a KServe route; the
// caller releases it. On failure it has answered.
func (s *Server) kserveTarget(c *gin.Context) target {
	t, err := s.resolveModel(c.Param("model"), c.Param("version"), auth.Request{
		Method: c.Request.Method, RawQuery: c.Request.URL.RawQuery, Header: c.Request.Header, Path: c.Request.URL.Path,
	})
	if err != nil {
		kserveFail(c, statusOf(err), err.Error())
		return nil
	}
	return t
}

func (s *Server) kserveMetadata(c *gin.Context) {
	if t := s.kserveTarget(c); t != nil {
		defer t.Release()
		c.JSON(http.StatusOK, t.Metadata())
	}
}

func (s *Server) kserveReady(c *gin.Context) {
	if t := s.kserveTarget(c); t != nil {
		defer t.Release()
		s.answerReady(c, t)
	}
}

// answerReady answers 200, or 503 when the model (a proxy whose upstream
// went away) says it is not healthy.
func (s *Server) answerReady(c *gin.Context, t target) int {
	if err := t.Healthy(c.Request.Context()); err != nil {
		return kserveFail(c, http.StatusServiceUnavailable, err.Error())
	}
	c.Status(http.StatusOK)
	return http.StatusOK
}

// kserveStats answers the statistics extension for models that keep them.
func (s *Server) kserveStats(c *gin.Context) {
	if t := s.kserveTarget(c); t != nil {
		defer t.Release()
		s.answerStats(c, t, c.Param("version"))
	}
}

// answerStats answers Triton's statistics of t's model: of the version
// asked for, or of every version served when the request names none.
func (s *Server) answerStats(c *gin.Context, t target, version string) int {
	st, ok := stats(t, version == "")
	if !ok {
		return kserveFail(c, http.StatusNotFound, "model \""+t.Name()+"\" keeps no statistics; the statistics extension covers the models of a triton repository")
	}
	c.JSON(http.StatusOK, gin.H{"model_stats": st})
	return http.StatusOK
}

// kserveAllStats answers GET /v2/models/stats: the statistics of every
// model of the triton repositories that the request's token opens.
func (s *Server) kserveAllStats(c *gin.Context) {
	ar := auth.Request{Method: c.Request.Method, RawQuery: c.Request.URL.RawQuery, Header: c.Request.Header, Path: c.Request.URL.Path}
	out := []any{}
	opened := false
	for _, svc := range s.opt.Manager.List() {
		live, ok := svc.Acquire()
		if !ok {
			continue
		}
		ar.Service = svc.Name
		if _, err := s.opt.Auth.Verify(string(live.Token), ar); err == nil {
			opened = true
			out = append(out, listedStats(live.Engine.Processor(), "")...)
		}
		live.Release()
	}
	if !opened {
		ar.Service = "stats"
		err := s.unknown(ar, "no service serves statistics")
		kserveFail(c, statusOf(err), err.Error())
		return
	}
	c.JSON(http.StatusOK, gin.H{"model_stats": out})
}

// kserveConfig answers Triton's model configuration extension for models
// that have a configuration (those of a triton repository).
func (s *Server) kserveConfig(c *gin.Context) {
	if t := s.kserveTarget(c); t != nil {
		defer t.Release()
		s.answerConfig(c, t)
	}
}

func (s *Server) answerConfig(c *gin.Context, t target) int {
	cfg, ok := modelConfig(t)
	if !ok {
		return kserveFail(c, http.StatusNotImplemented, "model \""+t.Name()+"\" has no Triton model configuration; the model configuration extension covers the models of a triton repository (its metadata is GET /v2/models/"+t.Name()+")")
	}
	c.JSON(http.StatusOK, cfg)
	return http.StatusOK
}

// serveRepositoryV2 answers the server-wide paths of Triton's HTTP API under
// /api/predict/<service> of a service whose processor routes models, which
// a Triton client pointed at the service's EAS endpoint sends: server
// metadata and health, the statistics of every model, and, for a GET of
// any other path, the not-found a Triton server gives. done is false for
// what the processor answers itself (POSTs: the repository API, a
// proxy's pass-through).
func (s *Server) serveRepositoryV2(c *gin.Context, live *service.Live, check auth.BodyCheck, extra string) (code int, done bool) {
	if c.Request.Method != http.MethodGet {
		return 0, false
	}
	if err := check.Body(nil); err != nil {
		return kserveFail(c, http.StatusUnauthorized, err.Error()), true
	}
	switch extra {
	case "/v2":
		c.JSON(http.StatusOK, kserve.ServerMetadata{Name: "eas-server", Version: Version, Extensions: kserve.Extensions})
		return http.StatusOK, true
	case "/v2/health/live":
		c.Status(http.StatusOK)
		return http.StatusOK, true
	case "/v2/health/ready":
		if err := healthOf(c.Request.Context(), live.Engine.Processor()); err != nil {
			return kserveFail(c, http.StatusServiceUnavailable, err.Error()), true
		}
		c.Status(http.StatusOK)
		return http.StatusOK, true
	case "/v2/models/stats":
		if ml, ok := live.Engine.Processor().(processors.ModelLister); ok {
			if _, ok := ml.Models(); !ok {
				return kserveFail(c, http.StatusNotImplemented, "a triton proxy does not forward the upstream's statistics; ask the upstream"), true
			}
			c.JSON(http.StatusOK, gin.H{"model_stats": listedStats(live.Engine.Processor(), "")})
			return http.StatusOK, true
		}
	}
	if parts := strings.Split(strings.Trim(extra, "/"), "/"); len(parts) >= 3 && parts[1] == "models" {
		msg := "request for unknown model: '" + parts[2] + "' is not found"
		if len(parts) >= 5 && parts[3] == "versions" {
			msg = "request for unknown model: '" + parts[2] + "' version " + parts[4] + " is not found"
		}
		return kserveFail(c, http.StatusNotFound, msg), true
	}
	return kserveFail(c, http.StatusNotFound, "no route for GET "+c.Request.URL.Path), true
}

func (s *Server) kserveInfer(c *gin.Context) {
	start := time.Now()
	t, err := s.resolveModel(c.Param("model"), c.Param("version"), auth.Request{
		Method: c.Request.Method, RawQuery: c.Request.URL.RawQuery, Header: c.Request.Header, Path: c.Request.URL.Path,
	})
	if err != nil {
		code := kserveFail(c, statusOf(err), err.Error())
		if isKnown(err) { // an unknown name is no metrics label
			s.opt.Metrics.Request(c.Param("model"), "", code, time.Since(start))
		}
		s.note(c, c.Param("model"), 0, code)
		return
	}
	defer t.Release()
	flight := s.opt.Metrics.Start(t.Service())
	code := s.serveInfer(c, t)
	flight.Done()
	v := t.ServiceVersion()
	s.opt.Metrics.Request(t.Service(), versionLabel(v), code, time.Since(start))
	s.note(c, t.Service(), v, code)
}

// serveInfer runs one KServe infer request on t. A target whose scheduler
// would refuse it (429, 450) answers before the body is read.
func (s *Server) serveInfer(c *gin.Context, t target) int {
	if err := t.Admit(); err != nil {
		return kserveFail(c, statusOf(err), err.Error())
	}
	s.allowBody(c, t.Keepalive())
	kind := t.Decompressor()
	if enc := c.GetHeader("Content-Encoding"); enc != "" {
		// Triton's HTTP clients compress with request_compression_algorithm
		// and say so, the HTTP way; the header then names the body's
		// compression in place of metadata.rpc.decompressor.
		var ok bool
		if kind, ok = contentCodings[strings.ToLower(strings.TrimSpace(enc))]; !ok {
			return kserveFail(c, http.StatusUnsupportedMediaType, "Content-Encoding \""+enc+"\" is not supported; send gzip, deflate or an uncompressed body")
		}
	}
	body, status, err := s.readBody(c, kind, t.BodyCheck())
	if err != nil {
		return kserveFail(c, status, err.Error())
	}
	req, err := kserve.DecodeRequest(body, c.GetHeader(kserve.HeaderContentLength))
	if err != nil {
		return kserveFail(c, http.StatusBadRequest, err.Error())
	}
	tr, err := t.Infer(c.Request.Context(), &processors.TensorPayload{Inputs: req.Inputs, Outputs: req.OutputNames()})
	if err != nil {
		return kserveFail(c, statusOf(err), err.Error())
	}
	out, hlen, err := kserve.EncodeResponse(&kserve.InferResponse{ModelName: t.Name(), ModelVersion: t.Version(), ID: req.ID, Outputs: tr.Outputs}, req)
	if err != nil {
		return kserveFail(c, http.StatusInternalServerError, err.Error())
	}
	ct := "application/json"
	if hlen > 0 {
		c.Header(kserve.HeaderContentLength, strconv.Itoa(hlen))
		ct = "application/octet-stream"
	}
	c.Data(http.StatusOK, ct, out)
	return http.StatusOK
}

// contentCodings maps the Content-Encoding values of KServe infer requests
// to internal/decompress kinds: HTTP's deflate is the zlib format (RFC
// 1950), which is what Triton's clients send for it.
var contentCodings = map[string]string{"gzip": "gzip", "x-gzip": "gzip", "deflate": "zlib", "identity": ""}

// kserveFail answers {"error": msg}, as KServe clients expect, with msg
// capped and the connection closed when the body was not read, as fail.
func kserveFail(c *gin.Context, code int, msg string) int {
	if code == 499 {
		c.Abort()
		return code
	}
	closeIfUnread(c)
	c.Data(code, "application/json", kserve.ErrorBody(capMsg(msg)))
	return code
}

// routedPath reads the model named by the extra path of
// /api/predict/<service>: "/<model>[/versions/<v>]", or Triton's
// "/v2/models/<model>[/versions/<v>][/infer|/ready|/stats|/config]" as
// Triton clients pointed at an EAS endpoint send it. op is "", infer,
// ready, stats or config; ok is false for any other path, and for
// "/v2/models/stats", Triton's statistics of every model.
func routedPath(extra string) (model, version, op string, ok bool) {
	parts := strings.Split(strings.Trim(extra, "/"), "/")
	switch {
	case extra == "" || parts[0] == "" || strings.Trim(extra, "/") == "v2/models/stats":
		return "", "", "", false
	case len(parts) >= 3 && parts[0] == "v2" && parts[1] == "models":
		parts = parts[2:]
		if last := parts[len(parts)-1]; len(parts) > 1 && (last == "infer" || last == "ready" || last == "stats" || last == "config") {
			op, parts = last, parts[:len(parts)-1]
		}
	case parts[0] == "v2":
		return "", "", "", false
	}
	switch {
	case len(parts) == 1:
		return parts[0], "", op, true
	case len(parts) == 3 && parts[1] == "versions":
		return parts[0], parts[2], op, true
	}
	return "", "", "", false
}

// serveRouted answers a request under /api/predict/<service> that names one
// model of the service's processor (a Triton repository), with KServe v2
// bodies and errors, as Triton clients expect.
func (s *Server) serveRouted(c *gin.Context, t target, op, version string) int {
	switch {
	case op == "infer" || (op == "" && c.Request.Method == http.MethodPost):
		if c.Request.Method != http.MethodPost {
			c.Header("Allow", "POST")
			return kserveFail(c, http.StatusMethodNotAllowed, "infer takes POST")
		}
		return s.serveInfer(c, t)
	case op == "ready":
		return s.answerReady(c, t)
	case op == "stats":
		return s.answerStats(c, t, version)
	case op == "config":
		return s.answerConfig(c, t)
	}
	c.JSON(http.StatusOK, t.Metadata())
	return http.StatusOK
}
