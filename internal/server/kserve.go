package server

import (
	"net/http"
	"strconv"
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
		if ok, _ := s.opt.Manager.Ready(); !ok || s.draining.Load() {
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.Status(http.StatusOK)
	})
	for _, prefix := range []string{"/v2/models/:model", "/v2/models/:model/versions/:version"} {
		r.GET(prefix, s.kserveMetadata)
		r.GET(prefix+"/ready", s.kserveReady)
		r.POST(prefix+"/infer", s.kserveInfer)
	}
}

// kserveService resolves and authorises the model of a KServe route and
// holds its serving version; the caller releases it. On failure it has
// answered and returns nil.
func (s *Server) kserveService(c *gin.Context) (*service.Live, processors.TensorModel) {
	name := c.Param("model")
	svc, ok := s.opt.Manager.Get(name)
	if !ok {
		kserveFail(c, http.StatusNotFound, "model \""+name+"\" not found")
		return nil, nil
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
		return nil, nil
	}
	if !serving {
		st, msg, _ := svc.State()
		kserveFail(c, http.StatusServiceUnavailable, notServing(name, st, msg))
		return nil, nil
	}
	tm, ok := live.Processor.(processors.TensorModel)
	if !ok {
		live.Release()
		kserveFail(c, http.StatusBadRequest, "model \""+name+"\" is served by processor "+live.Spec.Processor+", which is not a tensor model; call POST /api/predict/"+name+" instead")
		return nil, nil
	}
	return live, tm
}

func (s *Server) kserveMetadata(c *gin.Context) {
	live, tm := s.kserveService(c)
	if live == nil {
		return
	}
	defer live.Release()
	c.JSON(http.StatusOK, kserve.ModelMetadataFrom(live.Spec.Name, tm.Platform(), []string{strconv.Itoa(live.Version)}, tm.Metadata()))
}

func (s *Server) kserveReady(c *gin.Context) {
	if live, _ := s.kserveService(c); live != nil {
		live.Release()
		c.Status(http.StatusOK)
	}
}

func (s *Server) kserveInfer(c *gin.Context) {
	start := time.Now()
	live, _ := s.kserveService(c)
	if live == nil {
		if _, ok := s.opt.Manager.Get(c.Param("model")); ok {
			s.opt.Metrics.Request(c.Param("model"), c.Writer.Status(), time.Since(start))
		}
		return
	}
	defer live.Release()
	code := s.serveInfer(c, live)
	s.opt.Metrics.Request(live.Spec.Name, code, time.Since(start))
}

func (s *Server) serveInfer(c *gin.Context, live *service.Live) int {
	body, status, err := s.readBody(c, live.Spec.Metadata.RPC.Decompressor)
	if err != nil {
		return kserveFail(c, status, err.Error())
	}
	req, err := kserve.DecodeRequest(body, c.GetHeader(kserve.HeaderContentLength))
	if err != nil {
		return kserveFail(c, http.StatusBadRequest, err.Error())
	}
	result, err := live.Scheduler.Do(c.Request.Context(), &processors.TensorPayload{Inputs: req.Inputs, Outputs: req.OutputNames()})
	if err != nil {
		return kserveFail(c, statusOf(err), err.Error())
	}
	tr, ok := result.(*processors.TensorResult)
	if !ok {
		return kserveFail(c, http.StatusInternalServerError, "processor returned no tensors")
	}
	out, hlen, err := kserve.EncodeResponse(&kserve.InferResponse{ModelName: live.Spec.Name, ModelVersion: strconv.Itoa(live.Version), ID: req.ID, Outputs: tr.Outputs}, req)
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
