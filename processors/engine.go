package processors

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/eas-server/eas-server/internal/scheduler"
)

// Engine is a processor with its payload types erased, as the scheduler and
// the server drive it. Adapt is the only way to make one, so the only type
// assertions between the server and a processor are the ones below, and
// they cannot fail: every payload an Engine runs came from its own Decode or
// FromTensors.
type Engine struct {
	proc    Processor
	decode  func(context.Context, *Request) (any, error)
	run     func(context.Context, []any) ([]any, error)
	encode  func(ctx context.Context, p, r any) (*Response, error)
	key     func(any) (string, bool) // nil: payloads never share a run
	tensors *tensorDoor              // nil: no KServe doors
}

// tensorDoor is the erased form of Tensors[P, R].
type tensorDoor struct {
	platform func() string
	from     func(context.Context, *TensorPayload) (any, error)
	to       func(ctx context.Context, p, r any) (*TensorResult, error)
}

// Adapt wraps a typed processor for the scheduler and the server.
func Adapt[P, R any](t Typed[P, R]) *Engine {
	e := &Engine{
		proc:   t,
		decode: func(ctx context.Context, req *Request) (any, error) { return t.Decode(ctx, req) },
		run: func(ctx context.Context, batch []any) ([]any, error) {
			ps := make([]P, len(batch))
			for i, b := range batch {
				ps[i] = b.(P)
			}
			rs, err := t.Run(ctx, ps)
			var failed PayloadErrors
			if err != nil && !errors.As(err, &failed) {
				return nil, err
			}
			if len(rs) != len(ps) {
				return nil, fmt.Errorf("processor returned %d results for a batch of %d", len(rs), len(ps))
			}
			if failed != nil && len(failed) != len(ps) {
				return nil, fmt.Errorf("processor returned %d payload errors for a batch of %d", len(failed), len(ps))
			}
			out := make([]any, len(rs))
			for i, r := range rs {
				if failed != nil && failed[i] != nil {
					out[i] = scheduler.Failed{Err: failed[i]}
				} else {
					out[i] = r
				}
			}
			return out, nil
		},
		encode: func(ctx context.Context, p, r any) (*Response, error) { return t.Encode(ctx, p.(P), r.(R)) },
	}
	if b, ok := t.(Batcher[P]); ok {
		e.key = func(p any) (string, bool) { return b.BatchKey(p.(P)) }
	}
	if ts, ok := t.(Tensors[P, R]); ok {
		e.tensors = &tensorDoor{
			platform: ts.Platform,
			from:     func(ctx context.Context, tp *TensorPayload) (any, error) { return ts.FromTensors(ctx, tp) },
			to: func(ctx context.Context, p, r any) (*TensorResult, error) {
				return ts.ToTensors(ctx, p.(P), r.(R))
			},
		}
	}
	return e
}

// Processor returns the processor itself, for its lifecycle and its
// optional interfaces (Closer, Healther, Warmer, ModelRouter, ...).
func (e *Engine) Processor() Processor { return e.proc }

// Decode decodes a request into the processor's payload, under the
// request's ctx.
func (e *Engine) Decode(ctx context.Context, req *Request) (any, error) { return e.decode(ctx, req) }

// Run runs a batch of payloads made by this Engine; it is the scheduler's
// run function. A payload the processor failed alone (PayloadErrors) has a
// scheduler.Failed for its result.
func (e *Engine) Run(ctx context.Context, batch []any) ([]any, error) { return e.run(ctx, batch) }

// Encode encodes one payload's result, under the request's ctx.
func (e *Engine) Encode(ctx context.Context, p, r any) (*Response, error) { return e.encode(ctx, p, r) }

// BatchKey is the scheduler's key function; nil when the processor never
// merges payloads.
func (e *Engine) BatchKey() func(any) (string, bool) { return e.key }

// TensorGate is implemented by processors that implement Tensors but serve
// tensors only for some of the models they load (a python custom
// processor: a batch-inference model class does, an allspark processor
// does not). ServesTensors asks it; it may change only at Load.
type TensorGate interface {
	TensorsServed() bool
}

// ServesTensors reports whether the KServe v2 doors may call the processor.
func (e *Engine) ServesTensors() bool {
	if e.tensors == nil {
		return false
	}
	if g, ok := e.proc.(TensorGate); ok {
		return g.TensorsServed()
	}
	return true
}

// Platform names the runtime for KServe model metadata; "" unless
// ServesTensors.
func (e *Engine) Platform() string {
	if !e.ServesTensors() {
		return ""
	}
	return e.tensors.platform()
}

// ErrNoTensors is what FromTensors and ToTensors answer for an Engine whose
// processor does not serve tensors (ServesTensors is false): a 501, never a
// nil dereference.
var ErrNoTensors = &StatusError{Code: http.StatusNotImplemented, Err: errors.New("this service's processor does not serve tensors (the KServe v2 doors); use POST /api/predict/<service>")}

// FromTensors makes a payload from KServe tensors, under the request's
// ctx; ErrNoTensors unless ServesTensors.
func (e *Engine) FromTensors(ctx context.Context, tp *TensorPayload) (any, error) {
	if !e.ServesTensors() {
		return nil, ErrNoTensors
	}
	return e.tensors.from(ctx, tp)
}

// ToTensors turns a result into tensors, under the request's ctx;
// ErrNoTensors unless ServesTensors.
func (e *Engine) ToTensors(ctx context.Context, p, r any) (*TensorResult, error) {
	if !e.ServesTensors() {
		return nil, ErrNoTensors
	}
	return e.tensors.to(ctx, p, r)
}
