// Package echo is the echo processor: it returns the request body unchanged.
// It needs no model, so it serves demos and the tests of the request path;
// model_config {"sleep_ms": N} makes every request take N ms, so deadlines,
// queue limits and batching can be exercised.
package echo

import (
	"context"
	"fmt"
	"time"

	"github.com/eas-server/eas-server/processors"
)

func init() {
	processors.Register("echo", "returns the request body; model_config {\"sleep_ms\": N} delays each request (tests, demos)",
		func() *processors.Engine { return processors.Adapt[[]byte, []byte](&Processor{}) })
}

// Config is echo's model_config.
type Config struct {
	SleepMS int `json:"sleep_ms"` // delay per request, 0..600000 ms
	// PanicOn makes a request whose body equals it panic, to exercise
	// panic recovery end to end.
	PanicOn string `json:"panic_on"`
}

// Processor echoes request bodies. It is safe for concurrent use.
type Processor struct {
	cfg Config
}

// Configure reads model_config.
func (p *Processor) Configure(spec processors.Spec) error {
	if err := spec.DecodeConfig(&p.cfg, `{"sleep_ms": N, "panic_on": "body"}`); err != nil {
		return err
	}
	if p.cfg.SleepMS < 0 || p.cfg.SleepMS > 600000 {
		return fmt.Errorf("model_config.sleep_ms: must be between 0 and 600000, got %d", p.cfg.SleepMS)
	}
	return nil
}

// Load does nothing: echo has no model.
func (p *Processor) Load(context.Context, processors.Files) error { return nil }

// Metadata describes the one bytes input and output.
func (p *Processor) Metadata() processors.Metadata {
	return processors.Metadata{
		Processor: "echo",
		Inputs:    []processors.IOSpec{{Name: "body", DType: "BYTES"}},
		Outputs:   []processors.IOSpec{{Name: "body", DType: "BYTES"}},
	}
}

// Decode keeps the body as the payload.
func (p *Processor) Decode(_ context.Context, req *processors.Request) ([]byte, error) {
	return req.Body, nil
}

// Run returns each payload after the configured sleep; it stops early when
// ctx ends so a timed-out request frees its worker.
func (p *Processor) Run(ctx context.Context, batch [][]byte) ([][]byte, error) {
	if p.cfg.SleepMS > 0 {
		t := time.NewTimer(time.Duration(p.cfg.SleepMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p.cfg.PanicOn != "" {
		for _, b := range batch {
			if string(b) == p.cfg.PanicOn {
				panic("echo: panic_on matched the request body")
			}
		}
	}
	return batch, nil
}

// Encode returns the body.
func (p *Processor) Encode(_ context.Context, _, result []byte) (*processors.Response, error) {
	return &processors.Response{Body: result}, nil
}

var _ processors.Typed[[]byte, []byte] = (*Processor)(nil)
