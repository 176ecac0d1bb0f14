package processors

import "github.com/eas-server/eas-server/internal/scheduler"

// Generative is implemented by a processor that generates text (llm_cpu,
// llm_gpu). Its answers are streamed per request, token by token, so the
// request batcher does not run it: the service gives its Generator to a
// sequence scheduler (internal/scheduler's Sequences), which calls Step once
// per iteration with every sequence in flight, and the server's OpenAI doors
// (/v1/completions, /v1/chat/completions, also under
// /api/predict/<service>/) feed that scheduler. Admission, deadlines
// (rpc.keepalive) and the rate limit are the service's, as for every other
// processor. Such a processor's Decode, Run and Encode answer the plain
// /api/predict/<service> form, which the server also routes to the
// sequence scheduler.
type Generative interface {
	Generator() *Generator
}

// The generative contract's types live with the sequence scheduler that
// consumes them (package scheduler cannot import this one); a processor
// names them here.
type (
	// Generator is a loaded generative model as the sequence scheduler and
	// the OpenAI doors see it.
	Generator = scheduler.Generator
	// Stepper runs a decoder model one iteration at a time over a batch of
	// sequences.
	Stepper = scheduler.Stepper
	// Sequence is one sequence's place in a Stepper.
	Sequence = scheduler.Sequence
	// StepInput is one sequence's part of a Step.
	StepInput = scheduler.StepInput
)
