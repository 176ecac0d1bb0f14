// Package openai is the OpenAI-compatible HTTP API of a generative service
// (processor codes llm_cpu, llm_gpu): /v1/completions,
// /v1/chat/completions and /v1/models, at the server's root and under
// /api/predict/<service>/, and the plain EAS form (a POST to
// /api/predict/<service> with a prompt or messages). It decodes a request
// into the sequence scheduler's GenRequests (tokenized prompt, decoding
// parameters), and turns the scheduler's events into OpenAI's answers or
// server-sent-event streams. It knows net/http only: the server (gin)
// authenticates, routes, and reads the body through the function it hands
// over, so that admission is asked before the body is read.
//
// docs/generation.md lists every field accepted and refused; the package's
// README.md says what is tested and how.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eas-server/eas-server/internal/httpstatus"
	"github.com/eas-server/eas-server/internal/scheduler"
)

// Backend is a generative service's sequence scheduler
// (*scheduler.Sequences implements it).
type Backend interface {
	Generator() *scheduler.Generator
	// Admit says, before the body is read, whether a request would be
	// refused at once (scheduler.ErrStopped, ErrRateLimited, ErrQueueFull).
	Admit() error
	// Generate starts a request; its errors are those sentinels or a bad
	// request (*badinput.Error).
	Generate(ctx context.Context, req scheduler.GenRequest) (*scheduler.GenStream, error)
}

var _ Backend = (*scheduler.Sequences)(nil)

// BodyFunc reads the request's body under the server's limits; its error
// goes through Service.Status (413 for a body over the limit, ...).
type BodyFunc func() ([]byte, error)

// Service is one generative service's OpenAI API. The zero value is not
// usable: Name and Backend are required. A Service is safe for concurrent
// use (it holds no state of its own).
type Service struct {
	// Name is the service's name: the model id when the Generator has
	// none, and accepted as the request's model in any case.
	Name    string
	Backend Backend
	// Status maps an error (the scheduler's, the body reader's) to a
	// status code; nil is httpstatus.Of.
	Status func(error) int
	// Created is the "created" time /v1/models lists (the version's
	// deploy time); zero is the process's start.
	Created time.Time
	// Log receives the failures answered 500; nil discards them.
	Log *slog.Logger
}

var processStart = time.Now()

// Paths that Serve answers.
const (
	PathCompletions     = "/v1/completions"
	PathChatCompletions = "/v1/chat/completions"
	PathModels          = "/v1/models"
)

// IsPath says whether Serve answers path (the part after the root or
// /api/predict/<service>), so a router can send it there.
func IsPath(path string) bool {
	return path == PathCompletions || path == PathChatCompletions || path == PathModels ||
		strings.HasPrefix(path, PathModels+"/")
}

// Serve answers one request for path: POST /v1/completions, POST
// /v1/chat/completions, GET /v1/models or GET /v1/models/<id>. Errors are
// OpenAI's error objects. It returns the status sent (200 once a stream
// has started, whatever happens after).
func (s *Service) Serve(w http.ResponseWriter, r *http.Request, path string, body BodyFunc) int {
	ew := errorWriter{w: w, openai: true, s: s}
	switch {
	case path == PathModels || strings.HasPrefix(path, PathModels+"/"):
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			return ew.fail(http.StatusMethodNotAllowed, "invalid_request_error", "", "", "method "+r.Method+" is not allowed on "+path+"; use GET")
		}
		return s.models(ew, strings.TrimPrefix(strings.TrimPrefix(path, PathModels), "/"), path != PathModels)
	case path == PathCompletions || path == PathChatCompletions:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			return ew.fail(http.StatusMethodNotAllowed, "invalid_request_error", "", "", "method "+r.Method+" is not allowed on "+path+"; use POST")
		}
		return s.generate(ew, r, body, path == PathChatCompletions, false)
	default:
		return ew.fail(http.StatusNotFound, "invalid_request_error", "", "unknown_url",
			"no such path "+path+"; this service answers POST /v1/completions, POST /v1/chat/completions and GET /v1/models")
	}
}

// ServePlain answers the plain EAS form: a POST to /api/predict/<service>
// whose JSON body has a prompt (answered as /v1/completions) or messages
// (as /v1/chat/completions), with the same fields. Errors before a stream
// starts are plain text, as on every EAS door. It returns the status sent.
func (s *Service) ServePlain(w http.ResponseWriter, r *http.Request, body BodyFunc) int {
	ew := errorWriter{w: w, s: s}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return ew.fail(http.StatusMethodNotAllowed, "", "", "", "method "+r.Method+" is not allowed; POST a JSON body with a prompt or messages")
	}
	return s.generate(ew, r, body, false, true)
}

func (s *Service) status(err error) int {
	if s.Status != nil {
		return s.Status(err)
	}
	return httpstatus.Of(err)
}

