package openai

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/internal/scheduler"
)

func encode(t *testing.T, g *scheduler.Generator, text string, special bool) []int32 {
	t.Helper()
	enc, err := g.Tokenizer.Encode(text, special)
	if err != nil {
		t.Fatal(err)
	}
	return enc.IDs
}

// TestCompletionAccepted decodes every accepted /v1/completions field and
// checks the GenRequests made of it.
func TestCompletionAccepted(t *testing.T) {
	g := testGenerator(t, &chatRecord{}, nil)
	hello := encode(t, g, "Hello world", true)
	cases := []struct {
		name, body string
		check      func(t *testing.T, s *sampling, jobs []job)
	}{
		{"minimal: the model's defaults, max_tokens the rest of the context", `{"prompt": "Hello world"}`, func(t *testing.T, s *sampling, jobs []job) {
			want := g.Defaults
			want.MaxTokens = testCtx - len(hello)
			want.EOSTokenIDs = []int32{gpt2EOS}
			if len(jobs) != 1 || !slices.Equal(jobs[0].Req.Prompt, hello) || !reflect.DeepEqual(jobs[0].Req.Params, want) ||
				jobs[0].Req.N != 1 || !jobs[0].Req.SkipSpecial || s.Stream || jobs[0].Echo != "" {
				t.Fatalf("got %+v, want prompt %v params %+v", jobs, hello, want)
			}
		}},
		{"every sampling field", `{"model": "tiny-gpt2", "prompt": "Hello world", "max_tokens": 5, "temperature": 0, "top_p": 0.5,
			"n": 2, "best_of": 2, "stream": true, "stream_options": {"include_usage": true}, "stop": "x", "seed": -1,
			"presence_penalty": 0.5, "frequency_penalty": -0.5, "logprobs": 3, "logit_bias": {}, "user": "u", "top_k": 5,
			"min_p": 0.1, "repetition_penalty": 1.1, "min_tokens": 1, "ignore_eos": true, "stop_token_ids": [13],
			"skip_special_tokens": false, "include_stop_str_in_output": true, "echo": false, "suffix": ""}`,
			func(t *testing.T, s *sampling, jobs []job) {
				want := decoding.Params{Temperature: 0, TopK: 5, TopP: 0.5, MinP: 0.1, RepetitionPenalty: 1.1, PresencePenalty: 0.5,
					FrequencyPenalty: -0.5, Seed: ^uint64(0), HasSeed: true, MaxTokens: 5, MinTokens: 1, IgnoreEOS: true,
					StopTokenIDs: []int32{13}, EOSTokenIDs: []int32{gpt2EOS}, Stop: []string{"x"}, Logprobs: true, TopLogprobs: 3}
				r := jobs[0].Req
				if !reflect.DeepEqual(r.Params, want) || r.N != 2 || r.SkipSpecial || !s.Stream || !s.IncludeUsage || !s.IncludeStopStr || jobs[0].Echo != "" {
					t.Fatalf("got %+v (sampling %+v), want params %+v", jobs, s, want)
				}
			}},
		{"null is absent", `{"prompt": "Hello world", "temperature": null, "stop": null, "logprobs": null, "n": null, "model": null}`,
			func(t *testing.T, s *sampling, jobs []job) {
				if p := jobs[0].Req.Params; p.Temperature != 0.7 || p.Stop != nil || p.Logprobs || jobs[0].Req.N != 1 {
					t.Fatalf("got %+v", p)
				}
			}},
		{"the service's name as model, integral floats as integers", `{"model": "svc", "prompt": "Hello world", "max_tokens": 5.0, "n": 1e0}`,
			func(t *testing.T, s *sampling, jobs []job) {
				if jobs[0].Req.Params.MaxTokens != 5 || jobs[0].Req.N != 1 {
					t.Fatalf("got %+v", jobs[0].Req)
				}
			}},
		{"stop list, logprobs 0", `{"prompt": "Hello world", "stop": ["a", "bc"], "logprobs": 0}`, func(t *testing.T, s *sampling, jobs []job) {
			if p := jobs[0].Req.Params; !slices.Equal(p.Stop, []string{"a", "bc"}) || !p.Logprobs || p.TopLogprobs != 0 {
				t.Fatalf("got %+v", p)
			}
		}},
		{"array of prompts", `{"prompt": ["Hello world", "Hi"], "echo": true}`, func(t *testing.T, s *sampling, jobs []job) {
			hi := encode(t, g, "Hi", true)
			if len(jobs) != 2 || !slices.Equal(jobs[0].Req.Prompt, hello) || !slices.Equal(jobs[1].Req.Prompt, hi) ||
				jobs[1].Req.Params.MaxTokens != testCtx-len(hi) || jobs[1].Echo != "Hi" {
				t.Fatalf("got %+v", jobs)
			}
		}},
		{"token ids", `{"prompt": [15496, 995], "echo": true}`, func(t *testing.T, s *sampling, jobs []job) {
			if len(jobs) != 1 || !slices.Equal(jobs[0].Req.Prompt, []int32{15496, 995}) || jobs[0].Echo != "Hello world" {
				t.Fatalf("got %+v", jobs)
			}
		}},
		{"arrays of token ids", `{"prompt": [[15496], [15496, 995]]}`, func(t *testing.T, s *sampling, jobs []job) {
			if len(jobs) != 2 || !slices.Equal(jobs[0].Req.Prompt, []int32{15496}) || !slices.Equal(jobs[1].Req.Prompt, []int32{15496, 995}) {
				t.Fatalf("got %+v", jobs)
			}
		}},
		{"max_tokens up to the context", fmt.Sprintf(`{"prompt": "Hello world", "max_tokens": %d}`, testCtx-len(hello)), func(t *testing.T, s *sampling, jobs []job) {
			if jobs[0].Req.Params.MaxTokens != testCtx-len(hello) {
				t.Fatalf("got %+v", jobs[0].Req.Params)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, jobs, err := prepare([]byte(c.body), false, g, "svc")
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			c.check(t, s, jobs)
		})
	}
}

// refusal is a request that must be refused: the error's param and a part
// of its message; the message must also name the param.
type refusal struct {
	body, param, msg string
}

func checkRefusals(t *testing.T, chat bool, g *scheduler.Generator, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			_, _, err := prepare([]byte(c.body), chat, g, "svc")
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v (%T), want a *FieldError", err, err)
			}
			if fe.Param != c.param || !strings.Contains(fe.Msg, c.msg) || !strings.Contains(fe.Msg, c.param) {
				t.Fatalf("got param %q message %q; want param %q and a message with %q", fe.Param, fe.Msg, c.param, c.msg)
			}
		})
	}
}

