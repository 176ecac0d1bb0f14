package openai

import (
	"fmt"
	"strings"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/internal/scheduler"
)

// job is one prompt's generation request, and the text that comes before
// each of its choices' outputs (completions' echo).
type job struct {
	Req  scheduler.GenRequest
	Echo string
}

// ModelID is the id a service's model answers to and is listed as: the
// Generator's Model, or the service's name when that is "".
func ModelID(g *scheduler.Generator, service string) string {
	if g.Model != "" {
		return g.Model
	}
	return service
}

// checkModel accepts a request without a model, or with the model's id or
// the service's name; anything else is OpenAI's 404 model_not_found.
func checkModel(s *sampling, g *scheduler.Generator, service string) error {
	if s.Model == nil || *s.Model == ModelID(g, service) || *s.Model == service {
		return nil
	}
	return &FieldError{Param: "model", Code: "model_not_found",
		Msg: fmt.Sprintf("The model `%s` does not exist; this service serves %q", *s.Model, ModelID(g, service))}
}

// params is the request's decoding parameters over the model's defaults,
// MaxTokens left for maxTokens.
func params(s *sampling, g *scheduler.Generator) (decoding.Params, error) {
	p := g.Defaults
	if p.TopP == 0 && p.RepetitionPenalty == 0 { // Defaults not set: OpenAI's
		p = decoding.DefaultParams()
	}
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.Temperature, s.Temperature)
	set(&p.TopP, s.TopP)
	set(&p.MinP, s.MinP)
	set(&p.RepetitionPenalty, s.RepetitionPenalty)
	set(&p.PresencePenalty, s.PresencePenalty)
	set(&p.FrequencyPenalty, s.FrequencyPenalty)
	if s.TopK != nil {
		p.TopK = int(*s.TopK)
	}
	if s.MinTokens != nil {
		p.MinTokens = int(*s.MinTokens)
	}
	if s.Seed != nil {
		p.Seed, p.HasSeed = uint64(*s.Seed), true
	}
	p.IgnoreEOS = s.IgnoreEOS
	p.Stop = s.Stop
	p.StopTokenIDs = s.StopTokenIDs
	p.EOSTokenIDs = g.EOS
	p.Logprobs, p.TopLogprobs = s.Logprobs, s.TopLogprobs
	for i, id := range s.StopTokenIDs {
		if g.Vocab > 0 && int(id) >= g.Vocab {
			return p, fieldErr("stop_token_ids", "stop_token_ids[%d] is %d, past the model's vocabulary of %d tokens", i, id, g.Vocab)
		}
	}
	return p, nil
}

// withMaxTokens sets p.MaxTokens for a prompt of n tokens: the request's
// max_tokens when it fits the context with the prompt, else what is left of
// the context (vLLM's default), and validates p.
// param is the prompt's field (prompt, messages), what names it in
// messages (prompt[1], the rendered conversation).
func withMaxTokens(p decoding.Params, s *sampling, n int, g *scheduler.Generator, param, what string) (decoding.Params, error) {
	ctx := g.ContextLength
	if n == 0 {
		return p, &FieldError{Param: param, Msg: fmt.Sprintf("%s: the %s is empty (0 tokens); send at least one token", param, what)}
	}
	if ctx > 0 && n >= ctx {
		return p, &FieldError{Param: param, Code: "context_length_exceeded",
			Msg: fmt.Sprintf("%s: the %s has %d tokens, but the model's context is %d tokens (prompt and answer together); shorten it", param, what, n, ctx)}
	}
	switch {
	case s.MaxTokens != nil:
		p.MaxTokens = int(*s.MaxTokens)
		if ctx > 0 && n+p.MaxTokens > ctx {
			return p, &FieldError{Param: "max_tokens", Code: "context_length_exceeded",
				Msg: fmt.Sprintf("max_tokens: the %s has %d tokens and max_tokens is %d, %d in all, over the model's context of %d tokens; lower max_tokens to at most %d or shorten the %s",
					what, n, p.MaxTokens, n+p.MaxTokens, ctx, ctx-n, what)}
		}
	case ctx > 0:
		p.MaxTokens = ctx - n
	}
	if err := p.Validate(); err != nil {
		return p, validateErr(err)
	}
	return p, nil
}