// models answers GET /v1/models, or /v1/models/<id> when one.
func (s *Service) models(ew errorWriter, id string, one bool) int {
	g := s.Backend.Generator()
	created := s.Created
	if created.IsZero() {
		created = processStart
	}
	m := Model{ID: ModelID(g, s.Name), Object: "model", Created: created.Unix(), OwnedBy: "eas-server", MaxModelLen: g.ContextLength}
	if !one {
		return writeJSON(ew.w, http.StatusOK, ModelList{Object: "list", Data: []Model{m}})
	}
	if id != m.ID && id != s.Name {
		return ew.fail(http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			"The model `"+id+"` does not exist; this service serves \""+m.ID+"\"")
	}
	return writeJSON(ew.w, http.StatusOK, m)
}

// generate answers a completion or chat request; plain is the EAS form,
// which picks the API by the body.
func (s *Service) generate(ew errorWriter, r *http.Request, body BodyFunc, chat, plain bool) int {
	if err := s.Backend.Admit(); err != nil {
		return ew.failErr(s.status(err), err)
	}
	b, err := body()
	if err != nil {
		return ew.failErr(s.status(err), err)
	}
	g := s.Backend.Generator()
	if plain {
		if chat, err = plainIsChat(b); err != nil {
			return ew.badRequest(err)
		}
	}
	smp, jobs, err := prepare(b, chat, g, s.Name)
	if err != nil {
		return ew.badRequest(err)
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	streams := make([]*scheduler.GenStream, 0, len(jobs))
	for _, j := range jobs {
		st, err := s.Backend.Generate(ctx, j.Req)
		if err != nil {
			cancel()
			return ew.failErr(s.status(err), err)
		}
		streams = append(streams, st)
	}
	a := newAnswer(chat, smp, jobs, ModelID(g, s.Name), g.Tokenizer, time.Now().Unix())
	events := fanIn(ctx, streams)
	if smp.Stream {
		return s.stream(ctx, cancel, ew.w, a, events, smp.IncludeUsage)
	}
	if err := s.collect(ctx, a, events); err != nil {
		cancel()
		return ew.failErr(s.status(err), err)
	}
	u := events.usage()
	if chat {
		return writeJSON(ew.w, http.StatusOK, a.chatCompletion(u))
	}
	return writeJSON(ew.w, http.StatusOK, a.completion(u))
}

// prepare decodes a request body and makes its jobs. Every error is a
// *FieldError (or, should a tokenizer fail, a plain error: a 500).
func prepare(b []byte, chat bool, g *scheduler.Generator, service string) (*sampling, []job, error) {
	if chat {
		req, err := decodeChat(b)
		if err != nil {
			return nil, nil, err
		}
		if err := checkModel(&req.sampling, g, service); err != nil {
			return nil, nil, err
		}
		jobs, err := prepareChat(req, g)
		return &req.sampling, jobs, err
	}
	req, err := decodeCompletion(b)
	if err != nil {
		return nil, nil, err
	}
	if err := checkModel(&req.sampling, g, service); err != nil {
		return nil, nil, err
	}
	jobs, err := prepareCompletion(req, g)
	return &req.sampling, jobs, err
}

// plainIsChat says which API a plain-form body is for.
func plainIsChat(b []byte) (bool, error) {
	o, err := parseObject("", b)
	if err != nil {
		return false, err
	}
	hasPrompt, hasMessages := o.has("prompt"), o.has("messages")
	switch {
	case hasPrompt && hasMessages:
		return false, fieldErr("messages", "send either prompt (a completion) or messages (a chat), not both")
	case !hasPrompt && !hasMessages:
		return false, &FieldError{Param: "prompt", Msg: "the body needs a prompt (a completion) or messages (a chat)"}
	}
	return hasMessages, nil
}

// collect applies every event; the first failure ends it.
func (s *Service) collect(ctx context.Context, a *answer, events *merged) error {
	for it := range events.ch {
		if _, err := a.apply(it.prompt, it.ev); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return scheduler.ErrCanceled
	}
	if i := a.unfinished(); i >= 0 {
		return errors.New("generation ended without finishing choice " + strconv.Itoa(i))
	}
	return nil
}

// stream sends the answer as server-sent events, flushed one by one, and
// [DONE] at the end; a failure after the start is an error event. A client
// that goes away cancels ctx, which frees its sequences.
func (s *Service) stream(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, a *answer, events *merged, includeUsage bool) int {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not hold the events back
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, rc: http.NewResponseController(w), cancel: cancel}
	for _, c := range a.firstChunks() {
		out.send(c)
	}
	var failure error
	for it := range events.ch {
		if out.err != nil || failure != nil {
			continue // the client is gone or a choice failed; ctx is cancelled, drain
		}
		d, err := a.apply(it.prompt, it.ev)
		if err != nil {
			failure = err
			cancel()
			continue
		}
		if d.text != "" || d.finish != "" || d.chat != nil || d.complete != nil {
			out.send(a.chunk(d))
		}
	}
	if out.err != nil {
		return http.StatusOK
	}
	if failure == nil && ctx.Err() != nil {
		failure = scheduler.ErrCanceled
	}
	if i := a.unfinished(); failure == nil && i >= 0 {
		failure = errors.New("generation ended without finishing choice " + strconv.Itoa(i))
	}
	if failure != nil {
		code := s.status(failure)
		s.logFailure(code, failure)
		out.send(errorBody(code, "", "", failure.Error()))
	} else if includeUsage {
		out.send(a.usageChunk(events.usage()))
	}
	out.done()
	return http.StatusOK
}

