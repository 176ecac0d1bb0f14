package decoding

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

type refCase struct {
	Name              string    `json:"name"`
	Logits            []float32 `json:"logits"`
	Prompt            []int32   `json:"prompt"`
	Output            []int32   `json:"output"`
	Temperature       float64   `json:"temperature"`
	TopK              int       `json:"top_k"`
	TopP              float64   `json:"top_p"`
	MinP              float64   `json:"min_p"`
	RepetitionPenalty float64   `json:"repetition_penalty"`
	PresencePenalty   float64   `json:"presence_penalty"`
	FrequencyPenalty  float64   `json:"frequency_penalty"`
}

// TestProcessorsAgainstPyTorch compares each processor, and all together, on
// random logits with testdata/reference.py. The reference computes in float32
// with torch's softmax, we in float32 logits and float64 sums: another
// formulation of the same float32 computation, so F32Reformulated.
func TestProcessorsAgainstPyTorch(t *testing.T) {
	const vocab = 1000
	rng := rand.New(rand.NewPCG(7, 7))
	rnd := func() []float32 {
		l := make([]float32, vocab)
		for i := range l {
			l[i] = float32(rng.NormFloat64() * 1.5)
		}
		return l
	}
	ids := func(n int) []int32 {
		r := make([]int32, n)
		for i := range r {
			r[i] = int32(rng.IntN(50)) // repeats
		}
		return r
	}
	base := func(name string) refCase {
		return refCase{Name: name, Logits: rnd(), Prompt: ids(30), Output: ids(40), Temperature: 1, TopP: 1, RepetitionPenalty: 1}
	}
	var cases []refCase
	for _, f := range []func(*refCase){
		func(c *refCase) { c.Name = "temperature 0.7"; c.Temperature = 0.7 },
		func(c *refCase) { c.Name = "temperature 1.6"; c.Temperature = 1.6 },
		func(c *refCase) { c.Name = "top_k 40"; c.TopK = 40 },
		func(c *refCase) { c.Name = "top_k 1"; c.TopK = 1 },
		func(c *refCase) { c.Name = "top_p 0.9"; c.TopP = 0.9 },
		func(c *refCase) { c.Name = "top_p 0.01"; c.TopP = 0.01 },
		func(c *refCase) { c.Name = "min_p 0.05"; c.MinP = 0.05 },
		func(c *refCase) { c.Name = "repetition_penalty 1.3"; c.RepetitionPenalty = 1.3 },
		func(c *refCase) { c.Name = "repetition_penalty 0.8"; c.RepetitionPenalty = 0.8 },
		func(c *refCase) {
			c.Name = "presence 0.5 frequency 0.3"
			c.PresencePenalty, c.FrequencyPenalty = 0.5, 0.3
		},
		func(c *refCase) {
			c.Name = "presence -1 frequency -0.5"
			c.PresencePenalty, c.FrequencyPenalty = -1, -0.5
		},
		func(c *refCase) {
			c.Name = "all"
			c.RepetitionPenalty, c.PresencePenalty, c.FrequencyPenalty = 1.2, 0.4, 0.2
			c.Temperature, c.TopK, c.TopP, c.MinP = 0.8, 100, 0.95, 0.02
		},
	} {
		c := base("")
		f(&c)
		cases = append(cases, c)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		require.Missing(t, require.Python, "no /usr/bin/python3 (Debian's python3-torch: scripts/install-test-deps.sh)")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		require.Missing(t, require.Python, "/usr/bin/python3 cannot import torch (Debian's python3-torch: scripts/install-test-deps.sh)")
	}
	cmd := exec.Command("/usr/bin/python3", "testdata/reference.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testdata/reference.py: %v\n%s", err, stderr.Bytes())
	}
	var want [][]float64
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		p := Params{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP, RepetitionPenalty: c.RepetitionPenalty,
			PresencePenalty: c.PresencePenalty, FrequencyPenalty: c.FrequencyPenalty, MaxTokens: 1000, HasSeed: true}
		s, err := NewSampler(p, c.Prompt, vocab)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range c.Output {
			s.record(id)
		}
		got := probs(s.process(c.Logits))
		if err := tensor.CloseValues(c.Name, got, want[i], tensor.F32Reformulated); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		kept := 0
		for _, v := range want[i] {
			if v > 0 {
				kept++
			}
		}
		t.Logf("%s: %d of %d tokens kept", c.Name, kept, vocab)
	}
}

func probs(l []float32) []float64 {
	mx, lse := logSumExp(l)
	p := make([]float64, len(l))
	for i, v := range l {
		p[i] = math.Exp(float64(v) - mx - lse)
	}
	return p
}
