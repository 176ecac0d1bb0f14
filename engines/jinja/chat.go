package jinja

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ChatTemplates are the chat templates of a tokenizer_config.json, whose
// chat_template is either one template or a list of {"name", "template"}.
type ChatTemplates struct {
	// Default is the template transformers uses when none is named: the
	// single template, or the one named "default" ("" when the list has
	// none of that name).
	Default string
	// Named holds the templates of a list by name (nil for a single one).
	Named map[string]string
}

// ErrNoChatTemplate is returned when a tokenizer_config.json has no
// chat_template (llama2's, for one); transformers 4.45 then refuses
// apply_chat_template too.
var ErrNoChatTemplate = errors.New("jinja: tokenizer_config.json has no chat_template")

// ParseTokenizerConfigTemplate reads the chat templates of a
// tokenizer_config.json.
func ParseTokenizerConfigTemplate(b []byte) (*ChatTemplates, error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("jinja: tokenizer_config.json: %w", err)
	}
	raw := cfg.ChatTemplate
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ErrNoChatTemplate
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return &ChatTemplates{Default: one}, nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("jinja: tokenizer_config.json: chat_template: must be a string or a list of {\"name\", \"template\"}: %w", err)
	}
	ct := &ChatTemplates{Named: make(map[string]string, len(list))}
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return nil, fmt.Errorf("jinja: tokenizer_config.json: chat_template[%d]: needs both name and template", i)
		}
		ct.Named[*e.Name] = *e.Template
	}
	ct.Default = ct.Named["default"]
	if len(ct.Named) == 0 {
		return nil, ErrNoChatTemplate
	}
	return ct, nil
}

// Select picks a template as transformers' get_chat_template does: the
// one called name when name is given, else "tool_use" when the request has
// tools and the list has one, else the default.
func (c *ChatTemplates) Select(name string, hasTools bool) (string, error) {
	if c.Named == nil {
		if name != "" {
			return "", fmt.Errorf("jinja: chat template %q: the model has one unnamed template", name)
		}
		return c.Default, nil
	}
	if name != "" {
		t, ok := c.Named[name]
		if !ok {
			return "", fmt.Errorf("jinja: no chat template named %q (have %s)", name, strings.Join(c.Names(), ", "))
		}
		return t, nil
	}
	if t, ok := c.Named["tool_use"]; ok && hasTools {
		return t, nil
	}
	if t, ok := c.Named["default"]; ok {
		return t, nil
	}
	return "", fmt.Errorf("jinja: the model has several chat templates and none is called default; name one of %s", strings.Join(c.Names(), ", "))
}

// Names lists the named templates, sorted.
func (c *ChatTemplates) Names() []string {
	out := make([]string, 0, len(c.Named))
	for n := range c.Named {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// specialTokenNames are transformers' SPECIAL_TOKENS_ATTRIBUTES, in order.
var specialTokenNames = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// SpecialTokens returns the template variables transformers' apply_chat_template
// adds from the tokenizer (its special_tokens_map): bos_token, eos_token,
// unk_token, sep_token, pad_token, cls_token and mask_token as strings
// (tokenizer_config.json gives each as a string or an AddedToken object
// {"content": ...}), and additional_special_tokens as a list of strings;
// tokens that are null or empty are left out, so a template sees them as
// undefined.
func SpecialTokens(tokenizerConfig []byte) (map[string]any, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(tokenizerConfig, &cfg); err != nil {
		return nil, fmt.Errorf("jinja: tokenizer_config.json: %w", err)
	}
	out := map[string]any{}
	for _, name := range specialTokenNames {
		raw, ok := cfg[name]
		if !ok {
			continue
		}
		s, err := tokenContent(raw)
		if err != nil {
			return nil, fmt.Errorf("jinja: tokenizer_config.json: %s: %w", name, err)
		}
		if s != "" {
			out[name] = s
		}
	}
	if raw, ok := cfg["additional_special_tokens"]; ok && string(raw) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("jinja: tokenizer_config.json: additional_special_tokens: %w", err)
		}
		var toks []any
		for i, r := range list {
			s, err := tokenContent(r)
			if err != nil {
				return nil, fmt.Errorf("jinja: tokenizer_config.json: additional_special_tokens[%d]: %w", i, err)
			}
			toks = append(toks, s)
		}
		if len(toks) > 0 {
			out["additional_special_tokens"] = toks
		}
	}
	return out, nil
}

// tokenContent is a token given as a string, null, or an AddedToken
// object.
func tokenContent(raw json.RawMessage) (string, error) {
	if string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("must be a string or an object with content")
	}
	return *obj.Content, nil
}

// RenderChat renders a chat template as transformers' apply_chat_template
// (tokenize=False) does: the template sees messages, tools and documents
// (None unless vars give them), add_generation_prompt, and vars (typically
// SpecialTokens plus extra template arguments such as enable_thinking).
// Message values may hold *Map where key order must show (a tool call's
// arguments through tojson); a message's own keys are taken sorted. An
// empty conversation is an error, as it is in apply_chat_template.
func RenderChat(t *Template, messages []map[string]any, addGenerationPrompt bool, vars map[string]any) (string, error) {
	ctx := make(map[string]any, len(vars)+4)
	for k, v := range vars {
		switch k {
		case "messages", "add_generation_prompt":
			return "", fmt.Errorf("jinja: RenderChat: vars may not set %q", k)
		}
		ctx[k] = v
	}
	if len(messages) == 0 {
		// apply_chat_template reads conversation[0] before rendering.
		return "", errors.New("jinja: RenderChat: no messages")
	}
	msgs := make([]any, len(messages))
	for i, m := range messages {
		msgs[i] = m
	}
	ctx["messages"] = msgs
	ctx["add_generation_prompt"] = addGenerationPrompt
	if _, ok := ctx["tools"]; !ok {
		ctx["tools"] = nil
	}
	if _, ok := ctx["documents"]; !ok {
		ctx["documents"] = nil
	}
	return t.Render(ctx)
}
