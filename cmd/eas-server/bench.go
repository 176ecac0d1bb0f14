package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eas-server/eas-server/internal/cli"
	"github.com/eas-server/eas-server/internal/loadgen"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

func benchCmd() *cobra.Command {
	var (
		endpoint, service, url, token, bodyFile, format, output string
		bodiesFile                                              string
		tensors                                                 []string
		concurrency                                             string
		duration, warmup                                        time.Duration
		inProcess, processorCode, modelConfig                   string
		cpu, gpu                                                int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test a service: throughput and latency percentiles per concurrency",
		Long: "Closed-loop load generator (like Triton's perf_analyzer). Each of C clients sends a request,\n" +
			"waits for the answer and sends the next, for --duration after --warmup.\n" +
			"The body is --body FILE, one line of --bodies FILE in turn, or generated from --tensor NAME:DTYPE:D1xD2 in --format.",
		Example: "  eas-server bench --service echo --token T --body req.json --concurrency 1,8,64\n" +
			"  eas-server bench --service mlp --token T --tensor input:FP32:1x2048 --format torch -c 1,64 -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if inProcess != "" {
				spec := processors.Spec{Service: "bench", Code: processorCode, ModelSource: inProcess, CPU: cpu, GPU: gpu}
				if modelConfig != "" {
					spec.ModelConfig = []byte(modelConfig) // Configure says what is wrong with it
				}
				return benchInProcess(cmd, spec, tensors, duration, warmup, output)
			}
			target := url
			if target == "" {
				if service == "" {
					return fmt.Errorf("give --service NAME (with --endpoint) or --url")
				}
				base := strings.TrimRight(cli.Endpoint(endpoint), "/")
				target = base + "/api/predict/" + service
				if strings.HasPrefix(format, "kserve") {
					target = base + "/v2/models/" + service + "/infer"
				}
			}
			header := map[string]string{}
			if token != "" {
				header["Authorization"] = token
			}
			var body []byte
			var bodies [][]byte
			given := 0
			for _, g := range []bool{bodyFile != "", bodiesFile != "", len(tensors) > 0} {
				if g {
					given++
				}
			}
			switch {
			case given > 1:
				return fmt.Errorf("give one of --body, --bodies, --tensor")
			case bodiesFile != "":
				b, err := os.ReadFile(bodiesFile)
				if err != nil {
					return fmt.Errorf("--bodies: %w", err)
				}
				for _, line := range strings.Split(string(b), "\n") {
					if line = strings.TrimRight(line, "\r"); line != "" {
						bodies = append(bodies, []byte(line))
					}
				}
				if len(bodies) == 0 {
					return fmt.Errorf("--bodies: %s has no non-empty line", bodiesFile)
				}
			case bodyFile != "":
				b, err := os.ReadFile(bodyFile)
				if err != nil {
					return fmt.Errorf("--body: %w", err)
				}
				body = b
			case len(tensors) > 0:
				rng := rand.New(rand.NewPCG(1, 2))
				var ts []tensor.Tensor
				for _, s := range tensors {
					spec, err := loadgen.ParseTensorSpec(s)
					if err != nil {
						return fmt.Errorf("--tensor: %w", err)
					}
					ts = append(ts, spec.Generate(rng))
				}
				b, h, err := loadgen.EncodeBody(format, ts)
				if err != nil {
					return fmt.Errorf("--format: %w", err)
				}
				body = b
				for k, v := range h {
					header[k] = v
				}
			}
			levels, err := intList("--concurrency", concurrency)
			if err != nil {
				return err
			}
			if len(levels) == 0 {
				return fmt.Errorf("--concurrency: want a comma-separated list of positive integers, got %q", concurrency)
			}
			var results []loadgen.Result
			for _, c := range levels {
				r, err := loadgen.Run(cmd.Context(), loadgen.Config{
					URL: target, Body: body, Bodies: bodies, Header: header, Concurrency: c, Duration: duration, Warmup: warmup,
				})
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			return writeResults(cmd.OutOrStdout(), output,
				func(w io.Writer) error { return loadgen.WriteJSON(w, results) },
				func(w io.Writer) error { return loadgen.WriteTable(w, results) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&endpoint, "endpoint", "", "server URL (default $EAS_ENDPOINT, then http://127.0.0.1:8080), as the other client verbs")
	fl.StringVar(&service, "service", "", "service name (POST /api/predict/NAME, or /v2/models/NAME/infer for kserve formats)")
	fl.StringVar(&url, "url", "", "full target URL (instead of --endpoint and --service)")
	fl.StringVar(&token, "token", os.Getenv("EAS_TOKEN"), "service token (default $EAS_TOKEN)")
	fl.StringVar(&bodyFile, "body", "", "file whose bytes every request sends")
	fl.StringVar(&bodiesFile, "bodies", "", "file with one body per line (e.g. JSON lines): requests send them in turn, shared by all clients")
	fl.StringArrayVar(&tensors, "tensor", nil, "generated input NAME:DTYPE:D1xD2 (repeatable)")
	fl.StringVar(&format, "format", "torch", "body format of generated tensors: "+strings.Join(loadgen.Formats, ", "))
	fl.StringVarP(&concurrency, "concurrency", "c", "1,8,64", "comma-separated client counts")
	fl.DurationVarP(&duration, "duration", "d", 10*time.Second, "measured time per concurrency level")
	fl.DurationVar(&warmup, "warmup", 2*time.Second, "unmeasured time before each level")
	fl.StringVarP(&output, "output", "o", "table", "table or json")
	fl.StringVar(&inProcess, "in-process", "", "instead of HTTP, load this model file in this process and time Run on the --tensor inputs")
	fl.StringVar(&processorCode, "processor", "onnx_cpu", "processor code for --in-process")
	fl.IntVar(&cpu, "cpu", 0, "metadata.cpu for --in-process (intra-op threads; 0 = all cores)")
	fl.IntVar(&gpu, "gpu", 0, "metadata.gpu for --in-process (a GPU code such as onnx_cu100 needs 1)")
	fl.StringVar(&modelConfig, "model-config", "", "model_config JSON for --in-process (e.g. {\"device_id\": 1})")
	return cmd
}

// benchInProcess times the processor's Run with no server in the path,
// configured as a service with spec's resources and model_config would be.
func benchInProcess(cmd *cobra.Command, spec processors.Spec, tensorSpecs []string, d, warmup time.Duration, output string) error {
	if len(tensorSpecs) == 0 {
		return fmt.Errorf("--in-process needs --tensor inputs")
	}
	engine, err := processors.New(spec.Code)
	if err != nil {
		return err
	}
	proc := engine.Processor()
	if err := proc.Configure(spec); err != nil {
		return err
	}
	if err := proc.Load(cmd.Context(), processors.Files{ModelPath: spec.ModelSource}); err != nil {
		return err
	}
	if c, ok := proc.(processors.Closer); ok {
		defer c.Close()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	p := &processors.TensorPayload{}
	for _, s := range tensorSpecs {
		ts, err := loadgen.ParseTensorSpec(s)
		if err != nil {
			return fmt.Errorf("--tensor: %w", err)
		}
		p.Inputs = append(p.Inputs, ts.Generate(rng))
	}
	rows, err := tensor.BatchSize(p.Inputs)
	if err != nil {
		return err
	}
	res, err := loadgen.RunInProcess(cmd.Context(), engine, p, int(rows), d, warmup)
	if err != nil {
		return err
	}
	if output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "in-process %s batch %d: %.1f rows/s, %.3f ms per run (%d runs)\n", spec.Code, res.Batch, res.RowsPS, res.MeanMs, res.Runs)
	return nil
}
