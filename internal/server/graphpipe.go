package server

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/graphpipe"
	"github.com/eas-server/eas-server/wire/kserve"
)

// The GraphPipe door (docs/protocol.md, "GraphPipe"): Oracle's GraphPipe
// clients POST a flatbuffers Request to a URL; every tensor model answers
// one at /api/predict/<name>/graphpipe, where <name> is a synchronous
// service serving tensors or a model of a routing processor (a Triton
// repository's, as /v2/models/<name> finds it), and at
// /api/predict/<service>/<model>[/versions/<v>]/graphpipe for a model of a
// routing service. It resolves, admits, queues and batches as the KServe
// doors do (resolveModel or routedIn, target.Admit, target.Infer); only the
// body's codec and the Basic form of the token are its own.

// graphpipeSuffix ends the path of the door.
const graphpipeSuffix = "/graphpipe"

// graphpipe answers the request when its path is the GraphPipe door of a
// model; false, having answered nothing, when the path belongs to the
// service's processor as ever: a service that serves no tensors (a custom
// processor, echo), an asynchronous one, or a routing service's own paths.
// The check looks at the serving version without the token; the door then
// resolves and authorises once, as every door does.
func (s *Server) graphpipe(c *gin.Context, name, extra string) bool {
	if !strings.HasSuffix(extra, graphpipeSuffix) || name == "" {
		return false
	}
	model := strings.TrimSuffix(extra, graphpipeSuffix) // "" or "/<model>[/versions/<v>]"
	svc, found := s.opt.Manager.Get(name)
	if found {
		if live, ok := svc.Acquire(); ok {
			_, routes := live.Engine.Processor().(processors.ModelRouter)
			tensors := live.Engine.ServesTensors() && !(svc.Queues() != nil && live.Spec.IsAsync())
			live.Release()
			if model == "" && !tensors || model != "" && !routes {
				return false
			}
		} else if model != "" {
			return false
		}
	} else if model != "" {
		return false
	}
	start := time.Now()
	ar := graphpipeAuth(c.Request, extra)
	var t target
	var err error
	if model == "" {
		t, err = s.resolveModel(name, "", ar)
	} else {
		t, err = s.resolveRoutedIn(name, model, ar)
	}
	if err != nil {
		code := s.failErr(c, err)
		if isKnown(err) { // an unknown name is no metrics label
			s.opt.Metrics.Request(name, "", code, time.Since(start))
		}
		s.note(c, name, 0, code)
		return true
	}
	defer t.Release()
	flight := s.opt.Metrics.Start(t.Service())
	code := s.serveGraphPipe(c, t)
	flight.Done()
	v := t.ServiceVersion()
	s.opt.Metrics.Request(t.Service(), versionLabel(v), code, time.Since(start))
	s.note(c, t.Service(), v, code)
	return true
}

// resolveRoutedIn resolves /api/predict/<service>/<model>/graphpipe: the
// model that path names among those of the service's routing processor,
// authorised with the service's token.
func (s *Server) resolveRoutedIn(name, model string, ar auth.Request) (target, error) {
	_, live, check, err := s.admit(name, ar)
	if err != nil {
		return nil, err
	}
	t, _, _, ok := routedIn(live, check, model)
	if !ok {
		live.Release()
		return nil, knownService(refuse(http.StatusNotFound, "service \""+name+"\" has no model at \""+model+"\"; GraphPipe's door of a routed model is /api/predict/"+name+"/<model>[/versions/<v>]/graphpipe"))
	}
	return t, nil
}

// graphpipeAuth is the request's auth.Request, with the password of HTTP
// Basic authentication taken as the raw token: GraphPipe's Python client
// takes only a URL, so its token comes as the URL's userinfo
// (http://user:TOKEN@host/...) or from ~/.netrc, which requests sends as
// Basic. The user name is not read. Only this door takes the Basic form.
func graphpipeAuth(r *http.Request, extra string) auth.Request {
	h := r.Header
	if scheme, rest, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Basic") {
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest)); err == nil {
			if _, password, ok := strings.Cut(string(raw), ":"); ok {
				h = h.Clone()
				h.Set("Authorization", password)
			}
		}
	}
	return auth.Request{Method: r.Method, ExtraPath: extra, RawQuery: r.URL.RawQuery, Header: h, Path: r.URL.Path}
}

