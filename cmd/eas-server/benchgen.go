package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/cli"
	"github.com/eas-server/eas-server/internal/loadgen"
)

// benchGenerationCmd is `eas-server bench-generation`: the streaming load
// generator of issue 39 over an OpenAI-compatible /v1/completions, and its
// `workload` subcommand that writes the seeded workload file. The workload
// format and every measure are defined in internal/loadgen (GenRequest,
// GenConfig, GenResult) and BENCHMARKS.md.
func benchGenerationCmd() *cobra.Command {
	var (
		endpoint, service, url, token, model, workloadFile, output string
		clients, rates, fields                                     string
		duration, warmup                                           time.Duration
		pid                                                        int
		seed                                                       uint64
		limit                                                      int
	)
	cmd := &cobra.Command{
		Use:   "bench-generation",
		Short: "Load-test a generative service over streaming /v1/completions: tokens/s, TTFT, inter-token latency",
		Long: "Sends the requests of a workload file (JSON lines {\"prompt\": [token ids], \"max_tokens\": N}, made by\n" +
			"`eas-server bench-generation workload`) to POST /v1/completions with stream=true, greedy, ignore_eos and\n" +
			"logprobs 0, reading the server-sent events as they arrive. --clients runs closed loops (each client\n" +
			"sends its next request when its stream ends), --rate open loops (Poisson arrivals); each level is\n" +
			"measured for --duration after --warmup, or with --duration 0 the workload is sent once through.\n" +
			"Any OpenAI-compatible server works: --fields '{\"logprobs\": null}' removes a field it refuses.",
		Example: "  eas-server bench-generation workload -n 300 --prompt 16-512 --output 16-256 --seed 39 > w.jsonl\n" +
			"  eas-server bench-generation --service gpt2 --token T --workload w.jsonl --clients 1,8,32,64 --pid $(pgrep -n eas-server)\n" +
			"  eas-server bench-generation --url http://127.0.0.1:8081/v1/completions --workload w.jsonl --rate 0.5,1 -d 60s -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target := url
			if target == "" {
				base := strings.TrimRight(cli.Endpoint(endpoint), "/")
				if service != "" {
					target = base + "/api/predict/" + service + "/v1/completions"
				} else {
					target = base + "/v1/completions"
				}
			}
			if workloadFile == "" {
				return fmt.Errorf("give --workload FILE (make one with `eas-server bench-generation workload`)")
			}
			f, err := os.Open(workloadFile)
			if err != nil {
				return fmt.Errorf("--workload: %w", err)
			}
			work, err := loadgen.ReadWorkload(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("--workload %s: %w", workloadFile, err)
			}
			if limit > 0 && limit < len(work) {
				work = work[:limit]
			}
			var extra map[string]json.RawMessage
			if fields != "" {
				if err := json.Unmarshal([]byte(fields), &extra); err != nil {
					return fmt.Errorf("--fields: want a JSON object: %v", err)
				}
			}
			header := map[string]string{}
			if token != "" {
				header["Authorization"] = "Bearer " + token
			}
			cs, err := intList("--clients", clients)
			if err != nil {
				return err
			}
			rs, err := floatList("--rate", rates)
			if err != nil {
				return err
			}
			if len(cs) == 0 && len(rs) == 0 {
				return fmt.Errorf("give --clients, --rate or both")
			}
			base := loadgen.GenConfig{URL: target, Header: header, Model: model, Workload: work, Fields: extra,
				Duration: duration, Warmup: warmup, PID: pid, Seed: seed}
			var results []loadgen.GenResult
			for _, c := range cs {
				run := base
				run.Clients = c
				r, err := loadgen.RunGeneration(cmd.Context(), run)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			for _, rate := range rs {
				run := base
				run.Rate = rate
				r, err := loadgen.RunGeneration(cmd.Context(), run)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			return writeResults(cmd.OutOrStdout(), output,
				func(w io.Writer) error { return loadgen.WriteGenJSON(w, results) },
				func(w io.Writer) error { return loadgen.WriteGenTable(w, results) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&endpoint, "endpoint", "", "server URL (default $EAS_ENDPOINT, then http://127.0.0.1:8080)")
	fl.StringVar(&service, "service", "", "service name: POST /api/predict/NAME/v1/completions (default: /v1/completions at the root)")
	fl.StringVar(&url, "url", "", "full URL of the completions endpoint (instead of --endpoint and --service), e.g. a peer's http://127.0.0.1:8081/v1/completions")
	fl.StringVar(&token, "token", os.Getenv("EAS_TOKEN"), "sent as Authorization: Bearer TOKEN (default $EAS_TOKEN; empty sends none)")
	fl.StringVar(&model, "model", "", "the body's model field (default: left out)")
	fl.StringVar(&workloadFile, "workload", "", "workload file: JSON lines {\"prompt\": [ids], \"max_tokens\": N}")
	fl.IntVar(&limit, "requests", 0, "use only the workload's first N requests (0: all)")
	fl.StringVarP(&clients, "clients", "c", "", "closed loop: comma-separated client counts, e.g. 1,8,32,64")
	fl.StringVar(&rates, "rate", "", "open loop: comma-separated request rates per second (Poisson arrivals), e.g. 0.5,1,2")
	fl.StringVar(&fields, "fields", "", "JSON object merged over each request body; a null value removes the field (e.g. {\"logprobs\": null})")
	fl.DurationVarP(&duration, "duration", "d", 30*time.Second, "measured window per level; 0 sends the workload once through and measures all of it")
	fl.DurationVar(&warmup, "warmup", 10*time.Second, "unmeasured time before each window")
	fl.IntVar(&pid, "pid", 0, "the server's process id: its CPU over the window is read from /proc/PID/stat (0: not measured)")
	fl.Uint64Var(&seed, "seed", 39, "seed of the open loop's arrivals")
	fl.StringVarP(&output, "output", "o", "table", "table or json")
	cmd.AddCommand(workloadCmd())
	return cmd
}

// workloadCmd writes a seeded workload (loadgen.MakeWorkload) to stdout or
// a file.
func workloadCmd() *cobra.Command {
	spec := loadgen.DefaultWorkload
	prompt := fmt.Sprintf("%d-%d", spec.PromptMin, spec.PromptMax)
	outLen := fmt.Sprintf("%d-%d", spec.OutputMin, spec.OutputMax)
	var out string
	cmd := &cobra.Command{
		Use:   "workload",
		Short: "Write a seeded generation workload (JSON lines) for bench-generation and the peers",
		Long: "Draws --requests requests: prompt lengths log-uniform over --prompt MIN-MAX tokens, max_tokens uniform\n" +
			"over --output MIN-MAX, token ids uniform below --vocab, all from --seed (the same file on every machine);\n" +
			"with --prefix N, the same N ids (a system prompt) start every prompt.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if spec.PromptMin, spec.PromptMax, err = rangeFlag("--prompt", prompt); err != nil {
				return err
			}
			if spec.OutputMin, spec.OutputMax, err = rangeFlag("--output", outLen); err != nil {
				return err
			}
			reqs, err := loadgen.MakeWorkload(spec)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				return loadgen.WriteWorkload(cmd.OutOrStdout(), reqs)
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := loadgen.WriteWorkload(f, reqs); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&spec.Requests, "requests", "n", spec.Requests, "number of requests")
	fl.StringVar(&prompt, "prompt", prompt, "prompt length range in tokens, MIN-MAX (log-uniform)")
	fl.StringVar(&outLen, "output", outLen, "max_tokens range, MIN-MAX (uniform)")
	fl.IntVar(&spec.Vocab, "vocab", spec.Vocab, "token ids are drawn below this (50000: ordinary tokens of GPT-2's and Llama 3's vocabularies)")
	fl.Uint64Var(&spec.Seed, "seed", spec.Seed, "the generator's seed")
	fl.IntVar(&spec.Prefix, "prefix", 0, "a shared prefix of this many ids (a system prompt) before every prompt's own")
	fl.StringVarP(&out, "out", "o", "", "output file (default stdout)")
	return cmd
}

func rangeFlag(name, s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		lo, err = strconv.Atoi(strings.TrimSpace(a))
		if err == nil {
			hi, err = strconv.Atoi(strings.TrimSpace(b))
		}
	}
	if !ok || err != nil || lo < 1 || hi < lo {
		return 0, 0, fmt.Errorf("%s: want MIN-MAX with 1 <= MIN <= MAX, got %q", name, s)
	}
	return lo, hi, nil
}

// writeResults writes a bench verb's results as -o asks: json or table.
func writeResults(w io.Writer, output string, asJSON, asTable func(io.Writer) error) error {
	switch output {
	case "json":
		return asJSON(w)
	case "table", "":
		return asTable(w)
	}
	return fmt.Errorf("-o: want table or json, got %q", output)
}

// intList parses a flag's comma-separated positive integers ("" is none).
func intList(name, s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: want a comma-separated list of positive integers, got %q", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func floatList(name, s string) ([]float64, error) {
	var out []float64
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x > 0) || x > 1e6 {
			return nil, fmt.Errorf("%s: want a comma-separated list of positive rates, got %q", name, s)
		}
		out = append(out, x)
	}
	return out, nil
}
