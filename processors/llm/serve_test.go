package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	_ "github.com/eas-server/eas-server/processors/echo" // a service of another kind beside generative ones
	"github.com/eas-server/eas-server/queue"
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
	Prompt int     `json:"prompt_tokens"`
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
				if g.Finish != "length" || g.Usage != r.MaxTokens || g.Prompt != len(want[i].PromptIDs) {
					t.Errorf("request %d: finish %q, usage %d completion and %d prompt tokens, want length, %d and %d (transformers' prompt)",
						i, g.Finish, g.Usage, g.Prompt, r.MaxTokens, len(want[i].PromptIDs))
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

// lifecycleStack serves the Llama test model as "llama" (token T), and as
// "llama_deadline" with a keepalive of 1 ms.
func lifecycleStack(t *testing.T) *teststack.Stack {
	t.Helper()
	dir := filepath.Join(testModels(t), "llama", "optimum")
	return teststack.New(t, teststack.Options{},
		fmt.Sprintf(`{"name": "llama", "processor": "llm_cpu", "model_path": %q, "token": "T", "metadata": {"instance": 1}}`, dir),
		fmt.Sprintf(`{"name": "llama_deadline", "processor": "llm_cpu", "model_path": %q, "token": "T", "metadata": {"instance": 1, "rpc": {"keepalive": 1}}}`, dir))
}

// freed waits until svc runs no sequence and holds nothing in its cache.
func freed(t *testing.T, st *teststack.Stack, svc string) {
	t.Helper()
	wait.Until(t, 30*time.Second, func() error {
		run := teststack.Metric(t, st.URL, `eas_generation_sequences_running{service="`+svc+`"}`)
		cache := teststack.Metric(t, st.URL, `eas_generation_cache_tokens{service="`+svc+`"}`)
		if run != 0 || cache != 0 {
			return fmt.Errorf("%s: %v sequences running, %v tokens cached", svc, run, cache)
		}
		return nil
	})
}

// TestGenerationLifecycle: seeded sampling is reproducible whatever runs
// beside it; a client that goes away and a request past its deadline free
// their sequences; bad requests get OpenAI's 400s through the real server.
func TestGenerationLifecycle(t *testing.T) {
	st := lifecycleStack(t)
	post := func(path, body string) (int, []byte) {
		t.Helper()
		code, b, _ := teststack.Do(t, http.MethodPost, st.URL+path, "Bearer T", []byte(body))
		return code, b
	}
	text := func(b []byte) string {
		var c struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("answer %s: %v", b, err)
		}
		return c.Choices[0].Text
	}

	t.Run("seed", func(t *testing.T) {
		body := `{"model": "llama", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.9, "top_p": 0.95, "seed": 7, "ignore_eos": true}`
		code, b := post("/v1/completions", body)
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, b)
		}
		alone := text(b)
		// The same request again, beside eight unseeded ones.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				post("/v1/completions", fmt.Sprintf(`{"model": "llama", "prompt": "noise %d", "max_tokens": %d, "temperature": 1, "ignore_eos": true}`, i, 10+i*5))
			}()
		}
		code, b = post("/v1/completions", body)
		wg.Wait()
		if code != http.StatusOK || text(b) != alone {
			t.Fatalf("seeded answer %q beside others, %q alone (%d)", text(b), alone, code)
		}
		_, other := post("/v1/completions", strings.Replace(body, `"seed": 7`, `"seed": 8`, 1))
		if text(other) == alone {
			t.Errorf("seeds 7 and 8 gave the same %d-token answer %q", 24, alone)
		}
	})

	t.Run("disconnect", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.URL+"/api/predict/llama/v1/completions",
			strings.NewReader(`{"prompt": "Tell a long story", "max_tokens": 480, "ignore_eos": true, "stream": true}`))
		req.Header.Set("Authorization", "T")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n') // the first event has arrived
		if err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("first line %q: %v", line, err)
		}
		cancel()
		resp.Body.Close()
		freed(t, st, "llama")
		if n := teststack.Metric(t, st.URL, `eas_generation_tokens_total{service="llama"}`); n >= 480+24*2+8*50 {
			t.Errorf("%v tokens generated: the abandoned stream ran to its end", n)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		code, b, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/llama_deadline/v1/completions", "T",
			[]byte(`{"prompt": "Tell a long story", "max_tokens": 480, "ignore_eos": true}`))
		if code != http.StatusRequestTimeout || !strings.Contains(string(b), "deadline") {
			t.Fatalf("past rpc.keepalive: %d %s", code, b)
		}
		freed(t, st, "llama_deadline")
	})

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct{ path, body, param, want string }{
			{"/v1/completions", `{"model": "llama", "prompt": "x", "temprature": 0.5}`, "temprature", "unknown"},
			{"/v1/completions", `{"model": "llama", "prompt": "x", "max_tokens": 600}`, "max_tokens", "512"},
			{"/v1/completions", `{"model": "llama", "prompt": "x", "n": 1000}`, "n", "n"},
			{"/v1/chat/completions", `{"model": "llama", "messages": [{"role": "user"}]}`, "messages[0].content", "content"},
			{"/v1/chat/completions", `{"model": "llama", "messages": "hello"}`, "messages", "messages"},
			{"/v1/chat/completions", `{"model": "llama", "messages": [{"role": "wizard", "content": "x"}]}`, "messages[0].role", "role"},
		} {
			code, b := post(c.path, c.body)
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || code != http.StatusBadRequest || e.Error.Type != "invalid_request_error" ||
				e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.want) {
				t.Errorf("%s %s: %d %s, want a 400 invalid_request_error on %s saying %q", c.path, c.body, code, b, c.param, c.want)
			}
		}
		// A long prompt over the context.
		long := strings.Repeat("word ", 600)
		if code, b := post("/v1/completions", `{"model": "llama", "prompt": "`+long+`", "max_tokens": 4}`); code != http.StatusBadRequest || !strings.Contains(string(b), "context") {
			t.Errorf("a prompt over the context: %d %s", code, b)
		}
		if code, b := post("/v1/completions", `{"model": "gpt-4", "prompt": "x"}`); code != http.StatusNotFound || !strings.Contains(string(b), "model_not_found") {
			t.Errorf("an unknown model: %d %s", code, b)
		}
	})
}

