package custom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
)

// WithHooks wraps a built-in processor so that service.json's pre_process
// runs on each request body before the built-in Decode, and post_process on
// each response body after its Encode, in the same request. The built-in
// step keeps its batching: the hooks run on the request's goroutine, one
// call each, while the model's Run still sees whole batches.
func WithHooks(inner *processors.Engine) *processors.Engine {
	return processors.Adapt[*hookPayload, any](&hooked{inner: inner})
}

// hooked is a built-in processor with pre- and post-processing.
type hooked struct {
	inner     *processors.Engine
	spec      processors.Spec
	pre, post *Processor // nil when not given
}

// hookPayload is the built-in processor's payload. Post-processing runs
// under the ctx Encode is given, the request's.
type hookPayload struct {
	inner any
}

// Configure configures the built-in processor and the hooks.
func (h *hooked) Configure(spec processors.Spec) error {
	if spec.Logger == nil { // eas-server validate
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	h.spec = spec
	if err := h.inner.Processor().Configure(spec); err != nil {
		return err
	}
	for _, x := range []struct {
		key  string
		hook *processors.Hook
		to   **Processor
	}{{"pre_process", spec.PreProcess, &h.pre}, {"post_process", spec.PostProcess, &h.post}} {
		if x.hook == nil {
			continue
		}
		if x.hook.Type != "cpp" && x.hook.Type != "python" {
			return fmt.Errorf("%s.processor_type: %q; use cpp or python", x.key, x.hook.Type)
		}
		p := &Processor{kind: x.hook.Type}
		hs := spec
		hs.Code = "custom_" + x.hook.Type
		hs.ProcessorType, hs.ProcessorEntry, hs.ModelConfig = x.hook.Type, x.hook.Entry, x.hook.Config
		hs.ModelSource, hs.ModelEntry = "", "" // the model is the built-in processor's
		hs.PreProcess, hs.PostProcess = nil, nil
		hs.Logger = spec.Logger.With("hook", x.key)
		if spec.Event != nil { // the hook's worker events name it
			key := x.key
			hs.Event = func(warning bool, reason, message string) { spec.Event(warning, reason, key+": "+message) }
		}
		if err := p.Configure(hs); err != nil {
			return fmt.Errorf("%s: %w", x.key, err)
		}
		*x.to = p
	}
	return nil
}

// Load loads the built-in processor, then fetches and starts the hooks.
func (h *hooked) Load(ctx context.Context, files processors.Files) (err error) {
	if err := h.inner.Processor().Load(ctx, files); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			h.Close() //nolint:errcheck // the load error is the one to report
		}
	}()
	for _, x := range []struct {
		key  string
		hook *processors.Hook
		p    *Processor
	}{{"pre_process", h.spec.PreProcess, h.pre}, {"post_process", h.spec.PostProcess, h.post}} {
		if x.p == nil {
			continue
		}
		if h.spec.Fetcher == nil {
			return fmt.Errorf("%s: no fetcher to download %s with", x.key, x.hook.Path)
		}
		local, err := h.spec.Fetcher.Fetch(ctx, x.hook.Path)
		if err != nil {
			return fmt.Errorf("%s.processor_path: %w", x.key, err)
		}
		if err := x.p.Load(ctx, processors.Files{ProcessorPath: local}); err != nil {
			return fmt.Errorf("%s: %w", x.key, err)
		}
	}
	return nil
}

// Metadata is the built-in processor's, with a body in place of its inputs
// (outputs) when a pre (post) hook takes the request (makes the answer).
func (h *hooked) Metadata() processors.Metadata {
	md := h.inner.Processor().Metadata()
	extra := map[string]any{}
	for k, v := range md.Extra {
		extra[k] = v
	}
	body := []processors.IOSpec{{Name: "body", DType: "BYTES"}}
	if h.pre != nil {
		md.Inputs = body
		extra["pre_process"] = h.pre.Metadata().Processor
	}
	if h.post != nil {
		md.Outputs = body
		extra["post_process"] = h.post.Metadata().Processor
	}
	md.Extra = extra
	return md
}

