package llm

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// fp16Cache is the tolerance of the fp16kv layout against transformers'
// float32 run: its past and present are float16 (unit roundoff 2^-11, 4.9e-4
// relative to each key and value), and those errors pass through two
// layers of attention to the logits. The network itself is float32, so the
// first step, whose past is empty, is held to F32Reformulated. Measured:
// the later steps reach 5.6 times F32Reformulated's bound and 0.11 of
// this one.
var fp16Cache = tensor.Tolerance{Name: "float16 cache", Rtol: 5e-3, Atol: 1e-3}

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

// tieBound is how far apart two logits of row may be and still be a tie
// under tol: each may be off by tol's bound.
func tieBound(row []float32, tol tensor.Tolerance) float64 {
	mx := 0.0
	for _, v := range row {
		mx = max(mx, math.Abs(float64(v)))
	}
	return 2 * tol.Bound(mx)
}

// step runs one Step and copies the rows out (they alias the model's
// buffers until the next Step).
func step(t testing.TB, m *Model, batch ...processors.StepInput) [][]float32 {
	t.Helper()
	rows, err := m.Step(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(batch) {
		t.Fatalf("Step returned %d rows for %d inputs", len(rows), len(batch))
	}
	out := make([][]float32, len(rows))
	for i, r := range rows {
		if len(r) != m.Vocab() {
			t.Fatalf("row %d has %d logits, want %d", i, len(r), m.Vocab())
		}
		out[i] = slices.Clone(r)
	}
	return out
}

// TestGreedyMatchesTransformers runs every family's every layout as the
// scheduler would, one sequence at a time: the prompt in one Step, then
// the argmax token one per Step. The tokens must be transformers' greedy
// generate() tokens, and the logits of the first steps transformers' own.
// A token may differ only where transformers' two best logits are within
// the tolerance of each other (a tie that rounding may break either way);
// the comparison then stops, the two continuations being different texts.
func TestGreedyMatchesTransformers(t *testing.T) {
	root := testModels(t)
	for _, fam := range []string{"gpt2", "llama", "qwen2"} {
		ref := loadReference(t, filepath.Join(root, fam))
		for _, lay := range ref.Layouts {
			t.Run(fam+"/"+lay, func(t *testing.T) {
				m := shared(t, filepath.Join(root, fam, lay))
				if m.Vocab() != ref.Vocab {
					t.Fatalf("Vocab %d, reference %d", m.Vocab(), ref.Vocab)
				}
				t.Logf("%s: %s", filepath.Base(m.File()), m.Layout())
				for pi, p := range ref.Prompts {
					enc, err := m.Tokenizer().Encode(p.Text, false)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(enc.IDs, p.IDs) {
						t.Errorf("prompt %d: tokenizer.json encodes %v, transformers %v", pi, enc.IDs, p.IDs)
					}
					seq := m.NewSequence()
					rows := step(t, m, processors.StepInput{Seq: seq, Tokens: p.IDs})
					for i, want := range p.Greedy {
						row := rows[0]
						if i < len(p.logits) {
							tol := tensor.F32Reformulated
							if lay == "fp16kv" && i > 0 {
								tol = fp16Cache
							}
							if err := tensor.CloseValues("logits", row, p.logits[i], tol); err != nil {
								t.Errorf("prompt %d step %d: %v", pi, i, err)
							}
						}
						got := argmax(row)
						if got != want {
							tol := tensor.F32Reformulated
							if lay == "fp16kv" {
								tol = fp16Cache
							}
							if p.Gaps[i] <= tieBound(row, tol) {
								t.Logf("prompt %d step %d: token %d, transformers %d, whose two best logits are %.3g apart (a tie within %s); stopping here",
									pi, i, got, want, p.Gaps[i], tol.Name)
								break
							}
							t.Fatalf("prompt %d step %d: token %d, transformers %d (its two best logits %.3g apart); so far %v",
								pi, i, got, want, p.Gaps[i], p.Greedy[:i])
						}
						if i+1 < len(p.Greedy) {
							rows = step(t, m, processors.StepInput{Seq: seq, Tokens: []int32{got}})
						}
					}
					if n := seq.Len(); n != len(p.IDs)+len(p.Greedy)-1 && !t.Failed() {
						t.Logf("prompt %d: Len %d", pi, n)
					}
					seq.Release()
				}
				if b := holding(m); b != 0 {
					t.Errorf("%d still held after every sequence was released", b)
				}
			})
		}
	}
}

// alone runs each prompt by itself, prompt then greedy tokens, and returns
// per prompt the tokens fed after the prompt and the logits of every step.
func alone(t *testing.T, m *Model, prompts [][]int32, steps int) (toks [][]int32, logits [][][]float32) {
	t.Helper()
	for _, p := range prompts {
		seq := m.NewSequence()
		rows := step(t, m, processors.StepInput{Seq: seq, Tokens: p})
		var tk []int32
		lg := [][]float32{rows[0]}
		for i := 0; i < steps; i++ {
			tok := argmax(rows[0])
			tk = append(tk, tok)
			rows = step(t, m, processors.StepInput{Seq: seq, Tokens: []int32{tok}})
			lg = append(lg, rows[0])
		}
		seq.Release()
		toks, logits = append(toks, tk), append(logits, lg)
	}
	return toks, logits
}

// TestBatchedEqualsAlone runs sequences of different prompt lengths
// together, joining and leaving at different steps, their prompts fed in
// chunks beside other sequences' decode tokens, and checks each step's
// logits against the same sequence run alone (teacher-forced with the
// alone run's tokens, so that both see the same text), and the argmax
// token against the alone run's except at ties. optimum's exports run on
// the slot cache (their attention rewritten) and, exported, on the blocks;
// the other layouts on the blocks.
func TestBatchedEqualsAlone(t *testing.T) {
	root := testModels(t)
	for _, c := range []struct {
		fam, lay string
		exported bool
	}{
		{"llama", "optimum", false}, {"gpt2", "optimum", false}, {"qwen2", "optimum", false}, {"llama", "optimum", true},
		{"qwen2", "merged", false}, {"gpt2", "ortgpt2", false}, {"gpt2", "merged", false}, {"llama", "fp16kv", false},
	} {
		name := c.fam + "/" + c.lay
		if c.exported {
			name += "/exported"
		}
		t.Run(name, func(t *testing.T) {
			m := sharedWith(t, filepath.Join(root, c.fam, c.lay), Options{ExportedAttention: c.exported})
			if want := c.lay == "optimum" && !c.exported; m.lay.slots != want {
				t.Fatalf("slot cache: %v, want %v (%s)", m.lay.slots, want, m.Layout())
			}
			runs0, repacks0 := m.runs, m.repacks
			ref := loadReference(t, filepath.Join(root, c.fam))
			prompts := [][]int32{ref.Prompts[2].IDs, ref.Prompts[0].IDs, ref.Prompts[1].IDs, append(slices.Clone(ref.Prompts[1].IDs), ref.Prompts[0].IDs...)}
			const steps = 10
			toks, want := alone(t, m, prompts, steps)

			// The schedule: when each sequence joins, its prompt's chunk
			// size, and when it leaves (released after that many decode
			// tokens, before the end for sequence 0).
			type plan struct{ join, chunk, decodes int }
			plans := []plan{{0, 16, 6}, {1, 100, steps}, {3, 3, steps}, {4, 5, steps}}
			type live struct {
				seq            processors.Sequence
				fed, decoded   int
				gotRow         int // logits compared so far
				done, released bool
			}
			st := make([]live, len(prompts))
			tol := tensor.F32Accumulated
			if c.lay == "fp16kv" {
				// The batch's padding changes the float16 cache's
				// rounding only through the order of the sums that
				// feed it, so this is F32Accumulated's bound on logits
				// whose inputs went through float16.
				tol = fp16Cache
			}
			for it := 0; it < 40; it++ {
				var batch []processors.StepInput
				var who []int
				for i := range st {
					s := &st[i]
					if s.done || it < plans[i].join {
						continue
					}
					if s.seq == nil {
						s.seq = m.NewSequence()
					}
					p := prompts[i]
					switch {
					case s.fed < len(p):
						n := min(plans[i].chunk, len(p)-s.fed)
						batch = append(batch, processors.StepInput{Seq: s.seq, Tokens: p[s.fed : s.fed+n]})
					case s.decoded < plans[i].decodes:
						batch = append(batch, processors.StepInput{Seq: s.seq, Tokens: []int32{toks[i][s.decoded]}})
					default:
						s.seq.Release()
						s.done, s.released = true, true
						continue
					}
					who = append(who, i)
				}
				if len(batch) == 0 {
					break
				}
				rows := step(t, m, batch...)
				for j, i := range who {
					s := &st[i]
					n := len(batch[j].Tokens)
					if s.fed < len(prompts[i]) {
						s.fed += n
						if s.fed < len(prompts[i]) {
							continue // mid-prompt: no alone logits to compare
						}
					} else {
						s.decoded++
					}
					k := s.gotRow
					s.gotRow++
					if err := tensor.CloseValues("logits", rows[j], want[i][k], tol); err != nil {
						t.Errorf("iteration %d, sequence %d, step %d (batch of %d): %v", it, i, k, len(batch), err)
					}
					if k < steps {
						if got, w := argmax(rows[j]), toks[i][k]; got != w {
							alone := want[i][k]
							if gap := math.Abs(float64(alone[got] - alone[w])); gap > tieBound(alone, tol) {
								t.Errorf("iteration %d, sequence %d, step %d: token %d, alone %d", it, i, k, got, w)
							}
						}
					}
					if got, wantLen := s.seq.Len(), s.fed+s.decoded; got != wantLen {
						t.Errorf("sequence %d: Len %d, want %d", i, got, wantLen)
					}
				}
			}
			for i, s := range st {
				if !s.released {
					s.seq.Release()
				}
				if s.gotRow < plans[i].decodes {
					t.Errorf("sequence %d: compared %d steps, planned %d", i, s.gotRow, plans[i].decodes)
				}
			}
			runs, repacks := m.runs-runs0, m.repacks-repacks0
			t.Logf("%d runs, %d of them on a repacked past", runs, repacks)
			if m.sc == nil && m.lay.positions != "" && (repacks == 0 || repacks == runs) {
				t.Errorf("%d runs, %d repacked: the schedule should exercise both the reused and the repacked past", runs, repacks)
			}
			if b := holding(m); b != 0 {
				t.Errorf("%d still held after every sequence was released", b)
			}
		})
	}
}

// TestReleaseFreesCache follows the blocks' memory (the exported attention): sequences prefilled
// alone hold blocks of their own, a batch moves them into one, a released
// member's rows go at the next Step that repacks, and nothing is held once
// all are released.
func TestReleaseFreesCache(t *testing.T) {
	root := testModels(t)
	m := sharedWith(t, filepath.Join(root, "llama", "optimum"), Options{ExportedAttention: true})
	per := func(rows, cols int) int64 { // llama: 2 layers x key and value, 2 kv heads of 16, float32
		return int64(2 * 2 * rows * 2 * cols * 16 * 4)
	}
	if m.lay.layers != 2 || m.lay.kvHeads != 2 || m.lay.headDim != 16 || m.lay.kvElem.String() == "" {
		t.Fatalf("llama test model: %s", m.Layout())
	}
	a, b, c := m.NewSequence(), m.NewSequence(), m.NewSequence()
	step(t, m, processors.StepInput{Seq: a, Tokens: []int32{1, 2, 3}})
	step(t, m, processors.StepInput{Seq: b, Tokens: []int32{4, 5, 6, 7, 8}})
	if got, want := m.KVBytes(), per(1, 3)+per(1, 5); got != want {
		t.Fatalf("two sequences alone: KVBytes %d, want %d", got, want)
	}
	step(t, m, processors.StepInput{Seq: c, Tokens: []int32{9}})
	step(t, m, processors.StepInput{Seq: a, Tokens: []int32{10}}, processors.StepInput{Seq: b, Tokens: []int32{11}}, processors.StepInput{Seq: c, Tokens: []int32{12}})
	// One block of 3 rows: the longest cache (5) and the new token.
	if got, want := m.KVBytes(), per(3, 6); got != want {
		t.Fatalf("three in one batch: KVBytes %d, want %d", got, want)
	}
	if a.Len() != 4 || b.Len() != 6 || c.Len() != 2 {
		t.Fatalf("Len %d %d %d, want 4 6 2", a.Len(), b.Len(), c.Len())
	}
	b.Release()
	if b.Len() != 0 {
		t.Errorf("released sequence: Len %d", b.Len())
	}
	if _, err := m.Step(t.Context(), []processors.StepInput{{Seq: b, Tokens: []int32{1}}}); err == nil {
		t.Error("Step of a released sequence: no error")
	}
	if got, want := m.KVBytes(), per(3, 6); got != want {
		t.Fatalf("b released while sharing the batch's block: KVBytes %d, want %d (freed at the next repack)", got, want)
	}
	step(t, m, processors.StepInput{Seq: a, Tokens: []int32{14}}, processors.StepInput{Seq: c, Tokens: []int32{15}})
	if got, want := m.KVBytes(), per(2, 5); got != want { // repacked: longest 4, plus 1
		t.Fatalf("a and c after b left: KVBytes %d, want %d", got, want)
	}
	step(t, m, processors.StepInput{Seq: a, Tokens: []int32{16}})
	// a ran alone: c moved to a block of its own, without padding.
	if got, want := m.KVBytes(), per(1, 6)+per(1, 3); got != want {
		t.Fatalf("a alone, c set aside: KVBytes %d, want %d", got, want)
	}
	// Decode tokens and a prompt chunk run apart, the decode row unpadded.
	runs := m.runs
	step(t, m, processors.StepInput{Seq: a, Tokens: []int32{17}}, processors.StepInput{Seq: c, Tokens: []int32{18, 19, 20}})
	if m.runs-runs != 2 {
		t.Errorf("a decode token and a prompt chunk: %d runs, want 2", m.runs-runs)
	}
	a.Release()
	c.Release()
	a.Release() // a second Release is harmless
	if got := m.KVBytes(); got != 0 {
		t.Fatalf("all released: KVBytes %d", got)
	}
}

// TestStepRefuses checks what Step refuses before running anything.
func TestStepRefuses(t *testing.T) {
	root := testModels(t)
	m := shared(t, filepath.Join(root, "gpt2", "optimum"))
	other := shared(t, filepath.Join(root, "gpt2", "merged"))
	s := m.NewSequence()
	held := m.KVBytes() // other tests' retained prefixes
	long := make([]int32, m.ContextLength()+1)
	for _, c := range []struct {
		name  string
		batch []processors.StepInput
	}{
		{"no tokens", []processors.StepInput{{Seq: s}}},
		{"twice", []processors.StepInput{{Seq: s, Tokens: []int32{1}}, {Seq: s, Tokens: []int32{2}}}},
		{"another model's sequence", []processors.StepInput{{Seq: other.NewSequence(), Tokens: []int32{1}}}},
		{"token outside the vocabulary", []processors.StepInput{{Seq: s, Tokens: []int32{int32(m.Vocab())}}}},
		{"negative token", []processors.StepInput{{Seq: s, Tokens: []int32{-1}}}},
		{"over the context length", []processors.StepInput{{Seq: s, Tokens: long}}},
	} {
		if _, err := m.Step(t.Context(), c.batch); err == nil {
			t.Errorf("%s: no error", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	if s.Len() != 0 || m.KVBytes() != held {
		t.Errorf("after refused steps: Len %d, KVBytes %d (before: %d)", s.Len(), m.KVBytes(), held)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Step(ctx, []processors.StepInput{{Seq: s, Tokens: []int32{1}}}); err == nil {
		t.Error("cancelled context: no error")
	}
	if s.Len() != 0 {
		t.Errorf("after a cancelled step: Len %d", s.Len())
	}
}