func TestCompletionRefused(t *testing.T) {
	g := testGenerator(t, &chatRecord{}, nil)
	long := strings.Repeat(" the", testCtx)
	n := len(encode(t, g, "Hello world", true))
	checkRefusals(t, false, g, []refusal{
		{`[]`, "", "the body: must be a JSON object, got an array"},
		{`"x"`, "", "must be a JSON object, got a string"},
		{`{"prompt": "x"`, "", "is not valid JSON"},
		{`null`, "", "must be a JSON object, got null"},
		{`{}`, "prompt", "is required"},
		{`{"prompt": 5}`, "prompt", "must be a string, an array of strings"},
		{`{"prompt": []}`, "prompt", "empty array"},
		{`{"prompt": [[]]}`, "prompt", "prompt[0] is an empty array"},
		{`{"prompt": [1.5]}`, "prompt", "prompt[0] must be a token id"},
		{`{"prompt": [-1]}`, "prompt", "prompt[0] must be a token id"},
		{`{"prompt": [1, 99999999999]}`, "prompt", "prompt[1] must be a token id"},
		{`{"prompt": [true]}`, "prompt", "got an array of boolean"},
		{`{"prompt": ["a", 1]}`, "prompt", "prompt[1] must be a string"},
		{`{"prompt": [[1], "a"]}`, "prompt", "prompt[1] must be an array of token ids"},
		{`{"prompt": [[1], [2, -3]]}`, "prompt", "prompt[1][1] must be a token id"},
		{`{"prompt": [50257]}`, "prompt", "past the model's vocabulary of 50257"},
		{`{"prompt": ""}`, "prompt", "is empty (0 tokens)"},
		{`{"prompt": "` + long + `"}`, "prompt", fmt.Sprintf("has %d tokens, but the model's context is %d", testCtx, testCtx)},
		{fmt.Sprintf(`{"prompt": "Hello world", "max_tokens": %d}`, testCtx), "max_tokens", fmt.Sprintf("has %d tokens and max_tokens is %d, %d in all, over the model's context of %d tokens; lower max_tokens to at most %d", n, testCtx, n+testCtx, testCtx, testCtx-n)},
		{`{"prompt": ["Hi", "` + long + `"]}`, "prompt", "prompt[1] has"},
		{`{"prompt": "x", "suffix": "y"}`, "suffix", "not supported"},
		{`{"prompt": "x", "best_of": 3}`, "best_of", "only best_of equal to n (1)"},
		{`{"prompt": "x", "logprobs": 6}`, "logprobs", "between 0 and 5, got 6"},
		{`{"prompt": "x", "logprobs": true}`, "logprobs", "must be an integer from 0 to 5"},
		{`{"prompt": "x", "echo": true, "logprobs": 1}`, "echo", "echo with logprobs"},
		{`{"prompt": "x", "echo": 1}`, "echo", "must be true or false, got 1"},
		{`{"prompt": "x", "logit_bias": {"50256": -100}}`, "logit_bias", "not supported"},
		{`{"prompt": "x", "logit_bias": []}`, "logit_bias", "must be an object"},
		{`{"prompt": "x", "temperature": "hot"}`, "temperature", "must be a number, got a string"},
		{`{"prompt": "x", "temperature": 3}`, "temperature", "temperature must be in [0, 2], got 3"},
		{`{"prompt": "x", "top_p": 0}`, "top_p", "top_p must be in (0, 1]"},
		{`{"prompt": "x", "min_p": 2}`, "min_p", "min_p must be in [0, 1]"},
		{`{"prompt": "x", "repetition_penalty": 0}`, "repetition_penalty", "greater than 0"},
		{`{"prompt": "x", "presence_penalty": -3}`, "presence_penalty", "[-2, 2]"},
		{`{"prompt": "x", "frequency_penalty": 2.5}`, "frequency_penalty", "[-2, 2]"},
		{`{"prompt": "x", "top_k": -2}`, "top_k", "between -1 and"},
		{`{"prompt": "x", "n": 0}`, "n", "between 1 and 128, got 0"},
		{`{"prompt": "x", "n": 129}`, "n", "between 1 and 128, got 129"},
		{`{"prompt": "x", "n": "2"}`, "n", "must be an integer, got a string"},
		{`{"prompt": "x", "max_tokens": 0}`, "max_tokens", "between 1 and"},
		{`{"prompt": "x", "max_tokens": 1.5}`, "max_tokens", "must be an integer, got 1.5"},
		{`{"prompt": "x", "max_tokens": 2, "min_tokens": 3}`, "min_tokens", "min_tokens (3) must not exceed max_tokens (2)"},
		{`{"prompt": "x", "min_tokens": -1}`, "min_tokens", "between 0 and"},
		{`{"prompt": "x", "seed": 1.5}`, "seed", "must be an integer"},
		{`{"prompt": "x", "seed": 1e30}`, "seed", "must be an integer"},
		{`{"prompt": "x", "stop": 5}`, "stop", "must be a string or an array of strings"},
		{`{"prompt": "x", "stop": [""]}`, "stop", "stop[0] is empty"},
		{`{"prompt": "x", "stop": [` + strings.Repeat(`"a",`, 64) + `"a"]}`, "stop", "at most 64 stop strings, got 65"},
		{`{"prompt": "x", "stop_token_ids": [-1]}`, "stop_token_ids", "stop_token_ids[0] must be a token id"},
		{`{"prompt": "x", "stop_token_ids": 5}`, "stop_token_ids", "must be an array"},
		{`{"prompt": "x", "stop_token_ids": [50300]}`, "stop_token_ids", "past the model's vocabulary"},
		{`{"prompt": "x", "stream": "yes"}`, "stream", "must be true or false"},
		{`{"prompt": "x", "stream_options": {"include_usage": true}}`, "stream_options", "only allowed when stream is true"},
		{`{"prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": true}}`, "stream_options.continuous_usage_stats", "unknown field"},
		{`{"prompt": "x", "stream": true, "stream_options": []}`, "stream_options", "must be a JSON object"},
		{`{"prompt": "x", "ignore_eos": "no"}`, "ignore_eos", "must be true or false"},
		{`{"prompt": "x", "skip_special_tokens": 0}`, "skip_special_tokens", "must be true or false"},
		{`{"prompt": "x", "include_stop_str_in_output": 1}`, "include_stop_str_in_output", "must be true or false"},
		{`{"prompt": "x", "user": 5}`, "user", "must be a string"},
		{`{"prompt": "x", "model": 5}`, "model", "must be a string"},
		{`{"prompt": "x", "model": "gpt-4"}`, "model", "The model `gpt-4` does not exist"},
		{`{"prompt": "x", "foo": 1}`, "foo", `unknown field "foo"; accepted here: prompt`},
		{`{"prompt": "x", "zed": 1, "bar": 2}`, "bar", `unknown fields "bar", "zed"`},
		{`{"prompt": "x", "store": true}`, "store", "not supported by this server"},
		{`{"prompt": "x", "messages": []}`, "messages", "belongs to /v1/chat/completions"},
		{`{"prompt": "x", "top_logprobs": 2}`, "top_logprobs", "belongs to /v1/chat/completions"},
	})
}

