package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/auth"
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
		if ok, _ := s.opt.Manager.Ready(); !ok || s.draining.Load() || !s.processorsHealthy(c.Request.Context()) {
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.Status(http.StatusOK)
	})
	for _, prefix := range []string{"/v2/models/:model", "/v2/models/:model/versions/:version"} {
		r.GET(prefix, s.kserveMetadata)
		r.GET(prefix+"/ready", s.kserveReady)
		r.POST(prefix+"/infer", s.kserveInfer)
		r.GET(prefix+"/stats", s.kserveStats)
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
		h, isH := live.Processor.(processors.Healther)
		healthy := !isH || h.Healthy(ctx) == nil
		live.Release()
		if !healthy {
			return false
		}
	}
	return true
}

// kserveService resolves and authorises the model of a KServe route and
// holds its serving version; the caller releases it. The model is a
// service, or else one model of a service whose processor routes models
// (a Triton repository): then rm is set and tm is nil. On failure it has
// answered and returns a nil Live.
func (s *Server) kserveService(c *gin.Context) (*service.Live, processors.TensorModel, processors.RoutedModel) {
	name := c.Param("model")
	svc, ok := s.opt.Manager.Get(name)
	if !ok {
		if live, rm, found := s.routedModel(c, name, c.Param("version")); found {
			return live, nil, rm
		}
		kserveFail(c, http.StatusNotFound, "model \""+name+"\" not found")
		return nil, nil, nil
	}
	live, serving := svc.Acquire()
	token := svc.Token()
	if serving {
		token = string(live.Token)
	}
	if err := auth.Verify(token, auth.Request{
		Method: c.Request.Method, Service: name, ExtraPath: "", RawQuery: c.Request.URL.RawQuery, Header: c.Request.Header,
	}); err != nil {
		if serving {
			live.Release()
		}
		kserveFail(c, http.StatusUnauthorized, "unauthorized: missing or wrong token for model \""+name+"\"")
		return nil, nil, nil
	}
	if !serving {
		st, msg, _ := svc.State()
		kserveFail(c, http.StatusServiceUnavailable, notServing(name, st, msg))
		return nil, nil, nil
	}
	tm, ok := live.Processor.(processors.TensorModel)
	if !ok {
		live.Release()
		kserveFail(c, http.StatusBadRequest, "model \""+name+"\" is served by processor "+live.Spec.Processor+", which is not a tensor model; call POST /api/predict/"+name+" instead")
		return nil, nil, nil
	}
	return live, tm, nil
}

// routedModel looks for name among the models of the serving services
// whose processor routes models, in service name order, and authorises the
// request with that service's token. found is false when no service has the
// model; when one has it but the token is wrong, it has answered 401 and
// returns found with a nil Live.
func (s *Server) routedModel(c *gin.Context, name, version string) (*service.Live, processors.RoutedModel, bool) {
	live, svcName, rm := s.lookupRouted(name, version)
	if live == nil {
		return nil, nil, false
	}
	if err := auth.Verify(string(live.Token), auth.Request{
		Method: c.Request.Method, Service: name, ExtraPath: "", RawQuery: c.Request.URL.RawQuery, Header: c.Request.Header,
	}); err != nil {
		live.Release()
		kserveFail(c, http.StatusUnauthorized, "unauthorized: missing or wrong token for model \""+name+"\" of service \""+svcName+"\"")
		return nil, nil, true
	}
	return live, rm, true
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
		if mr, ok := live.Processor.(processors.ModelRouter); ok {
			if rm, ok := mr.Model(name, version); ok {
				return live, svc.Name, rm
			}
		}
		live.Release()
	}
	return nil, "", nil
}

func (s *Server) kserveMetadata(c *gin.Context) {
	live, tm, rm := s.kserveService(c)
	if live == nil {
		return
	}
	defer live.Release()
	if rm != nil {
		c.JSON(http.StatusOK, kserve.ModelMetadataFrom(rm.Name(), rm.Platform(), rm.Versions(), rm.Metadata()))
		return
	}
	c.JSON(http.StatusOK, kserve.ModelMetadataFrom(live.Spec.Name, tm.Platform(), []string{strconv.Itoa(live.Version)}, tm.Metadata()))
}

func (s *Server) kserveReady(c *gin.Context) {
	if live, _, rm := s.kserveService(c); live != nil {
		defer live.Release()
		s.answerReady(c, live, rm)
	}
}

