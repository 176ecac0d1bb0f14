package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/internal/wait"
)

// do sends one request and returns its status, header and body.
func do(t *testing.T, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Close { // net/http's client takes "Connection: close" out of the header
		resp.Header.Set("Connection", "close")
	}
	return resp.StatusCode, resp.Header, b
}

func decodeInto[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

// events splits a server-sent-event stream into its data payloads, the
// last of which must be [DONE]; every event is one "data: " line and a
// blank line.
func events(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			t.Fatalf("stream line %q is not a data line", line)
		}
		out = append(out, bytes.Clone(data))
		if !sc.Scan() || len(sc.Bytes()) != 0 {
			t.Fatalf("no blank line after event %s", data)
		}
	}
	if len(out) == 0 || string(out[len(out)-1]) != "[DONE]" {
		t.Fatalf("the stream does not end with [DONE]: %s", b)
	}
	return out[:len(out)-1]
}

func TestServeCompletion(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{}, false)
	prompt := encode(t, ts.gen, "The cat", true)
	ids, text, finish := ts.model.greedy(t, prompt, 40)

	code, h, b := do(t, "POST", ts.URL+"/v1/completions", `{"model": "tiny-gpt2", "prompt": "The cat", "max_tokens": 40, "temperature": 0, "logprobs": 2}`)
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %s", code, h.Get("Content-Type"), b)
	}
	c := decodeInto[Completion](t, b)
	if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || c.Model != "tiny-gpt2" || len(c.Choices) != 1 || c.Created == 0 {
		t.Fatalf("answer %s", b)
	}
	ch := c.Choices[0]
	if ch.Text != text || *ch.FinishReason != finish {
		t.Fatalf("text %q finish %s, want %q %s", ch.Text, *ch.FinishReason, text, finish)
	}
	if *c.Usage != (Usage{PromptTokens: len(prompt), CompletionTokens: len(ids), TotalTokens: len(prompt) + len(ids)}) {
		t.Fatalf("usage %+v, want %d prompt and %d generated tokens", c.Usage, len(prompt), len(ids))
	}
	lp := ch.Logprobs
	if len(lp.Tokens) != len(ids) || len(lp.TokenLogprobs) != len(ids) || len(lp.TopLogprobs) != len(ids) || len(lp.TextOffset) != len(ids) {
		t.Fatalf("logprobs of %d tokens: %s", len(ids), b)
	}
	for i := range ids {
		if len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 2 || lp.TokenLogprobs[i] > 0 {
			t.Fatalf("token %d: %s", i, b)
		}
		// Greedy: the chosen token is the most likely, so its logprob is
		// the top alternative's.
		best := -1e9
		for _, v := range lp.TopLogprobs[i] {
			best = max(best, v)
		}
		if best != lp.TokenLogprobs[i] {
			t.Fatalf("token %d: logprob %v, best alternative %v", i, lp.TokenLogprobs[i], best)
		}
		if i > 0 && lp.TextOffset[i] != lp.TextOffset[i-1]+utf8.RuneCountInString(lp.Tokens[i-1]) {
			t.Fatalf("text_offset %v for tokens %q", lp.TextOffset, lp.Tokens)
		}
	}

	// The same request streamed: the chunks' texts add up to the answer.
	code, h, b = do(t, "POST", ts.URL+"/api/predict/svc/v1/completions", `{"prompt": "The cat", "max_tokens": 40, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}`)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" {
		t.Fatalf("%d %v: %s", code, h, b)
	}
	evs := events(t, b)
	var got strings.Builder
	finishes := 0
	for i, e := range evs[:len(evs)-1] {
		k := decodeInto[Completion](t, e)
		if len(k.Choices) != 1 || k.Usage != nil || k.Object != "text_completion" {
			t.Fatalf("chunk %d: %s", i, e)
		}
		got.WriteString(k.Choices[0].Text)
		if f := k.Choices[0].FinishReason; f != nil {
			finishes++
			if *f != finish || i != len(evs)-2 {
				t.Fatalf("chunk %d of %d finishes %s: %s", i, len(evs), *f, e)
			}
		}
	}
	last := decodeInto[Completion](t, evs[len(evs)-1])
	if got.String() != text || finishes != 1 || len(last.Choices) != 0 || last.Usage == nil || *last.Usage != *c.Usage {
		t.Fatalf("streamed %q (%d finishes), last %s; want %q and usage %+v", got.String(), finishes, evs[len(evs)-1], text, c.Usage)
	}
}

