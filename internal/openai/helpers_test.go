package openai

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/scheduler"
)

var (
	gpt2Once sync.Once
	gpt2Tok  *tokenizer.Tokenizer
	gpt2Err  error
)

// gpt2 is GPT-2's real tokenizer; without its files the test skips, or
// fails under EAS_REQUIRE_PYTHON=1 (the files come with the Python
// references' set-up, make test-deps).
func gpt2(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	dir := filepath.Join(require.TokenizerCache(), "gpt2")
	gpt2Once.Do(func() {
		vocab, err := os.ReadFile(filepath.Join(dir, "encoder.json"))
		if err != nil {
			gpt2Err = err
			return
		}
		merges, err := os.ReadFile(filepath.Join(dir, "vocab.bpe"))
		if err != nil {
			gpt2Err = err
			return
		}
		gpt2Tok, gpt2Err = tokenizer.NewGPT2Tokenizer(vocab, merges)
	})
	if gpt2Err != nil {
		require.Missing(t, require.Python, "no GPT-2 tokenizer in %s (%v): run bash scripts/fetch-tokenizers.sh (make test-deps does)", dir, gpt2Err)
	}
	return gpt2Tok
}

const (
	gpt2Vocab = 50257
	gpt2EOS   = 50256
	testCtx   = 192 // the test models' context length
)

// chatRecord is what the test template was last called with.
type chatRecord struct {
	mu       sync.Mutex
	messages []map[string]any
	addGen   bool
	extra    map[string]any
}

// chatML renders a conversation the way Qwen's and many other models'
// chat_template do (<|im_start|>role\ncontent<|im_end|>\n, the tools listed
// in the system turn), written out in Go: the jinja templates themselves are
// the model loader's. It refuses a conversation that does not end with a
// user or tool turn when asked for a generation prompt, as strict templates
// raise_exception.
func chatML(rec *chatRecord) func([]map[string]any, bool, map[string]any) (string, error) {
	return func(msgs []map[string]any, addGen bool, extra map[string]any) (string, error) {
		rec.mu.Lock()
		rec.messages, rec.addGen, rec.extra = msgs, addGen, extra
		rec.mu.Unlock()
		var b strings.Builder
		if tools, ok := extra["tools"].([]any); ok {
			fmt.Fprintf(&b, "<|im_start|>system\ntools: %d<|im_end|>\n", len(tools))
		}
		for _, m := range msgs {
			content, _ := m["content"].(string)
			fmt.Fprintf(&b, "<|im_start|>%s\n%s", m["role"], content)
			if calls, ok := m["tool_calls"].([]any); ok {
				for _, c := range calls {
					f := c.(map[string]any)["function"].(map[string]any)
					fmt.Fprintf(&b, "<tool_call>%v %v</tool_call>", f["name"], f["arguments"])
				}
			}
			b.WriteString("<|im_end|>\n")
		}
		if addGen {
			if last := msgs[len(msgs)-1]["role"]; last == "assistant" {
				return "", fmt.Errorf("conversation roles must alternate: a generation prompt after an assistant turn")
			}
			b.WriteString("<|im_start|>assistant\n")
		}
		return b.String(), nil
	}
}

// testGenerator is GPT-2's tokenizer with a short context, temperature 0.7
// as its own default, and the chatML template.
func testGenerator(t testing.TB, rec *chatRecord, model scheduler.Stepper) *scheduler.Generator {
	d := decoding.DefaultParams()
	d.Temperature = 0.7
	return &scheduler.Generator{Model: "tiny-gpt2", Vocab: gpt2Vocab, ContextLength: testCtx, EOS: []int32{gpt2EOS},
		Defaults: d, Tokenizer: gpt2(t), Chat: chatML(rec), Stepper: model}
}

// wordModel is a test model over GPT-2's vocabulary: the logits after a
// history favour a few words chosen by a hash of the whole history (so a
// cached sequence and a fresh one agree, and batching cannot change a
// choice), sometimes the end of text. gate, when set, holds each Step until
// the test sends on it.
type wordModel struct {
	words    []int32
	gate     chan struct{}
	released chan struct{} // closed at the test's end: steps run freely
	waiting  atomic.Int32  // Steps blocked on gate
	live     atomic.Int32  // sequences not released
}

type wordSeq struct {
	m    *wordModel
	hist []int32
	done bool
}

func (q *wordSeq) Len() int { return len(q.hist) }
func (q *wordSeq) Release() {
	if !q.done {
		q.done = true
		q.m.live.Add(-1)
	}
}

