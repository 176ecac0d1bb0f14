package llm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/loadgen"
	"github.com/eas-server/eas-server/internal/teststack"
)

// TestGenerationLoad drives the generation benchmark's load generator
// (internal/loadgen.RunGeneration, issue 39) against the real server with
// the small GPT-2 export served as llm_cpu: every request of a seeded
// workload is answered in full, the tokens counted from the stream equal
// the workload's max_tokens (whether counted from the chunks' logprobs or
// from text chunks and the usage), and refusals and short answers are
// counted as such. Nothing here depends on timing: the runs send the
// workload once through (Duration 0) and assert counts.
func TestGenerationLoad(t *testing.T) {
	models := testModels(t)
	svc := `{"name": "gen", "processor": "llm_cpu", "model_path": ` + jsonString(filepath.Join(models, "gpt2", "optimum")) + `, "token": "T",
		"model_config": {"max_num_seqs": 8, "max_num_batched_tokens": 64}, "metadata": {"instance": 1, "rpc": {"max_queue_size": 64}}}`
	st := teststack.New(t, teststack.Options{}, svc)
	work, err := loadgen.MakeWorkload(loadgen.WorkloadSpec{Requests: 24, PromptMin: 4, PromptMax: 60, OutputMin: 2, OutputMax: 24, Vocab: 50000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantTokens, wantPrompt := 0, 0
	for _, r := range work {
		wantTokens += r.MaxTokens
		wantPrompt += len(r.Prompt)
	}
	base := loadgen.GenConfig{URL: st.URL + "/api/predict/gen/v1/completions", Header: map[string]string{"Authorization": "Bearer T"},
		Workload: work, PID: os.Getpid(), Seed: 3}

	full := func(name string, cfg loadgen.GenConfig) loadgen.GenResult {
		t.Helper()
		res, err := loadgen.RunGeneration(t.Context(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.OK != len(work) || res.Requests != len(work) || res.ByStatus["200"] != len(work) || len(res.ByStatus) != 1 || res.Short != 0 {
			t.Errorf("%s: %+v: want all %d requests answered in full", name, res, len(work))
		}
		if res.OutputTokens != wantTokens || res.PromptTokens != wantPrompt {
			t.Errorf("%s: %d output and %d prompt tokens counted, the workload has %d and %d", name, res.OutputTokens, res.PromptTokens, wantTokens, wantPrompt)
		}
		if res.TTFTp50ms <= 0 || res.TTFTp99ms < res.TTFTp50ms || res.ITLp99ms < res.ITLp50ms || res.OutputTPS <= 0 || res.ServerCPU < 0 || res.ServerRSSMiB <= 0 {
			t.Errorf("%s: measures %+v", name, res)
		}
		return res
	}

	closed := base
	closed.Clients = 4
	if r := full("closed loop, 4 clients", closed); r.Mode != "closed" || r.Clients != 4 {
		t.Errorf("closed loop reported as %q, %d clients", r.Mode, r.Clients)
	}
	open := base
	open.Rate = 200
	if r := full("open loop", open); r.Mode != "open" || r.Rate != 200 {
		t.Errorf("open loop reported as %q at %v", r.Mode, r.Rate)
	}
	// Without logprobs each chunk with text counts one token and the usage
	// chunk the rest (random ids give chunks of partial characters, held
	// back by the server's detokenizer): the total is the same.
	noLogprobs := closed
	noLogprobs.Fields = map[string]json.RawMessage{"logprobs": json.RawMessage("null")}
	full("closed loop without logprobs", noLogprobs)

	// A server that generates less than asked: every answer is short.
	short := closed
	short.Fields = map[string]json.RawMessage{"max_tokens": json.RawMessage("1")}
	res, err := loadgen.RunGeneration(t.Context(), short)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != len(work) || res.Short != countOver(work, 1) || res.OutputTokens != len(work) {
		t.Errorf("max_tokens 1: %+v: want %d short answers of one token", res, countOver(work, 1))
	}

	// A wrong token: every request is a 401, counted by status.
	bad := closed
	bad.Header = map[string]string{"Authorization": "Bearer wrong"}
	res, err = loadgen.RunGeneration(t.Context(), bad)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 0 || res.ByStatus["401"] != len(work) || res.OutputTokens != 0 {
		t.Errorf("wrong token: %+v: want %d 401s", res, len(work))
	}

	// A measured window: whatever finished inside it was answered in full;
	// what was in flight at its end is cancelled and not counted, and the
	// server frees those sequences.
	win := closed
	win.Duration, win.Warmup = 300*time.Millisecond, 50*time.Millisecond
	res, err = loadgen.RunGeneration(t.Context(), win)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != res.OK || res.Short != 0 {
		t.Errorf("windowed run: %+v: want only full answers", res)
	}
	freed(t, st, "gen") // the cancelled streams' sequences
}

func countOver(work []loadgen.GenRequest, n int) int {
	c := 0
	for _, r := range work {
		if r.MaxTokens > n {
			c++
		}
	}
	return c
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