func TestServeChatStream(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{}, false)
	rendered := "<|im_start|>user\nTell me<|im_end|>\n<|im_start|>assistant\n"
	prompt := encode(t, ts.gen, rendered, false)
	ids, text, finish := ts.model.greedy(t, prompt, 30)

	body := `{"messages": [{"role": "user", "content": "Tell me"}], "max_completion_tokens": 30, "temperature": 0, "n": 2,
		"logprobs": true, "top_logprobs": 3, "stream": true, "stream_options": {"include_usage": true}}`
	code, _, b := do(t, "POST", ts.URL+"/v1/chat/completions", body)
	if code != 200 {
		t.Fatalf("%d: %s", code, b)
	}
	evs := events(t, b)
	texts := make([]strings.Builder, 2)
	tokens, roles, finished := [2]int{}, [2]int{}, [2]bool{}
	for i, e := range evs[:len(evs)-1] {
		k := decodeInto[ChatCompletionChunk](t, e)
		if k.Object != "chat.completion.chunk" || !strings.HasPrefix(k.ID, "chatcmpl-") || len(k.Choices) != 1 || k.Usage != nil {
			t.Fatalf("chunk %d: %s", i, e)
		}
		ch := k.Choices[0]
		if finished[ch.Index] {
			t.Fatalf("chunk %d after choice %d finished: %s", i, ch.Index, e)
		}
		if ch.Delta.Role != "" {
			roles[ch.Index]++
			if ch.Delta.Role != "assistant" || texts[ch.Index].Len() > 0 || tokens[ch.Index] > 0 {
				t.Fatalf("role chunk %d: %s", i, e)
			}
		}
		if ch.Delta.Content != nil {
			texts[ch.Index].WriteString(*ch.Delta.Content)
		}
		if ch.Logprobs != nil {
			for _, tl := range ch.Logprobs.Content {
				if len(tl.TopLogprobs) != 3 || tl.TopLogprobs[0].Logprob != tl.Logprob || tl.TopLogprobs[0].Token != tl.Token ||
					string(intsToBytes(tl.Bytes)) != tl.Token {
					t.Fatalf("chunk %d: logprob %+v", i, tl)
				}
			}
			tokens[ch.Index] += len(ch.Logprobs.Content)
		}
		if ch.FinishReason != nil {
			finished[ch.Index] = true
			if *ch.FinishReason != finish {
				t.Fatalf("chunk %d: finish %s, want %s", i, *ch.FinishReason, finish)
			}
		}
	}
	for i := range 2 {
		if texts[i].String() != text || tokens[i] != len(ids) || roles[i] != 1 || !finished[i] {
			t.Fatalf("choice %d: %q in %d tokens (%d role chunks, finished %v); want %q in %d", i, texts[i].String(), tokens[i], roles[i], finished[i], text, len(ids))
		}
	}
	last := decodeInto[ChatCompletionChunk](t, evs[len(evs)-1])
	if len(last.Choices) != 0 || *last.Usage != (Usage{len(prompt), 2 * len(ids), len(prompt) + 2*len(ids)}) {
		t.Fatalf("last chunk %s, want usage of %d + 2 x %d tokens", evs[len(evs)-1], len(prompt), len(ids))
	}

	// Not streamed.
	code, _, b = do(t, "POST", ts.URL+"/v1/chat/completions", strings.Replace(body, `"stream": true, "stream_options": {"include_usage": true}`, `"stream": false`, 1))
	if code != 200 {
		t.Fatalf("%d: %s", code, b)
	}
	c := decodeInto[ChatCompletion](t, b)
	if c.Object != "chat.completion" || len(c.Choices) != 2 || *c.Usage != *last.Usage {
		t.Fatalf("answer %s", b)
	}
	for i, ch := range c.Choices {
		if ch.Index != i || ch.Message.Role != "assistant" || ch.Message.Content != text || ch.FinishReason != finish || len(ch.Logprobs.Content) != len(ids) {
			t.Fatalf("choice %d: %s", i, b)
		}
	}
}

func intsToBytes(a []int) []byte {
	out := make([]byte, len(a))
	for i, x := range a {
		out[i] = byte(x)
	}
	return out
}

func TestServeManyPrompts(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{}, false)
	var wantTexts []string
	promptTokens, generated := 0, 0
	for _, p := range []string{"The cat", "A mat and"} {
		ids := encode(t, ts.gen, p, true)
		out, text, _ := ts.model.greedy(t, ids, 20)
		wantTexts = append(wantTexts, p+text, p+text)
		promptTokens += len(ids)
		generated += 2 * len(out)
	}
	code, _, b := do(t, "POST", ts.URL+"/v1/completions", `{"prompt": ["The cat", "A mat and"], "n": 2, "max_tokens": 20, "temperature": 0, "echo": true}`)
	if code != 200 {
		t.Fatalf("%d: %s", code, b)
	}
	c := decodeInto[Completion](t, b)
	if len(c.Choices) != 4 || *c.Usage != (Usage{promptTokens, generated, promptTokens + generated}) {
		t.Fatalf("answer %s", b)
	}
	for i, ch := range c.Choices {
		if ch.Index != i || ch.Text != wantTexts[i] {
			t.Fatalf("choice %d: %q, want %q", i, ch.Text, wantTexts[i])
		}
	}

	// Streamed with a seed: every choice its own, and the same again.
	body := `{"prompt": ["The cat", "A mat and"], "n": 2, "max_tokens": 20, "seed": 7, "stream": true}`
	collect := func() []string {
		code, _, b := do(t, "POST", ts.URL+"/v1/completions", body)
		if code != 200 {
			t.Fatalf("%d: %s", code, b)
		}
		out := make([]string, 4)
		for _, e := range events(t, b) {
			k := decodeInto[Completion](t, e)
			out[k.Choices[0].Index] += k.Choices[0].Text
		}
		return out
	}
	first, second := collect(), collect()
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("seeded answers differ: %q and %q", first, second)
	}
}