// validateErr turns a decoding.Params.Validate error, whose message starts
// with the field's name, into a *FieldError.
func validateErr(err error) error {
	msg := err.Error()
	name, _, _ := strings.Cut(msg, " ")
	if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz_") != "" {
		name = ""
	}
	return &FieldError{Param: name, Msg: msg}
}

// prepareCompletion tokenizes a completion request's prompts (with the
// tokenizer's special tokens, as vLLM does) and makes one job per prompt.
func prepareCompletion(r *completionRequest, g *scheduler.Generator) ([]job, error) {
	base, err := params(&r.sampling, g)
	if err != nil {
		return nil, err
	}
	jobs := make([]job, len(r.Prompts))
	for i, pr := range r.Prompts {
		what := "prompt"
		if len(r.Prompts) > 1 {
			what = fmt.Sprintf("prompt[%d]", i)
		}
		ids := pr.IDs
		if pr.IsTokens {
			for j, id := range ids {
				if g.Vocab > 0 && int(id) >= g.Vocab {
					return nil, &FieldError{Param: "prompt", Msg: fmt.Sprintf("%s: token %d is id %d, past the model's vocabulary of %d tokens", what, j, id, g.Vocab)}
				}
			}
		} else {
			enc, err := g.Tokenizer.Encode(pr.Text, true)
			if err != nil {
				return nil, &FieldError{Param: "prompt", Msg: what + ": " + err.Error()}
			}
			ids = enc.IDs
		}
		p, err := withMaxTokens(base, &r.sampling, len(ids), g, "prompt", what)
		if err != nil {
			return nil, err
		}
		jobs[i].Req = scheduler.GenRequest{Prompt: ids, Params: p, N: r.N, SkipSpecial: r.SkipSpecial}
		if r.Echo {
			if pr.IsTokens {
				if jobs[i].Echo, err = g.Tokenizer.Decode(ids, false); err != nil {
					return nil, fmt.Errorf("decode the prompt for echo: %w", err)
				}
			} else {
				jobs[i].Echo = pr.Text
			}
		}
	}
	return jobs, nil
}

// prepareChat renders a chat request with the model's chat template and
// tokenizes the text without adding special tokens: the template already
// holds them (transformers' apply_chat_template(tokenize=True) does the
// same).
func prepareChat(r *chatRequest, g *scheduler.Generator) ([]job, error) {
	if g.Chat == nil {
		return nil, &FieldError{Param: "messages", Msg: "messages: this model has no chat_template (tokenizer_config.json), so it cannot take a conversation; send a prompt to /v1/completions instead"}
	}
	base, err := params(&r.sampling, g)
	if err != nil {
		return nil, err
	}
	text, err := g.Chat(r.Messages, r.AddGenerationPrompt, r.Extra)
	if err != nil {
		return nil, &FieldError{Param: "messages", Msg: "messages: the model's chat_template refused them: " + err.Error()}
	}
	if r.ContinueFinal {
		// The template closed the last message; the answer continues it
		// instead, so the text ends where its content does (transformers'
		// continue_final_message cuts it the same way).
		last, _ := r.Messages[len(r.Messages)-1]["content"].(string)
		last = strings.TrimSpace(last)
		at := strings.LastIndex(text, last)
		if last == "" || at < 0 {
			return nil, fieldErr("continue_final_message", "the last message's content is empty or not in the rendered conversation; nothing to continue")
		}
		text = text[:at+len(last)]
	}
	enc, err := g.Tokenizer.Encode(text, false)
	if err != nil {
		return nil, &FieldError{Param: "messages", Msg: "messages: " + err.Error()}
	}
	p, err := withMaxTokens(base, &r.sampling, len(enc.IDs), g, "messages", "rendered conversation")
	if err != nil {
		return nil, err
	}
	return []job{{Req: scheduler.GenRequest{Prompt: enc.IDs, Params: p, N: r.N, SkipSpecial: r.SkipSpecial}}}, nil
}