// TestRootDoor: OpenAI's paths at the server's root pick the service by the
// request's model (its name or model_config.model_name) and check that
// service's token; /v1/models lists what the token opens.
func TestRootDoor(t *testing.T) {
	models := testModels(t)
	st := teststack.New(t, teststack.Options{},
		fmt.Sprintf(`{"name": "llama", "processor": "llm_cpu", "model_path": %q, "token": "T", "metadata": {"instance": 1}}`,
			filepath.Join(models, "llama", "optimum")),
		fmt.Sprintf(`{"name": "qwen", "processor": "llm_cpu", "model_path": %q, "token": "Q", "model_config": {"model_name": "qwen-tiny"}, "metadata": {"instance": 1}}`,
			filepath.Join(models, "qwen2", "optimum")),
		`{"name": "echo", "processor": "echo", "token": "E", "metadata": {"instance": 1}}`)
	errorOf := func(b []byte) (typ, code string) {
		var e struct {
			Error struct {
				Type string  `json:"type"`
				Code *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("not an OpenAI error object: %s", b)
		}
		if e.Error.Code != nil {
			code = *e.Error.Code
		}
		return e.Error.Type, code
	}
	for _, c := range []struct {
		method, path, token, body string
		code                      int
		want                      string // in the body
	}{
		{"GET", "/v1/models", "Bearer T", "", 200, `"id":"llama"`},
		{"GET", "/v1/models", "Q", "", 200, `"id":"qwen-tiny"`},
		{"GET", "/v1/models", "E", "", 200, `"data":[]`},
		{"GET", "/v1/models", "Bearer nope", "", 401, "authentication_error"},
		{"GET", "/v1/models/qwen-tiny", "Bearer Q", "", 200, `"max_model_len":512`},
		{"POST", "/v1/completions", "Bearer Q", `{"model": "qwen-tiny", "prompt": "hi", "max_tokens": 2}`, 200, `"model":"qwen-tiny"`},
		{"POST", "/v1/completions", "Bearer Q", `{"model": "qwen", "prompt": "hi", "max_tokens": 2}`, 200, `"text_completion"`},
		{"POST", "/v1/completions", "Bearer T", `{"model": "qwen-tiny", "prompt": "hi", "max_tokens": 2}`, 401, "authentication_error"},
		{"POST", "/v1/completions", "Bearer T", `{"prompt": "hi", "max_tokens": 2}`, 400, "model is required"},
		{"POST", "/v1/completions", "Bearer T", `{"model": "echo", "prompt": "hi"}`, 404, "model_not_found"},
		{"POST", "/v1/embeddings", "Bearer T", `{"model": "llama", "input": "hi"}`, 404, "unknown_url"},
	} {
		code, b, _ := teststack.Do(t, c.method, st.URL+c.path, c.token, []byte(c.body))
		if code != c.code || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s (%s) %s: %d %s, want %d with %s", c.method, c.path, c.token, c.body, code, b, c.code, c.want)
		}
		if code != 200 {
			if typ, _ := errorOf(b); typ == "" {
				t.Errorf("%s %s: error without a type: %s", c.method, c.path, b)
			}
		}
	}
}