// apiError decodes an OpenAI error answer.
func apiError(t *testing.T, b []byte) ErrorObject {
	t.Helper()
	return decodeInto[ErrorBody](t, b).Error
}

func TestServeErrors(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{MaxSeqs: 4}, false)
	for _, c := range []struct {
		method, path, body string
		code               int
		typ, param, ecode  string
		msg                string
	}{
		{"POST", "/v1/completions", `{"prompt": "x", "model": "nope"}`, 404, "invalid_request_error", "model", "model_not_found", "The model `nope` does not exist"},
		{"POST", "/api/predict/svc/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "temperature": 5}`, 400, "invalid_request_error", "temperature", "", "temperature must be in [0, 2], got 5"},
		{"POST", "/v1/completions", `{"prompt": "x", "wat": 1}`, 400, "invalid_request_error", "wat", "unknown_field", `unknown field "wat"`},
		{"POST", "/v1/completions", `{"prompt": "x", "n": 5}`, 400, "invalid_request_error", "", "", "more than the 4 sequences the service runs at once"},
		{"GET", "/v1/completions", ``, 405, "invalid_request_error", "", "", "use POST"},
		{"POST", "/v1/models", ``, 405, "invalid_request_error", "", "", "use GET"},
		{"GET", "/v1/embeddings", ``, 404, "invalid_request_error", "", "unknown_url", "no such path /v1/embeddings"},
		{"GET", "/v1/models/other", ``, 404, "invalid_request_error", "model", "model_not_found", "The model `other` does not exist"},
	} {
		t.Run(c.method+c.path+c.body, func(t *testing.T) {
			code, h, b := do(t, c.method, ts.URL+c.path, c.body)
			if code != c.code || h.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s: %s", code, h.Get("Content-Type"), b)
			}
			e := apiError(t, b)
			if e.Type != c.typ || deref(e.Param) != c.param || deref(e.Code) != c.ecode || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("error %s; want type %s param %q code %q message with %q", b, c.typ, c.param, c.ecode, c.msg)
			}
			if c.code == 405 && h.Get("Allow") == "" {
				t.Fatal("a 405 without Allow")
			}
		})
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func TestServeModels(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{}, false)
	code, _, b := do(t, "GET", ts.URL+"/v1/models", "")
	want := Model{ID: "tiny-gpt2", Object: "model", Created: 1700000000, OwnedBy: "eas-server", MaxModelLen: testCtx}
	if l := decodeInto[ModelList](t, b); code != 200 || l.Object != "list" || len(l.Data) != 1 || l.Data[0] != want {
		t.Fatalf("%d: %s", code, b)
	}
	for _, id := range []string{"tiny-gpt2", "svc"} { // the service's name is the model too
		code, _, b = do(t, "GET", ts.URL+"/api/predict/svc/v1/models/"+id, "")
		if m := decodeInto[Model](t, b); code != 200 || m != want {
			t.Fatalf("%d: %s", code, b)
		}
	}
}

func TestServePlain(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{}, false)
	prompt := encode(t, ts.gen, "The cat", true)
	_, text, _ := ts.model.greedy(t, prompt, 10)
	code, _, b := do(t, "POST", ts.URL+"/api/predict/svc", `{"prompt": "The cat", "max_tokens": 10, "temperature": 0}`)
	if c := decodeInto[Completion](t, b); code != 200 || c.Object != "text_completion" || c.Choices[0].Text != text {
		t.Fatalf("%d: %s, want text %q", code, b, text)
	}
	code, _, b = do(t, "POST", ts.URL+"/api/predict/svc", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": true}`)
	if evs := events(t, b); code != 200 || decodeInto[ChatCompletionChunk](t, evs[0]).Choices[0].Delta.Role != "assistant" {
		t.Fatalf("%d: %s", code, b)
	}
	for _, c := range []struct {
		method, body, msg string
		code              int
	}{
		{"POST", `{"prompt": "x", "messages": []}`, "send either prompt (a completion) or messages (a chat), not both", 400},
		{"POST", `{"prompt": "x", "temperature": -1}`, "temperature must be in [0, 2], got -1", 400},
		{"POST", `{"prompt": "x", "model": "m"}`, "The model `m` does not exist", 404},
		{"GET", ``, "POST a JSON body", 405},
	} {
		code, h, b := do(t, c.method, ts.URL+"/api/predict/svc", c.body)
		if code != c.code || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s %s: %d %s %q; want %d and a plain-text message with %q", c.method, c.body, code, h.Get("Content-Type"), b, c.code, c.msg)
		}
	}
}

