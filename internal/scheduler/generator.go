package scheduler

import (
	"context"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/engines/tokenizer"
)

// Generator is a loaded generative model as the sequence scheduler and the
// OpenAI doors see it. Every field is set by Load and read-only afterwards.
type Generator struct {
	// Model is the id /v1/models lists and answers carry ("" = the
	// service's name).
	Model string
	// Vocab is the length of one row of logits.
	Vocab int
	// ContextLength is the most tokens, prompt and generated together, one
	// sequence may hold (config.json's max_position_embeddings or
	// n_positions, or less where model_config says so).
	ContextLength int
	// EOS are the ids that end a sequence (generation_config.json's
	// eos_token_id, else config.json's).
	EOS []int32
	// Defaults are the model's own sampling defaults over OpenAI's
	// (generation_config.json's temperature, top_k, top_p,
	// repetition_penalty when it sets do_sample); a request overrides them.
	Defaults decoding.Params
	// Tokenizer encodes prompts and decodes generated tokens.
	Tokenizer *tokenizer.Tokenizer
	// Chat renders a chat conversation with the model's chat_template
	// (tokenizer_config.json) to the prompt text; it is nil when the model
	// has no template, and chat requests are then refused. messages are the
	// request's as decoded JSON objects (role, content, ...); extra holds
	// further template variables (chat_template_kwargs, tools).
	Chat func(messages []map[string]any, addGenerationPrompt bool, extra map[string]any) (string, error)
	// Stepper runs the model.
	Stepper Stepper
	// Limits are model_config's bounds on the sequence scheduler
	// (max_num_seqs, max_num_batched_tokens, max_cached_tokens); the
	// service adds metadata.rpc's queue, deadline and rate limit.
	Limits SeqConfig
}

// Stepper runs a decoder model one iteration at a time over a batch of
// sequences, each with its own key/value cache. Step is called from one
// goroutine at a time (the sequence scheduler's loop).
type Stepper interface {
	// NewSequence starts an empty sequence (no cached tokens).
	NewSequence() Sequence
	// Step feeds each input's tokens to its sequence (a prompt chunk, or
	// the one token generated last) and returns, per input and in order,
	// the logits (Generator.Vocab of them) that follow its last token. A
	// sequence's cache grows by the tokens fed. The rows may alias the
	// Stepper's buffers: they are valid until the next Step. A sequence
	// appears at most once per Step.
	Step(ctx context.Context, batch []StepInput) ([][]float32, error)
}

// Sequence is one sequence's place in a Stepper: its cached tokens.
type Sequence interface {
	// Len is the number of tokens in its cache.
	Len() int
	// Release frees its cache; the sequence is not used again.
	Release()
}

// StepInput is one sequence's part of a Step.
type StepInput struct {
	Seq    Sequence
	Tokens []int32
}