func TestChatAccepted(t *testing.T) {
	rec := &chatRecord{}
	g := testGenerator(t, rec, nil)
	cases := []struct {
		name, body string
		check      func(t *testing.T, s *sampling, jobs []job)
	}{
		{"minimal", `{"model": "tiny-gpt2", "messages": [{"role": "user", "content": "Hi"}]}`, func(t *testing.T, s *sampling, jobs []job) {
			text := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
			if want := encode(t, g, text, false); !slices.Equal(jobs[0].Req.Prompt, want) {
				t.Fatalf("prompt %v, want %v (the rendered text encoded without special tokens added)", jobs[0].Req.Prompt, want)
			}
			if !rec.addGen || len(rec.extra) != 0 || jobs[0].Req.Params.MaxTokens != testCtx-len(jobs[0].Req.Prompt) {
				t.Fatalf("add_generation_prompt %v extra %v params %+v", rec.addGen, rec.extra, jobs[0].Req.Params)
			}
		}},
		{"roles, parts, names, tool calls", `{"messages": [
			{"role": "developer", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}]},
			{"role": "user", "content": "Weather?", "name": "ann"},
			{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{\"city\": \"Oslo\"}"}}], "refusal": null},
			{"role": "tool", "content": "sunny", "tool_call_id": "c1"}],
			"tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
			"tool_choice": "auto", "parallel_tool_calls": false, "chat_template_kwargs": {"enable_thinking": false},
			"response_format": {"type": "text"}}`,
			func(t *testing.T, s *sampling, jobs []job) {
				want := []map[string]any{
					{"role": "system", "content": "Be brief.\nBe kind."},
					{"role": "user", "content": "Weather?", "name": "ann"},
					{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
						"function": map[string]any{"name": "get", "arguments": map[string]any{"city": "Oslo"}}}}},
					{"role": "tool", "content": "sunny", "tool_call_id": "c1"},
				}
				if !reflect.DeepEqual(rec.messages, want) {
					t.Fatalf("the template got %#v\nwant %#v", rec.messages, want)
				}
				tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get", "parameters": map[string]any{"type": "object"}}}}
				if !reflect.DeepEqual(rec.extra, map[string]any{"tools": tools, "enable_thinking": false}) {
					t.Fatalf("extra %#v", rec.extra)
				}
			}},
		{"max_completion_tokens, logprobs", `{"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 7, "max_tokens": 7, "logprobs": true, "top_logprobs": 4}`,
			func(t *testing.T, s *sampling, jobs []job) {
				if p := jobs[0].Req.Params; p.MaxTokens != 7 || !p.Logprobs || p.TopLogprobs != 4 {
					t.Fatalf("params %+v", p)
				}
			}},
		{"continue the final message", `{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello the "}],
			"add_generation_prompt": false, "continue_final_message": true}`, func(t *testing.T, s *sampling, jobs []job) {
			text := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello the"
			if want := encode(t, g, text, false); rec.addGen || !slices.Equal(jobs[0].Req.Prompt, want) {
				t.Fatalf("prompt %v, want %v (%q)", jobs[0].Req.Prompt, want, text)
			}
		}},
		{"no generation prompt", `{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": false}`, func(t *testing.T, s *sampling, jobs []job) {
			if want := encode(t, g, "<|im_start|>user\nHi<|im_end|>\n", false); rec.addGen || !slices.Equal(jobs[0].Req.Prompt, want) {
				t.Fatalf("prompt %v, want %v", jobs[0].Req.Prompt, want)
			}
		}},
		{"logprobs false with top_logprobs 0", `{"messages": [{"role": "user", "content": "Hi"}], "logprobs": false, "top_logprobs": 0, "n": 3, "stream": true}`,
			func(t *testing.T, s *sampling, jobs []job) {
				if p := jobs[0].Req.Params; p.Logprobs || jobs[0].Req.N != 3 || !s.Stream {
					t.Fatalf("params %+v", p)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, jobs, err := prepare([]byte(c.body), true, g, "svc")
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(jobs) != 1 {
				t.Fatalf("%d jobs", len(jobs))
			}
			c.check(t, s, jobs)
		})
	}
}

