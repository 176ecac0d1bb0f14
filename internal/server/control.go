package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

// maxConfigBytes bounds a service.json sent to the control plane.
const maxConfigBytes = 1 << 20

// controlRoutes adds the control plane (docs/protocol.md "Control plane") under
// /api/v2/services, behind the admin token. The region segment of the
// paths is accepted whatever it is: one server is one region.
func (s *Server) controlRoutes(r *gin.Engine) {
	g := r.Group("/api/v2/services", s.adminAuth)
	g.POST("", s.createService)
	g.GET("", s.listServices)
	g.GET("/:region/:name", s.describeService)
	g.PUT("/:region/:name", s.updateService)
	g.DELETE("/:region/:name", s.deleteService)
	g.PUT("/:region/:name/start", s.startService)
	g.PUT("/:region/:name/stop", s.stopService)
	g.GET("/:region/:name/events", s.serviceEvents)
	g.GET("/:region/:name/instances", s.serviceInstances)
	g.GET("/:region/:name/versions", s.serviceVersions)
	g.PUT("/:region/:name/version", s.switchVersion)
	// The console's charts and editor check (history.go, validate.go).
	r.GET("/api/v2/metrics", s.adminAuth, s.metricsHistory)
	r.POST("/api/v2/validate", s.adminAuth, s.validateSpec)
	if s.opt.Manager != nil {
		s.cacheRoutes(r)
	}
}

// adminAuth admits requests that carry the admin token, raw or as a Bearer
// token, compared in constant time. Without a configured admin token the
// control plane refuses everything.
func (s *Server) adminAuth(c *gin.Context) {
	want := s.opt.AdminToken
	if want == "" {
		controlFail(c, http.StatusUnauthorized, "Unauthorized", "the control plane is disabled: the server has no admin token; start it with a --state-dir or set EAS_ADMIN_TOKEN")
		return
	}
	if !s.isAdmin(c) {
		s.log.Warn("control plane request refused: missing or wrong admin token", "method", c.Request.Method, "path", c.Request.URL.Path, "remote", c.ClientIP())
		controlFail(c, http.StatusUnauthorized, "Unauthorized", `missing or wrong admin token; send "Authorization: <admin token>" (EAS_ADMIN_TOKEN, or the admin_token file in the server's state dir)`)
		return
	}
	c.Next()
}

// isAdmin reports whether the request carries the admin token (raw or
// Bearer), compared in constant time; never true without one.
func (s *Server) isAdmin(c *gin.Context) bool {
	want := s.opt.AdminToken
	got := strings.TrimSpace(c.GetHeader("Authorization"))
	if scheme, rest, ok := strings.Cut(got, " "); ok && strings.EqualFold(scheme, "Bearer") {
		got = strings.TrimSpace(rest)
	}
	return want != "" && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// control is the controlapi.ControlPlane the API drives: Options.Control, else the
// process's own Manager.
func (s *Server) control() controlapi.ControlPlane {
	if s.opt.Control != nil {
		return s.opt.Control
	}
	return managerControl{s.opt.Manager}
}

func (s *Server) createService(c *gin.Context) {
	spec, ok := s.readSpec(c)
	if !ok {
		return
	}
	info, err := s.control().Create(c.Request.Context(), spec)
	if err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusCreated, s.changeAnswer(c, info, spec))
}

// keyEffects is a controlapi.ControlPlane on which some keys that have no effect in
// one process do take effect (on Kubernetes: autoscaler, metadata.cpu and
// the like), so their warnings are not sent.
type keyEffects interface{ TakesEffect(path string) bool }

// changeAnswer renders the service with spec's no-effect warnings.
func (s *Server) changeAnswer(c *gin.Context, info service.Info, spec *servicejson.Service) controlapi.ChangeAnswer {
	out := controlapi.ChangeAnswer{ServiceObject: s.object(c, info)}
	for _, w := range spec.Warnings() {
		if k, ok := s.control().(keyEffects); ok && k.TakesEffect(w.Path) {
			continue
		}
		out.Warnings = append(out.Warnings, w.String())
	}
	return out
}

func (s *Server) listServices(c *gin.Context) {
	infos, err := s.control().List(c.Request.Context())
	if err != nil {
		s.controlErr(c, err)
		return
	}
	list := controlapi.ServiceList{Services: []controlapi.ServiceObject{}}
	for _, in := range infos {
		list.Services = append(list.Services, s.object(c, in))
	}
	list.TotalCount = len(list.Services)
	c.JSON(http.StatusOK, list)
}

func (s *Server) describeService(c *gin.Context) {
	info, err := s.control().Describe(c.Request.Context(), c.Param("name"))
	s.answer(c, info, err)
}

func (s *Server) updateService(c *gin.Context) {
	spec, ok := s.readSpec(c)
	if !ok {
		return
	}
	info, err := s.control().Update(c.Request.Context(), c.Param("name"), spec)
	if err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusOK, s.changeAnswer(c, info, spec))
}

func (s *Server) deleteService(c *gin.Context) {
	name := c.Param("name")
	// A client that goes away must not cut the drain short.
	if err := s.control().Delete(context.WithoutCancel(c.Request.Context()), name); err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"Message": fmt.Sprintf("service %q deleted", name)})
}

func (s *Server) startService(c *gin.Context) {
	info, err := s.control().Start(c.Request.Context(), c.Param("name"))
	s.answer(c, info, err)
}

func (s *Server) stopService(c *gin.Context) {
	info, err := s.control().Stop(context.WithoutCancel(c.Request.Context()), c.Param("name"))
	s.answer(c, info, err)
}

func (s *Server) serviceEvents(c *gin.Context) {
	name := c.Param("name")
	events, err := s.control().Events(c.Request.Context(), name)
	if err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusOK, controlapi.EventList{ServiceName: name, Events: events})
}

