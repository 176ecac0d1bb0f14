package triton

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestParseRepositoryConfigs parses the committed config.pbtxt files and
// compares the result with golden JSON (go test -update rewrites it).
func TestParseRepositoryConfigs(t *testing.T) {
	for _, model := range []string{"mlp", "multi_io"} {
		t.Run(model, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "model_repository", model, "config.pbtxt"))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseModelConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(cfg, "", "  ")
			golden := filepath.Join("testdata", "golden", model+".json")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
				t.Errorf("parsed config differs from %s:\n%s", golden, got)
			}
		})
	}
}

func TestParseModelConfigFields(t *testing.T) {
	cfg, err := ParseModelConfig([]byte(`
name: "m"
max_batch_size: 16
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 1500
  preserve_ordering: true
  default_queue_policy { max_queue_size: 32 default_timeout_microseconds: 250000 timeout_action: REJECT }
}
instance_group [ { name: "g" count: 3 kind: KIND_CPU } ]
version_policy: { latest: { num_versions: 2 } }
optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }
parameters { key: "k" value: { string_value: "v" } }
`))
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.DynamicBatching
	if cfg.MaxBatchSize != 16 || db == nil || len(db.PreferredBatchSizes) != 2 || db.MaxQueueDelay != 1500*time.Microsecond ||
		!db.PreserveOrdering || db.MaxQueueSize != 32 || db.QueueTimeout != 250*time.Millisecond {
		t.Errorf("dynamic batching: %+v %+v", cfg, db)
	}
	if len(cfg.InstanceGroups) != 1 || cfg.InstanceGroups[0].Count != 3 || cfg.InstanceGroups[0].Kind != "KIND_CPU" {
		t.Errorf("instance groups: %+v", cfg.InstanceGroups)
	}
	if cfg.VersionPolicy.Kind != "latest" || cfg.VersionPolicy.NumVersions != 2 {
		t.Errorf("version policy: %+v", cfg.VersionPolicy)
	}
}

func TestParseModelConfigErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`max_batch_size: -1`, "max_batch_size: must be between 0 and 65536, got -1"},
		{`max_batch_size: "8"`, "expected an integer"},
		{`name: m`, `name: expected a quoted string, found identifier "m"`},
		{`input [ { name: "x" data_type: TYPE_FLOAT dims: [ 1 ] } ]`, `unknown data type "TYPE_FLOAT"`},
		{`input [ { data_type: TYPE_FP32 } ]`, "input: name is required"},
		{`input [ { name: "x" dims: [ -2 ] data_type: TYPE_FP32 } ]`, "a dimension must be -1 (variable) or between 0"},
		{`instance_group [ { kind: KIND_TPU } ]`, `"KIND_TPU" is not one of KIND_AUTO, KIND_CPU, KIND_GPU, KIND_MODEL`},
		{`dynamic_batching { preferred_batch_size: [ 0 ] }`, "preferred_batch_size: must be at least 1"},
		{`dynamic_batching { max_queue_delay: 5 }`, `unknown field "max_queue_delay" in dynamic_batching`},
		{`version_policy: { latest: {} all: {} }`, "set exactly one of latest, all, specific"},
		{`version_policy: { specific: { } }`, "list at least one version"},
		{`model_warmup [ { inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 1 ] } } } ]`, "set exactly one of zero_data, random_data, input_data_file"},
		{`model_warmup [ { inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } } ]`, "dims must be fixed"},
		{"name: \"m\"\nfoo: 1\nbar { }", `line 2:6: unknown field "foo" in ModelConfig` + "\n" + `line 3:5: unknown field "bar" in ModelConfig`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			_, err := ParseModelConfig([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseModelConfig runs arbitrary bytes through the config decoder: no
// panic, and an accepted config holds values inside the documented bounds.
func FuzzParseModelConfig(f *testing.F) {
	for _, m := range []string{"mlp", "multi_io"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "model_repository", m, "config.pbtxt")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`name: "m" version_policy: { specific: { versions: [ 1, 2 ] } } model_warmup [ { name: "w" batch_size: 2 inputs { key: "x" value: { data_type: TYPE_INT64 dims: [ 3 ] random_data: true } } } ]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseModelConfig(b)
		if err != nil {
			return
		}
		if cfg.MaxBatchSize < 0 || cfg.MaxBatchSize > maxCount {
			t.Fatalf("max_batch_size %d accepted", cfg.MaxBatchSize)
		}
		for _, io := range append(cfg.Inputs, cfg.Outputs...) {
			if io.Name == "" || io.DataType == "" {
				t.Fatalf("io without name or type accepted: %+v", io)
			}
		}
		if db := cfg.DynamicBatching; db != nil && db.MaxQueueDelay < 0 {
			t.Fatalf("negative delay %v", db.MaxQueueDelay)
		}
	})
}

// TestGPUPlacement: a KIND_GPU model runs on the first GPU id a KIND_GPU
// group lists (device 0 when none does); KIND_CPU models run on the CPU.
func TestGPUPlacement(t *testing.T) {
	for name, tc := range map[string]struct {
		pbtxt  string
		gpu    bool
		device int
	}{
		"cpu":         {`instance_group [{ kind: KIND_CPU }]`, false, 0},
		"none listed": {`instance_group [{ kind: KIND_GPU }]`, true, 0},
		"listed":      {`instance_group [{ kind: KIND_CPU }, { kind: KIND_GPU gpus: [2, 3] }]`, true, 2},
		"later group": {`instance_group [{ kind: KIND_GPU }, { kind: KIND_GPU gpus: [1] }]`, true, 1},
	} {
		cfg, err := ParseModelConfig([]byte(`name: "m" platform: "onnxruntime_onnx" ` + tc.pbtxt))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if gpu, device := gpuPlacement(cfg); gpu != tc.gpu || device != tc.device {
			t.Errorf("%s: gpu %v device %d, want %v %d", name, gpu, device, tc.gpu, tc.device)
		}
	}
}
