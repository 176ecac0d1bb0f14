package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/auth"
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
	}
}

// processorsHealthy asks every serving processor that can become unhealthy
// after load (a Triton proxy whose upstream went away); KServe server
// readiness is false while one is not.
func (s *Server) processorsHealthy(ctx context.Context) bool {
	for _, svc := range s.opt.Manager.List() {
		live, ok := svc.Acquire()
		if !ok {
			continue
		}
		h, isH := live.Engine.Processor().(processors.Healther)
		healthy := !isH || h.Healthy(ctx) == nil
		live.Release()
		if !healthy {
			return false
		}
	}
	return true
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
		s.answerStats(c, t)
	}
}

func (s *Server) answerStats(c *gin.Context, t target) int {
	st, ok := stats(t)
	if !ok {
		return kserveFail(c, http.StatusNotFound, "model \""+t.Name()+"\" keeps no statistics; the statistics extension covers the models of a triton repository")
	}
	c.JSON(http.StatusOK, gin.H{"model_stats": []any{st}})
	return http.StatusOK
}

func (s *Server) kserveInfer(c *gin.Context) {
	start := time.Now()
	t := s.kserveTarget(c)
	if t == nil {
		if _, ok := s.opt.Manager.Get(c.Param("model")); ok {
			s.opt.Metrics.Request(c.Param("model"), "", c.Writer.Status(), time.Since(start))
		}
		s.note(c, c.Param("model"), 0, c.Writer.Status())
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

// serveInfer runs one KServe infer request on t.
func (s *Server) serveInfer(c *gin.Context, t target) int {
	s.allowBody(c, t.Keepalive())
	body, status, err := s.readBody(c, t.Decompressor(), t.BodyCheck())
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
// "/v2/models/<model>[/versions/<v>][/infer|/ready|/stats]" as Triton
// clients pointed at an EAS endpoint send it. op is "", infer, ready or
// stats; ok is false for any other path.
func routedPath(extra string) (model, version, op string, ok bool) {
	parts := strings.Split(strings.Trim(extra, "/"), "/")
	switch {
	case extra == "" || parts[0] == "":
		return "", "", "", false
	case len(parts) >= 3 && parts[0] == "v2" && parts[1] == "models":
		parts = parts[2:]
		if last := parts[len(parts)-1]; len(parts) > 1 && (last == "infer" || last == "ready" || last == "stats") {
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
func (s *Server) serveRouted(c *gin.Context, t target, op string) int {
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
		return s.answerStats(c, t)
	}
	c.JSON(http.StatusOK, t.Metadata())
	return http.StatusOK
}