func (s *Server) serviceInstances(c *gin.Context) {
	name := c.Param("name")
	inst, err := s.control().Instances(c.Request.Context(), name)
	if err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusOK, controlapi.InstanceList{ServiceName: name, Instances: inst, TotalCount: len(inst)})
}

func (s *Server) serviceVersions(c *gin.Context) {
	out, err := s.control().Versions(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) switchVersion(c *gin.Context) {
	var req controlapi.VersionRequest
	body, ok := readControlBody(c)
	if !ok {
		return
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Version < 1 {
		controlFail(c, http.StatusBadRequest, "InvalidParameter", `the body must be {"Version": N} with N >= 1 (see the versions list)`)
		return
	}
	info, err := s.control().SwitchVersion(c.Request.Context(), c.Param("name"), req.Version)
	s.answer(c, info, err)
}

// readSpec reads and parses the service.json body; on failure it has
// answered 400 with every problem.
func (s *Server) readSpec(c *gin.Context) (*servicejson.Service, bool) {
	body, ok := readControlBody(c)
	if !ok {
		return nil, false
	}
	spec, err := servicejson.Parse(body)
	if err != nil {
		controlFail(c, http.StatusBadRequest, "InvalidParameter", "invalid service.json:\n"+err.Error())
		return nil, false
	}
	if spec.Processor != "" {
		if _, ok := processors.Lookup(spec.Processor); !ok {
			_, err := processors.New(spec.Processor)
			controlFail(c, http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("processor: %q is an EAS code this server does not serve: %v", spec.Processor, err))
			return nil, false
		}
	}
	return spec, true
}

// readControlBody reads a control-plane body under maxConfigBytes. On
// failure it has answered: 413 for a body over the limit, declared by its
// Content-Length (answered before any of it is read) or found while
// reading; 400 for a body that could not be read.
func readControlBody(c *gin.Context) ([]byte, bool) {
	tooLarge := func() ([]byte, bool) {
		controlFail(c, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the body is larger than the control plane's limit of "+humanBytes(maxConfigBytes)+"; a service.json is far smaller: check that the right file is sent")
		return nil, false
	}
	if c.Request.ContentLength > maxConfigBytes {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxConfigBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case err != nil:
		controlFail(c, http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("reading the body: %v (the limit is %s)", err, humanBytes(maxConfigBytes)))
		return nil, false
	}
	return body, true
}

func (s *Server) answer(c *gin.Context, info service.Info, err error) {
	if err != nil {
		s.controlErr(c, err)
		return
	}
	c.JSON(http.StatusOK, s.object(c, info))
}

// object renders a service snapshot; the endpoints name the host the
// client reached the control plane by.
func (s *Server) object(c *gin.Context, in service.Info) controlapi.ServiceObject {
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	endpoint := scheme + "://" + c.Request.Host + "/api/predict/" + in.Name
	region := c.Param("region")
	if region == "" {
		region = s.opt.Region
	}
	return controlapi.ServiceObject{
		ServiceName:      in.Name,
		Region:           region,
		Status:           string(in.Status),
		Message:          in.Message,
		Reason:           in.Reason,
		AccessToken:      in.Token,
		IntranetEndpoint: endpoint,
		InternetEndpoint: endpoint,
		ServiceConfig:    string(in.Config),
		CreateTime:       in.CreateTime,
		UpdateTime:       in.UpdateTime,
		CurrentVersion:   in.CurrentVersion,
		LatestVersion:    in.LatestVersion,
		PendingVersion:   in.PendingVersion,
		RunningInstance:  in.RunningInstance,
		TotalInstance:    in.TotalInstance,
		Progress:         progressObject(in.Progress),
		Queues:           in.Queues,
	}
}

func progressObject(p *service.Progress) *controlapi.ProgressObject {
	if p == nil {
		return nil
	}
	return &controlapi.ProgressObject{
		Key: p.Key, DoneBytes: p.DoneBytes, TotalBytes: p.TotalBytes,
		BytesPerSecond: p.BytesPerSecond, ETASeconds: p.ETASeconds,
		Retries: p.Retries, Retry: p.Retry, MaxRetries: p.MaxRetries, LastError: p.LastError,
		UpdateTime: p.UpdateTime,
	}
}

// controlErr maps a manager error to a status: the control plane's one
// error-to-code helper.
func (s *Server) controlErr(c *gin.Context, err error) {
	switch {
	case errors.Is(err, service.ErrNotFound):
		controlFail(c, http.StatusNotFound, "NotFound", err.Error())
	case errors.Is(err, service.ErrExists):
		controlFail(c, http.StatusConflict, "AlreadyExists", err.Error())
	case errors.Is(err, service.ErrBusy):
		controlFail(c, http.StatusConflict, "Conflict", err.Error())
	case errors.Is(err, service.ErrInvalid):
		controlFail(c, http.StatusBadRequest, "InvalidParameter", err.Error())
	case errors.Is(err, service.ErrShuttingDown):
		controlFail(c, http.StatusServiceUnavailable, "ShuttingDown", err.Error())
	default:
		s.log.Error("control plane request failed", "path", c.Request.URL.Path, "err", err)
		controlFail(c, http.StatusInternalServerError, "InternalError", err.Error())
	}
}

// controlFail answers an error object, the message capped, closing the
// connection when the body was not read (as fail). PureJSON keeps <, > and
// & readable for people reading answers with curl.
func controlFail(c *gin.Context, code int, kind, msg string) {
	c.Abort()
	closeIfUnread(c)
	c.PureJSON(code, controlapi.ErrorObject{Code: kind, Message: capMsg(msg)})
}
