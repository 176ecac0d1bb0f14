package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/wait"
)

// historyModel is a test model whose next-token logits are a function of a
// sequence's whole history (every token fed to it, in order), so a
// scheduler that fed a token to the wrong sequence, dropped one or fed one
// twice changes the output. It records each step's batch.
type historyModel struct {
	vocab int
	gate  chan struct{} // when set, every Step waits for a receive

	mu    sync.Mutex
	state [4]int   // the last SeqObserver.State: running, waiting, cached, capacity
	live  int      // sequences not released
	steps [][2]int // per step: rows, tokens
	mixed bool     // a step held both a decode row and a prompt chunk
	fail  atomic.Bool
	rows  [][]float32
}

type historySeq struct {
	m        *historyModel
	tokens   []int32
	released bool
}

func (q *historySeq) Len() int { return len(q.tokens) }
func (q *historySeq) Release() {
	q.m.mu.Lock()
	defer q.m.mu.Unlock()
	if q.released {
		panic("released twice")
	}
	q.released = true
	q.m.live--
}

func (m *historyModel) NewSequence() Sequence {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live++
	return &historySeq{m: m}
}

func (m *historyModel) Step(ctx context.Context, batch []StepInput) ([][]float32, error) {
	if m.gate != nil {
		<-m.gate
	}
	if m.fail.Load() {
		return nil, errors.New("the test model failed")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tokens, one, many := 0, false, false
	for len(m.rows) < len(batch) {
		m.rows = append(m.rows, make([]float32, m.vocab))
	}
	for i, in := range batch {
		q := in.Seq.(*historySeq)
		if q.released {
			return nil, fmt.Errorf("step over a released sequence")
		}
		q.tokens = append(q.tokens, in.Tokens...)
		tokens += len(in.Tokens)
		one = one || len(in.Tokens) == 1
		many = many || len(in.Tokens) > 1
		h := uint32(2166136261)
		for _, t := range q.tokens {
			h = (h ^ uint32(t)) * 16777619
		}
		for j := range m.rows[i] {
			m.rows[i][j] = float32((h>>uint(j%24))&7) + float32(j%5)*0.01
		}
		m.rows[i][int(h%uint32(m.vocab))] = 20 // the greedy choice
	}
	m.steps = append(m.steps, [2]int{len(batch), tokens})
	m.mixed = m.mixed || (one && many)
	return m.rows[:len(batch)], nil
}

func (m *historyModel) liveSeqs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live
}

// directGreedy runs a fresh test model's greedy loop by hand, without a
// scheduler: the whole prompt, then one token a step.
func directGreedy(vocab int, prompt []int32, n int) []int32 {
	m := &historyModel{vocab: vocab}
	q := m.NewSequence()
	in := prompt
	var out []int32
	for range n {
		rows, _ := m.Step(context.Background(), []StepInput{{Seq: q, Tokens: in}})
		best := 0
		for j, v := range rows[0] {
			if v > rows[0][best] {
				best = j
			}
		}
		out = append(out, int32(best))
		in = []int32{int32(best)}
	}
	return out
}

