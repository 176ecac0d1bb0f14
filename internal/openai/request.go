package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Bounds on what one request may ask, beyond the model's own limits (its
// context length, which the scheduler also enforces): each is far above
// what a client needs and keeps one request from holding the scheduler's
// loop (stop strings and stop ids are checked at every step).
const (
	// MaxN is the most choices per prompt (n).
	MaxN = 128
	// MaxStops is the most stop strings, and the most stop_token_ids.
	MaxStops = 64
	// MaxCompletionLogprobs is /v1/completions' bound on logprobs
	// (OpenAI's).
	MaxCompletionLogprobs = 5
)

// sampling holds the fields both APIs share, as sent: a nil pointer is a
// field not sent (or sent as null), so the model's default applies.
type sampling struct {
	Model                                      *string
	MaxTokens                                  *int64
	Temperature, TopP, MinP, RepetitionPenalty *float64
	PresencePenalty, FrequencyPenalty          *float64
	TopK, MinTokens, Seed                      *int64
	N                                          int
	Stream, IncludeUsage                       bool
	Stop                                       []string
	StopTokenIDs                               []int32
	IgnoreEOS                                  bool
	SkipSpecial                                bool // default true
	IncludeStopStr                             bool
	TokensAsIDs                                bool // vLLM's return_tokens_as_token_ids
	Logprobs                                   bool
	TopLogprobs                                int
}

// prompt is one prompt of /v1/completions: text, or token ids.
type prompt struct {
	Text     string
	IDs      []int32
	IsTokens bool
}

// completionRequest is a decoded /v1/completions body.
type completionRequest struct {
	sampling
	Prompts []prompt
	Echo    bool
}

// chatRequest is a decoded /v1/chat/completions body. Messages are as the
// chat template sees them (role "developer" is "system", content parts
// joined); Extra are further template variables (tools,
// chat_template_kwargs).
type chatRequest struct {
	sampling
	Messages            []map[string]any
	AddGenerationPrompt bool
	ContinueFinal       bool
	Extra               map[string]any
}

// The fields each API accepts, for the message of an unknown field.
var (
	commonFields = []string{"model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "seed",
		"presence_penalty", "frequency_penalty", "logit_bias (empty)", "user", "top_k", "min_p", "repetition_penalty",
		"min_tokens", "ignore_eos", "stop_token_ids", "skip_special_tokens", "include_stop_str_in_output", "return_tokens_as_token_ids"}
	completionFields = append([]string{"prompt", "echo", "logprobs", "best_of (= n)", "suffix (empty)"}, commonFields...)
	chatFields       = append([]string{"messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools",
		"tool_choice (none, auto)", "parallel_tool_calls", "response_format (text)", "chat_template_kwargs",
		"add_generation_prompt", "continue_final_message"}, commonFields...)
)

// openAIOnly are OpenAI's fields for features of its own service; each is
// refused by name rather than as unknown.
var openAIOnly = []string{"audio", "metadata", "modalities", "prediction", "prompt_cache_key", "reasoning_effort",
	"safety_identifier", "service_tier", "store", "verbosity", "web_search_options"}

// decodeSampling takes the fields both APIs share from o.
func decodeSampling(o *object) (sampling, error) {
	s := sampling{N: 1, SkipSpecial: true}
	var n *int64
	steps := []func() error{
		func() error { return o.str("model", &s.Model) },
		func() error { return o.integer("max_tokens", 1, math.MaxInt32, &s.MaxTokens) },
		func() error { return o.float("temperature", &s.Temperature) },
		func() error { return o.float("top_p", &s.TopP) },
		func() error { return o.float("min_p", &s.MinP) },
		func() error { return o.float("repetition_penalty", &s.RepetitionPenalty) },
		func() error { return o.float("presence_penalty", &s.PresencePenalty) },
		func() error { return o.float("frequency_penalty", &s.FrequencyPenalty) },
		func() error { return o.integer("top_k", -1, math.MaxInt32, &s.TopK) },
		func() error { return o.integer("min_tokens", 0, math.MaxInt32, &s.MinTokens) },
		func() error { return o.integer("seed", math.MinInt64, math.MaxInt64, &s.Seed) },
		func() error { return o.integer("n", 1, MaxN, &n) },
		func() error { return o.boolean("stream", &s.Stream) },
		func() error { return o.boolean("ignore_eos", &s.IgnoreEOS) },
		func() error { return o.boolean("skip_special_tokens", &s.SkipSpecial) },
		func() error { return o.boolean("include_stop_str_in_output", &s.IncludeStopStr) },
		func() error { return o.boolean("return_tokens_as_token_ids", &s.TokensAsIDs) },
		func() error { var u *string; return o.str("user", &u) },
		func() error { return decodeStop(o, &s) },
		func() error { return decodeStopIDs(o, &s) },
		func() error { return decodeLogitBias(o) },
		func() error { return decodeStreamOptions(o, &s) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return s, err
		}
	}
	if n != nil {
		s.N = int(*n)
	}
	for _, k := range openAIOnly {
		if err := o.refuse(k, "not supported by this server (a feature of OpenAI's own service); leave it out"); err != nil {
			return s, err
		}
	}
	return s, nil
}