func (s *Service) logFailure(code int, err error) {
	if code == http.StatusInternalServerError && s.Log != nil {
		s.Log.Error("generation failed", "service", s.Name, "err", err)
	}
}

// sse writes server-sent events; the first write error cancels the
// request (the client is gone) and silences the rest.
type sse struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc
	buf    bytes.Buffer
	err    error
}

func (o *sse) send(v any) {
	o.buf.Reset()
	o.buf.WriteString("data: ")
	enc := json.NewEncoder(&o.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // the types here always encode
		o.buf.Truncate(len("data: "))
		o.buf.WriteString(`{"error":{"message":"encoding a chunk failed","type":"server_error","param":null,"code":null}}` + "\n")
	}
	o.buf.WriteString("\n")
	o.write(o.buf.Bytes())
}

func (o *sse) done() { o.write([]byte("data: [DONE]\n\n")) }

func (o *sse) write(b []byte) {
	if o.err != nil {
		return
	}
	if _, err := o.w.Write(b); err != nil {
		o.err = err
	} else if err := o.rc.Flush(); err != nil {
		o.err = err
	}
	if o.err != nil {
		o.cancel()
	}
}

// item is one event of job prompt.
type item struct {
	prompt int
	ev     scheduler.GenEvent
}

// merged is the events of a request's streams (one per prompt) in one
// channel, closed when all of theirs are; usage is valid then.
type merged struct {
	ch     chan item
	mu     sync.Mutex
	totals Usage
}

func (m *merged) usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.totals
}

// fanIn merges streams. Once ctx ends, what still arrives is dropped (the
// scheduler closes the streams of a cancelled request).
func fanIn(ctx context.Context, streams []*scheduler.GenStream) *merged {
	m := &merged{ch: make(chan item, 16)}
	var wg sync.WaitGroup
	for p, st := range streams {
		wg.Go(func() {
			for ev := range st.Events() {
				select {
				case m.ch <- item{p, ev}:
				case <-ctx.Done():
				}
			}
			u := st.Usage()
			m.mu.Lock()
			m.totals.PromptTokens += u.PromptTokens
			m.totals.CompletionTokens += u.CompletionTokens
			m.totals.TotalTokens += u.PromptTokens + u.CompletionTokens
			m.mu.Unlock()
		})
	}
	go func() {
		wg.Wait()
		close(m.ch)
	}()
	return m
}

func writeJSON(w http.ResponseWriter, code int, v any) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, "encoding the answer failed: "+err.Error(), http.StatusInternalServerError)
		return http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
	return code
}

// errorWriter answers an error before any answer was sent: OpenAI's error
// object on the /v1 paths, plain text on the EAS form.
type errorWriter struct {
	w      http.ResponseWriter
	openai bool
	s      *Service
}

// badRequest answers a decoding error: 400, or 404 for an unknown model.
func (ew errorWriter) badRequest(err error) int {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return ew.fail(http.StatusInternalServerError, "", "", "", err.Error())
	}
	code := http.StatusBadRequest
	if fe.Code == "model_not_found" {
		code = http.StatusNotFound
	}
	return ew.fail(code, "invalid_request_error", fe.Param, fe.Code, fe.Msg)
}

// failErr answers err with code (the scheduler's sentinels, a bad request
// the scheduler found, a body the server refused).
func (ew errorWriter) failErr(code int, err error) int {
	return ew.fail(code, "", "", "", err.Error())
}

func (ew errorWriter) fail(code int, typ, param, errCode, msg string) int {
	if code == http.StatusInternalServerError && ew.s.Log != nil {
		ew.s.Log.Error("generation failed", "service", ew.s.Name, "err", msg)
	}
	if code == http.StatusRequestTimeout {
		ew.w.Header().Set("Connection", "close") // as every EAS door does
	}
	if !ew.openai {
		ew.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ew.w.WriteHeader(code)
		_, _ = ew.w.Write([]byte(msg))
		return code
	}
	b := errorBody(code, param, errCode, msg)
	if typ != "" {
		b.Error.Type = typ
	}
	return writeJSON(ew.w, code, b)
}

// errorBody is OpenAI's error object for a status code.
func errorBody(code int, param, errCode, msg string) *ErrorBody {
	b := &ErrorBody{Error: ErrorObject{Message: msg, Type: errorType(code)}}
	if param != "" {
		b.Error.Param = &param
	}
	if errCode == "" {
		errCode = defaultCode(code)
	}
	if errCode != "" {
		b.Error.Code = &errCode
	}
	return b
}

// errorType is the error object's type for a status code.
func errorType(code int) string {
	switch code {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusRequestTimeout:
		return "timeout_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 450, http.StatusServiceUnavailable:
		return "overloaded_error"
	default:
		return "server_error"
	}
}

func defaultCode(code int) string {
	switch code {
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case 450:
		return "queue_full"
	case http.StatusServiceUnavailable:
		return "service_unavailable"
	case http.StatusRequestTimeout:
		return "timeout"
	}
	return ""
}
