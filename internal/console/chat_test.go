package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eas-server/eas-server/internal/browsertest"
	"github.com/eas-server/eas-server/internal/console"
	"github.com/eas-server/eas-server/internal/history"
	"github.com/eas-server/eas-server/internal/metrics"
)

// These tests run the console's own modules in a real headless chromium
// (Debian's), served by console.Handler with its security headers, and
// call their functions from the page. The whole console in a browser
// against a real server is e2e/console_test.go.

// page serves the console at /console/ beside extra (the data plane the
// test answers, if any), opens it in a chromium of browsertest.Start with
// o and answers the browser's context and a function listing the page's
// problems: uncaught exceptions, console errors and warnings, failed loads
// other than those o expects.
func page(t *testing.T, extra http.Handler, o browsertest.Options) (context.Context, func() []string) {
	t.Helper()
	ctx, problems := browsertest.Start(t, o)
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console/", console.Handler()))
	if extra != nil {
		mux.Handle("/api/", extra)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/console/"), chromedp.WaitVisible("#login-token", chromedp.ByQuery)); err != nil {
		t.Fatalf("opening the console: %v", err)
	}
	return ctx, problems
}

// evalJSON runs an async JavaScript function's source with arg (as JSON)
// in the page and decodes the JSON string it answers into out.
func evalJSON(t *testing.T, ctx context.Context, fn string, arg, out any) {
	t.Helper()
	a, err := json.Marshal(arg)
	if err != nil {
		t.Fatal(err)
	}
	var s string
	expr := fmt.Sprintf("(%s)(%s).then((v) => JSON.stringify(v))", fn, a)
	if err := chromedp.Run(ctx, chromedp.Evaluate(expr, &s, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})); err != nil {
		t.Fatalf("in the page: %v", err)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
}

type chunk struct {
	Role, Content, Finish, Error string
	Done                         bool
}

type parsed struct {
	Reads  int
	Data   []string
	Chunks []chunk
}

// parseJS feeds each case's text to readEvents as a stream whose reads
// end at the given byte offsets, and answers the events' data and what
// chunkOf makes of each.
const parseJS = `async (cases) => {
  const { readEvents, chunkOf } = await import(new URL('chat.js', location.href).href);
  const enc = new TextEncoder();
  const out = [];
  for (const c of cases) {
    const bytes = enc.encode(c.Text);
    const parts = [];
    let at = 0;
    for (const cut of [...(c.Cuts || []), bytes.length]) { parts.push(bytes.slice(at, cut)); at = cut; }
    const body = new ReadableStream({ start(ctl) { parts.forEach((p) => ctl.enqueue(p)); ctl.close(); } });
    const Data = [];
    const Chunks = [];
    await readEvents(body, (d) => {
      Data.push(d);
      let k;
      try {
        k = chunkOf(d);
      } catch (err) {
        k = { error: 'throws: ' + err.message };
      }
      Chunks.push({ Role: k.role || '', Content: k.content || '', Finish: k.finish || '', Error: k.error || '', Done: !!k.done });
    });
    out.push({ Reads: parts.length, Data, Chunks });
  }
  return out;
}`

