package llm

import (
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// TestSlotCache follows the slot cache through a schedule that takes slots
// lowest first and reuses a released one, runs a sequence in its prompt as
// a dummy row of the decode run, grows the columns past slotCols and the
// slots past 8 (copying every sequence's tokens), shrinks the columns when
// the longest sequence leaves, and holds nothing once all are released.
// Every step's logits must equal those of the exported attention (kv.go's
// blocks) fed the same tokens.
func TestSlotCache(t *testing.T) {
	root := testModels(t)
	dir := filepath.Join(root, "llama", "optimum")
	m := shared(t, dir)
	ref := sharedWith(t, dir, Options{ExportedAttention: true})
	if !m.lay.slots || ref.lay.slots {
		t.Fatalf("slots: %v and %v, want true and false", m.lay.slots, ref.lay.slots)
	}
	if m.lay.layers != 2 || m.lay.kvHeads != 2 || m.lay.headDim != 16 {
		t.Fatalf("llama test model: %s", m.Layout())
	}
	per := func(slots, cols int) int64 { // 2 layers x key and value, 2 kv heads of 16, float32
		return int64(4 * slots * 2 * cols * 16 * 4)
	}
	type twin struct {
		s, r processors.Sequence
		name string
	}
	var all []*twin
	newTwin := func(name string) *twin {
		tw := &twin{s: m.NewSequence(), r: ref.NewSequence(), name: name}
		all = append(all, tw)
		return tw
	}
	type in struct {
		tw   *twin
		toks []int32
	}
	run := func(label string, ins ...in) {
		t.Helper()
		var a, b []processors.StepInput
		for _, i := range ins {
			a = append(a, processors.StepInput{Seq: i.tw.s, Tokens: i.toks})
			b = append(b, processors.StepInput{Seq: i.tw.r, Tokens: i.toks})
		}
		got, want := step(t, m, a...), step(t, ref, b...)
		for j := range got {
			if err := tensor.CloseValues("logits", got[j], want[j], tensor.F32Accumulated); err != nil {
				t.Errorf("%s, %s: %v", label, ins[j].tw.name, err)
			}
			if g, w := ins[j].tw.s.Len(), ins[j].tw.r.Len(); g != w {
				t.Errorf("%s, %s: Len %d, exported %d", label, ins[j].tw.name, g, w)
			}
		}
	}
	toks := func(n, from int) []int32 {
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(from + 7*i)
		}
		return v
	}
	slot := func(tw *twin) int { return tw.s.(*sequence).slot }
	memory := func(label string, want int64) {
		t.Helper()
		if got := m.KVBytes(); got != want {
			t.Fatalf("%s: KVBytes %d, want %d (%d slots x %d columns)", label, got, want, m.sc.slots, m.sc.cols)
		}
	}

	a, b, c := newTwin("a"), newTwin("b"), newTwin("c")
	run("a's prompt", in{a, toks(5, 100)})
	memory("one sequence", per(8, slotCols))
	run("b's prompt beside a", in{a, []int32{3}}, in{b, toks(3, 200)})
	run("c's one-token prompt in the decode run", in{a, []int32{4}}, in{b, []int32{5}}, in{c, []int32{300}})
	if slot(a) != 0 || slot(b) != 1 || slot(c) != 2 {
		t.Fatalf("slots %d %d %d, want 0 1 2", slot(a), slot(b), slot(c))
	}
	b.s.Release()
	b.r.Release()
	d := newTwin("d")
	run("d's prompt, a dummy row of the decode run", in{a, []int32{6}}, in{c, []int32{7}}, in{d, toks(4, 400)})
	if slot(d) != 1 {
		t.Fatalf("d took slot %d, want b's 1", slot(d))
	}
	run("a's 70-token chunk: the columns grow", in{a, toks(70, 500)}, in{c, []int32{8}}, in{d, []int32{9}})
	memory("a at 79 tokens", per(8, 2*slotCols))
	var more []in
	for i := 0; i < 6; i++ {
		more = append(more, in{newTwin(string(rune('e' + i))), toks(2, 600+10*i)})
	}
	run("six more: the slots grow", append([]in{{a, []int32{10}}, {c, []int32{11}}, {d, []int32{12}}}, more...)...)
	memory("nine sequences", per(16, 2*slotCols))
	a.s.Release()
	a.r.Release()
	var decode []in
	for _, tw := range all[2:] { // c, d and the six: a and b are gone
		decode = append(decode, in{tw, []int32{13}})
	}
	run("a gone: the columns shrink", decode...)
	memory("the longest gone", per(16, slotCols))
	for _, tw := range all {
		tw.s.Release()
		tw.r.Release()
	}
	memory("all released", 0)
}
