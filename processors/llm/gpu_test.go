package llm

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// TestGPU opens models on ONNX Runtime's CUDA execution provider. Where
// CUDA cannot run (no driver, no provider) Open must say why, naming the
// GPU code and the CPU code to use instead, never falling back to the CPU;
// where it runs, greedy decoding must give transformers' tokens, the
// logits within tensor.GPU.
func TestGPU(t *testing.T) {
	root := testModels(t)
	for _, fam := range []string{"gpt2", "llama"} {
		t.Run(fam, func(t *testing.T) {
			ref := loadReference(t, filepath.Join(root, fam))
			m, err := Open(t.Context(), filepath.Join(root, fam, "optimum"), Options{GPU: true})
			if err != nil {
				for _, w := range []string{`processor "llm_gpu"`, "CUDA", `"llm_cpu"`} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("GPU open failed without saying %q: %v", w, err)
					}
				}
				t.Logf("no CUDA here: %v", err)
				return
			}
			defer m.Close()
			if m.Provider() != "CUDAExecutionProvider" {
				t.Fatalf("provider %s", m.Provider())
			}
			for pi, p := range ref.Prompts {
				seq := m.NewSequence()
				rows := step(t, m, processors.StepInput{Seq: seq, Tokens: p.IDs})
				for i, want := range p.Greedy {
					if i < len(p.logits) {
						if err := tensor.CloseValues("logits", rows[0], p.logits[i], tensor.GPU); err != nil {
							t.Errorf("prompt %d step %d: %v", pi, i, err)
						}
					}
					got := argmax(rows[0])
					if got != want {
						if p.Gaps[i] <= tieBound(rows[0], tensor.GPU) {
							break
						}
						t.Fatalf("prompt %d step %d: token %d, transformers %d; so far %v", pi, i, got, want, p.Greedy[:i])
					}
					rows = step(t, m, processors.StepInput{Seq: seq, Tokens: []int32{got}})
				}
				seq.Release()
			}
		})
	}
}
