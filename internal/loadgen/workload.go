package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
)

// A generation workload (issue 39) is a JSON Lines file, one request a
// line, in the order clients take them:
//
//	{"prompt": [464, 2068, 7586, ...], "max_tokens": 128}
//
// prompt is a list of token ids (OpenAI's /v1/completions accepts one in
// place of text), so every server under test, whatever its tokenizer,
// feeds the model exactly these tokens; max_tokens is the number of tokens
// to generate. Nothing else is allowed on a line. The load generator sends
// each with greedy decoding and vLLM's ignore_eos, so every request
// generates exactly max_tokens tokens on every server.
//
// MakeWorkload writes the benchmark's workloads: the same spec and seed
// give the same file on every machine.

// GenRequest is one line of a workload.
type GenRequest struct {
	Prompt    []int `json:"prompt"`
	MaxTokens int   `json:"max_tokens"`
}

// WorkloadSpec says how MakeWorkload draws its requests.
type WorkloadSpec struct {
	Requests             int    // lines
	PromptMin, PromptMax int    // prompt length in tokens: log-uniform over [min, max]
	OutputMin, OutputMax int    // max_tokens: uniform over [min, max]
	Vocab                int    // token ids uniform over [0, Vocab)
	Seed                 uint64 // the generator's seed (PCG)
	// Prefix is a shared prefix's length (a system prompt): that many
	// ids, drawn once, start every prompt, before its own PromptMin to
	// PromptMax ids. 0: none.
	Prefix int
}

// DefaultWorkload is the benchmark's default: 300 requests, prompts of 16
// to 512 tokens (log-uniform, so short prompts are more common, with a
// mean of about 143), 16 to 256 tokens generated (uniform, mean 136), ids
// below 50000: ordinary tokens in both GPT-2's vocabulary (50257, the last
// its end-of-text) and Llama 3's (128256, specials from 128000).
var DefaultWorkload = WorkloadSpec{Requests: 300, PromptMin: 16, PromptMax: 512, OutputMin: 16, OutputMax: 256, Vocab: 50000, Seed: 39}

// Check says what is wrong with a spec.
func (s WorkloadSpec) Check() error {
	switch {
	case s.Requests < 1:
		return fmt.Errorf("requests must be at least 1, got %d", s.Requests)
	case s.PromptMin < 1 || s.PromptMax < s.PromptMin:
		return fmt.Errorf("prompt lengths %d-%d: want 1 <= min <= max", s.PromptMin, s.PromptMax)
	case s.OutputMin < 1 || s.OutputMax < s.OutputMin:
		return fmt.Errorf("output lengths %d-%d: want 1 <= min <= max", s.OutputMin, s.OutputMax)
	case s.Vocab < 1:
		return fmt.Errorf("vocab must be at least 1, got %d", s.Vocab)
	case s.Prefix < 0 || s.Prefix > MaxPromptTokens:
		return fmt.Errorf("prefix must be between 0 and %d tokens, got %d", MaxPromptTokens, s.Prefix)
	}
	return nil
}

// MakeWorkload draws s.Requests requests as s says.
func MakeWorkload(s WorkloadSpec) ([]GenRequest, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x39))
	lo, hi := math.Log(float64(s.PromptMin)), math.Log(float64(s.PromptMax)+1)
	out := make([]GenRequest, s.Requests)
	var prefix []int
	if s.Prefix > 0 {
		// Its own generator, so that the prompts after it are those of
		// the same spec without a prefix.
		pr := rand.New(rand.NewPCG(s.Seed, 0x5e))
		prefix = make([]int, s.Prefix)
		for j := range prefix {
			prefix[j] = pr.IntN(s.Vocab)
		}
	}
	for i := range out {
		n := min(int(math.Exp(lo+rng.Float64()*(hi-lo))), s.PromptMax)
		n = max(n, s.PromptMin)
		p := make([]int, len(prefix)+n)
		copy(p, prefix)
		for j := len(prefix); j < len(p); j++ {
			p[j] = rng.IntN(s.Vocab)
		}
		out[i] = GenRequest{Prompt: p, MaxTokens: s.OutputMin + rng.IntN(s.OutputMax-s.OutputMin+1)}
	}
	return out, nil
}

// WriteWorkload writes reqs as JSON Lines.
func WriteWorkload(w io.Writer, reqs []GenRequest) error {
	bw := bufio.NewWriter(w)
	for _, r := range reqs {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// Bounds of what ReadWorkload accepts, so a wrong file fails at once
// instead of after a long run.
const (
	MaxWorkloadRequests = 1 << 20
	MaxPromptTokens     = 1 << 20
	MaxOutputTokens     = 1 << 20
	MaxTokenID          = 1<<31 - 1
)

// ReadWorkload parses a workload: one JSON object a line, blank lines
// skipped. Each line must have a non-empty prompt of non-negative token ids
// and a positive max_tokens, and no other field; the error names the line.
func ReadWorkload(r io.Reader) ([]GenRequest, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var out []GenRequest
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(out) == MaxWorkloadRequests {
			return nil, fmt.Errorf("line %d: more than %d requests", line, MaxWorkloadRequests)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var g struct {
			Prompt    []int64 `json:"prompt"`
			MaxTokens *int64  `json:"max_tokens"`
		}
		if err := dec.Decode(&g); err != nil {
			return nil, fmt.Errorf("line %d: %v (want {\"prompt\": [ids], \"max_tokens\": N})", line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("line %d: more than one JSON value", line)
		}
		if len(g.Prompt) == 0 || len(g.Prompt) > MaxPromptTokens {
			return nil, fmt.Errorf("line %d: prompt must have 1 to %d token ids, has %d", line, MaxPromptTokens, len(g.Prompt))
		}
		if g.MaxTokens == nil || *g.MaxTokens < 1 || *g.MaxTokens > MaxOutputTokens {
			return nil, fmt.Errorf("line %d: max_tokens must be 1 to %d", line, MaxOutputTokens)
		}
		p := make([]int, len(g.Prompt))
		for i, id := range g.Prompt {
			if id < 0 || id > MaxTokenID {
				return nil, fmt.Errorf("line %d: prompt[%d] = %d is not a token id", line, i, id)
			}
			p[i] = int(id)
		}
		out = append(out, GenRequest{Prompt: p, MaxTokens: int(*g.MaxTokens)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no requests")
	}
	return out, nil
}