// TestServeAdmission: the scheduler's refusals before the body is read
// (450 queue full, 429 rate limit, 503 stopping), as OpenAI error objects.
func TestServeAdmission(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{MaxSeqs: 1, MaxWaiting: 1}, true)
	done := make(chan int, 2)
	for i := range 2 { // one runs (held in its first step), one waits
		go func() {
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "The cat", "max_tokens": 2}`))
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		wait.Until(t, 10*time.Second, func() error {
			if r, w := ts.seqs.Load(); r != 1 || w != i {
				return fmt.Errorf("%d running, %d waiting; want 1 and %d", r, w, i)
			}
			return nil
		})
	}
	code, _, b := do(t, "POST", ts.URL+"/v1/completions", `{"prompt": "x"}`)
	if e := apiError(t, b); code != 450 || e.Type != "overloaded_error" || deref(e.Code) != "queue_full" || !strings.Contains(e.Message, "max_queue_size") {
		t.Fatalf("%d: %s", code, b)
	}
	ts.model.runSteps()
	for range 2 {
		if code := <-done; code != 200 {
			t.Fatalf("a queued request answered %d", code)
		}
	}

	rl := newTestServer(t, scheduler.SeqConfig{RateLimit: 0.001}, false)
	if code, _, b := do(t, "POST", rl.URL+"/v1/completions", `{"prompt": "x", "max_tokens": 1}`); code != 200 {
		t.Fatalf("first request: %d %s", code, b)
	}
	code, _, b = do(t, "POST", rl.URL+"/v1/completions", `{"prompt": "x", "max_tokens": 1}`)
	if e := apiError(t, b); code != 429 || e.Type != "rate_limit_error" || deref(e.Code) != "rate_limit_exceeded" {
		t.Fatalf("%d: %s", code, b)
	}

	if err := rl.seqs.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, _, b = do(t, "POST", rl.URL+"/v1/chat/completions", `{"messages": []}`)
	if e := apiError(t, b); code != 503 || e.Type != "overloaded_error" || !strings.Contains(e.Message, "stopping") {
		t.Fatalf("%d: %s", code, b)
	}
}

// TestServeDeadline: a choice past rpc.keepalive fails the request with 408,
// or a streamed one with an error event and [DONE].
func TestServeDeadline(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{Timeout: 30 * time.Millisecond}, true)
	for _, stream := range []bool{false, true} {
		type answer struct {
			code int
			h    http.Header
			b    []byte
		}
		done := make(chan answer, 1)
		start := time.Now()
		go func() {
			code, h, b := do(t, "POST", ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt": "The cat", "max_tokens": 50, "stream": %v}`, stream))
			done <- answer{code, h, b}
		}()
		wait.Until(t, 10*time.Second, func() error {
			if ts.model.waiting.Load() != 1 {
				return errors.New("the first step has not started")
			}
			if time.Since(start) < 40*time.Millisecond {
				return errors.New("the deadline has not passed") // the condition is the clock itself
			}
			return nil
		})
		ts.model.gate <- struct{}{} // the prompt's step; the next loop finds the deadline past
		a := <-done
		if !stream {
			if e := apiError(t, a.b); a.code != 408 || e.Type != "timeout_error" || a.h.Get("Connection") != "close" || !strings.Contains(e.Message, "keepalive") {
				t.Fatalf("%d %v: %s", a.code, a.h, a.b)
			}
			continue
		}
		evs := events(t, a.b)
		if e := apiError(t, evs[len(evs)-1]); a.code != 200 || e.Type != "timeout_error" || !strings.Contains(e.Message, "keepalive") {
			t.Fatalf("%d: %s", a.code, a.b)
		}
	}
}

// TestServeClientGone: a streaming client that goes away frees its
// sequence.
func TestServeClientGone(t *testing.T) {
	ts := newTestServer(t, scheduler.SeqConfig{}, true)
	ts.model.runSteps()
	req, err := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt": "The cat", "max_tokens": 150, "ignore_eos": true, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	wait.Until(t, 10*time.Second, func() error {
		if r, _ := ts.seqs.Load(); r != 0 || ts.model.live.Load() != 0 {
			return fmt.Errorf("%d sequences running, %d caches held after the client left", r, ts.model.live.Load())
		}
		return nil
	})
}