// TestAsyncGeneration: an asynchronous generative service answers the
// plain form's requests from its input queue into its sink, each answer the
// completion object the synchronous door gives for the same body.
func TestAsyncGeneration(t *testing.T) {
	dir := filepath.Join(testModels(t), "llama", "optimum")
	st := teststack.New(t, teststack.Options{},
		fmt.Sprintf(`{"name": "llama_async", "processor": "llm_cpu", "model_path": %q, "token": "T", "metadata": {"instance": 1, "type": "Async"}}`, dir),
		fmt.Sprintf(`{"name": "llama", "processor": "llm_cpu", "model_path": %q, "token": "T", "metadata": {"instance": 1}}`, dir))
	ctx := context.Background()
	in := &queue.Client{URL: st.URL + "/api/predict/llama_async", Token: "T"}
	sink := &queue.Client{URL: in.URL + "/sink", Token: "T"}
	bodies := map[string]string{}
	for i := range 6 {
		body := fmt.Sprintf(`{"prompt": "story %d", "max_tokens": %d, "temperature": 0, "ignore_eos": true}`, i, 3+i*4)
		if i%2 == 1 {
			body = fmt.Sprintf(`{"messages": [{"role": "user", "content": "story %d"}], "max_tokens": %d, "temperature": 0, "ignore_eos": true}`, i, 3+i*4)
		}
		_, id, err := in.Put(ctx, []byte(body), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		bodies[id] = body
	}
	_, badID, err := in.Put(ctx, []byte(`{"prompt": "x", "n": 0}`), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ch, err := sink.Watch(wctx, 0, 8, false, true, false)
	if err != nil {
		t.Fatal(err)
	}
	text := func(b []byte) string {
		var c struct {
			Choices []struct {
				Text    string
				Message struct{ Content string }
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("answer %s: %v", b, err)
		}
		return c.Choices[0].Text + c.Choices[0].Message.Content
	}
	for seen := 0; seen < len(bodies)+1; seen++ {
		f, ok := <-ch
		if !ok {
			t.Fatalf("the sink closed after %d answers", seen)
		}
		id := f.Tags[queue.RequestIDTag]
		if id == badID {
			if f.Tags["status"] != "400" || !strings.Contains(f.Message, "n") {
				t.Errorf("the bad request's answer: status %s, %q", f.Tags["status"], f.Message)
			}
			continue
		}
		body, ok := bodies[id]
		if !ok || f.Tags["status"] != "200" {
			t.Fatalf("answer for %q: status %s %q %s", id, f.Tags["status"], f.Message, f.Data)
		}
		code, want, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/llama", "T", []byte(body))
		if code != 200 || text(f.Data) != text(want) {
			t.Errorf("%s: async %q, sync %q (%d)", body, text(f.Data), text(want), code)
		}
	}
}