// TestChatStreamParsing: the chat panel's event-stream reader gives each
// event's data whole however the bytes are cut into reads: at every byte,
// inside a two-byte and a four-byte UTF-8 character, between the CR and
// LF of a line end. Comments, other fields and an unfinished last event
// give nothing; an error event and [DONE] are told apart.
func TestChatStreamParsing(t *testing.T) {
	ctx, problems := page(t, nil, browsertest.Options{})

	chunkJSON := func(delta, finish string) string {
		return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"llm","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, finish)
	}
	openai := []string{
		chunkJSON(`{"role":"assistant"}`, "null"),
		chunkJSON(`{"content":"Héllo "}`, "null"),
		chunkJSON(`{"content":"wörld 😀"}`, "null"),
		chunkJSON(`{}`, `"stop"`),
		"[DONE]",
	}
	var text strings.Builder
	for _, d := range openai {
		text.WriteString("data: " + d + "\n\n")
	}
	stream := text.String()
	e := strings.Index(stream, "é")
	emoji := strings.Index(stream, "😀")
	framing := ": keep-alive\r\n\r\nevent: message\r\nid: 7\r\ndata: {\"a\":\r\ndata:1}\r\n\r\ndata: two\rdata: lines\r\rdata: x\n\nretry: 10\ndata: never finished"
	crlf := strings.Index(framing, "\"a\":\r\n") + len("\"a\":\r") // between the CR and LF ending a data line
	errEvent := `{"error":{"message":"the key/value cache is full","type":"server_error","code":"overloaded"}}`

	type parseCase struct {
		Text string
		Cuts []int
		want []string
	}
	every := func(s string) []int {
		var cuts []int
		for i := 1; i < len(s); i++ {
			cuts = append(cuts, i)
		}
		return cuts
	}
	cases := []parseCase{
		{stream, nil, openai},
		{stream, every(stream), openai},
		{stream, []int{e + 1, emoji + 1, emoji + 3}, openai}, // é in two reads, 😀 in three
		{framing, nil, []string{"{\"a\":\n1}", "two\nlines", "x"}},
		{framing, every(framing), []string{"{\"a\":\n1}", "two\nlines", "x"}},
		{framing, []int{crlf}, []string{"{\"a\":\n1}", "two\nlines", "x"}},
		{"data: " + errEvent + "\n\n", every("data: " + errEvent + "\n\n"), []string{errEvent}},
	}
	var got []parsed
	evalJSON(t, ctx, parseJS, cases, &got)
	if len(got) != len(cases) {
		t.Fatalf("%d results for %d cases", len(got), len(cases))
	}
	for i, c := range cases {
		g := got[i]
		if g.Reads != len(c.Cuts)+1 {
			t.Errorf("case %d: %d reads, want %d", i, g.Reads, len(c.Cuts)+1)
		}
		if strings.Join(g.Data, "\x00") != strings.Join(c.want, "\x00") {
			t.Errorf("case %d (%d reads): events %q, want %q", i, g.Reads, g.Data, c.want)
		}
	}
	for _, i := range []int{0, 1, 2} {
		var content strings.Builder
		var roles, finish string
		for _, k := range got[i].Chunks {
			content.WriteString(k.Content)
			roles += k.Role
			finish += k.Finish
		}
		ks := got[i].Chunks
		if content.String() != "Héllo wörld 😀" || roles != "assistant" || finish != "stop" || len(ks) != 5 || !ks[4].Done || ks[3].Done {
			t.Errorf("case %d: chunks %+v; want the content \"Héllo wörld 😀\", role assistant, finish stop, then [DONE]", i, ks)
		}
	}
	if ks := got[3].Chunks; len(ks) != 3 || ks[1].Error != "throws: the server sent an event that is not JSON: two\nlines" {
		t.Errorf("an event that is not JSON: %+v; want chunkOf to throw, saying so", ks)
	}
	if ks := got[6].Chunks; len(ks) != 1 || ks[0].Error != "the key/value cache is full (server_error, overloaded)" || ks[0].Done {
		t.Errorf("an error event: %+v", ks)
	}

	// After [DONE] the reader stops and cancels the stream, even one the
	// server has not closed.
	var done struct {
		Got       []string
		Cancelled bool
	}
	evalJSON(t, ctx, `async () => {
  const { readEvents } = await import(new URL('chat.js', location.href).href);
  let Cancelled = false;
  const body = new ReadableStream({
    start(ctl) { ctl.enqueue(new TextEncoder().encode('data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\ndata: late\n\n')); },
    cancel() { Cancelled = true; },
  });
  const Got = [];
  const limit = new Promise((_, reject) => setTimeout(() => reject(new Error('readEvents did not return after [DONE]')), 10000));
  await Promise.race([readEvents(body, (d) => { Got.push(d); return d !== '[DONE]'; }), limit]);
  return { Got, Cancelled };
}`, nil, &done)
	if len(done.Got) != 2 || done.Got[1] != "[DONE]" || !done.Cancelled {
		t.Errorf("after [DONE]: events %q, stream cancelled %v; want two events and a cancel", done.Got, done.Cancelled)
	}
	browsertest.NoProblems(t, problems)
}