// letters is a tokenizer of 52 one-letter tokens: decoding joins them.
func letters(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	var vocab []string
	for c := 'a'; c <= 'z'; c++ {
		vocab = append(vocab, fmt.Sprintf("%q: %d", string(c), c-'a'))
	}
	for c := 'A'; c <= 'Z'; c++ {
		vocab = append(vocab, fmt.Sprintf("%q: %d", string(c), 26+c-'A'))
	}
	js := `{"model": {"type": "BPE", "vocab": {` + strings.Join(vocab, ", ") + `}, "merges": []}}`
	tk, err := tokenizer.ParseTokenizerJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func newTestSequences(t *testing.T, m *historyModel, cfg SeqConfig) *Sequences {
	t.Helper()
	gen := &Generator{Vocab: m.vocab, ContextLength: 256, EOS: []int32{51}, Tokenizer: letters(t), Stepper: m}
	s := NewSequences(cfg, gen, SeqObserver{State: func(running, waiting, cached, capacity int) {
		m.mu.Lock()
		m.state = [4]int{running, waiting, cached, capacity}
		m.mu.Unlock()
	}}, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if m.gate != nil {
			go func() {
				for {
					select {
					case m.gate <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
			}()
		}
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

func greedy(maxTokens int) decoding.Params {
	p := decoding.DefaultParams()
	p.Temperature = 0
	p.MaxTokens = maxTokens
	p.IgnoreEOS = true
	return p
}

// collect reads a stream to its end: the text and tokens of each choice.
func collect(t *testing.T, st *GenStream) ([]string, [][]int32, []decoding.FinishReason, error) {
	t.Helper()
	var texts []string
	var toks [][]int32
	var fins []decoding.FinishReason
	var err error
	for ev := range st.Events() {
		for len(texts) <= ev.Index {
			texts, toks, fins = append(texts, ""), append(toks, nil), append(fins, "")
		}
		texts[ev.Index] += ev.Text
		toks[ev.Index] = append(toks[ev.Index], ev.Tokens...)
		if ev.Finish != "" {
			fins[ev.Index] = ev.Finish
		}
		if ev.Err != nil {
			err = ev.Err
		}
	}
	return texts, toks, fins, err
}

func prompt(n, salt int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7 + salt*13) % 50)
	}
	return p
}

// TestSequencesBatchedEqualsAlone: requests of different prompt lengths
// and max_tokens, run one at a time and then all at once (joining at
// different steps, prompts fed in chunks beside running decodes), get the
// same tokens.
func TestSequencesBatchedEqualsAlone(t *testing.T) {
	m := &historyModel{vocab: 52}
	s := newTestSequences(t, m, SeqConfig{MaxSeqs: 8, MaxWaiting: 64, StepTokens: 12})
	const n = 24
	alone := make([][]int32, n)
	for i := range n {
		st, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(1+i*3, i), Params: greedy(5 + i%9)})
		if err != nil {
			t.Fatal(err)
		}
		_, toks, fins, err := collect(t, st)
		if err != nil || fins[0] != decoding.FinishLength || len(toks[0]) != 5+i%9 {
			t.Fatalf("request %d alone: %v, %v, %d tokens", i, err, fins, len(toks[0]))
		}
		alone[i] = toks[0]
		if want := directGreedy(m.vocab, prompt(1+i*3, i), 5+i%9); fmt.Sprint(want) != fmt.Sprint(alone[i]) {
			t.Fatalf("request %d alone: %v, the model's own greedy loop %v", i, alone[i], want)
		}
	}
	var wg sync.WaitGroup
	got := make([][]int32, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(1+i*3, i), Params: greedy(5 + i%9)})
			if err != nil {
				errs[i] = err
				return
			}
			_, toks, _, err := collect(t, st)
			got[i], errs[i] = toks[0], err
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if fmt.Sprint(got[i]) != fmt.Sprint(alone[i]) {
			t.Errorf("request %d: batched %v, alone %v", i, got[i], alone[i])
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, st := range m.steps {
		if st[1] > 12 {
			t.Errorf("step %d fed %d tokens, over the budget of 12", i, st[1])
		}
		if st[0] > 8 {
			t.Errorf("step %d ran %d sequences, over max_num_seqs 8", i, st[0])
		}
	}
	if !m.mixed {
		t.Error("no step mixed a prompt chunk with decode rows")
	}
	if m.live != 0 {
		t.Errorf("%d sequences not released", m.live)
	}
}

// TestSequencesCancelFrees: a client that goes away frees its sequence at
// the next step, and the others go on.
func TestSequencesCancelFrees(t *testing.T) {
	m := &historyModel{vocab: 52}
	s := newTestSequences(t, m, SeqConfig{MaxSeqs: 4})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := s.Generate(ctx, GenRequest{Prompt: prompt(4, 1), Params: greedy(200)})
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-st.Events(); len(ev.Tokens) == 0 {
		t.Fatalf("first event %+v", ev)
	}
	cancel()
	wait.Until(t, 10*time.Second, func() error {
		m.mu.Lock()
		state := m.state
		m.mu.Unlock()
		if r, _ := s.Load(); r != 0 || m.liveSeqs() != 0 || state[0] != 0 || state[2] != 0 {
			return fmt.Errorf("%d running, %d sequences not freed, gauges %v after the cancel", r, m.liveSeqs(), state)
		}
		return nil
	})
	other, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(3, 2), Params: greedy(3)})
	if err != nil {
		t.Fatal(err)
	}
	if _, toks, _, err := collect(t, other); err != nil || len(toks[0]) != 3 {
		t.Fatalf("after a cancel: %v %v", toks, err)
	}
}

// TestSequencesDeadline: past its deadline a sequence fails with
// ErrDeadline and is freed.
func TestSequencesDeadline(t *testing.T) {
	m := &historyModel{vocab: 52, gate: make(chan struct{})}
	s := newTestSequences(t, m, SeqConfig{Timeout: 20 * time.Millisecond})
	start := time.Now()
	st, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(4, 1), Params: greedy(100)})
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // the prompt's step
	wait.Until(t, 10*time.Second, func() error {
		if time.Since(start) <= 40*time.Millisecond {
			return errors.New("the deadline has not passed")
		}
		return nil
	})
	m.gate <- struct{}{} // one more step: then the deadline is seen
	_, _, _, err = collect(t, st)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("got %v, want ErrDeadline", err)
	}
	wait.Until(t, 10*time.Second, func() error {
		if m.liveSeqs() != 0 {
			return errors.New("the expired sequence was not freed")
		}
		return nil
	})
}

