package jinja_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/jinja"
)

// qwen3Chat loads qwen3's template and special tokens from the cache.
func qwen3Chat(b *testing.B) (*jinja.Template, map[string]any) {
	dir := needConfigs(b)
	cfg, err := os.ReadFile(filepath.Join(dir, "qwen3", "tokenizer_config.json"))
	if err != nil {
		b.Fatal(err)
	}
	ct, err := jinja.ParseTokenizerConfigTemplate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := jinja.Parse(ct.Default)
	if err != nil {
		b.Fatal(err)
	}
	vars, err := jinja.SpecialTokens(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return tmpl, vars
}

var fourTurns = []map[string]any{
	{"role": "system", "content": "You are a helpful assistant."},
	{"role": "user", "content": "What is the capital of France?"},
	{"role": "assistant", "content": "<think>\nEasy one.\n</think>\n\nParis."},
	{"role": "user", "content": "And of Japan? Answer in one word."},
	{"role": "assistant", "content": "Tokyo."},
	{"role": "user", "content": "Thanks! Now write a haiku about both cities."},
}

// BenchmarkRenderQwen3Chat renders a four-turn chat (system prompt, a
// thinking answer, generation prompt) with qwen3's real template parsed
// once, as the server does per request.
func BenchmarkRenderQwen3Chat(b *testing.B) {
	tmpl, vars := qwen3Chat(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jinja.RenderChat(tmpl, fourTurns, true, vars); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseQwen3 parses qwen3's template (once per model load).
func BenchmarkParseQwen3(b *testing.B) {
	dir := needConfigs(b)
	cfg, err := os.ReadFile(filepath.Join(dir, "qwen3", "tokenizer_config.json"))
	if err != nil {
		b.Fatal(err)
	}
	ct, err := jinja.ParseTokenizerConfigTemplate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jinja.Parse(ct.Default); err != nil {
			b.Fatal(err)
		}
	}
}
