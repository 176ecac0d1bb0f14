package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/decompress"
	"github.com/eas-server/eas-server/internal/openai"
	"github.com/eas-server/eas-server/internal/service"
)

// The doors of generative services (processors.Generative, whose version
// has a sequence scheduler): OpenAI's API under the service's own path,
// /api/predict/<service>/v1/..., as EAS exposes it, the plain form (a POST
// to /api/predict/<service>), and the same API at the root, /v1/...,
// where the request's model names the service. Authentication is the
// service's token, raw, as a Bearer token (what OpenAI's clients send) or
// EAS-signed.

// openaiService is the OpenAI API of a serving generative version.
func (s *Server) openaiService(name string, live *service.Live) *openai.Service {
	return &openai.Service{Name: name, Backend: live.Sequences, Status: statusOf, Created: live.Started, Log: s.log}
}

// serveGeneration answers a request for a generative service under
// /api/predict/<name>, admitted and held by servePredict.
func (s *Server) serveGeneration(c *gin.Context, name string, live *service.Live, check auth.BodyCheck, extra string) int {
	c.Set(kserveErrorsKey, false)
	body := func() ([]byte, error) {
		b, status, err := s.readBody(c, live.Spec.Metadata.RPC.Decompressor, check)
		if err != nil {
			return nil, refuse(status, err.Error())
		}
		return b, nil
	}
	api := s.openaiService(name, live)
	if extra == "" {
		return api.ServePlain(c.Writer, c.Request, body)
	}
	if c.Request.Method == http.MethodGet {
		if err := check.Body(nil); err != nil {
			return s.fail(c, http.StatusUnauthorized, err.Error())
		}
	}
	return api.Serve(c.Writer, c.Request, extra, body)
}

// openaiRoot serves /v1/... at the root: the service is the one the
// request's model names (the service's name or its model_config.model_name),
// or the only generative service the token opens when the request names
// none.
func (s *Server) openaiRoot(c *gin.Context) {
	start := time.Now()
	path := "/v1" + c.Param("rest")
	name, version := "", 0
	code := s.serveOpenAIRoot(c, path, &name, &version)
	if name != "" {
		s.opt.Metrics.Request(name, versionLabel(version), code, time.Since(start))
	}
	s.note(c, name, version, code)
}

func (s *Server) serveOpenAIRoot(c *gin.Context, path string, name *string, version *int) int {
	req := c.Request
	ar := auth.Request{Method: req.Method, ExtraPath: path, RawQuery: req.URL.RawQuery, Header: req.Header, Path: req.URL.Path}
	if !openai.IsPath(path) {
		return openAIFail(c, http.StatusNotFound, "unknown_url", "no such path "+path+"; the server answers POST /v1/completions, POST /v1/chat/completions and GET /v1/models (also under /api/predict/<service>/)")
	}
	var raw []byte
	model := ""
	switch {
	case path == openai.PathModels && req.Method == http.MethodGet:
		return s.listModels(c, ar)
	case strings.HasPrefix(path, openai.PathModels+"/"):
		model = strings.TrimPrefix(path, openai.PathModels+"/")
	case req.Method == http.MethodPost:
		// The model is in the body: read it (under the size limit) before
		// the service, and so its token, is known.
		limit := s.opt.MaxBodyBytes
		b, err := readAll(http.MaxBytesReader(c.Writer, req.Body, limit), req.ContentLength, limit)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return openAIFail(c, http.StatusRequestEntityTooLarge, "", "request body larger than the server's limit of "+humanBytes(limit))
			}
			return openAIFail(c, http.StatusBadRequest, "", "reading the request body: "+err.Error())
		}
		raw = b
		var head struct {
			Model *string `json:"model"`
		}
		if json.Unmarshal(b, &head) == nil && head.Model != nil {
			model = *head.Model
		}
	}
	svc, live, err := s.findGenerative(model, ar)
	if err != nil {
		return openAIFail(c, statusOf(err), "", err.Error())
	}
	defer live.Release()
	*name, *version = svc.Name, live.Version
	flight := s.opt.Metrics.Start(svc.Name)
	defer flight.Done()
	ar.Service = svc.Name
	check, err := s.opt.Auth.Verify(string(live.Token), ar)
	if err != nil {
		return openAIFail(c, http.StatusUnauthorized, "invalid_api_key", unauthorized(svc.Name, err).Error())
	}
	body := func() ([]byte, error) {
		if err := check.Body(raw); err != nil {
			return nil, refuse(http.StatusUnauthorized, err.Error())
		}
		if kind := live.Spec.Metadata.RPC.Decompressor; kind != "" && raw != nil {
			out, err := decompress.Decompress(kind, raw, s.opt.MaxBodyBytes)
			if err != nil {
				if errors.Is(err, decompress.ErrTooLarge) {
					return nil, refuse(http.StatusRequestEntityTooLarge, err.Error())
				}
				return nil, refuse(http.StatusBadRequest, err.Error())
			}
			return out, nil
		}
		return raw, nil
	}
	return s.openaiService(svc.Name, live).Serve(c.Writer, req, path, body)
}

