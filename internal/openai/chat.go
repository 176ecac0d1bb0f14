package openai

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/decoding"
)

// decodeChat decodes a /v1/chat/completions body (or the plain form's with
// messages). Every error is a *FieldError.
func decodeChat(body []byte) (*chatRequest, error) {
	o, err := parseObject("", body)
	if err != nil {
		return nil, err
	}
	return chatFrom(o)
}

func chatFrom(o *object) (*chatRequest, error) {
	s, err := decodeSampling(o)
	if err != nil {
		return nil, err
	}
	r := &chatRequest{sampling: s, AddGenerationPrompt: true, Extra: map[string]any{}}
	msgs, ok, err := o.array("messages")
	if err != nil {
		return nil, err
	}
	if !ok || len(msgs) == 0 {
		return nil, fieldErr("messages", "is required: an array of at least one message")
	}
	for i, raw := range msgs {
		m, err := decodeMessage(i, raw)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, m)
	}

	var mct *int64
	if err := o.integer("max_completion_tokens", 1, math.MaxInt32, &mct); err != nil {
		return nil, err
	}
	if mct != nil {
		if r.MaxTokens != nil && *r.MaxTokens != *mct {
			return nil, fieldErr("max_completion_tokens", "is %d but max_tokens is %d; send one of them", *mct, *r.MaxTokens)
		}
		r.MaxTokens = mct
	}
	if v, ok := o.m["logprobs"]; ok && !isNull(v) && jsonKind(v) != "a boolean" {
		return nil, fieldErr("logprobs", "must be true or false on /v1/chat/completions (top_logprobs asks for alternatives), got %s", describe(v))
	}
	if err := o.boolean("logprobs", &r.Logprobs); err != nil {
		return nil, err
	}
	var top *int64
	if err := o.integer("top_logprobs", 0, decoding.MaxTopLogprobs, &top); err != nil {
		return nil, err
	}
	if top != nil {
		if !r.Logprobs && *top > 0 {
			return nil, fieldErr("top_logprobs", "needs logprobs to be true")
		}
		r.TopLogprobs = int(*top)
	}

	if err := decodeTools(o, r); err != nil {
		return nil, err
	}
	if err := decodeResponseFormat(o); err != nil {
		return nil, err
	}
	if err := o.boolean("add_generation_prompt", &r.AddGenerationPrompt); err != nil {
		return nil, err
	}
	if err := o.boolean("continue_final_message", &r.ContinueFinal); err != nil {
		return nil, err
	}
	if r.ContinueFinal {
		if r.AddGenerationPrompt {
			return nil, fieldErr("continue_final_message", "needs add_generation_prompt to be false (the answer continues the last message instead of starting a new one)")
		}
		if last := r.Messages[len(r.Messages)-1]; last["role"] != "assistant" {
			return nil, fieldErr("continue_final_message", "needs the last message to be the assistant's, got %q", last["role"])
		}
	}
	kw, ok, err := o.any("chat_template_kwargs")
	if err != nil {
		return nil, err
	}
	if ok {
		m, isMap := kw.(map[string]any)
		if !isMap {
			return nil, fieldErr("chat_template_kwargs", "must be an object, got %s", jsonType(kw))
		}
		for k, v := range m {
			switch k {
			case "messages", "add_generation_prompt", "continue_final_message":
				return nil, fieldErr("chat_template_kwargs."+k, "is set by the request itself; use the request's %s", k)
			}
			if _, set := r.Extra[k]; !set {
				r.Extra[k] = v
			}
		}
	}
	if err := o.refuse("chat_template", "a request's own template is not supported; the model's chat_template (tokenizer_config.json) is used"); err != nil {
		return nil, err
	}
	for _, k := range []string{"functions", "function_call"} {
		if err := o.refuse(k, "deprecated by OpenAI and not supported; send tools instead"); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"prompt", "echo", "best_of", "suffix"} {
		if err := o.refuse(k, "belongs to /v1/completions, not /v1/chat/completions"); err != nil {
			return nil, err
		}
	}
	if err := o.rest(chatFields); err != nil {
		return nil, err
	}
	return r, nil
}

