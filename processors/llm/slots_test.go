package llm

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// twins steps a slot-cache model and the exported attention (kv.go's
// blocks) on the same inputs, each sequence having a twin in both, and
// checks that every step's logits and lengths agree.
type twins struct {
	t      *testing.T
	m, ref *Model
	all    []*twin
}

type twin struct {
	s, r processors.Sequence
	name string
}

// in is one input of a step: a sequence's new tokens.
type in struct {
	tw   *twin
	toks []int32
}

// newTwins opens the llama test model with opt, its own (so that no other
// test's prefixes are retained in it), and the shared exported one.
func newTwins(t *testing.T, opt Options) *twins {
	dir := filepath.Join(testModels(t), "llama", "optimum")
	opt.Threads = 1
	m, err := Open(t.Context(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tw := &twins{t: t, m: m, ref: sharedWith(t, dir, Options{ExportedAttention: true})}
	if !tw.m.lay.slots || tw.ref.lay.slots {
		t.Fatalf("slots: %v and %v, want true and false", tw.m.lay.slots, tw.ref.lay.slots)
	}
	if tw.m.lay.layers != 2 || tw.m.lay.kvHeads != 2 || tw.m.lay.headDim != 16 {
		t.Fatalf("llama test model: %s", tw.m.Layout())
	}
	return tw
}

func (tw *twins) seq(name string) *twin {
	x := &twin{s: tw.m.NewSequence(), r: tw.ref.NewSequence(), name: name}
	tw.all = append(tw.all, x)
	return x
}

func (tw *twins) run(label string, ins ...in) {
	t := tw.t
	t.Helper()
	var a, b []processors.StepInput
	for _, i := range ins {
		a = append(a, processors.StepInput{Seq: i.tw.s, Tokens: i.toks})
		b = append(b, processors.StepInput{Seq: i.tw.r, Tokens: i.toks})
	}
	got, want := step(t, tw.m, a...), step(t, tw.ref, b...)
	for j := range got {
		if err := tensor.CloseValues("logits", got[j], want[j], tensor.F32Accumulated); err != nil {
			t.Errorf("%s, %s: %v", label, ins[j].tw.name, err)
		}
		if g, w := ins[j].tw.s.Len(), ins[j].tw.r.Len(); g != w {
			t.Errorf("%s, %s: Len %d, exported %d", label, ins[j].tw.name, g, w)
		}
	}
}

func (tw *twins) release(xs ...*twin) {
	for _, x := range xs {
		x.s.Release()
		x.r.Release()
	}
}

// toks is n token ids from from, 7 apart.
func toks(n, from int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(from + 7*i)
	}
	return v
}

func cat(parts ...[]int32) []int32 { return slices.Concat(parts...) }

func slotOf(x *twin) int { return x.s.(*sequence).slot }

// perToken is the llama test model's cache bytes per token: 2 layers x
// key and value, 2 kv heads of 16, float32.
const perToken = 4 * 2 * 16 * 4

// TestSlotCache follows the slot cache (prefix reuse off) through a
// schedule that takes slots lowest first and reuses a released one, runs a
// sequence in its prompt as a dummy row of the decode run, grows the slots
// past 8 (by remapping: every sequence's tokens stay where they are),
// holds the tokens its slots hold (a released sequence's go at once), and
// nothing once all are released. Every step's logits must equal the
// exported attention's.
func TestSlotCache(t *testing.T) {
	tw := newTwins(t, Options{NoPrefixReuse: true})
	m := tw.m
	memory := func(label string, slots, tokens int) {
		t.Helper()
		if m.sc.slots != slots {
			t.Fatalf("%s: %d slots, want %d", label, m.sc.slots, slots)
		}
		if got, want := m.KVBytes(), int64(tokens*perToken); got != want {
			t.Fatalf("%s: KVBytes %d, want %d (%d tokens)", label, got, want, tokens)
		}
	}
	a, b, c := tw.seq("a"), tw.seq("b"), tw.seq("c")
	tw.run("a's prompt", in{a, toks(5, 100)})
	memory("one sequence", 8, 5)
	if m.sc.cols != m.ctxLen+1 {
		t.Fatalf("%d columns, want the context length %d + 1", m.sc.cols, m.ctxLen)
	}
	tw.run("b's prompt beside a", in{a, []int32{3}}, in{b, toks(3, 200)})
	tw.run("c's one-token prompt in the decode run", in{a, []int32{4}}, in{b, []int32{5}}, in{c, []int32{300}})
	if slotOf(a) != 0 || slotOf(b) != 1 || slotOf(c) != 2 {
		t.Fatalf("slots %d %d %d, want 0 1 2", slotOf(a), slotOf(b), slotOf(c))
	}
	memory("a 7, b 4, c 1", 8, 12)
	tw.release(b)
	memory("b gone", 8, 8)
	d := tw.seq("d")
	tw.run("d's prompt, a dummy row of the decode run", in{a, []int32{6}}, in{c, []int32{7}}, in{d, toks(4, 400)})
	if slotOf(d) != 1 {
		t.Fatalf("d took slot %d, want b's 1", slotOf(d))
	}
	tw.run("a's 70-token chunk", in{a, toks(70, 500)}, in{c, []int32{8}}, in{d, []int32{9}})
	memory("a 78, c 3, d 5", 8, 86)
	more := []in{{a, []int32{10}}, {c, []int32{11}}, {d, []int32{12}}}
	for i := 0; i < 6; i++ {
		more = append(more, in{tw.seq(string(rune('e' + i))), toks(2, 600+10*i)})
	}
	tw.run("six more: the slots grow", more...)
	memory("nine sequences", 16, 101)
	tw.release(a)
	var decode []in
	for _, x := range tw.all[2:] { // c, d and the six: a and b are gone
		decode = append(decode, in{x, []int32{13}})
	}
	tw.run("a gone", decode...)
	memory("the longest gone", 16, 30)
	y, z := tw.seq("y"), tw.seq("z")
	tw.run("y's prompt", in{y, toks(12, 9000)})
	tw.run("z repeats y's prompt", in{y, []int32{14}}, in{z, cat(toks(12, 9000), []int32{15})})
	if m.sc.reused != 0 {
		t.Errorf("%d tokens reused with NoPrefixReuse", m.sc.reused)
	}
	memory("y 13 and z 13 beside the others", 16, 56)
	tw.release(tw.all...)
	if m.KVBytes() != 0 || m.sc.bufs != nil {
		t.Fatalf("all released: KVBytes %d, %d buffers", m.KVBytes(), len(m.sc.bufs))
	}
}

// TestPrefixReuse: prompts that share a prefix with a running or released
// sequence take its keys and values instead of computing them (a copy from
// a running one, the slot itself from a released one, across prompt
// chunks too), the least recently used prefix is evicted first, and every
// step's logits equal the exported attention's, which computes everything.
// Newcomers take the lowest slots, moving retained prefixes out of their way.
func TestPrefixReuse(t *testing.T) {
	tw := newTwins(t, Options{})
	m := tw.m
	reused := func(label string, want int) {
		t.Helper()
		if m.sc.reused != want {
			t.Fatalf("%s: %d tokens reused in all, want %d", label, m.sc.reused, want)
		}
	}
	system := toks(20, 1000)
	a, b := tw.seq("a"), tw.seq("b")
	tw.run("a: system prompt + 5", in{a, cat(system, toks(5, 2000))})
	reused("a", 0)
	tw.run("b: system prompt + 6, beside a's decode", in{a, []int32{42}}, in{b, cat(system, toks(6, 3000))})
	reused("b copies the system prompt from running a", 20)
	tw.run("both decode", in{a, []int32{43}}, in{b, []int32{44}})
	aSlot, aText := slotOf(a), cat(system, toks(5, 2000), []int32{42, 43})
	tw.release(a)

	// A second turn of a's chat: its whole text so far, then more.
	c := tw.seq("c")
	tw.run("c: a's text + 4, beside b", in{b, []int32{45}}, in{c, cat(aText, toks(4, 4000))})
	reused("c takes a's retained slot", 20+len(aText))
	if slotOf(c) != aSlot {
		t.Fatalf("c is in slot %d, want a's %d", slotOf(c), aSlot)
	}

	// A prompt fed in chunks: each continues b's tokens.
	d := tw.seq("d")
	tw.run("d's first chunk: 12 of the system prompt", in{b, []int32{46}}, in{c, []int32{47}}, in{d, system[:12]})
	reused("d's first chunk: all but its last token", 20+len(aText)+11)
	tw.run("d's second chunk: the rest and its own", in{d, cat(system[12:], toks(3, 5000))})
	reused("d's second chunk continues its own copied tokens", 20+len(aText)+11+8)

	// One token short of minPrefix: computed.
	e := tw.seq("e")
	tw.run("e: 7 tokens of the system prompt then its own", in{e, cat(system[:minPrefix-1], toks(4, 6000))})
	reused("e: too short a prefix", 20+len(aText)+11+8)
	tw.release(b, d, e, c)
	if m.sc.live != 0 || m.KVBytes() == 0 {
		t.Fatalf("all released: %d running, %d bytes: the prefixes should stay", m.sc.live, m.KVBytes())
	}

	// Eviction: the least recently used prefix goes first. c's, released
	// last, is the newest of the four retained; fill every other slot.
	free := 0
	for j := range m.sc.seqs {
		if len(m.sc.hist[j]) == 0 {
			free++
		}
	}
	var fill []in
	for i := 0; i < free+3; i++ {
		fill = append(fill, in{tw.seq("fill"), toks(2, 7000+10*i)})
	}
	tw.run("newcomers take the lowest slots, the prefixes moving up, then evict", fill...)
	cText := cat(aText, toks(4, 4000))
	kept := 0
	for j := range m.sc.seqs {
		if j < len(fill) && m.sc.seqs[j] == nil {
			t.Errorf("slot %d is not running: the newcomers should take the lowest slots", j)
		}
		if m.sc.seqs[j] == nil && len(m.sc.hist[j]) > 0 {
			kept++
			if h := m.sc.hist[j]; len(h) < len(cText) || !slices.Equal(h[:len(cText)], cText) {
				t.Errorf("slot %d retains %v; only c's prefix, the most recent, should stay", j, h)
			}
		}
	}
	if kept != 1 {
		t.Fatalf("%d prefixes retained, want 1", kept)
	}
	// And it still serves, moved: a second turn of c's chat.
	f := tw.seq("f")
	tw.run("f: c's prompt + 3 after the move", in{f, cat(cText, toks(3, 8000))})
	reused("f takes c's moved prefix", 20+len(aText)+11+8+len(cText))
	tw.release(tw.all...)
}
