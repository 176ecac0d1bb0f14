package scheduler

import (
	"github.com/eas-server/eas-server/engines/decoding"
)

// GenRequest is one generation request: a tokenized prompt and how to
// continue it. N sequences share the prompt (OpenAI's n), each sampled on
// its own (with a seed, sequence i draws from seed+i).
type GenRequest struct {
	Prompt []int32
	Params decoding.Params
	N      int // choices; 0 means 1
	// SkipSpecial leaves special tokens' text out of the output (OpenAI
	// servers' default).
	SkipSpecial bool
}

// GenEvent is one step's news of one choice. Text is what the choice adds to
// its output now (never half a UTF-8 character, never text that may still
// turn out to start a stop string); Tokens are the tokens generated this
// step, with their logprobs when asked. The last event of a choice has
// Finish set; Err is set when the choice failed (its sequence is freed) and
// is then the last event.
type GenEvent struct {
	Index    int
	Text     string
	Tokens   []int32
	Logprobs []TokenLogprobs // one per token when Params.Logprobs
	Finish   decoding.FinishReason
	// StopString is the stop string that ended the choice, when one did.
	StopString string
	Err        error
}

// TokenLogprobs is a generated token's logprob and the most likely
// alternatives (Params.TopLogprobs of them).
type TokenLogprobs struct {
	Token   int32
	Logprob float32
	Top     []decoding.TokenLogprob
}

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens     int
	CompletionTokens int // over all choices
}
