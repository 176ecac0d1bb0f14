package openai

import (
	"errors"
	"strings"
	"testing"
)

// fuzzSeeds are bodies of every form the decoders know.
var fuzzSeeds = []string{
	`{"prompt": "Hello world"}`,
	`{"prompt": ["a", "b"], "n": 2, "echo": true, "stop": ["x"], "logprobs": 3, "max_tokens": 5.0}`,
	`{"prompt": [[1, 2], [3]], "seed": -1, "stream": true, "stream_options": {"include_usage": true}}`,
	`{"prompt": [15496, 995], "temperature": 0, "top_k": 5, "min_p": 0.1, "stop_token_ids": [13], "logit_bias": {}}`,
	`{"prompt": "x", "model": "svc", "suffix": "", "best_of": 1, "user": "u", "ignore_eos": true, "min_tokens": 1}`,
	`{"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 7, "logprobs": true, "top_logprobs": 2}`,
	`{"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}]}, {"role": "assistant", "content": null,
		"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
		{"role": "tool", "content": "r", "tool_call_id": "c"}], "tools": [{"type": "function", "function": {"name": "f"}}],
		"tool_choice": "auto", "chat_template_kwargs": {"k": 1}, "response_format": {"type": "text"}}`,
	`{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}], "add_generation_prompt": false, "continue_final_message": true}`,
	`{"prompt": "x", "messages": []}`,
	`[1, 2]`, `null`, `{"prompt": [1.5e300]}`, `{"prompt": "x", "n": 1e400}`,
}

// FuzzDecode feeds any body to both decoders, as /v1/completions,
// /v1/chat/completions and the plain form would, with GPT-2's tokenizer
// and the test template. A body is accepted or refused with a *FieldError
// whose message names its param; what is accepted makes GenRequests the
// scheduler can run: valid parameters, a prompt of known tokens that fits
// the context with max_tokens, n within bounds.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	g := testGenerator(f, &chatRecord{}, nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := plainIsChat(body); err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("plain form: %v is a %T, not a *FieldError", err, err)
			}
		}
		for _, chat := range []bool{false, true} {
			s, jobs, err := prepare(body, chat, g, "svc")
			if err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("chat %v: %v is a %T, not a *FieldError", chat, err, err)
				}
				if fe.Msg == "" || (fe.Param != "" && !strings.Contains(fe.Msg, fe.Param)) {
					t.Fatalf("chat %v: message %q does not name param %q", chat, fe.Msg, fe.Param)
				}
				continue
			}
			if len(jobs) == 0 || s.N < 1 || s.N > MaxN {
				t.Fatalf("chat %v: %d jobs, n %d", chat, len(jobs), s.N)
			}
			for _, j := range jobs {
				p := j.Req.Params
				if err := p.Validate(); err != nil {
					t.Fatalf("accepted invalid params: %v", err)
				}
				if len(j.Req.Prompt) == 0 || len(j.Req.Prompt)+p.MaxTokens > g.ContextLength {
					t.Fatalf("prompt of %d tokens with max_tokens %d over the context %d", len(j.Req.Prompt), p.MaxTokens, g.ContextLength)
				}
				for _, id := range j.Req.Prompt {
					if id < 0 || int(id) >= g.Vocab {
						t.Fatalf("prompt token %d outside the vocabulary", id)
					}
				}
				if j.Req.N != s.N || len(p.EOSTokenIDs) != 1 {
					t.Fatalf("request %+v", j.Req)
				}
			}
		}
	})
}
