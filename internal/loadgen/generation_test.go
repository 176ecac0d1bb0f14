package loadgen

import (
	"bytes"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMakeWorkloadFollowsItsSpec(t *testing.T) {
	spec := WorkloadSpec{Requests: 2000, PromptMin: 16, PromptMax: 512, OutputMin: 16, OutputMax: 256, Vocab: 50000, Seed: 7}
	reqs, err := MakeWorkload(spec)
	if err != nil {
		t.Fatal(err)
	}
	var logSum float64
	seenMin, seenMax := false, false
	for i, r := range reqs {
		if len(r.Prompt) < spec.PromptMin || len(r.Prompt) > spec.PromptMax {
			t.Fatalf("request %d: prompt of %d tokens", i, len(r.Prompt))
		}
		if r.MaxTokens < spec.OutputMin || r.MaxTokens > spec.OutputMax {
			t.Fatalf("request %d: max_tokens %d", i, r.MaxTokens)
		}
		seenMin = seenMin || r.MaxTokens == spec.OutputMin
		seenMax = seenMax || r.MaxTokens == spec.OutputMax
		for _, id := range r.Prompt {
			if id < 0 || id >= spec.Vocab {
				t.Fatalf("request %d: id %d", i, id)
			}
		}
		logSum += math.Log(float64(len(r.Prompt)))
	}
	if !seenMin || !seenMax {
		t.Errorf("2000 uniform draws over [16, 256] never hit an end: min %v, max %v", seenMin, seenMax)
	}
	// Log-uniform: the mean of log(length) is the middle of the log range
	// (within 5% of the range for 2000 draws, about 8 standard errors).
	lo, hi := math.Log(16), math.Log(513)
	if mid := logSum / float64(len(reqs)); math.Abs(mid-(lo+hi)/2) > 0.05*(hi-lo) {
		t.Errorf("mean log prompt length %.3f, want about %.3f", mid, (lo+hi)/2)
	}
	again, _ := MakeWorkload(spec)
	var a, b bytes.Buffer
	WriteWorkload(&a, reqs)
	WriteWorkload(&b, again)
	if a.String() != b.String() {
		t.Error("the same spec and seed gave two workloads")
	}
	spec.Seed++
	other, _ := MakeWorkload(spec)
	var c bytes.Buffer
	WriteWorkload(&c, other)
	if a.String() == c.String() {
		t.Error("another seed gave the same workload")
	}
	read, err := ReadWorkload(&a)
	if err != nil {
		t.Fatal(err)
	}
	var d bytes.Buffer
	WriteWorkload(&d, read)
	if d.String() != b.String() {
		t.Error("a workload read back differs from the one written")
	}
	// A prefix: the same ids start every prompt, and what follows is the
	// prompt the spec draws without it.
	spec.Prefix = 40
	pre, err := MakeWorkload(spec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range pre {
		if !slices.Equal(r.Prompt[:40], pre[0].Prompt[:40]) || !slices.Equal(r.Prompt[40:], other[i].Prompt) || r.MaxTokens != other[i].MaxTokens {
			t.Fatalf("request %d with a 40-token prefix: %v; without: %v", i, r.Prompt, other[i].Prompt)
		}
	}
	for _, bad := range []WorkloadSpec{{}, {Requests: 1, PromptMin: 5, PromptMax: 4, OutputMin: 1, OutputMax: 1, Vocab: 1},
		{Requests: 1, PromptMin: 1, PromptMax: 1, OutputMin: 0, OutputMax: 1, Vocab: 1}, {Requests: 1, PromptMin: 1, PromptMax: 1, OutputMin: 1, OutputMax: 1},
		{Requests: 1, PromptMin: 1, PromptMax: 1, OutputMin: 1, OutputMax: 1, Vocab: 1, Prefix: -1}} {
		if _, err := MakeWorkload(bad); err == nil {
			t.Errorf("spec %+v accepted", bad)
		}
	}
}

func TestReadWorkloadRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"":     "no requests",
		"\n\n": "no requests",
		`{"prompt": [1], "max_tokens": 2, "x": 1}`: `line 1: json: unknown field "x"`,
		"\n" + `{"prompt": [], "max_tokens": 2}`:   "line 2: prompt must have 1 to",
		`{"prompt": [1, -2], "max_tokens": 2}`:     "line 1: prompt[1] = -2 is not a token id",
		`{"prompt": [1], "max_tokens": 0}`:         "line 1: max_tokens must be",
		`{"prompt": [1]}`:                          "line 1: max_tokens must be",
		`{"prompt": "text", "max_tokens": 1}`:      "line 1: json: cannot unmarshal string",
		`{"prompt": [1], "max_tokens": 1} {}`:      "line 1: more than one JSON value",
		`{"prompt": [1.5], "max_tokens": 1}`:       "line 1: json: cannot unmarshal number 1.5",
	} {
		_, err := ReadWorkload(strings.NewReader(in))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want one starting %q", in, err, want)
		}
	}
}