// serveGraphPipe answers one GraphPipe request on t: a POST of a Request
// (infer or metadata), a GET of the metadata as JSON. Errors are plain
// text with the status the other doors give, as graphpipe-go's servers
// answer theirs (HTTP 400 and the message), never InferResponse.errors.
func (s *Server) serveGraphPipe(c *gin.Context, t target) int {
	req := c.Request
	switch {
	case req.Method == http.MethodGet && req.ContentLength <= 0:
		if err := t.BodyCheck().Body(nil); err != nil {
			return s.fail(c, http.StatusUnauthorized, err.Error())
		}
		c.JSON(http.StatusOK, graphpipeMetadata(t))
		return http.StatusOK
	case req.Method != http.MethodPost && req.Method != http.MethodGet:
		c.Header("Allow", "GET, POST")
		return s.fail(c, http.StatusMethodNotAllowed, "method "+req.Method+" not allowed; POST a GraphPipe request, or GET the metadata as JSON")
	}
	// As on every tensor door, an overloaded model refuses (429, 450)
	// before the body is read; a MetadataRequest is refused alike.
	if err := t.Admit(); err != nil {
		return s.failErr(c, err)
	}
	s.allowBody(c, t.Keepalive())
	body, status, err := s.readBody(c, t.Decompressor(), t.BodyCheck())
	if err != nil {
		return s.fail(c, status, err.Error())
	}
	gr, err := graphpipe.DecodeRequest(body)
	if err != nil {
		return s.failErr(c, err)
	}
	if gr.Metadata {
		c.Data(http.StatusOK, "application/octet-stream", graphpipe.EncodeMetadata(graphpipeMetadata(t)))
		return http.StatusOK
	}
	md := t.Metadata()
	inputs, err := gr.Named(tensorNames(md.Inputs))
	if err != nil {
		return s.failErr(c, err)
	}
	if err := boolsFromUint8(inputs, md.Inputs); err != nil {
		return s.failErr(c, err)
	}
	tr, err := t.Infer(req.Context(), &processors.TensorPayload{Inputs: inputs, Outputs: gr.OutputNames})
	if err != nil {
		return s.failErr(c, err)
	}
	want := gr.OutputNames
	if len(want) == 0 {
		want = tensorNames(md.Outputs)
	}
	out, err := graphpipe.EncodeInferResponse(inOrder(tr.Outputs, want), nil)
	if err != nil {
		return s.failErr(c, err)
	}
	c.Data(http.StatusOK, "application/octet-stream", out)
	return http.StatusOK
}

// boolsFromUint8 makes a Uint8 input of a BOOL model input a Bool tensor
// (the same bytes, each 0 or 1): GraphPipe has no bool type, and its
// clients send numpy's bool arrays' bytes as Uint8, as eas-server answers
// a BOOL output.
func boolsFromUint8(inputs []tensor.Tensor, specs []kserve.TensorMetadata) error {
	for i := range inputs {
		if inputs[i].DType != tensor.Uint8 {
			continue
		}
		for _, m := range specs {
			if m.Name == inputs[i].Name && m.Datatype == tensor.Bool.String() {
				inputs[i].DType = tensor.Bool
				if err := inputs[i].Validate(); err != nil {
					return badinput.Errorf("input %q is BOOL, sent as Uint8: %v", m.Name, err)
				}
			}
		}
	}
	return nil
}

func tensorNames(ms []kserve.TensorMetadata) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// inOrder puts outputs in the order of names (the outputs asked for, else
// the model's), as GraphPipe answers them; outputs no name lists follow in
// the order the model gave them.
func inOrder(outputs []tensor.Tensor, names []string) []tensor.Tensor {
	out := make([]tensor.Tensor, 0, len(outputs))
	used := make([]bool, len(outputs))
	for _, n := range names {
		for i, t := range outputs {
			if !used[i] && t.Name == n {
				out = append(out, t)
				used[i] = true
				break
			}
		}
	}
	for i, t := range outputs {
		if !used[i] {
			out = append(out, t)
		}
	}
	return out
}

// graphpipeMetadata is t's metadata in GraphPipe's terms: a dimension of
// any size is -1, a dtype GraphPipe lacks is the type it is sent as (BOOL
// as Uint8, BF16 as Float32).
func graphpipeMetadata(t target) *graphpipe.Metadata {
	md := t.Metadata()
	conv := func(ms []kserve.TensorMetadata) []graphpipe.IOMetadata {
		out := make([]graphpipe.IOMetadata, len(ms))
		for i, m := range ms {
			dt, _ := tensor.ParseDType(m.Datatype)
			shape := m.Shape
			if shape == nil {
				shape = []int64{}
			}
			out[i] = graphpipe.IOMetadata{Name: m.Name, Description: m.Datatype, Shape: shape, Type: uint8(graphpipe.FromDType(dt))}
		}
		return out
	}
	return &graphpipe.Metadata{
		Name:        md.Name,
		Version:     Version,
		Server:      "eas-server",
		Description: md.Platform + " model " + md.Name + " version " + t.Version() + " of service " + t.Service(),
		Inputs:      conv(md.Inputs),
		Outputs:     conv(md.Outputs),
	}
}
