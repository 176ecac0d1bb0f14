package decoding

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func randLogits(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	return l
}

func sampler(t testing.TB, p Params, vocab int) *Sampler {
	s, err := NewSampler(p, nil, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGreedyIsArgmax(t *testing.T) {
	p := DefaultParams()
	p.Temperature, p.MaxTokens, p.Logprobs, p.TopLogprobs = 0, 100, true, 3
	s := sampler(t, p, 500)
	for i := range 20 {
		l := randLogits(uint64(i), 500)
		tok, lp, top := s.Next(l)
		if tok != argmax(l) {
			t.Fatalf("step %d: %d, argmax %d", i, tok, argmax(l))
		}
		if top[0].Token != tok || top[0].Logprob != lp || lp > 0 || top[1].Logprob > top[0].Logprob {
			t.Fatalf("step %d: logprob %v, top %v", i, lp, top)
		}
	}
}

func TestValidate(t *testing.T) {
	for field, f := range map[string]func(*Params){
		"temperature":        func(p *Params) { p.Temperature = 2.5 },
		"top_k":              func(p *Params) { p.TopK = -2 },
		"top_p":              func(p *Params) { p.TopP = 0 },
		"min_p":              func(p *Params) { p.MinP = 1.5 },
		"repetition_penalty": func(p *Params) { p.RepetitionPenalty = 0 },
		"presence_penalty":   func(p *Params) { p.PresencePenalty = 3 },
		"frequency_penalty":  func(p *Params) { p.FrequencyPenalty = math.NaN() },
		"max_tokens":         func(p *Params) { p.MaxTokens = 0 },
		"min_tokens":         func(p *Params) { p.MinTokens = 17 },
		"top_logprobs":       func(p *Params) { p.Logprobs, p.TopLogprobs = true, 21 },
		"stop[0]":            func(p *Params) { p.Stop = []string{""} },
	} {
		p := DefaultParams()
		f(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	p := DefaultParams()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestSamplingStatistics draws 200,000 tokens from 8 known probabilities on
// a fixed seed and checks Pearson's chi-square against the 0.001 quantile of
// 7 degrees of freedom (24.32): deterministic, as the seed is fixed.
func TestSamplingStatistics(t *testing.T) {
	logits := []float32{0, 1, 2, -1, 0.5, 1.5, -2, 0.2}
	p := DefaultParams()
	p.Seed, p.HasSeed, p.MaxTokens, p.Temperature = 42, true, 1, 0.9
	s := sampler(t, p, len(logits))
	want := probs(func() []float32 {
		l := make([]float32, len(logits))
		for i, v := range logits {
			l[i] = v / 0.9
		}
		return l
	}())
	const n = 200000
	counts := make([]int, len(logits))
	for range n {
		tok, lp, _ := s.Next(logits)
		counts[tok]++
		if d := math.Abs(math.Exp(float64(lp)) - want[tok]); d > 1e-6 {
			t.Fatalf("token %d: logprob %v, want log %v", tok, lp, want[tok])
		}
	}
	var chi2 float64
	for i, c := range counts {
		e := want[i] * n
		chi2 += (float64(c) - e) * (float64(c) - e) / e
	}
	t.Logf("chi-square %.2f over %v", chi2, counts)
	if chi2 > 24.32 {
		t.Fatalf("chi-square %.2f > 24.32: counts %v, probabilities %v", chi2, counts, want)
	}
}

func TestSeedReproducible(t *testing.T) {
	p := DefaultParams()
	p.Seed, p.HasSeed, p.MaxTokens, p.TopK, p.TopP = 1234, true, 100, 50, 0.95
	run := func(interleave bool) []int32 {
		a, b := sampler(t, p, 2000), sampler(t, DefaultParams(), 2000)
		var out []int32
		for i := range 50 {
			l := randLogits(uint64(i), 2000)
			if interleave { // another sequence in the batch draws too
				b.Next(l)
			}
			tok, _, _ := a.Next(l)
			out = append(out, tok)
		}
		return out
	}
	x, y := run(false), run(true)
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("step %d: %d alone, %d in a batch", i, x[i], y[i])
		}
	}
	p.Seed = 1235
	other := sampler(t, p, 2000)
	same := 0
	for i := range 50 {
		if tok, _, _ := other.Next(randLogits(uint64(i), 2000)); tok == x[i] {
			same++
		}
	}
	if same == 50 {
		t.Fatal("seed 1235 drew the same tokens as seed 1234")
	}
}

func TestMinTokensMasksEOSAndStopIDs(t *testing.T) {
	p := DefaultParams()
	p.Temperature, p.MinTokens, p.MaxTokens = 0, 3, 10
	p.EOSTokenIDs, p.StopTokenIDs = []int32{2}, []int32{3}
	s := sampler(t, p, 5)
	l := []float32{0, 1, 9, 8, 2} // eos, then the stop id, most likely
	m := NewStopMatcher(p)
	for i := range 3 {
		tok, _, _ := s.Next(l)
		if tok != 4 {
			t.Fatalf("step %d: token %d before min_tokens", i, tok)
		}
		if _, r := m.Push(tok, "x"); r != FinishNone {
			t.Fatalf("step %d: finished %q", i, r)
		}
	}
	if tok, _, _ := s.Next(l); tok != 2 {
		t.Fatalf("after min_tokens: token %d, want eos 2", tok)
	}
	if emit, r := m.Push(2, "</s>"); r != FinishStop || emit != "" {
		t.Fatalf("eos: %q %q", emit, r)
	}
}

func TestStopIDsAndIgnoreEOS(t *testing.T) {
	p := DefaultParams()
	p.EOSTokenIDs, p.StopTokenIDs, p.IgnoreEOS, p.MaxTokens = []int32{2}, []int32{3}, true, 3
	m := NewStopMatcher(p)
	if e, r := m.Push(2, "a"); r != FinishNone || e != "a" {
		t.Fatalf("eos with ignore_eos: %q %q", e, r)
	}
	if e, r := m.Push(3, "b"); r != FinishStop || e != "" {
		t.Fatalf("stop id: %q %q", e, r)
	}
	m = NewStopMatcher(p)
	m.Push(5, "a")
	m.Push(5, "b")
	if e, r := m.Push(5, "c"); r != FinishLength || e != "c" {
		t.Fatalf("max_tokens: %q %q", e, r)
	}
}

// feed pushes pieces and returns the text emitted and the finish reason.
func feed(m *StopMatcher, pieces []string) (string, FinishReason) {
	var b strings.Builder
	for i, pc := range pieces {
		e, r := m.Push(int32(100+i), pc)
		b.WriteString(e)
		if r != FinishNone {
			return b.String(), r
		}
	}
	return b.String() + m.Flush(), FinishNone
}

func TestStopStrings(t *testing.T) {
	for _, c := range []struct {
		stops  []string
		pieces []string
		want   string
		reason FinishReason
	}{
		{[]string{"END"}, []string{"hello E", "N", "D more"}, "hello ", FinishStop},
		{[]string{"END"}, []string{"hello E", "N", "d more"}, "hello ENd more", FinishNone},
		{[]string{"\n\n", "###"}, []string{"a\n", "#", "#", "#b"}, "a\n", FinishStop},
		{[]string{"ab", "b"}, []string{"xa", "b"}, "x", FinishStop},
		// Multi-byte: "你好" split into its bytes across tokens; the stop string begins mid-piece.
		{[]string{"好世"}, []string{"你", "\xe5\xa5", "\xbd", "\xe4\xb8", "\x96界"}, "你", FinishStop},
		// Half a character is never emitted, even with no stop string near it.
		{[]string{"zz"}, []string{"a\xe4", "\xb8", "\x96b"}, "a世b", FinishNone},
	} {
		p := DefaultParams()
		p.Stop, p.MaxTokens = c.stops, 100
		m := NewStopMatcher(p)
		var b strings.Builder
		var reason FinishReason
		for i, pc := range c.pieces {
			e, r := m.Push(int32(i), pc)
			if !validPrefix(e) {
				t.Errorf("%q: emitted half a character %q", c.pieces, e)
			}
			b.WriteString(e)
			if reason = r; r != FinishNone {
				break
			}
		}
		if reason == FinishNone {
			b.WriteString(m.Flush())
		}
		if b.String() != c.want || reason != c.reason {
			t.Errorf("%q with stops %q: %q %q, want %q %q", c.pieces, c.stops, b.String(), reason, c.want, c.reason)
		}
	}
}

func validPrefix(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func FuzzStopMatcher(f *testing.F) {
	f.Add("hello END world", "END", "x\n", uint8(3))
	f.Add("你好世界", "好世", "界", uint8(1))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, cut uint8) {
		var stops []string
		for _, s := range []string{stop1, stop2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		// Pieces of cut bytes (1 to 8) each.
		n := int(cut%8) + 1
		var pieces []string
		for i := 0; i < len(text); i += n {
			pieces = append(pieces, text[i:min(i+n, len(text))])
		}
		p := DefaultParams()
		p.Stop, p.MaxTokens = stops, len(pieces)+1
		m := NewStopMatcher(p)
		got, r := feed(m, pieces)
		want, wr := text, FinishNone
		at := -1
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && (at < 0 || i < at) {
				at = i
			}
		}
		if at >= 0 {
			want, wr = text[:at], FinishStop
		}
		if got != want || r != wr {
			t.Fatalf("pieces %q stops %q: %q %q, want %q %q", pieces, stops, got, r, want, wr)
		}
	})
}

func TestNextAllocationFree(t *testing.T) {
	p := DefaultParams()
	p.Seed, p.HasSeed, p.MaxTokens, p.TopK, p.TopP, p.MinP = 1, true, 1000, 50, 0.9, 0.01
	p.RepetitionPenalty, p.PresencePenalty, p.FrequencyPenalty, p.Logprobs, p.TopLogprobs = 1.1, 0.2, 0.1, true, 5
	s, err := NewSampler(p, []int32{1, 2, 3}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	l := randLogits(3, 4096)
	for range 50 { // the id lists grow to their steady size
		s.Next(l)
	}
	if a := testing.AllocsPerRun(20, func() { s.Next(l) }); a != 0 {
		t.Fatalf("%v allocations per Next", a)
	}
}

func BenchmarkNext(b *testing.B) {
	const vocab = 151936
	for _, c := range []struct {
		name string
		f    func(*Params)
	}{
		{"greedy", func(p *Params) { p.Temperature = 0 }},
		{"temperature", func(p *Params) {}},
		{"top_k_50", func(p *Params) { p.TopK = 50 }},
		{"top_p_0.9", func(p *Params) { p.TopP = 0.9 }},
		{"all", func(p *Params) {
			p.TopK, p.TopP, p.MinP, p.RepetitionPenalty, p.PresencePenalty, p.Logprobs, p.TopLogprobs = 50, 0.9, 0.05, 1.1, 0.5, true, 5
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := DefaultParams()
			p.Seed, p.HasSeed, p.MaxTokens = 1, true, 1<<30
			c.f(&p)
			s := sampler(b, p, vocab)
			l := randLogits(9, vocab)
			b.ReportAllocs()
			for b.Loop() {
				s.Next(l)
			}
		})
	}
}