func TestReadStream(t *testing.T) {
	// Chunks as an OpenAI-compatible server sends them: ours (logprobs
	// tokens), one without logprobs (a token a chunk), a chunk of several
	// tokens, the usage chunk, comments and other SSE lines.
	stream := ": comment\n\n" +
		`data: {"choices":[{"index":0,"text":"a","logprobs":{"tokens":["a"],"token_logprobs":[-1]},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"text":"bc","logprobs":{"tokens":["b","c"],"token_logprobs":[-1,-2]},"finish_reason":null}]}` + "\n\n" +
		"event: message\nid: 3\n" +
		`data:{"choices":[{"index":0,"text":"d","logprobs":null,"finish_reason":null}]}` + "\r\n\r\n" +
		`data: {"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}` + "\n\n" +
		"data: [DONE]\n\n"
	var got []int
	usage, err := ReadStream(strings.NewReader(stream), func(n int) { got = append(got, n) })
	if err != nil {
		t.Fatal(err)
	}
	if usage != 5 || len(got) != 4 || got[0] != 1 || got[1] != 2 || got[2] != 1 || got[3] != 0 {
		t.Fatalf("usage %d, chunk tokens %v; want 5 and [1 2 1 0]", usage, got)
	}

	for in, want := range map[string]string{
		`data: {"choices":[{"text":"a"}]}` + "\n\n": "ended without [DONE]",
		"data: {not json\n\n":                       "not JSON",
		`data: {"error":{"message":"boom","type":"server_error"}}` + "\n\ndata: [DONE]\n\n": "error event",
	} {
		_, err := ReadStream(strings.NewReader(in), func(int) {})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
	_, err = ReadStream(strings.NewReader(`data: {"error":{"message":"x"}}`+"\n"), func(int) {})
	if !errors.Is(err, ErrStreamError) {
		t.Errorf("an error event gave %v, want ErrStreamError", err)
	}
	long := "data: " + strings.Repeat("x", maxEventLine+1) + "\n"
	if _, err := ReadStream(strings.NewReader(long), func(int) {}); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("an over-long line gave %v", err)
	}
}

func TestParseStatTicks(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc on this system") // Linux-only measure; the benchmark runs on Linux
	}
	if n := parseStatTicks(b); n < 0 {
		t.Fatalf("this process's stat %q gave %d", b, n)
	}
	// A command name with spaces and a parenthesis shifts nothing.
	line := "42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 300 45 0 0 20 0 1 0"
	if n := parseStatTicks([]byte(line)); n != 345 {
		t.Errorf("parseStatTicks(%q) = %d, want 345", line, n)
	}
	for _, bad := range []string{"", "42 (x) S 1 2", "42 (x) S 1 2 3 4 5 6 7 8 9 10 u 45"} {
		if n := parseStatTicks([]byte(bad)); n != -1 {
			t.Errorf("parseStatTicks(%q) = %d, want -1", bad, n)
		}
	}
}

func FuzzReadWorkload(f *testing.F) {
	f.Add([]byte(`{"prompt": [1, 2], "max_tokens": 3}` + "\n"))
	f.Add([]byte(`{"prompt": [], "max_tokens": 3}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := ReadWorkload(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, r := range reqs {
			if len(r.Prompt) == 0 || r.MaxTokens < 1 {
				t.Fatalf("accepted %+v", r)
			}
		}
		var buf bytes.Buffer
		if err := WriteWorkload(&buf, reqs); err != nil {
			t.Fatal(err)
		}
		again, err := ReadWorkload(&buf)
		if err != nil || len(again) != len(reqs) {
			t.Fatalf("written back: %v, %d of %d", err, len(again), len(reqs))
		}
	})
}

func FuzzReadStream(f *testing.F) {
	f.Add([]byte(`data: {"choices":[{"text":"a","logprobs":{"tokens":["a"]}}]}` + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte(`data: {"choices":[],"usage":{"completion_tokens":3}}` + "\ndata: [DONE]\n"))
	f.Add([]byte("data: {\"error\":{}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		usage, err := ReadStream(bytes.NewReader(b), func(n int) {
			if n < 0 {
				t.Fatalf("a chunk of %d tokens", n)
			}
			total += n
		})
		if err == nil && usage < 0 {
			t.Fatalf("usage %d", usage)
		}
	})
}

func TestParseStatusRSS(t *testing.T) {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		if n := parseStatusRSS(b); n <= 0 {
			t.Fatalf("this process's status gave %d", n)
		}
	}
	ok := "Name:\teas-server\nVmPeak:\t  999 kB\nVmRSS:\t    1234 kB\nRssAnon:\t 1000 kB\n"
	if n := parseStatusRSS([]byte(ok)); n != 1234 {
		t.Errorf("parseStatusRSS = %d, want 1234", n)
	}
	for _, bad := range []string{"", "VmPeak:\t 999 kB\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n", "VmRSS:\n"} {
		if n := parseStatusRSS([]byte(bad)); n != -1 {
			t.Errorf("parseStatusRSS(%q) = %d, want -1", bad, n)
		}
	}
}