// Decode runs pre_process on the body, then the built-in Decode on what it
// returned.
func (h *hooked) Decode(ctx context.Context, req *processors.Request) (*hookPayload, error) {
	if h.pre != nil {
		body, err := h.pre.hook(ctx, "pre_process", req.Body)
		if err != nil {
			return nil, err
		}
		r := *req
		r.Body = body
		req = &r
	}
	p, err := h.inner.Decode(ctx, req)
	if err != nil {
		return nil, err
	}
	return &hookPayload{inner: p}, nil
}

// hook runs one hook call, within rpc.keepalive, and turns a status other
// than 200 into the request's error, with the hook's body as the message.
// Hooks run on the request's goroutine, outside the scheduler, so they keep
// to the deadline themselves.
func (p *Processor) hook(ctx context.Context, key string, body []byte) ([]byte, error) {
	p.mu.Lock()
	pl := p.pool
	p.mu.Unlock()
	if pl == nil {
		return nil, &processors.StatusError{Code: http.StatusServiceUnavailable, Err: errors.New(key + " is closed")}
	}
	if d := p.spec.Keepalive; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	r := pl.call(ctx, body)
	switch {
	case errors.Is(r.Err, context.DeadlineExceeded):
		return nil, &processors.StatusError{Code: http.StatusRequestTimeout, Err: fmt.Errorf("%s did not answer within rpc.keepalive (%s)", key, p.spec.Keepalive)}
	case errors.Is(r.Err, context.Canceled):
		return nil, &processors.StatusError{Code: 499, Err: fmt.Errorf("%s: the client closed the request", key)}
	case r.Err != nil:
		return nil, r.Err
	case r.Status != http.StatusOK:
		return nil, &processors.StatusError{Code: r.Status, Err: fmt.Errorf("%s: %s", key, r.Body)}
	}
	return r.Body, nil
}

// BatchKey is the built-in processor's, so batching works as without hooks.
func (h *hooked) BatchKey(p *hookPayload) (string, bool) {
	if key := h.inner.BatchKey(); key != nil {
		return key(p.inner)
	}
	return "", false
}

// Run runs the built-in processor on the batch. A payload it failed alone
// fails alone here too.
func (h *hooked) Run(ctx context.Context, batch []*hookPayload) ([]any, error) {
	in := make([]any, len(batch))
	for i, p := range batch {
		in[i] = p.inner
	}
	out, err := h.inner.Run(ctx, in)
	if err != nil {
		return nil, err
	}
	errs := make(processors.PayloadErrors, len(out))
	for i, r := range out {
		if f, ok := r.(scheduler.Failed); ok {
			errs[i] = f.Err
		}
	}
	return out, errs.Err()
}

// Encode runs the built-in Encode, then post_process on its body.
func (h *hooked) Encode(ctx context.Context, p *hookPayload, r any) (*processors.Response, error) {
	resp, err := h.inner.Encode(ctx, p.inner, r)
	if err != nil || h.post == nil {
		return resp, err
	}
	body, err := h.post.hook(ctx, "post_process", resp.Body)
	if err != nil {
		return nil, err
	}
	return &processors.Response{Body: body, Header: resp.Header}, nil
}

// Warmup replays warm-up data through the built-in processor alone.
func (h *hooked) Warmup(ctx context.Context, path string) error {
	w, ok := h.inner.Processor().(processors.Warmer)
	if !ok {
		return errors.New("the built-in processor does not support warm-up; remove warm_up_data_path")
	}
	return w.Warmup(ctx, path)
}

// Healthy is the built-in processor's health and the hooks'.
func (h *hooked) Healthy(ctx context.Context) error {
	if hh, ok := h.inner.Processor().(processors.Healther); ok {
		if err := hh.Healthy(ctx); err != nil {
			return err
		}
	}
	for _, p := range []*Processor{h.pre, h.post} {
		if p != nil {
			if err := p.Healthy(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the hooks and the built-in processor.
func (h *hooked) Close() error {
	for _, p := range []*Processor{h.pre, h.post} {
		if p != nil {
			p.Close() //nolint:errcheck // Close of a custom processor never fails
		}
	}
	if c, ok := h.inner.Processor().(processors.Closer); ok {
		return c.Close()
	}
	return nil
}

var (
	_ processors.Typed[*hookPayload, any] = (*hooked)(nil)
	_ processors.Batcher[*hookPayload]    = (*hooked)(nil)
	_ processors.Warmer                   = (*hooked)(nil)
	_ processors.Healther                 = (*hooked)(nil)
	_ processors.Closer                   = (*hooked)(nil)
)
