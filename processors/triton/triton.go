// Package triton is the `triton` processor. EAS runs NVIDIA Triton behind
// it; users come with a Triton model repository and Triton clients. It
// serves them in one of two modes, chosen by processor_params:
//
//   - Native (--model-repository=<local dir | oss:// | http(s) archive>, or
//     model_path): every ONNX model of the repository
//     (<model>/config.pbtxt + <version>/model.onnx) is served by our ONNX
//     Runtime, each version with its own scheduler sized by config.pbtxt
//     (max_batch_size, dynamic_batching, instance_group), and counted in
//     Triton's statistics shape. Backends we cannot run are refused by name.
//   - Proxy (--url=http(s)://host:port or grpc://host:port): requests are
//     forwarded to a Triton or any KServe v2 server, over pooled
//     connections, under the service's deadline, with the upstream's errors
//     mapped to our status codes and its readiness reflected in ours.
//
// Either way the processor is a processors.ModelRouter: the server sends
// /v2/models/<model>/... and /api/predict/<service>/<model> straight to the
// model. Other paths under /api/predict/<service> go through Decode and the
// service's scheduler: KServe v2 infer bodies for the repository's only
// model, the repository API (index, load, unload) and, in proxy mode,
// anything else passed through to the upstream as it came.
package triton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/kserve"
)

// Code is the EAS processor code.
const Code = "triton"

func init() {
	processors.Register(Code, "Triton model repository: ONNX models served natively with config.pbtxt batching, or a proxy to a Triton/KServe v2 server (--url)",
		func() *processors.Engine { return processors.Adapt[*call, *result](New()) })
}

// Processor serves one Triton repository or proxies to one upstream. It is
// safe for concurrent use after Load.
type Processor struct {
	spec   processors.Spec
	params Params
	log    *slog.Logger
	repo   string // local repository directory (native)
	proxy  *proxy // non-nil in proxy mode

	mu      sync.RWMutex
	entries map[string]*entry // by model name
	loading sync.Mutex        // serialises load/unload of repository models
}

// New returns an unconfigured processor.
func New() *Processor { return &Processor{entries: map[string]*entry{}} }

// Configure reads processor_params; it does no I/O: a remote repository is
// fetched by Load, through spec.Fetcher.
func (p *Processor) Configure(spec processors.Spec) error {
	p.spec = spec
	p.log = spec.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	params, err := ParseParams(spec.Params)
	if err != nil {
		return err
	}
	p.params = params
	if len(params.Ignored) > 0 {
		p.log.Info("triton flags accepted without effect here", "flags", strings.Join(params.Ignored, " "))
	}
	if params.URL != "" {
		if params.Repository != "" {
			return errors.New("processor_params: --url and --model-repository both given; a proxy serves the upstream's models, so drop --model-repository")
		}
		p.proxy, err = newProxy(params.URL, params.UpstreamToken, spec.Service, p.log)
		return err
	}
	if params.Repository == "" && spec.ModelSource == "" {
		return errors.New("processor_params: --model-repository=<dir | oss://bucket/path | https://.../repo.tar.gz> is required (or model_path naming the repository); to forward to a running Triton instead, set --url=http://host:8000")
	}
	if params.Repository != "" && spec.ModelSource != "" {
		return errors.New("model_path and --model-repository both name a repository; keep one")
	}
	return checkRepositorySource(params.Repository)
}

// Load fetches the repository and loads its models (native), or checks
// that the upstream answers (proxy). files.ModelPath is the repository
// when model_path names it.
func (p *Processor) Load(ctx context.Context, files processors.Files) error {
	if p.proxy != nil {
		return p.proxy.check(ctx)
	}
	dir := files.ModelPath
	if p.params.Repository != "" {
		var err error
		if dir, err = fetchRepository(ctx, p.spec.Fetcher, p.params.Repository); err != nil {
			return err
		}
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("model repository %s is not a directory; it must hold <model>/config.pbtxt and <model>/<version>/model.onnx", dir)
	}
	p.repo = unwrapRoot(dir)
	names, err := p.initialModels()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if err := p.loadModel(ctx, name); err != nil {
			if p.params.ExitOnError {
				errs = append(errs, err)
			} else {
				p.log.Warn("model not loaded", "model", name, "err", err)
			}
		}
	}
	if len(errs) > 0 {
		p.Close()
		return errors.Join(errs...)
	}
	p.mu.RLock()
	n := len(p.entries)
	p.mu.RUnlock()
	if n == 0 && p.params.ControlMode != "explicit" {
		return fmt.Errorf("model repository %s holds no model directory (<model>/config.pbtxt, <model>/1/model.onnx)", dir)
	}
	return nil
}

