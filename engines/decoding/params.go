// Package decoding turns a model's next-token logits into tokens, one step of
// one sequence at a time: the logits processors (penalties, temperature,
// top-k, top-p, min-p), seeded sampling, logprobs, and the stop conditions
// (stop strings that span tokens, stop and eos ids, max_tokens). It is pure
// Go and knows nothing of models or batches; the sequence scheduler calls a
// Sampler and a StopMatcher once per step per sequence.
package decoding

import (
	"fmt"
	"math"
)

// Params are one request's decoding parameters, as OpenAI's and vLLM's
// completions APIs name them. DefaultParams gives the neutral values; the
// zero value is not valid (TopP and RepetitionPenalty 0).
type Params struct {
	// Temperature divides the logits; 0 is greedy (argmax).
	Temperature float64
	// TopK keeps the K most likely tokens (ties at the K-th kept); 0 or -1
	// keeps all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (the token that crosses it kept); 1 keeps all.
	TopP float64
	// MinP drops the tokens less likely than MinP times the most likely
	// one; 0 keeps all.
	MinP float64
	// RepetitionPenalty is Hugging Face's: over the tokens seen in the
	// prompt and the output, a positive logit is divided by it, a negative
	// one multiplied. 1 is none.
	RepetitionPenalty float64
	// PresencePenalty and FrequencyPenalty are OpenAI's, over the output
	// tokens: logit -= frequency*count + presence*(count > 0).
	PresencePenalty, FrequencyPenalty float64
	// Seed makes sampling reproducible when HasSeed; otherwise each
	// Sampler draws its own seed.
	Seed    uint64
	HasSeed bool
	// MaxTokens is the most tokens generated (finish reason "length");
	// MinTokens the fewest: until then eos and stop ids are masked and stop
	// strings are not matched.
	MaxTokens, MinTokens int
	// IgnoreEOS keeps generating past an eos id (stop ids still stop).
	IgnoreEOS bool
	// StopTokenIDs stop generation; the token's text is not emitted.
	StopTokenIDs []int32
	// EOSTokenIDs come from the model's config (generation_config.json's
	// eos_token_id); they stop generation unless IgnoreEOS.
	EOSTokenIDs []int32
	// Stop strings end the output before the first of them.
	Stop []string
	// Logprobs asks for each chosen token's logprob, TopLogprobs for that
	// many most likely alternatives (0 to 20).
	Logprobs    bool
	TopLogprobs int
}

// MaxTopLogprobs is OpenAI's bound on top_logprobs.
const MaxTopLogprobs = 20

// DefaultParams are OpenAI's defaults: temperature 1, no truncation, no
// penalties, max_tokens 16.
func DefaultParams() Params {
	return Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1, MaxTokens: 16}
}

// Greedy says whether the next token is the argmax.
func (p *Params) Greedy() bool { return p.Temperature == 0 }

// Validate checks the ranges OpenAI and vLLM accept; an error names the field
// as the API spells it.
func (p *Params) Validate() error {
	finite := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s must be a finite number, got %v", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"temperature", p.Temperature}, {"top_p", p.TopP}, {"min_p", p.MinP}, {"repetition_penalty", p.RepetitionPenalty},
		{"presence_penalty", p.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty}} {
		if err := finite(f.name, f.v); err != nil {
			return err
		}
	}
	switch {
	case p.Temperature < 0 || p.Temperature > 2:
		return fmt.Errorf("temperature must be in [0, 2], got %g", p.Temperature)
	case p.TopK < -1:
		return fmt.Errorf("top_k must be -1 or 0 (all tokens) or at least 1, got %d", p.TopK)
	case p.TopP <= 0 || p.TopP > 1:
		return fmt.Errorf("top_p must be in (0, 1], got %g", p.TopP)
	case p.MinP < 0 || p.MinP > 1:
		return fmt.Errorf("min_p must be in [0, 1], got %g", p.MinP)
	case p.RepetitionPenalty <= 0:
		return fmt.Errorf("repetition_penalty must be greater than 0, got %g", p.RepetitionPenalty)
	case p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return fmt.Errorf("presence_penalty must be in [-2, 2], got %g", p.PresencePenalty)
	case p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return fmt.Errorf("frequency_penalty must be in [-2, 2], got %g", p.FrequencyPenalty)
	case p.MaxTokens < 1:
		return fmt.Errorf("max_tokens must be at least 1, got %d", p.MaxTokens)
	case p.MinTokens < 0:
		return fmt.Errorf("min_tokens must be at least 0, got %d", p.MinTokens)
	case p.MinTokens > p.MaxTokens:
		return fmt.Errorf("min_tokens (%d) must not exceed max_tokens (%d)", p.MinTokens, p.MaxTokens)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("top_logprobs must be in [0, %d], got %d", MaxTopLogprobs, p.TopLogprobs)
	case p.TopLogprobs > 0 && !p.Logprobs:
		return fmt.Errorf("top_logprobs needs logprobs to be true")
	}
	for i, s := range p.Stop {
		if s == "" {
			return fmt.Errorf("stop[%d] must not be empty", i)
		}
	}
	for i, id := range p.StopTokenIDs {
		if id < 0 {
			return fmt.Errorf("stop_token_ids[%d] must not be negative, got %d", i, id)
		}
	}
	return nil
}