// answerReady answers 200, or 503 when the processor (a proxy whose
// upstream went away) or the routed model says it is not healthy.
func (s *Server) answerReady(c *gin.Context, live *service.Live, rm processors.RoutedModel) int {
	var h processors.Healther
	if rm != nil {
		h, _ = rm.(processors.Healther)
	} else {
		h, _ = live.Processor.(processors.Healther)
	}
	if h != nil {
		if err := h.Healthy(c.Request.Context()); err != nil {
			return kserveFail(c, http.StatusServiceUnavailable, err.Error())
		}
	}
	c.Status(http.StatusOK)
	return http.StatusOK
}

// kserveStats answers the statistics extension for models that keep them.
func (s *Server) kserveStats(c *gin.Context) {
	live, _, rm := s.kserveService(c)
	if live == nil {
		return
	}
	defer live.Release()
	s.answerStats(c, rm)
}

func (s *Server) answerStats(c *gin.Context, rm processors.RoutedModel) int {
	sr, ok := rm.(processors.StatsReporter)
	if !ok {
		return kserveFail(c, http.StatusNotFound, "model \""+c.Param("model")+"\" keeps no statistics; the statistics extension covers the models of a triton repository")
	}
	c.JSON(http.StatusOK, gin.H{"model_stats": []any{sr.Stats()}})
	return http.StatusOK
}

func (s *Server) kserveInfer(c *gin.Context) {
	start := time.Now()
	live, _, rm := s.kserveService(c)
	if live == nil {
		if _, ok := s.opt.Manager.Get(c.Param("model")); ok {
			s.opt.Metrics.Request(c.Param("model"), c.Writer.Status(), time.Since(start))
		}
		return
	}
	defer live.Release()
	code := s.serveInfer(c, live, rm)
	s.opt.Metrics.Request(live.Spec.Name, code, time.Since(start))
}

// serveInfer runs one KServe infer request on the service's scheduler, or
// on the routed model's own one (under the service's keepalive) when rm is
// set.
func (s *Server) serveInfer(c *gin.Context, live *service.Live, rm processors.RoutedModel) int {
	body, status, err := s.readBody(c, live.Spec.Metadata.RPC.Decompressor)
	if err != nil {
		return kserveFail(c, status, err.Error())
	}
	req, err := kserve.DecodeRequest(body, c.GetHeader(kserve.HeaderContentLength))
	if err != nil {
		return kserveFail(c, http.StatusBadRequest, err.Error())
	}
	payload := &processors.TensorPayload{Inputs: req.Inputs, Outputs: req.OutputNames()}
	name, version := live.Spec.Name, strconv.Itoa(live.Version)
	var result any
	if rm != nil {
		name, version = rm.Name(), rm.Version()
		ctx, cancel := context.WithTimeout(c.Request.Context(), live.Spec.Metadata.RPC.Keepalive)
		result, err = rm.Do(ctx, payload)
		cancel()
	} else {
		result, err = live.Scheduler.Do(c.Request.Context(), payload)
	}
	if err != nil {
		return kserveFail(c, statusOf(err), err.Error())
	}
	tr, ok := result.(*processors.TensorResult)
	if !ok || tr == nil {
		return kserveFail(c, http.StatusInternalServerError, "processor returned no tensors")
	}
	out, hlen, err := kserve.EncodeResponse(&kserve.InferResponse{ModelName: name, ModelVersion: version, ID: req.ID, Outputs: tr.Outputs}, req)
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

// kserveFail answers {"error": msg}, as KServe clients expect.
func kserveFail(c *gin.Context, code int, msg string) int {
	if code == 499 {
		c.Abort()
		return code
	}
	c.Data(code, "application/json", kserve.ErrorBody(msg))
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
func (s *Server) serveRouted(c *gin.Context, live *service.Live, rm processors.RoutedModel, op string) int {
	switch {
	case op == "infer" || (op == "" && c.Request.Method == http.MethodPost):
		if c.Request.Method != http.MethodPost {
			c.Header("Allow", "POST")
			return kserveFail(c, http.StatusMethodNotAllowed, "infer takes POST")
		}
		return s.serveInfer(c, live, rm)
	case op == "ready":
		return s.answerReady(c, live, rm)
	case op == "stats":
		return s.answerStats(c, rm)
	}
	c.JSON(http.StatusOK, kserve.ModelMetadataFrom(rm.Name(), rm.Platform(), rm.Versions(), rm.Metadata()))
	return http.StatusOK
}