func decodeStop(o *object, s *sampling) error {
	v, ok := o.take("stop")
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		s.Stop = []string{one}
	} else if err := json.Unmarshal(v, &s.Stop); err != nil {
		return fieldErr("stop", "must be a string or an array of strings, got %s", jsonKind(v))
	}
	if len(s.Stop) > MaxStops {
		return fieldErr("stop", "at most %d stop strings, got %d", MaxStops, len(s.Stop))
	}
	for i, x := range s.Stop {
		if x == "" {
			return fieldErr("stop", "stop[%d] is empty; every stop string needs at least one character", i)
		}
	}
	return nil
}

func decodeStopIDs(o *object, s *sampling) error {
	a, ok, err := o.array("stop_token_ids")
	if err != nil || !ok {
		return err
	}
	if len(a) > MaxStops {
		return fieldErr("stop_token_ids", "at most %d ids, got %d", MaxStops, len(a))
	}
	for i, v := range a {
		id, err := parseInt(v)
		if err != nil || id < 0 || id > math.MaxInt32 {
			return fieldErr("stop_token_ids", "stop_token_ids[%d] must be a token id (an integer from 0), got %s", i, describe(v))
		}
		s.StopTokenIDs = append(s.StopTokenIDs, int32(id))
	}
	return nil
}

func decodeLogitBias(o *object) error {
	v, ok := o.take("logit_bias")
	if !ok {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return fieldErr("logit_bias", "must be an object, got %s", jsonKind(v))
	}
	if len(m) > 0 {
		return fieldErr("logit_bias", "not supported by this server; leave it out (or send {})")
	}
	return nil
}

func decodeStreamOptions(o *object, s *sampling) error {
	v, ok := o.take("stream_options")
	if !ok {
		return nil
	}
	so, err := parseObject("stream_options", v)
	if err != nil {
		return err
	}
	if err := so.boolean("include_usage", &s.IncludeUsage); err != nil {
		return err
	}
	if err := so.rest([]string{"include_usage"}); err != nil {
		return err
	}
	if !s.Stream {
		return fieldErr("stream_options", "only allowed when stream is true")
	}
	return nil
}

// decodeCompletion decodes a /v1/completions body (or the plain form's
// with a prompt). Every error is a *FieldError.
func decodeCompletion(body []byte) (*completionRequest, error) {
	o, err := parseObject("", body)
	if err != nil {
		return nil, err
	}
	return completionFrom(o)
}