func TestChatRefused(t *testing.T) {
	g := testGenerator(t, &chatRecord{}, nil)
	user := `{"role": "user", "content": "Hi"}`
	checkRefusals(t, true, g, []refusal{
		{`{}`, "messages", "is required"},
		{`{"messages": []}`, "messages", "is required"},
		{`{"messages": "Hi"}`, "messages", "must be an array"},
		{`{"messages": [5]}`, "messages[0]", "must be a JSON object, got a number"},
		{`{"messages": [{"content": "Hi"}]}`, "messages[0].role", "is required"},
		{`{"messages": [{"role": "bot", "content": "Hi"}]}`, "messages[0].role", `got "bot"`},
		{`{"messages": [{"role": "user"}]}`, "messages[0].content", "is required"},
		{`{"messages": [` + user + `, {"role": "assistant"}]}`, "messages[1].content", "needs content"},
		{`{"messages": [{"role": "user", "content": 5}]}`, "messages[0].content", "must be a string or an array of content parts"},
		{`{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, "messages[0].content[0].type", `"image_url" content parts are not supported`},
		{`{"messages": [{"role": "user", "content": [{"type": "text"}]}]}`, "messages[0].content[0].text", "is required"},
		{`{"messages": [{"role": "user", "content": [{"text": "a"}]}]}`, "messages[0].content[0].type", "is required"},
		{`{"messages": [{"role": "user", "content": "Hi", "tool_calls": []}]}`, "messages[0].tool_calls", "unknown field"},
		{`{"messages": [{"role": "user", "content": "Hi", "audio": {}}]}`, "messages[0].audio", "unknown field"},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"type": "web", "function": {"name": "f"}}]}]}`, "messages[0].tool_calls[0].type", `must be "function"`},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]}`, "messages[0].tool_calls[0].function", "is required"},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}`, "messages[0].tool_calls[0].function.name", "is required"},
		{`{"messages": [` + user + `], "response_format": {"type": "json_object"}}`, "response_format", `only {"type": "text"} is supported`},
		{`{"messages": [` + user + `], "response_format": "text"}`, "response_format", "must be an object"},
		{`{"messages": [` + user + `], "tool_choice": "required"}`, "tool_choice", `only "none" and "auto"`},
		{`{"messages": [` + user + `], "tool_choice": {"type": "function", "function": {"name": "f"}}}`, "tool_choice", `only "none" and "auto"`},
		{`{"messages": [` + user + `], "tools": [{"type": "retrieval"}]}`, "tools[0].type", `must be "function"`},
		{`{"messages": [` + user + `], "tools": [{"type": "function", "function": {}}]}`, "tools[0].function.name", "is required"},
		{`{"messages": [` + user + `], "tools": [{"type": "function"}]}`, "tools[0].function", "must be an object"},
		{`{"messages": [` + user + `], "tools": {}}`, "tools", "must be an array"},
		{`{"messages": [` + user + `], "parallel_tool_calls": "yes"}`, "parallel_tool_calls", "must be true or false"},
		{`{"messages": [` + user + `], "chat_template_kwargs": "x"}`, "chat_template_kwargs", "must be an object"},
		{`{"messages": [` + user + `], "chat_template_kwargs": {"messages": []}}`, "chat_template_kwargs.messages", "is set by the request itself"},
		{`{"messages": [` + user + `], "chat_template": "{{ x }}"}`, "chat_template", "not supported"},
		{`{"messages": [` + user + `], "functions": []}`, "functions", "send tools instead"},
		{`{"messages": [` + user + `], "logprobs": 3}`, "logprobs", "must be true or false on /v1/chat/completions"},
		{`{"messages": [` + user + `], "logprobs": true, "top_logprobs": 21}`, "top_logprobs", "between 0 and 20"},
		{`{"messages": [` + user + `], "top_logprobs": 2}`, "top_logprobs", "needs logprobs to be true"},
		{`{"messages": [` + user + `], "max_tokens": 5, "max_completion_tokens": 6}`, "max_completion_tokens", "is 6 but max_tokens is 5"},
		{`{"messages": [` + user + `], "max_completion_tokens": 190}`, "max_tokens", "over the model's context of 192 tokens"},
		{`{"messages": [` + user + `], "continue_final_message": true}`, "continue_final_message", "needs add_generation_prompt to be false"},
		{`{"messages": [` + user + `], "continue_final_message": true, "add_generation_prompt": false}`, "continue_final_message", "needs the last message to be the assistant's"},
		{`{"messages": [` + user + `, {"role": "assistant", "content": " "}], "continue_final_message": true, "add_generation_prompt": false}`, "continue_final_message", "nothing to continue"},
		{`{"messages": [` + user + `, {"role": "assistant", "content": "Hello"}]}`, "messages", "the model's chat_template refused them: conversation roles must alternate"},
		{`{"messages": [{"role": "user", "content": "` + strings.Repeat(" the", testCtx) + `"}]}`, "messages", "the rendered conversation has"},
		{`{"messages": [` + user + `], "prompt": "x"}`, "prompt", "belongs to /v1/completions"},
		{`{"messages": [` + user + `], "echo": true}`, "echo", "belongs to /v1/completions"},
		{`{"messages": [` + user + `], "modalities": ["audio"]}`, "modalities", "not supported by this server"},
		{`{"messages": [` + user + `], "model": "gpt-4o"}`, "model", "does not exist"},
		{`{"messages": [` + user + `], "whatever": 1}`, "whatever", `unknown field "whatever"; accepted here: messages`},
	})

	noTemplate := *g
	noTemplate.Chat = nil
	checkRefusals(t, true, &noTemplate, []refusal{
		{`{"messages": [` + user + `]}`, "messages", "this model has no chat_template"},
	})
}

func TestPlainForm(t *testing.T) {
	for _, c := range []struct {
		body string
		chat bool
		err  string
	}{
		{`{"prompt": "x"}`, false, ""},
		{`{"messages": []}`, true, ""},
		{`{"prompt": null, "messages": [1]}`, true, ""},
		{`{"prompt": "x", "messages": []}`, false, "not both"},
		{`{"temperature": 1}`, false, "needs a prompt"},
		{`[1]`, false, "must be a JSON object"},
	} {
		chat, err := plainIsChat([]byte(c.body))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %v, want an error with %q", c.body, err, c.err)
			}
			continue
		}
		if err != nil || chat != c.chat {
			t.Errorf("%s: got chat %v, %v; want %v", c.body, chat, err, c.chat)
		}
	}
}
