package llm

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/teststack"
)

// acceptRequest is one request of the acceptance test, as
// testdata/openai_client.py and testdata/transformers_greedy.py read it.
type acceptRequest struct {
	Kind      string           `json:"kind"` // chat or completion
	Messages  []map[string]any `json:"messages,omitempty"`
	Prompt    string           `json:"prompt,omitempty"`
	MaxTokens int              `json:"max_tokens"`
	Stream    bool             `json:"stream"`
}

type acceptAnswer struct {
	IDs    []int32 `json:"ids"`
	Text   string  `json:"text"`
	Finish string  `json:"finish"`
	Usage  int     `json:"usage"`
	Chunks int     `json:"chunks"`
}

type acceptExpected struct {
	PromptIDs []int32 `json:"prompt_ids"`
	IDs       []int32 `json:"ids"`
}

// acceptRequests makes n requests of different lengths: conversations of
// one to three turns (or prompts) and max_tokens from 3 to 40, so that
// sequences join and leave the batch at different steps.
func acceptRequests(kind string, n int) []acceptRequest {
	words := []string{"The cat", "sat on the mat", "Héllo, wörld! 你好", "numbers 1 2 3", "a longer sentence about the weather in spring and summer", "why?", "{\"json\": [1, 2]}"}
	out := make([]acceptRequest, n)
	for i := range out {
		r := acceptRequest{Kind: kind, MaxTokens: 3 + (i*7)%38, Stream: i%4 != 3}
		text := words[i%len(words)] + strings.Repeat(" and more", i%5)
		if kind == "chat" {
			r.Messages = []map[string]any{{"role": "user", "content": text}}
			if i%3 == 1 {
				r.Messages = append([]map[string]any{{"role": "system", "content": "You are brief."}}, r.Messages...)
			}
			if i%3 == 2 {
				r.Messages = append(r.Messages, map[string]any{"role": "assistant", "content": "Yes."}, map[string]any{"role": "user", "content": words[(i+1)%len(words)]})
			}
		} else {
			r.Prompt = text
		}
		out[i] = r
	}
	return out
}

// runPython runs a script of testdata with py and decodes its JSON output.
func runPython(t *testing.T, py string, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, lastLines(stderr.String(), 30))
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v: %.300s", args[0], err, b)
	}
}

// TestOpenAIClientAcceptance: optimum exports of GPT-2, Llama and Qwen2
// (random weights, real tokenizers) deployed as llm_cpu services answer
// the official openai client, streaming and not, with the service token as
// its API key; with 64 concurrent streams on one service, every greedy
// answer equals transformers' generate() token for token, and the chat
// prompts are the model's own chat_template as transformers renders it.
func TestOpenAIClientAcceptance(t *testing.T) {
	models := testModels(t)
	client := pyvenv.Python(t, "openai")
	ref := pyvenv.Python(t, "llm")
	cases := []struct {
		svc, family, kind string
		n                 int
	}{
		{"llm_llama", "llama", "chat", 64},
		{"llm_qwen2", "qwen2", "chat", 16},
		{"llm_gpt2", "gpt2", "completion", 16},
	}
	var services []string
	for _, c := range cases {
		services = append(services, fmt.Sprintf(`{"name": %q, "processor": "llm_cpu", "model_path": %q, "token": "T",
			"model_config": {"max_num_seqs": 64, "max_num_batched_tokens": 256}, "metadata": {"instance": 1, "rpc": {"max_queue_size": 64}}}`,
			c.svc, filepath.Join(models, c.family, "optimum")))
	}
	st := teststack.New(t, teststack.Options{}, services...)
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.svc, func(t *testing.T) {
			reqs := acceptRequests(c.kind, c.n)
			file := filepath.Join(dir, c.svc+".json")
			b, _ := json.Marshal(map[string]any{"base_url": st.URL + "/api/predict/" + c.svc + "/v1", "api_key": "T", "model": c.svc, "requests": reqs})
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var want []acceptExpected
			runPython(t, ref, &want, "testdata/transformers_greedy.py", filepath.Join(models, c.family, "hf"), file)
			var got []acceptAnswer
			runPython(t, client, &got, "testdata/openai_client.py", file)
			if len(got) != len(reqs) || len(want) != len(reqs) {
				t.Fatalf("%d answers, %d references for %d requests", len(got), len(want), len(reqs))
			}
			for i, r := range reqs {
				g := got[i]
				if fmt.Sprint(g.IDs) != fmt.Sprint(want[i].IDs) {
					t.Errorf("request %d (%d prompt tokens, max_tokens %d, stream %v): tokens\n  %v, transformers\n  %v",
						i, len(want[i].PromptIDs), r.MaxTokens, r.Stream, g.IDs, want[i].IDs)
					continue
				}
				if g.Finish != "length" || g.Usage != r.MaxTokens {
					t.Errorf("request %d: finish %q, usage %d, want length and %d", i, g.Finish, g.Usage, r.MaxTokens)
				}
				if r.Stream && g.Chunks < 2 {
					t.Errorf("request %d: a stream of %d chunks", i, g.Chunks)
				}
			}
			if v := teststack.Metric(t, st.URL, `eas_generation_tokens_total{service="`+c.svc+`"}`); v < float64(len(reqs)) {
				t.Errorf("eas_generation_tokens_total is %v", v)
			}
		})
	}
	for _, c := range cases {
		if v := teststack.Metric(t, st.URL, `eas_generation_sequences_running{service="`+c.svc+`"}`); v != 0 {
			t.Errorf("%s: %v sequences still running after every answer", c.svc, v)
		}
	}
}