// findGenerative finds the serving generative service a root request is
// for: the one whose name or model id is model, or, when model is "", the
// only one. The Live comes held.
func (s *Server) findGenerative(model string, ar auth.Request) (*service.Service, *service.Live, error) {
	var found []*service.Service
	var lives []*service.Live
	for _, svc := range s.opt.Manager.List() {
		live, ok := svc.Acquire()
		if !ok {
			continue
		}
		if live.Sequences == nil || (model != "" && svc.Name != model && openai.ModelID(live.Sequences.Generator(), svc.Name) != model) {
			live.Release()
			continue
		}
		found, lives = append(found, svc), append(lives, live)
	}
	release := func(keep int) {
		for i, l := range lives {
			if i != keep {
				l.Release()
			}
		}
	}
	switch {
	case len(found) == 1:
		return found[0], lives[0], nil
	case len(found) == 0 && model != "":
		ar.Service = model
		return nil, nil, s.unknown(ar, "the model \""+model+"\" does not exist: no serving generative service has that name or model id (GET /v1/models lists them)")
	case len(found) == 0:
		return nil, nil, refuse(http.StatusNotFound, "no generative service is serving")
	}
	// Several match: a name wins over another's model id.
	for i, svc := range found {
		if svc.Name == model {
			release(i)
			return svc, lives[i], nil
		}
	}
	release(-1)
	if model == "" {
		return nil, nil, refuse(http.StatusBadRequest, "model is required: several generative services serve here (GET /v1/models lists them)")
	}
	return nil, nil, refuse(http.StatusBadRequest, "the model \""+model+"\" is the model id of several services: name the service instead")
}

// listModels answers GET /v1/models at the root: the generative services
// the request's token opens.
func (s *Server) listModels(c *gin.Context, ar auth.Request) int {
	list := openai.ModelList{Object: "list", Data: []openai.Model{}}
	opened := false
	for _, svc := range s.opt.Manager.List() {
		live, ok := svc.Acquire()
		if !ok {
			continue
		}
		if live.Sequences != nil {
			ar.Service = svc.Name
			if _, err := s.opt.Auth.Verify(string(live.Token), ar); err == nil {
				opened = true
				g := live.Sequences.Generator()
				list.Data = append(list.Data, openai.Model{ID: openai.ModelID(g, svc.Name), Object: "model", Created: live.Started.Unix(),
					OwnedBy: "eas-server", MaxModelLen: g.ContextLength})
			}
		}
		live.Release()
	}
	if !opened && s.opt.Manager != nil && len(s.opt.Manager.List()) > 0 && !s.opensAny(ar) {
		return openAIFail(c, http.StatusUnauthorized, "invalid_api_key", "a missing or wrong token: send a service's token as Authorization: Bearer <token>")
	}
	c.JSON(http.StatusOK, list)
	return http.StatusOK
}

// openAIFail writes OpenAI's error object.
func openAIFail(c *gin.Context, code int, errCode, msg string) int {
	typ := "invalid_request_error"
	switch {
	case code == http.StatusUnauthorized:
		typ = "authentication_error"
	case code == http.StatusNotFound && errCode == "":
		errCode = "model_not_found"
	case code >= 500:
		typ = "server_error"
	}
	closeIfUnread(c)
	obj := openai.ErrorObject{Message: capMsg(msg), Type: typ}
	if errCode != "" {
		obj.Code = &errCode
	}
	c.JSON(code, openai.ErrorBody{Error: obj})
	return code
}