func completionFrom(o *object) (*completionRequest, error) {
	s, err := decodeSampling(o)
	if err != nil {
		return nil, err
	}
	r := &completionRequest{sampling: s}
	raw, ok := o.take("prompt")
	if !ok {
		return nil, fieldErr("prompt", "is required")
	}
	if r.Prompts, err = decodePrompt(raw); err != nil {
		return nil, err
	}
	var suffix *string
	if err := o.str("suffix", &suffix); err != nil {
		return nil, err
	}
	if suffix != nil && *suffix != "" {
		return nil, fieldErr("suffix", "not supported by this server (insertion needs a model trained for it); leave it out")
	}
	if err := o.boolean("echo", &r.Echo); err != nil {
		return nil, err
	}
	var bestOf, logprobs *int64
	if err := o.integer("best_of", 1, math.MaxInt32, &bestOf); err != nil {
		return nil, err
	}
	if bestOf != nil && int(*bestOf) != r.N {
		return nil, fieldErr("best_of", "only best_of equal to n (%d) is supported, got %d; leave it out", r.N, *bestOf)
	}
	if v, ok := o.m["logprobs"]; ok && !isNull(v) && jsonKind(v) == "a boolean" {
		return nil, fieldErr("logprobs", "must be an integer from 0 to %d on /v1/completions (the number of alternatives per token), got %s", MaxCompletionLogprobs, describe(v))
	}
	if err := o.integer("logprobs", 0, MaxCompletionLogprobs, &logprobs); err != nil {
		return nil, err
	}
	if logprobs != nil {
		r.Logprobs, r.TopLogprobs = true, int(*logprobs)
	}
	if r.Echo && r.Logprobs {
		return nil, fieldErr("echo", "echo with logprobs is not supported (it needs the prompt's logprobs); drop one of them")
	}
	for _, k := range []string{"messages", "max_completion_tokens", "top_logprobs"} {
		if err := o.refuse(k, "belongs to /v1/chat/completions, not /v1/completions"); err != nil {
			return nil, err
		}
	}
	if err := o.rest(completionFields); err != nil {
		return nil, err
	}
	return r, nil
}

// decodePrompt decodes prompt: a string, an array of strings, an array of
// token ids, or an array of arrays of token ids.
func decodePrompt(raw json.RawMessage) ([]prompt, error) {
	raw = bytes.TrimSpace(raw)
	const forms = "a string, an array of strings, an array of token ids or an array of arrays of token ids"
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldErr("prompt", "is not a valid JSON string")
		}
		return []prompt{{Text: s}}, nil
	case '[':
	default:
		return nil, fieldErr("prompt", "must be %s, got %s", forms, jsonKind(raw))
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fieldErr("prompt", "is not a valid JSON array")
	}
	if len(a) == 0 {
		return nil, fieldErr("prompt", "is an empty array; send at least one prompt or token")
	}
	switch jsonKind(a[0]) {
	case "a string":
		out := make([]prompt, len(a))
		for i, v := range a {
			if err := json.Unmarshal(v, &out[i].Text); err != nil {
				return nil, fieldErr("prompt", "prompt[%d] must be a string like prompt[0], got %s", i, jsonKind(v))
			}
		}
		return out, nil
	case "a number":
		ids, err := tokenIDs("prompt", raw, a)
		if err != nil {
			return nil, err
		}
		return []prompt{{IDs: ids, IsTokens: true}}, nil
	case "an array":
		out := make([]prompt, len(a))
		for i, v := range a {
			var inner []json.RawMessage
			if jsonKind(v) != "an array" || json.Unmarshal(v, &inner) != nil {
				return nil, fieldErr("prompt", "prompt[%d] must be an array of token ids like prompt[0], got %s", i, jsonKind(v))
			}
			ids, err := tokenIDs("prompt["+strconv.Itoa(i)+"]", v, inner)
			if err != nil {
				return nil, err
			}
			if len(ids) == 0 {
				return nil, fieldErr("prompt", "prompt[%d] is an empty array; send at least one token", i)
			}
			out[i] = prompt{IDs: ids, IsTokens: true}
		}
		return out, nil
	default:
		return nil, fieldErr("prompt", "must be %s, got an array of %s", forms, strings.TrimPrefix(strings.TrimPrefix(jsonKind(a[0]), "an "), "a "))
	}
}

// tokenIDs decodes an array of token ids; elems are its elements, for the
// message naming a bad one.
func tokenIDs(path string, raw json.RawMessage, elems []json.RawMessage) ([]int32, error) {
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		for i, id := range ids {
			if id < 0 {
				return nil, fieldErr("prompt", "%s[%d] must be a token id (an integer from 0), got %d", path, i, id)
			}
		}
		return ids, nil
	}
	ids = make([]int32, len(elems))
	for i, v := range elems {
		n, err := parseInt(v)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil, fieldErr("prompt", "%s[%d] must be a token id (an integer from 0), got %s", path, i, describe(v))
		}
		ids[i] = int32(n)
	}
	return ids, nil
}