func newWordModel(t testing.TB) *wordModel {
	tk := gpt2(t)
	m := &wordModel{}
	for _, w := range []string{" the", " cat", " sat", " on", " a", " mat", ".", " and", " café", " 世界"} {
		enc, err := tk.Encode(w, false)
		if err != nil {
			t.Fatal(err)
		}
		m.words = append(m.words, enc.IDs...) // multi-token words give partial UTF-8 tokens
	}
	return m
}

func (m *wordModel) NewSequence() scheduler.Sequence {
	m.live.Add(1)
	return &wordSeq{m: m}
}

func (m *wordModel) Step(ctx context.Context, batch []scheduler.StepInput) ([][]float32, error) {
	if m.gate != nil {
		m.waiting.Add(1)
		select {
		case <-m.gate:
		case <-m.released:
		}
		m.waiting.Add(-1)
	}
	out := make([][]float32, len(batch))
	for i, in := range batch {
		q := in.Seq.(*wordSeq)
		q.hist = append(q.hist, in.Tokens...)
		out[i] = m.logits(q.hist)
	}
	return out, nil
}

// logits are the model's logits after hist.
func (m *wordModel) logits(hist []int32) []float32 {
	h := fnv.New64a()
	for _, id := range hist {
		fmt.Fprint(h, id, ",")
	}
	x := h.Sum64()
	row := make([]float32, gpt2Vocab)
	for k := range 4 {
		row[m.words[(x+uint64(k))%uint64(len(m.words))]] = float32(9 - 2*k)
	}
	if x%9 == 0 {
		row[gpt2EOS] = 12
	}
	return row
}

// greedy is what the model generates from prompt at temperature 0, worked
// out here without the scheduler: the ids (the end of text included when
// it ended there), the text, and the finish reason.
func (m *wordModel) greedy(t testing.TB, prompt []int32, maxTokens int) ([]int32, string, string) {
	t.Helper()
	hist := slices.Clone(prompt)
	var out []int32
	finish := "length"
	for len(out) < maxTokens {
		row := m.logits(hist)
		best := int32(0)
		for id, v := range row {
			if v > row[best] {
				best = int32(id)
			}
		}
		out = append(out, best)
		hist = append(hist, best)
		if best == gpt2EOS {
			finish = "stop"
			break
		}
	}
	text, err := gpt2(t).Decode(out, true)
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler's incremental decoding never ends a piece in U+FFFD
	// (it may be half a character the next token completes), so a
	// choice that ends there does not show it.
	return out, strings.TrimRight(text, "\uFFFD"), finish
}

// runSteps lets a gated model's steps run until the test ends.
func (m *wordModel) runSteps() {
	go func() {
		for {
			select {
			case m.gate <- struct{}{}:
			case <-m.released:
				return
			}
		}
	}()
}

// testServer serves a Service over Sequences on model, the way the server
// wires it: /v1/... to Serve (also under /api/predict/svc/), and
// /api/predict/svc to ServePlain, the body read under a 1 MiB limit.
type testServer struct {
	*httptest.Server
	seqs  *scheduler.Sequences
	model *wordModel
	gen   *scheduler.Generator
	chat  *chatRecord
}

func newTestServer(t *testing.T, cfg scheduler.SeqConfig, gated bool) *testServer {
	t.Helper()
	ts := &testServer{model: newWordModel(t), chat: &chatRecord{}}
	if gated {
		ts.model.gate, ts.model.released = make(chan struct{}), make(chan struct{})
	}
	ts.gen = testGenerator(t, ts.chat, ts.model)
	ts.seqs = scheduler.NewSequences(cfg, ts.gen, scheduler.SeqObserver{}, nil)
	svc := &Service{Name: "svc", Backend: ts.seqs, Created: time.Unix(1700000000, 0)}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := func() ([]byte, error) { return io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20)) }
		path := r.URL.Path
		if path == "/api/predict/svc" {
			svc.ServePlain(w, r, body)
			return
		}
		path = strings.TrimPrefix(path, "/api/predict/svc")
		svc.Serve(w, r, path, body)
	}))
	t.Cleanup(func() {
		if ts.model.gate != nil {
			close(ts.model.released)
		}
		ts.Server.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ts.seqs.Stop(ctx); err != nil {
			t.Errorf("stop the scheduler: %v", err)
		}
	})
	return ts
}