// TestSequencesAdmission: beyond max_num_seqs requests wait, beyond
// MaxWaiting they are refused with ErrQueueFull; a waiting request starts
// when a place frees.
func TestSequencesAdmission(t *testing.T) {
	m := &historyModel{vocab: 52, gate: make(chan struct{})}
	s := newTestSequences(t, m, SeqConfig{MaxSeqs: 1, MaxWaiting: 1})
	first, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(2, 1), Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	m.gate <- struct{}{} // the first runs (and is no longer waiting)
	second, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(2, 2), Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Admit(); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Admit with one waiting: %v, want ErrQueueFull", err)
	}
	if _, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(2, 3), Params: greedy(2)}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third: %v, want ErrQueueFull", err)
	}
	go func() {
		for range 3 {
			m.gate <- struct{}{}
		}
	}()
	for _, st := range []*GenStream{first, second} {
		if _, toks, _, err := collect(t, st); err != nil || len(toks[0]) != 2 {
			t.Fatalf("%v %v", toks, err)
		}
	}
}

// TestSequencesCacheBound: a request starts only when the cache can hold
// all it may grow to.
func TestSequencesCacheBound(t *testing.T) {
	m := &historyModel{vocab: 52}
	s := newTestSequences(t, m, SeqConfig{MaxSeqs: 8, MaxCachedTokens: 30})
	var sts []*GenStream
	for i := range 4 {
		st, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(10, i), Params: greedy(10)})
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	for _, st := range sts {
		if _, _, _, err := collect(t, st); err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, st := range m.steps {
		if st[0] > 1 {
			t.Fatalf("step %d ran %d sequences of 20 tokens each in a cache of 30", i, st[0])
		}
	}
}

// TestSequencesRefusals: what can never run is a 400 naming the limit.
func TestSequencesRefusals(t *testing.T) {
	m := &historyModel{vocab: 52}
	s := newTestSequences(t, m, SeqConfig{MaxSeqs: 2, MaxCachedTokens: 100})
	for _, c := range []struct {
		req  GenRequest
		want string
	}{
		{GenRequest{Prompt: nil, Params: greedy(1)}, "empty"},
		{GenRequest{Prompt: []int32{1, 99}, Params: greedy(1)}, "outside the model's vocabulary"},
		{GenRequest{Prompt: prompt(250, 1), Params: greedy(10)}, "context of 256"},
		{GenRequest{Prompt: prompt(2, 1), Params: greedy(1), N: 3}, "max_num_seqs"},
		{GenRequest{Prompt: prompt(60, 1), Params: greedy(60)}, "max_cached_tokens"},
		{GenRequest{Prompt: prompt(2, 1), Params: decoding.Params{TopP: 1, RepetitionPenalty: 1, MaxTokens: 0}}, "max_tokens"},
	} {
		_, err := s.Generate(context.Background(), c.req)
		if !badinput.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.want, err)
		}
	}
}

// TestSequencesStepFailure: a failed step fails its sequences, frees them,
// and the scheduler serves the next request.
func TestSequencesStepFailure(t *testing.T) {
	m := &historyModel{vocab: 52}
	s := newTestSequences(t, m, SeqConfig{})
	m.fail.Store(true)
	st, err := s.Generate(context.Background(), GenRequest{Prompt: prompt(3, 1), Params: greedy(4), N: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := collect(t, st); err == nil || !strings.Contains(err.Error(), "test model failed") {
		t.Fatalf("got %v", err)
	}
	if m.liveSeqs() != 0 {
		t.Fatal("failed sequences not freed")
	}
	m.fail.Store(false)
	st, err = s.Generate(context.Background(), GenRequest{Prompt: prompt(3, 1), Params: greedy(4), N: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, toks, fins, err := collect(t, st)
	if err != nil || len(toks) != 2 || len(toks[0]) != 4 || fins[1] != decoding.FinishLength {
		t.Fatalf("%v %v %v", toks, fins, err)
	}
	if st.Usage().CompletionTokens != 8 || st.Usage().PromptTokens != 3 {
		t.Fatalf("usage %+v", st.Usage())
	}
}

// TestSequencesStopAndEOS: eos ends a sequence unless ignore_eos; a stop
// string ends it with the text before it.
func TestSequencesStopAndEOS(t *testing.T) {
	m := &historyModel{vocab: 52}
	s := newTestSequences(t, m, SeqConfig{})
	p := greedy(30)
	st, _ := s.Generate(context.Background(), GenRequest{Prompt: prompt(5, 3), Params: p})
	texts, _, _, err := collect(t, st)
	if err != nil || len(texts[0]) < 4 {
		t.Fatalf("%v %v", texts, err)
	}
	p.Stop = []string{texts[0][2:4]}
	st, _ = s.Generate(context.Background(), GenRequest{Prompt: prompt(5, 3), Params: p})
	stopped, _, fins, err := collect(t, st)
	if err != nil || fins[0] != decoding.FinishStop || !strings.HasPrefix(texts[0], stopped[0]) || strings.Contains(stopped[0], p.Stop[0]) {
		t.Fatalf("stop %q: got %q (%v, %v) from %q", p.Stop[0], stopped, fins, err, texts[0])
	}
}
