// Package echo is the echo processor: it returns the request body unchanged.
// It needs no model, so it serves demos and the tests of the request path;
// model_config {"sleep_ms": N} makes every request take N ms, so deadlines,
// queue limits and batching can be exercised.
package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/eas-server/eas-server/processors"
)

func init() {
	processors.Register("echo", "returns the request body; model_config {\"sleep_ms\": N} delays each request (tests, demos)",
		func() processors.Processor { return &Processor{} })
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
	raw := []byte(spec.ModelConfig)
	if len(raw) > 0 && raw[0] == '"' { // model_config given as a JSON string
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("model_config: %w", err)
		}
		raw = []byte(s)
	}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p.cfg); err != nil {
			return fmt.Errorf("model_config: %v; echo accepts {\"sleep_ms\": N, \"panic_on\": \"body\"}", err)
		}
	}
	if p.cfg.SleepMS < 0 || p.cfg.SleepMS > 600000 {
		return fmt.Errorf("model_config.sleep_ms: must be between 0 and 600000, got %d", p.cfg.SleepMS)
	}
	return nil
}

// Load does nothing: echo has no model.
func (p *Processor) Load(context.Context) error { return nil }

// Metadata describes the one bytes input and output.
func (p *Processor) Metadata() processors.Metadata {
	return processors.Metadata{
		Processor: "echo",
		Inputs:    []processors.IOSpec{{Name: "body", DType: "BYTES"}},
		Outputs:   []processors.IOSpec{{Name: "body", DType: "BYTES"}},
	}
}

// Decode keeps the body as the payload.
func (p *Processor) Decode(req *processors.Request) (any, error) { return req.Body, nil }

// Run returns each payload after the configured sleep; it stops early when
// ctx ends so a timed-out request frees its worker.
func (p *Processor) Run(ctx context.Context, batch []any) ([]any, error) {
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
			if string(b.([]byte)) == p.cfg.PanicOn {
				panic("echo: panic_on matched the request body")
			}
		}
	}
	return batch, nil
}

// Encode returns the body.
func (p *Processor) Encode(_, result any) (*processors.Response, error) {
	return &processors.Response{Body: result.([]byte)}, nil
}

var _ processors.Processor = (*Processor)(nil)