// chatFlowJS drives a ChatPanel through exchange with responses built in
// the page, whose bodies the script writes as the reply goes: a reply
// streamed in pieces, one stopped, one refused before streaming, one
// failing in the middle; then a real send() through fetch.
const chatFlowJS = `async () => {
  const { ChatPanel } = await import(new URL('chat.js', location.href).href);
  const panel = new ChatPanel(() => ({ ServiceName: 'llm', AccessToken: 'svc-token' }));
  document.querySelector('main').replaceChildren(panel.element);
  const enc = new TextEncoder();
  const ev = (obj) => enc.encode('data: ' + JSON.stringify(obj) + '\n\n');
  const piece = (content, finish = null) => ev({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }] });
  const until = (cond, what) => new Promise((resolve, reject) => {
    const end = performance.now() + 10000;
    const tick = () => {
      if (cond()) resolve();
      else if (performance.now() > end) reject(new Error('timed out waiting for ' + what));
      else setTimeout(tick, 5);
    };
    tick();
  });
  const sse = () => {
    let ctl;
    const body = new ReadableStream({ start(c) { ctl = c; } });
    const res = new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
    return { ctl, call: async () => res };
  };
  const last = () => panel.log.lastElementChild;
  const text = () => last().querySelector('.chat-text').textContent;
  const out = {};

  // 1. A reply in pieces: the text grows as they come.
  let s = sse();
  let p = panel.exchange('Hello', s.call);
  s.ctl.enqueue(ev({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant' }, finish_reason: null }] }));
  s.ctl.enqueue(piece('Hel'));
  await until(() => text() === 'Hel', 'the first piece');
  out.partial = { text: text(), stop: !panel.stopButton.disabled, send: panel.sendButton.disabled, streaming: last().classList.contains('streaming') };
  s.ctl.enqueue(piece('lo, wörld'));
  s.ctl.enqueue(piece(null, 'stop'));
  s.ctl.enqueue(enc.encode('data: [DONE]\n\n'));
  await p;
  out.done = { text: text(), status: panel.status.textContent, stop: !panel.stopButton.disabled, streaming: last().classList.contains('streaming'), messages: panel.messages.length };

  // 2. Stopped: what came stays, and in the conversation.
  s = sse();
  p = panel.exchange('Count to ten', s.call);
  s.ctl.enqueue(piece('one two'));
  await until(() => text() === 'one two', 'the piece before stop');
  document.querySelector('#chat-stop').click();
  await p;
  out.stopped = { text: text(), cls: last().className, status: panel.status.textContent, messages: panel.messages.length };

  // 3. Refused before streaming: OpenAI's error object, readable; the text goes back to the input.
  p = panel.exchange('Too long', async () => new Response(JSON.stringify({ error: { message: 'max_tokens is larger than the cache', type: 'invalid_request_error', code: 'max_tokens' } }),
    { status: 400, statusText: 'Bad Request', headers: { 'Content-Type': 'application/json' } }));
  await p;
  out.refused = { error: last().querySelector('.chat-error').textContent, input: panel.input.value, messages: panel.messages.length, send: panel.sendButton.disabled };

  // 4. An error event in the middle of the stream.
  panel.input.value = '';
  s = sse();
  p = panel.exchange('Go on', s.call);
  s.ctl.enqueue(piece('so'));
  s.ctl.enqueue(ev({ error: { message: 'the model failed', type: 'server_error', code: 500 } }));
  await p;
  out.failed = { text: text(), error: last().querySelector('.chat-error').textContent, messages: panel.messages.length, status: panel.status.textContent };

  // 5. Bad settings send nothing.
  const before = panel.log.children.length;
  panel.input.value = 'x';
  panel.maxTokens.value = '0';
  await panel.send();
  out.badSettings = { status: panel.status.textContent, added: panel.log.children.length - before };

  // 6. A real send through fetch, to the test server.
  panel.maxTokens.value = '32';
  panel.temperature.value = '0.2';
  panel.system.value = 'Be brief.';
  panel.input.value = 'Hi';
  await panel.send();
  out.sent = { error: (last().querySelector('.chat-error') || {}).textContent || '', messages: panel.messages.length };

  // 7. Clear forgets the conversation.
  document.querySelector('#chat-clear').click();
  out.cleared = { messages: panel.messages.length, items: panel.log.querySelectorAll('.chat-msg').length };
  return out;
}`

