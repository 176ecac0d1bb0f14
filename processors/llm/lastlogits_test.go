package llm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// TestLastPositionLogits: the graphs whose vocabulary projection is a
// MatMul of the hidden states are rewritten to compute each row's last
// token only (the merged decoder's If is left as exported), and the logits
// a step returns equal the exported graph's for prompts fed in chunks of
// different lengths beside decode rows.
func TestLastPositionLogits(t *testing.T) {
	root := testModels(t)
	for _, c := range []struct {
		dir      string
		rewrites bool
	}{
		{"gpt2/optimum", true}, {"llama/optimum", true}, {"qwen2/optimum", true}, {"llama/fp16kv", true},
		{"gpt2/ortgpt2", true}, {"llama/merged", false},
	} {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(root, c.dir)
			last := shared(t, dir)
			all, err := Open(t.Context(), dir, Options{Threads: 1, AllPositions: true})
			if err != nil {
				t.Fatal(err)
			}
			defer all.Close()
			if last.lay.lastOnly != c.rewrites || all.lay.lastOnly {
				t.Fatalf("rewritten: %v (want %v); with AllPositions: %v", last.lay.lastOnly, c.rewrites, all.lay.lastOnly)
			}
			tol := tensor.F32Reformulated
			if last.lay.kvElem != all.lay.kvElem {
				t.Fatal("the two sessions differ in their cache type")
			}
			// Two sequences: one prefilling 9 then 5 tokens, one decoding
			// beside it after a 3-token prompt.
			a1, b1 := last.NewSequence(), last.NewSequence()
			a2, b2 := all.NewSequence(), all.NewSequence()
			defer func() { a1.Release(); b1.Release(); a2.Release(); b2.Release() }()
			steps := [][2][]int32{
				{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {11, 12, 13}},
				{{10, 20, 30, 40, 50}, {14}},
				{{60}, {15}},
			}
			for i, st := range steps {
				got := step(t, last, processors.StepInput{Seq: a1, Tokens: st[0]}, processors.StepInput{Seq: b1, Tokens: st[1]})
				want := step(t, all, processors.StepInput{Seq: a2, Tokens: st[0]}, processors.StepInput{Seq: b2, Tokens: st[1]})
				for r := range got {
					if err := tensor.CloseValues("logits", got[r], want[r], tol); err != nil {
						t.Fatalf("step %d row %d: %v", i, r, err)
					}
				}
			}
		})
	}
}

// TestLastPositionLogitsRefuses: a graph whose logits are no MatMul of
// computed hidden states is left alone.
func TestLastPositionLogitsRefuses(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testModels(t), "llama", "merged", "decoder_model_merged.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lastPositionLogits(b, "logits"); !errors.Is(err, errNoRewrite) {
		t.Fatalf("the merged decoder's If: %v, want errNoRewrite", err)
	}
	if _, err := lastPositionLogits(b, "no_such_output"); !errors.Is(err, errNoRewrite) {
		t.Fatalf("an unknown output: %v", err)
	}
	if _, err := lastPositionLogits([]byte("not a model"), "logits"); err == nil {
		t.Fatal("garbage parsed")
	}
}
