package openai

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/scheduler"
)

// TestAnswersAgainstOpenAIClient records the answers of a live server in
// every shape (answers, stream chunks, usage, models, errors) and has the
// official openai Python client validate them with its own models, then
// talk to the server itself (testdata/check_openai.py).
func TestAnswersAgainstOpenAIClient(t *testing.T) {
	py := pyvenv.Python(t, "openai")
	ts := newTestServer(t, scheduler.SeqConfig{MaxSeqs: 4}, false)
	samples := map[string][]json.RawMessage{}
	add := func(kind string, b []byte) { samples[kind] = append(samples[kind], json.RawMessage(b)) }
	answer := func(kind, path, body string, code int) []byte {
		t.Helper()
		c, _, b := do(t, "POST", ts.URL+path, body)
		if c != code {
			t.Fatalf("%s %s: %d %s", path, body, c, b)
		}
		add(kind, b)
		return b
	}
	stream := func(kind, path, body string) {
		t.Helper()
		c, _, b := do(t, "POST", ts.URL+path, body)
		if c != 200 {
			t.Fatalf("%s %s: %d %s", path, body, c, b)
		}
		for _, e := range events(t, b) {
			add(kind, e)
		}
	}

	for _, body := range []string{
		`{"prompt": "The cat", "max_tokens": 12, "temperature": 0, "logprobs": 2}`,
		`{"prompt": "The cat", "max_tokens": 12, "logprobs": 0}`,
		`{"prompt": [[464, 3797], [32, 2603]], "n": 2, "max_tokens": 8, "echo": true, "seed": 1}`,
		`{"prompt": "The cat", "max_tokens": 30, "stop": [" mat"], "include_stop_str_in_output": true}`,
	} {
		b := answer("completion", "/v1/completions", body, 200)
		var c Completion
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		u, _ := json.Marshal(c.Usage)
		add("usage", u)
	}
	stream("completion_chunk", "/v1/completions", `{"prompt": "The cat", "max_tokens": 12, "logprobs": 3, "stream": true, "stream_options": {"include_usage": true}}`)
	stream("completion_chunk", "/v1/completions", `{"prompt": ["The cat", "A mat"], "max_tokens": 6, "echo": true, "stream": true}`)
	for _, body := range []string{
		`{"messages": [{"role": "user", "content": "Tell me"}], "max_tokens": 12, "temperature": 0, "logprobs": true, "top_logprobs": 2}`,
		`{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Tell me"}]}], "max_completion_tokens": 12, "n": 2, "logprobs": true}`,
		`{"messages": [{"role": "user", "content": "Tell me"}], "max_tokens": 12}`,
	} {
		answer("chat", "/v1/chat/completions", body, 200)
	}
	stream("chat_chunk", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "Tell me"}], "max_tokens": 12, "n": 2, "logprobs": true, "top_logprobs": 2, "stream": true, "stream_options": {"include_usage": true}}`)
	stream("chat_chunk", "/api/predict/svc", `{"messages": [{"role": "user", "content": "Tell me"}], "max_tokens": 5, "stream": true}`)
	answer("error", "/v1/completions", `{"prompt": "x", "model": "gpt-4"}`, 404)
	answer("error", "/v1/completions", `{"prompt": "x", "top_p": 2}`, 400)
	answer("error", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "n": 9}`, 400)
	for _, p := range []string{"/v1/models", "/v1/models/svc"} {
		c, _, b := do(t, "GET", ts.URL+p, "")
		if c != 200 {
			t.Fatalf("%s: %d %s", p, c, b)
		}
		add(map[bool]string{true: "model_list", false: "model"}[p == "/v1/models"], b)
	}
	c, _, b := do(t, "GET", ts.URL+"/v1/completions", "")
	if c != 405 {
		t.Fatalf("GET /v1/completions: %d", c)
	}
	add("error", b)

	path := filepath.Join(t.TempDir(), "samples.json")
	js, err := json.Marshal(samples)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), py, filepath.Join("testdata", "check_openai.py"), path, ts.URL, "tiny-gpt2")
	cmd.Env = append(os.Environ(), "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("check_openai.py: %v\n%s", err, stderr.String())
	}
	var got struct {
		Validated             int      `json:"validated"`
		Models                []string `json:"models"`
		Completion            string   `json:"completion"`
		CompletionTokens      int      `json:"completion_tokens"`
		ChatStream            string   `json:"chat_stream"`
		ChatStreamTotalTokens int      `json:"chat_stream_total_tokens"`
		ChatStreamRoles       int      `json:"chat_stream_roles"`
		NotFoundCode          string   `json:"not_found_code"`
		BadRequestParam       string   `json:"bad_request_param"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("check_openai.py printed %s: %v", out, err)
	}
	n := 0
	for _, v := range samples {
		n += len(v)
	}
	prompt := encode(t, ts.gen, "The cat", true)
	ids, text, _ := ts.model.greedy(t, prompt, 12)
	chatPrompt := encode(t, ts.gen, "<|im_start|>user\nTell me<|im_end|>\n<|im_start|>assistant\n", false)
	chatIDs, chatText, _ := ts.model.greedy(t, chatPrompt, 12)
	if got.Validated != n || len(got.Models) != 1 || got.Models[0] != "tiny-gpt2" || got.Completion != text || got.CompletionTokens != len(ids) ||
		got.ChatStream != chatText || got.ChatStreamTotalTokens != len(chatPrompt)+len(chatIDs) || got.ChatStreamRoles != 1 ||
		got.NotFoundCode != "model_not_found" || got.BadRequestParam != "temperature" {
		t.Fatalf("the openai client saw %+v; want %d samples validated, completion %q in %d tokens, chat %q in %d+%d tokens",
			got, n, text, len(ids), chatText, len(chatPrompt), len(chatIDs))
	}
	t.Logf("the openai client validated %d samples and talked to the server", n)
}