type chatMessage struct{ Role, Content string }

// TestChatPanel: the chat panel shows a reply as it streams, stops it on
// Stop keeping what came, shows errors before and during the stream
// readably without adding them to the conversation, refuses bad sampling
// settings, and sends OpenAI's request with the service's token and the
// conversation so far.
func TestChatPanel(t *testing.T) {
	var mu sync.Mutex
	var gotPath, gotAuth, gotAccept string
	var gotBody []byte
	// The test's server answers the chat request with an error: it checks
	// what the panel sends; the panel's streaming is driven above with
	// streams written from the page.
	ctx, problems := page(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotPath, gotAuth, gotAccept, gotBody = r.Method+" "+r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"no instance is serving","type":"server_error","code":"unavailable"}}`))
	}), browsertest.Options{ExpectedLoad: func(addr, text string) bool {
		// That 503 is the browser's only failed load the test expects.
		u, err := url.Parse(addr)
		return err == nil && u.Path == "/api/predict/llm/v1/chat/completions" && strings.Contains(text, "status of 503")
	}})
	var out struct {
		Partial struct {
			Text                  string
			Stop, Send, Streaming bool
		}
		Done struct {
			Text, Status    string
			Stop, Streaming bool
			Messages        int
		}
		Stopped struct {
			Text, Cls, Status string
			Messages          int
		}
		Refused struct {
			Error, Input string
			Messages     int
			Send         bool
		}
		Failed struct {
			Text, Error, Status string
			Messages            int
		}
		BadSettings struct {
			Status string
			Added  int
		}
		Sent struct {
			Error    string
			Messages int
		}
		Cleared struct{ Messages, Items int }
	}
	evalJSON(t, ctx, chatFlowJS, nil, &out)

	if p := out.Partial; p.Text != "Hel" || !p.Stop || !p.Send || !p.Streaming {
		t.Errorf("while streaming: %+v; want the text so far, Stop enabled, Send disabled", p)
	}
	if d := out.Done; d.Text != "Hello, wörld" || d.Stop || d.Streaming || d.Messages != 2 ||
		!strings.Contains(d.Status, "first token after") || !strings.Contains(d.Status, "2 chunks") || !strings.Contains(d.Status, "finish: stop") {
		t.Errorf("after [DONE]: %+v", d)
	}
	if s := out.Stopped; s.Text != "one two" || !strings.Contains(s.Cls, "chat-stopped") || !strings.HasPrefix(s.Status, "Stopped") || s.Messages != 4 {
		t.Errorf("stopped: %+v; want the text kept, marked stopped, and in the conversation", s)
	}
	if r := out.Refused; r.Error != "400 Bad Request: max_tokens is larger than the cache (invalid_request_error, max_tokens)" || r.Input != "Too long" || r.Messages != 4 || r.Send {
		t.Errorf("refused: %+v", r)
	}
	if f := out.Failed; f.Text != "so" || f.Error != "the server stopped the reply: the model failed (server_error, 500)" || f.Messages != 4 || !strings.HasPrefix(f.Status, "Error:") {
		t.Errorf("an error event: %+v", f)
	}
	if b := out.BadSettings; b.Added != 0 || !strings.Contains(b.Status, "max_tokens") {
		t.Errorf("max_tokens 0: %+v; want a message and nothing sent", b)
	}
	if s := out.Sent; s.Error != "503 Service Unavailable: no instance is serving (server_error, unavailable)" || s.Messages != 4 {
		t.Errorf("a real send: %+v", s)
	}
	if c := out.Cleared; c.Messages != 0 || c.Items != 0 {
		t.Errorf("after Clear: %+v", c)
	}

	mu.Lock()
	defer mu.Unlock()
	if gotPath != "POST /api/predict/llm/v1/chat/completions" || gotAuth != "svc-token" || gotAccept != "text/event-stream" {
		t.Errorf("request %s, Authorization %q, Accept %q", gotPath, gotAuth, gotAccept)
	}
	var req struct {
		Model       string
		Messages    []chatMessage
		Stream      bool
		MaxTokens   *int     `json:"max_tokens"`
		Temperature *float64 `json:"temperature"`
	}
	if err := json.Unmarshal(gotBody, &req); err != nil {
		t.Fatalf("request body %q: %v", gotBody, err)
	}
	want := []chatMessage{
		{"system", "Be brief."},
		{"user", "Hello"}, {"assistant", "Hello, wörld"},
		{"user", "Count to ten"}, {"assistant", "one two"},
		{"user", "Hi"},
	}
	if req.Model != "llm" || !req.Stream || req.MaxTokens == nil || *req.MaxTokens != 32 || req.Temperature == nil || *req.Temperature != 0.2 ||
		fmt.Sprint(req.Messages) != fmt.Sprint(want) {
		t.Errorf("request body %s; want model llm, stream, max_tokens 32, temperature 0.2 and messages %v", gotBody, want)
	}
	browsertest.NoProblems(t, problems)
}

// TestGenerativeCharts: a generative service's metrics points, made by the
// real history sampler from the real metrics series, draw in the detail
// page's five generation charts with the values the sampler computed.
func TestGenerativeCharts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	h := history.New(history.Options{Gatherer: reg})
	now := time.UnixMilli(1_733_100_000_000)
	sample := func() {
		now = now.Add(2 * time.Second)
		if err := h.Sample(now); err != nil {
			t.Fatal(err)
		}
	}
	g := m.Generation("llm")
	sample() // the base
	for range 4 {
		g.FirstToken(30 * time.Millisecond) // p99 49.75 ms
	}
	for range 10 {
		g.InterToken(7 * time.Millisecond) // p99 9.95 ms
	}
	g.Step(3, 120, 5*time.Millisecond)
	g.Tokens(120, 20) // 60 and 10 tokens/s
	g.State(3, 2, 700, 2048)
	sample()
	g.State(1, 4, 1536, 2048) // 75 %
	sample()
	pts, _ := h.Points("llm", 0)
	if len(pts) != 2 {
		t.Fatalf("%d points, want 2", len(pts))
	}

	ctx, problems := page(t, nil, browsertest.Options{})
	var charts map[string]struct {
		Points int
		Max    float64
	}
	evalJSON(t, ctx, `async (points) => {
  const { MetricsPanel } = await import(new URL('metrics-panel.js', location.href).href);
  const panel = new MetricsPanel('llm');
  document.querySelector('main').replaceChildren(panel.element);
  panel.setGenerative(true);
  panel.setGenerative(true); // once
  panel.points = points;
  panel.render();
  const ids = ['ttft', 'itl', 'tokens', 'sequences', 'cache'];
  const canvas = (id) => document.querySelectorAll('canvas[data-chart="' + id + '"]');
  await new Promise((resolve, reject) => {
    const end = performance.now() + 10000;
    const tick = () => {
      if (ids.every((id) => +canvas(id)[0].dataset.points > 0)) resolve();
      else if (performance.now() > end) reject(new Error('the generation charts drew nothing'));
      else setTimeout(tick, 10);
    };
    tick();
  });
  const out = {};
  for (const id of ids) out[id] = { Points: canvas(id).length === 1 ? +canvas(id)[0].dataset.points : -1, Max: +canvas(id)[0].dataset.max };
  return out;
}`, pts, &charts)
	want := map[string]struct {
		points int
		max    float64
	}{
		"ttft":      {2, 49.75},      // p50 and p99 of the first interval; none in the idle one
		"itl":       {2, 9.95},       //
		"tokens":    {4, 60},         // in and out, both intervals
		"sequences": {4, 4},          // running 3 then 1, waiting 2 then 4
		"cache":     {2, 100 * 0.75}, // 700 then 1536 of 2048
	}
	for id, w := range want {
		c, ok := charts[id]
		if !ok || c.Points != w.points || math.Abs(c.Max-w.max) > 1e-9 {
			t.Errorf("chart %s: %d values, top %v; want %d values, top %v", id, c.Points, c.Max, w.points, w.max)
		}
	}
	browsertest.NoProblems(t, problems)
}