// isRemote reports whether a --model-repository names a source to fetch
// rather than a local directory (a plain path or file://).
func isRemote(raw string) bool {
	return strings.Contains(raw, "://") && !strings.HasPrefix(raw, "file://")
}

// checkRepositorySource checks the form of --model-repository without
// reading it, so that `eas-server validate` refuses a scheme the fetch
// would refuse.
func checkRepositorySource(raw string) error {
	if !isRemote(raw) {
		return nil
	}
	scheme, _, _ := strings.Cut(raw, "://")
	switch strings.ToLower(scheme) {
	case "oss", "http", "https":
		return nil
	}
	return fmt.Errorf("--model-repository: unsupported scheme %q; use a local directory, file://, oss://bucket/path/ or http(s)://.../repo.tar.gz", scheme)
}

// fetchRepository brings a remote repository to local disk through the
// server's model cache (fetcher), which keeps it, accounted to the service,
// until the service's model is closed. A local directory is used in place.
func fetchRepository(ctx context.Context, fetcher processors.Fetcher, raw string) (string, error) {
	if !isRemote(raw) {
		return strings.TrimPrefix(raw, "file://"), nil
	}
	if fetcher == nil {
		return "", fmt.Errorf("--model-repository: %s is remote, and this loader has no model cache to fetch it into; use a local directory", raw)
	}
	dir, err := fetcher.Fetch(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("--model-repository: %w", err)
	}
	return dir, nil
}

// unwrapRoot descends into the single directory an archive often wraps a
// repository in (repo.tar.gz holding models/<model>/...), when that
// directory is not itself a model (no config.pbtxt, no version directory).
func unwrapRoot(dir string) string {
	for range 4 {
		des, err := os.ReadDir(dir)
		if err != nil {
			return dir
		}
		var only string
		n := 0
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".") {
				continue
			}
			n++
			if de.IsDir() {
				only = de.Name()
			}
		}
		if n != 1 || only == "" || looksLikeModel(filepath.Join(dir, only)) {
			return dir
		}
		dir = filepath.Join(dir, only)
	}
	return dir
}

// looksLikeModel reports whether dir holds config.pbtxt or a numeric
// version directory.
func looksLikeModel(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "config.pbtxt")); err == nil {
		return true
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if _, err := strconv.ParseUint(de.Name(), 10, 64); err == nil && de.IsDir() {
			return true
		}
	}
	return false
}

// initialModels lists the model directories to load at start: all of them,
// or with --model-control-mode=explicit those named by --load-model.
func (p *Processor) initialModels() ([]string, error) {
	all, err := p.repositoryModels()
	if err != nil {
		return nil, err
	}
	if p.params.ControlMode != "explicit" {
		return all, nil
	}
	var out []string
	for _, m := range p.params.LoadModels {
		if m == "*" {
			return all, nil
		}
		if !slices.Contains(all, m) {
			return nil, fmt.Errorf("--load-model=%s: no such model directory in the repository (found %s)", m, strings.Join(all, ", "))
		}
		out = append(out, m)
	}
	return out, nil
}