// jsonType names the type of a decoded JSON value.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return "a number"
	}
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// decodeMessage decodes messages[i] into what the chat template sees: role
// ("developer" becomes "system": templates know only system), content as
// one string (text parts joined with "\n", as vLLM does for templates that
// take a string), name, tool_calls (with each function's arguments decoded
// from its JSON string into an object, as templates expect them) and
// tool_call_id.
func decodeMessage(i int, raw json.RawMessage) (map[string]any, error) {
	path := "messages[" + strconv.Itoa(i) + "]"
	o, err := parseObject(path, raw)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	var role *string
	if err := o.str("role", &role); err != nil {
		return nil, err
	}
	if role == nil {
		return nil, fieldErr(o.name("role"), "is required (system, developer, user, assistant or tool)")
	}
	if !roles[*role] {
		return nil, fieldErr(o.name("role"), "must be system, developer, user, assistant or tool, got %q", *role)
	}
	r := *role
	if r == "developer" {
		r = "system"
	}
	out["role"] = r

	content, hasContent, err := decodeContent(o)
	if err != nil {
		return nil, err
	}
	var name *string
	if err := o.str("name", &name); err != nil {
		return nil, err
	}
	if name != nil {
		out["name"] = *name
	}
	if *role == "assistant" {
		calls, ok, err := decodeToolCalls(o)
		if err != nil {
			return nil, err
		}
		if ok {
			out["tool_calls"] = calls
		}
		if !hasContent && !ok {
			return nil, fieldErr(o.name("content"), "is required (an assistant message without tool_calls needs content)")
		}
		var refusal *string
		if err := o.str("refusal", &refusal); err != nil {
			return nil, err
		}
	} else if !hasContent {
		return nil, fieldErr(o.name("content"), "is required")
	}
	if hasContent {
		out["content"] = content
	} else {
		out["content"] = nil
	}
	if *role == "tool" {
		var id *string
		if err := o.str("tool_call_id", &id); err != nil {
			return nil, err
		}
		if id != nil {
			out["tool_call_id"] = *id
		}
	}
	known := []string{"role", "content", "name"}
	switch *role {
	case "assistant":
		known = append(known, "tool_calls", "refusal")
	case "tool":
		known = append(known, "tool_call_id")
	}
	if err := o.rest(known); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeContent takes content: a string or an array of text parts.
func decodeContent(o *object) (string, bool, error) {
	v, ok := o.take("content")
	if !ok {
		return "", false, nil
	}
	path := o.name("content")
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(v, &parts); err != nil {
		return "", false, fieldErr(path, "must be a string or an array of content parts, got %s", jsonKind(v))
	}
	texts := make([]string, 0, len(parts))
	for j, raw := range parts {
		p, err := parseObject(path+"["+strconv.Itoa(j)+"]", raw)
		if err != nil {
			return "", false, err
		}
		var typ, text *string
		if err := p.str("type", &typ); err != nil {
			return "", false, err
		}
		if typ == nil {
			return "", false, fieldErr(p.name("type"), "is required (\"text\")")
		}
		if *typ != "text" {
			return "", false, fieldErr(p.name("type"), "%q content parts are not supported (this server's models read text only); send {\"type\": \"text\", \"text\": ...}", *typ)
		}
		if err := p.str("text", &text); err != nil {
			return "", false, err
		}
		if text == nil {
			return "", false, fieldErr(p.name("text"), "is required")
		}
		if err := p.rest([]string{"type", "text"}); err != nil {
			return "", false, err
		}
		texts = append(texts, *text)
	}
	return strings.Join(texts, "\n"), true, nil
}

// decodeToolCalls takes an assistant message's tool_calls: each
// {id, type: "function", function: {name, arguments}}.
func decodeToolCalls(o *object) ([]any, bool, error) {
	calls, ok, err := o.array("tool_calls")
	if err != nil || !ok {
		return nil, false, err
	}
	out := make([]any, 0, len(calls))
	for j, raw := range calls {
		c, err := parseObject(o.name("tool_calls")+"["+strconv.Itoa(j)+"]", raw)
		if err != nil {
			return nil, false, err
		}
		call := map[string]any{}
		var id, typ *string
		if err := c.str("id", &id); err != nil {
			return nil, false, err
		}
		if id != nil {
			call["id"] = *id
		}
		if err := c.str("type", &typ); err != nil {
			return nil, false, err
		}
		if typ != nil && *typ != "function" {
			return nil, false, fieldErr(c.name("type"), "must be \"function\", got %q", *typ)
		}
		call["type"] = "function"
		fraw, ok := c.take("function")
		if !ok {
			return nil, false, fieldErr(c.name("function"), "is required")
		}
		f, err := parseObject(c.name("function"), fraw)
		if err != nil {
			return nil, false, err
		}
		var name, args *string
		if err := f.str("name", &name); err != nil {
			return nil, false, err
		}
		if name == nil {
			return nil, false, fieldErr(f.name("name"), "is required")
		}
		if err := f.str("arguments", &args); err != nil {
			return nil, false, err
		}
		fn := map[string]any{"name": *name}
		if args != nil {
			// Templates index or iterate the arguments (vLLM decodes
			// them too); a string that is not a JSON object stays a string.
			var obj map[string]any
			if json.Unmarshal([]byte(*args), &obj) == nil && obj != nil {
				fn["arguments"] = obj
			} else {
				fn["arguments"] = *args
			}
		}
		if err := f.rest([]string{"name", "arguments"}); err != nil {
			return nil, false, err
		}
		call["function"] = fn
		if err := c.rest([]string{"id", "type", "function"}); err != nil {
			return nil, false, err
		}
		out = append(out, call)
	}
	return out, true, nil
}

// decodeTools takes tools (passed to the template as its tools variable),
// tool_choice and parallel_tool_calls. The answer's tool calls are not
// parsed out of the text: a model that calls a tool answers with its own
// tool-call text as content, so only tool_choice "none" and "auto" are
// accepted ("required" and a named function need constrained decoding).
func decodeTools(o *object, r *chatRequest) error {
	tools, ok, err := o.array("tools")
	if err != nil {
		return err
	}
	if ok {
		list := make([]any, 0, len(tools))
		for j, raw := range tools {
			path := "tools[" + strconv.Itoa(j) + "]"
			var t map[string]any
			if err := json.Unmarshal(raw, &t); err != nil || t == nil {
				return fieldErr(path, "must be an object {\"type\": \"function\", \"function\": {...}}, got %s", jsonKind(raw))
			}
			if t["type"] != "function" {
				return fieldErr(path+".type", "must be \"function\", got %s", shortJSON(t["type"]))
			}
			f, isMap := t["function"].(map[string]any)
			if !isMap {
				return fieldErr(path+".function", "must be an object with a name, got %s", jsonType(t["function"]))
			}
			if name, _ := f["name"].(string); name == "" {
				return fieldErr(path+".function.name", "is required (a non-empty string)")
			}
			list = append(list, t)
		}
		r.Extra["tools"] = list
	}
	choice, ok, err := o.any("tool_choice")
	if err != nil {
		return err
	}
	if ok && choice != "none" && choice != "auto" {
		return fieldErr("tool_choice", "only \"none\" and \"auto\" are supported (tool calls come back as the model's text), got %s", shortJSON(choice))
	}
	var parallel bool
	return o.boolean("parallel_tool_calls", &parallel)
}

// decodeResponseFormat accepts only {"type": "text"}.
func decodeResponseFormat(o *object) error {
	v, ok, err := o.any("response_format")
	if err != nil || !ok {
		return err
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return fieldErr("response_format", "must be an object, got %s", jsonType(v))
	}
	if m["type"] != "text" {
		return fieldErr("response_format", "only {\"type\": \"text\"} is supported (json_object and json_schema need constrained decoding), got type %s", shortJSON(m["type"]))
	}
	return nil
}

// shortJSON shows a decoded value in a message, cut to 60 bytes.
func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