// repositoryModels lists the model directories, sorted.
func (p *Processor) repositoryModels() ([]string, error) {
	des, err := os.ReadDir(p.repo)
	if err != nil {
		return nil, fmt.Errorf("model repository: %w", err)
	}
	var out []string
	for _, de := range des {
		if de.IsDir() && !strings.HasPrefix(de.Name(), ".") {
			out = append(out, de.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// loadModel (re)loads one model directory; a model already loaded keeps
// serving until the new one is ready, then is drained and closed.
func (p *Processor) loadModel(ctx context.Context, name string) error {
	if !validModelName(name) {
		return badinput.Errorf("model name %q is not a directory name of the repository", name)
	}
	p.loading.Lock()
	defer p.loading.Unlock()
	e, err := p.loadEntry(ctx, name, filepath.Join(p.repo, name))
	p.mu.Lock()
	old := p.entries[name]
	if err != nil {
		if old == nil {
			p.entries[name] = &entry{name: name, state: "UNAVAILABLE", reason: err.Error(), versions: map[string]*version{}}
		}
		p.mu.Unlock()
		return err
	}
	p.entries[name] = e
	p.mu.Unlock()
	if old != nil {
		old.close(p.log)
	}
	p.log.Info("model loaded", "model", name, "versions", strings.Join(e.order, ","), "max_batch_size", e.latest().cfg.MaxBatchSize, "dynamic_batching", e.latest().cfg.DynamicBatching != nil)
	return nil
}

// unloadModel drains and closes a model; it stays listed as UNLOADED.
func (p *Processor) unloadModel(name string) error {
	p.loading.Lock()
	defer p.loading.Unlock()
	p.mu.Lock()
	old, ok := p.entries[name]
	if !ok || old.state != "READY" {
		p.mu.Unlock()
		return &processors.StatusError{Code: http.StatusNotFound, Err: fmt.Errorf("failed to unload '%s', no version is available", name)}
	}
	p.entries[name] = &entry{name: name, state: "UNLOADED", versions: map[string]*version{}}
	p.mu.Unlock()
	old.close(p.log)
	return nil
}

func validModelName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\\") && filepath.IsLocal(n)
}

// Model implements processors.ModelRouter.
func (p *Processor) Model(name, version string) (processors.RoutedModel, bool) {
	if p.proxy != nil {
		return p.proxy.model(name, version)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	e, ok := p.entries[name]
	if !ok || e.state != "READY" {
		return nil, false
	}
	if version == "" {
		return e.latest(), true
	}
	v, ok := e.versions[version]
	return v, ok
}

// Models implements processors.ModelLister: every served version of every
// ready model (native); a proxy cannot list the upstream's.
func (p *Processor) Models() ([]processors.RoutedModel, bool) {
	if p.proxy != nil {
		return nil, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	names := make([]string, 0, len(p.entries))
	for n, e := range p.entries {
		if e.state == "READY" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := []processors.RoutedModel{}
	for _, n := range names {
		e := p.entries[n]
		for _, v := range e.order {
			out = append(out, e.versions[v])
		}
	}
	return out, true
}

// Metadata lists the repository's models (native) or the upstream (proxy).
func (p *Processor) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: Code, Inputs: []processors.IOSpec{}, Outputs: []processors.IOSpec{}}
	if p.proxy != nil {
		md.Extra = map[string]any{"mode": "proxy", "upstream": p.proxy.display}
		return md
	}
	md.Extra = map[string]any{"mode": "native", "models": p.index()}
	if only := p.onlyModel(); only != nil {
		md.Inputs, md.Outputs = only.meta.Inputs, only.meta.Outputs
	}
	return md
}

// IndexEntry is one model of POST /v2/repository/index.
type IndexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

func (p *Processor) index() []IndexEntry {
	p.mu.RLock()
	defer p.mu.RUnlock()
	names := make([]string, 0, len(p.entries))
	for n := range p.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []IndexEntry
	for _, n := range names {
		e := p.entries[n]
		if len(e.order) == 0 {
			out = append(out, IndexEntry{Name: n, State: e.state, Reason: e.reason})
			continue
		}
		for _, v := range e.order {
			out = append(out, IndexEntry{Name: n, Version: v, State: e.state})
		}
	}
	return out
}

// fullIndex adds the repository's model directories not loaded yet.
func (p *Processor) fullIndex() []IndexEntry {
	out := p.index()
	all, _ := p.repositoryModels()
	for _, n := range all {
		if !slices.ContainsFunc(out, func(e IndexEntry) bool { return e.Name == n }) {
			out = append(out, IndexEntry{Name: n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// onlyModel is the latest version of the repository's only ready model.
func (p *Processor) onlyModel() *version {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var only *version
	for _, e := range p.entries {
		if e.state != "READY" {
			continue
		}
		if only != nil {
			return nil
		}
		only = e.latest()
	}
	return only
}

// Healthy reports an unready model (with --strict-readiness) or an
// unreachable upstream.
func (p *Processor) Healthy(ctx context.Context) error {
	if p.proxy != nil {
		return p.proxy.ready(ctx)
	}
	if !p.params.StrictReadiness {
		return nil
	}
	for _, e := range p.index() {
		if e.State == "UNAVAILABLE" {
			return fmt.Errorf("model %s is not ready: %s", e.Name, e.Reason)
		}
	}
	return nil
}

// Close drains and closes every model.
func (p *Processor) Close() error {
	if p.proxy != nil {
		p.proxy.close()
		return nil
	}
	p.mu.Lock()
	entries := p.entries
	p.entries = map[string]*entry{}
	p.mu.Unlock()
	for _, e := range entries {
		e.close(p.log)
	}
	return nil
}

// Path parsing shared by Decode: the paths Triton clients use under an EAS
// endpoint, and our short /<model> form.

// route is what an extra path under /api/predict/<service> asks for.
type route struct {
	op      string // infer, repo_index, repo_load, repo_unload, passthrough
	model   string
	version string
}

func parseRoute(path string) route {
	if path == "" || path == "/" {
		return route{op: "infer"}
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if parts[0] != "v2" {
		switch {
		case len(parts) == 1:
			return route{op: "infer", model: parts[0]}
		case len(parts) == 3 && parts[1] == "versions":
			return route{op: "infer", model: parts[0], version: parts[2]}
		}
		return route{op: "passthrough"}
	}
	rest := parts[1:]
	switch {
	case len(rest) == 2 && rest[0] == "repository" && rest[1] == "index":
		return route{op: "repo_index"}
	case len(rest) == 4 && rest[0] == "repository" && rest[1] == "models" && (rest[3] == "load" || rest[3] == "unload"):
		return route{op: "repo_" + rest[3], model: rest[2]}
	case len(rest) >= 3 && rest[0] == "models" && rest[len(rest)-1] == "infer":
		r := route{op: "infer", model: rest[1]}
		switch {
		case len(rest) == 3:
			return r
		case len(rest) == 5 && rest[2] == "versions":
			r.version = rest[3]
			return r
		}
	}
	return route{op: "passthrough"}
}

// call is the payload of a request that came through Decode.
type call struct {
	route route
	model processors.RoutedModel
	req   *kserve.InferRequest
	tp    *processors.TensorPayload
	raw   *processors.Request // passthrough and repository calls
}

// reply is the result of a call that is not an inference.
type reply struct {
	body        []byte
	contentType string
}

// result is what one call produced: the tensors of an inference, or the
// reply of any other call.
type result struct {
	tensors *processors.TensorResult
	reply   *reply
}

// Decode reads a request that the server did not route to a model itself.
func (p *Processor) Decode(_ context.Context, req *processors.Request) (*call, error) {
	r := parseRoute(req.Path)
	switch r.op {
	case "infer":
		var m processors.RoutedModel
		if r.model == "" {
			if p.proxy != nil {
				return nil, badinput.Errorf("name the model: POST /api/predict/%s/<model> or /api/predict/%s/v2/models/<model>/infer", p.spec.Service, p.spec.Service)
			}
			only := p.onlyModel()
			if only == nil {
				return nil, badinput.Errorf("the repository serves several models (%s); name one: POST /api/predict/%s/<model>", strings.Join(p.readyNames(), ", "), p.spec.Service)
			}
			m = only
		} else {
			var ok bool
			if m, ok = p.Model(r.model, r.version); !ok {
				return nil, &processors.StatusError{Code: http.StatusNotFound, Err: p.notFound(r.model, r.version)}
			}
		}
		ir, err := kserve.DecodeRequest(req.Body, req.Header.Get(kserve.HeaderContentLength))
		if err != nil {
			return nil, badinput.Errorf("%v", err)
		}
		return &call{route: r, model: m, req: ir, tp: &processors.TensorPayload{Inputs: ir.Inputs, Outputs: ir.OutputNames()}}, nil
	case "passthrough":
		if p.proxy == nil {
			return nil, &processors.StatusError{Code: http.StatusNotFound, Err: fmt.Errorf("no route %s under /api/predict/%s; use /<model>, /v2/models/<model>/infer or /v2/repository/index", req.Path, p.spec.Service)}
		}
	case "repo_index", "repo_load", "repo_unload":
		if p.proxy == nil && r.model != "" && !validModelName(r.model) {
			return nil, badinput.Errorf("model name %q is not valid", r.model)
		}
	}
	return &call{route: r, raw: req}, nil
}

func (p *Processor) readyNames() []string {
	var out []string
	for _, e := range p.index() {
		if e.State == "READY" && !slices.Contains(out, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

func (p *Processor) notFound(model, version string) error {
	if version != "" {
		return fmt.Errorf("request for unknown model: '%s' version %s is not found", model, version)
	}
	return fmt.Errorf("request for unknown model: '%s' is not found", model)
}

// Run executes calls; inferences go to each model's own scheduler, so
// they batch with the model's other requests.
func (p *Processor) Run(ctx context.Context, batch []*call) ([]*result, error) {
	out := make([]*result, len(batch))
	for i, c := range batch {
		var err error
		if out[i], err = p.runCall(ctx, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (p *Processor) runCall(ctx context.Context, c *call) (*result, error) {
	switch c.route.op {
	case "infer":
		tr, err := c.model.Do(ctx, c.tp)
		if err != nil {
			return nil, err
		}
		return &result{tensors: tr}, nil
	case "passthrough":
		return replied(p.proxy.passthrough(ctx, c.raw))
	}
	if p.proxy != nil {
		return replied(p.proxy.passthrough(ctx, c.raw))
	}
	switch c.route.op {
	case "repo_index":
		body, err := json.Marshal(p.fullIndex())
		return replied(&reply{body: body, contentType: "application/json"}, err)
	case "repo_load":
		if err := p.loadModel(ctx, c.route.model); err != nil {
			if badinput.Is(err) {
				return nil, err
			}
			return nil, &processors.StatusError{Code: http.StatusBadRequest, Err: fmt.Errorf("failed to load '%s': %w", c.route.model, err)}
		}
		return replied(&reply{contentType: "application/json", body: []byte("{}")}, nil)
	case "repo_unload":
		if err := p.unloadModel(c.route.model); err != nil {
			return nil, err
		}
		return replied(&reply{contentType: "application/json", body: []byte("{}")}, nil)
	}
	return nil, fmt.Errorf("triton: unknown operation %q", c.route.op)
}

// replied makes the result of a call answered with a reply.
func replied(r *reply, err error) (*result, error) {
	if err != nil {
		return nil, err
	}
	return &result{reply: r}, nil
}

// Encode writes an inference result as KServe v2 JSON (a response header
// length cannot travel through Encode, so binary outputs are answered as
// JSON here; the routed paths answer binary), or a reply as it is.
func (p *Processor) Encode(_ context.Context, c *call, r *result) (*processors.Response, error) {
	if r.reply != nil {
		return &processors.Response{Body: r.reply.body, ContentType: r.reply.contentType}, nil
	}
	tr := r.tensors
	req := *c.req
	req.BinaryDataOutput = false
	req.Outputs = slices.Clone(req.Outputs)
	for i := range req.Outputs {
		req.Outputs[i].Binary = nil
	}
	body, _, err := kserve.EncodeResponse(&kserve.InferResponse{ModelName: c.model.Name(), ModelVersion: c.model.Version(), ID: c.req.ID, Outputs: tr.Outputs}, &req)
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: body, ContentType: "application/json"}, nil
}

// String helps logs.
func (p *Processor) String() string {
	if p.proxy != nil {
		return "triton proxy to " + p.proxy.display
	}
	return "triton repository " + p.repo + " (" + strconv.Itoa(len(p.readyNames())) + " models)"
}

var (
	_ processors.Typed[*call, *result] = (*Processor)(nil)
	_ processors.ModelRouter           = (*Processor)(nil)
	_ processors.ModelLister           = (*Processor)(nil)
	_ processors.Healther              = (*Processor)(nil)
	_ processors.Closer                = (*Processor)(nil)
)
