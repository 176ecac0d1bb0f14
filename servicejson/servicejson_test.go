package servicejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, doc string) *Service {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return s
}

func parseFile(t *testing.T, path string) *Service {
	t.Helper()
	s, err := ParseFile(path)
	if err != nil {
		t.Fatalf("ParseFile(%s): %v", path, err)
	}
	return s
}

// sameService compares two services as values, ignoring the raw bytes and
// which spelling set each key.
func sameService(a, b *Service) bool {
	x, y := *a, *b
	x.Raw, y.Raw = nil, nil
	return reflect.DeepEqual(x, y)
}

// TestSpellingsAreOneKey checks that nested, dotted, top-level dotted and
// string-valued spellings of the same file give the same Service.
func TestSpellingsAreOneKey(t *testing.T) {
	want := parseFile(t, "testdata/valid/nested.json")
	r := want.Metadata.RPC
	if want.Metadata.Instance != 2 || want.Metadata.CPU != 4 || want.Metadata.Memory != 8000 ||
		want.Metadata.TerminationGracePeriod != 60*time.Second ||
		!r.Batching || r.MaxBatchSize != 32 || r.MaxBatchTimeout != 20*time.Millisecond ||
		r.Keepalive != 3*time.Second || r.WorkerThreads != 8 || r.Decompressor != "zstd" ||
		want.Cloud.InstanceType != "ecs.c6.xlarge" {
		t.Fatalf("nested.json parsed wrong: %+v", want)
	}
	// Keys the file leaves out keep their defaults.
	if r.IOThreads != DefaultIOThreads || r.MaxQueueSize != DefaultMaxQueueSize || r.Batcher != "concat" {
		t.Errorf("defaults not applied: %+v", r)
	}
	for _, name := range []string{"dotted", "top_dotted", "strings", "mixed_same_values"} {
		t.Run(name, func(t *testing.T) {
			got := parseFile(t, "testdata/valid/"+name+".json")
			if !sameService(got, want) {
				t.Errorf("differs from nested.json:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, `{"name":"m","processor":"pmml","metadata":{"instance":1}}`)
	want := RPC{
		MaxBatchSize:    16,
		MaxBatchTimeout: 50 * time.Millisecond,
		Keepalive:       5000 * time.Millisecond,
		WorkerThreads:   5,
		IOThreads:       4,
		MaxQueueSize:    64,
		Batcher:         "concat",
	}
	if !reflect.DeepEqual(s.Metadata.RPC, want) {
		t.Errorf("rpc defaults = %+v, want %+v", s.Metadata.RPC, want)
	}
	if s.Metadata.TerminationGracePeriod != 30*time.Second {
		t.Errorf("termination grace period = %v, want 30s", s.Metadata.TerminationGracePeriod)
	}
	if s.IsSet("metadata.rpc.keepalive") || !s.IsSet("metadata.instance") {
		t.Errorf("IsSet wrong: keepalive %v instance %v", s.IsSet("metadata.rpc.keepalive"), s.IsSet("metadata.instance"))
	}
	if s.Autoscaler != nil || s.Labels != nil || s.ModelConfig != nil || !s.Token.IsZero() {
		t.Errorf("absent sections should stay empty: %+v", s)
	}
}

// TestExplicitZeroWins checks that a value given as 0 is not replaced by its
// default: max_batch_timeout 0 means "do not wait", not 50 ms.
func TestExplicitZeroWins(t *testing.T) {
	s := mustParse(t, `{"name":"m","processor":"pmml","metadata":{"instance":1,"eas.termination_grace_period":0,"rpc":{"max_batch_timeout":0,"rate_limit":"0"}}}`)
	if s.Metadata.RPC.MaxBatchTimeout != 0 || s.Metadata.TerminationGracePeriod != 0 || s.Metadata.RPC.RateLimit != 0 {
		t.Errorf("explicit zeros lost: %+v", s.Metadata)
	}
}

func TestFullFile(t *testing.T) {
	s := parseFile(t, "testdata/valid/full.json")
	if got := string(s.ModelConfigBytes()); got != `{"input":"data","threshold":0.5}` {
		t.Errorf("ModelConfigBytes = %s", got)
	}
	if got := string(s.ModelConfig); got != `"{\"input\":\"data\",\"threshold\":0.5}"` {
		t.Errorf("ModelConfig = %s, want the string as given", got)
	}
	if s.Token.Reveal() != "c2VjcmV0LXRva2Vu" || s.GenerateToken {
		t.Errorf("token = %q generate = %v", s.Token.Reveal(), s.GenerateToken)
	}
	wantLabels := map[string]string{"team": "vision", "app.kubernetes.io/name": "resnet", "tier": "2", "owner": "alice"}
	if !reflect.DeepEqual(s.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", s.Labels, wantLabels)
	}
	down := 300 * time.Second
	wantAS := &Autoscaler{Min: 1, Max: 5, Strategies: []ScaleStrategy{{MetricCPU, 80}, {MetricQPS, 10}}, ScaleDownWindow: &down}
	if !reflect.DeepEqual(s.Autoscaler, wantAS) {
		t.Errorf("autoscaler = %+v, want %+v", s.Autoscaler, wantAS)
	}
	if len(s.Storage) != 1 || len(s.Containers) != 1 || string(s.Networking) != `{"disable_internet_endpoint":true}` {
		t.Errorf("opaque sections: storage %s containers %s networking %s", s.Storage, s.Containers, s.Networking)
	}
	if _, ok := s.Cloud.Extra["computing.disable_spot_protection_period"]; !ok || len(s.Cloud.Extra) != 2 {
		t.Errorf("cloud extras = %v", s.Cloud.Extra)
	}
	m := s.Metadata
	if m.WorkspaceID != "12345" || !m.EnableGRPC || !s.Runtime.EnableCrashBlock {
		t.Errorf("metadata = %+v runtime = %+v", m, s.Runtime)
	}
	if *m.RollingStrategy.MaxSurge != (IntOrPercent{25, true}) || m.RollingStrategy.MaxSurge.String() != "25%" ||
		*m.RollingStrategy.MaxUnavailable != (IntOrPercent{Value: 1}) {
		t.Errorf("rolling strategy = %v %v", m.RollingStrategy.MaxSurge, m.RollingStrategy.MaxUnavailable)
	}
	r := m.RPC
	if !slices.Equal(r.PreferredBatchSizes, []int{4, 8, 16}) || r.Batcher != "bucket" || r.PadValue != -1.5 ||
		!slices.Equal(r.Buckets, []int{32, 64, 128}) || r.Decompressor != "" || !r.EnableJemalloc || r.RateLimit != 100 {
		t.Errorf("rpc = %+v", r)
	}
	if s.UsesGPU() {
		t.Error("UsesGPU for a CPU file")
	}
	raw, err := os.ReadFile("testdata/valid/full.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Raw, raw) {
		t.Error("Raw is not the file as read")
	}
}

func TestModelConfigObject(t *testing.T) {
	s := parseFile(t, "testdata/valid/model_config_object.json")
	var cfg struct {
		Features  []string
		Normalize bool
	}
	if err := json.Unmarshal(s.ModelConfigBytes(), &cfg); err != nil || !cfg.Normalize || len(cfg.Features) != 2 {
		t.Errorf("ModelConfigBytes = %s (%v)", s.ModelConfigBytes(), err)
	}
	if s.IsSet("metadata.cpu") {
		t.Error("a null value must count as not given")
	}
}

// TestParseKeepsNoReference checks that the Service does not alias the
// caller's buffer, which the server reuses.
func TestParseKeepsNoReference(t *testing.T) {
	doc := []byte(`{"name":"m","processor":"pmml","model_config":{"a":1},"metadata":{"instance":1}}`)
	s, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range doc {
		doc[i] = ' '
	}
	if string(s.ModelConfig) != `{"a":1}` || !strings.HasPrefix(string(s.Raw), `{"name"`) {
		t.Errorf("service aliases the input: config %s raw %s", s.ModelConfig, s.Raw)
	}
}

func TestByteOrderMark(t *testing.T) {
	s := mustParse(t, "\xef\xbb\xbf"+`{"name":"m","processor":"pmml","metadata":{"instance":1}}`)
	if s.Name != "m" || bytes.HasPrefix(s.Raw, []byte("\xef")) {
		t.Errorf("BOM not stripped: %q", s.Raw)
	}
}

// TestDeviceRules covers the processor/GPU rule of docs/service-json.md.
func TestDeviceRules(t *testing.T) {
	tests := []struct {
		doc  string
		want []string // substrings of the error; nil = valid
	}{
		{`{"name":"m","processor":"tensorflow_gpu_1.15","metadata":{"instance":1,"gpu":0}}`,
			[]string{"processor: ", "metadata.gpu", "tensorflow_cpu_1.15"}},
		{`{"name":"m","processor":"pytorch_gpu_1.6","metadata":{"instance":1}}`, []string{"metadata.gpu", "pytorch_cpu_1.6"}},
		{`{"name":"m","processor":"caffe_gpu","metadata":{"instance":1}}`, []string{"metadata.gpu", "caffe_cpu"}},
		{`{"name":"m","processor":"pytorch_cpu_1.9","metadata":{"instance":1,"gpu":"1"}}`, []string{"metadata.gpu", "pytorch_gpu_1.9"}},
		{`{"name":"m","processor":"onnx_cpu","metadata":{"instance":1,"gpu":1}}`, []string{"onnx_cu100"}},
		{`{"name":"m","processor":"xgboost","metadata":{"instance":1,"gpu":1}}`, []string{"xgboost has no GPU variant"}},
		{`{"name":"m","processor":"parameter_server","metadata":{"instance":1,"gpu":1}}`, []string{"parameter_server has no GPU variant"}},
		{`{"name":"m","processor":"tensorflow_gpu_1.15","metadata":{"instance":1,"gpu":1}}`, nil},
		{`{"name":"m","processor":"tensorflow_gpu_2.7","metadata":{"instance":1,"gpu_memory":8}}`, nil},
		{`{"name":"m","processor":"tensorflow_gpu_1.14","metadata":{"instance":1},"cloud.computing.instance_type":"ecs.gn7i-c8g1.2xlarge"}`, nil},
		{`{"name":"m","processor":"tensorflow_gpu_1.14","metadata":{"instance":1},"cloud.computing.instance_type":"ecs.g6.xlarge"}`, []string{"metadata.gpu"}},
		{`{"name":"m","processor":"tensorflow_cpu_1.14","metadata":{"instance":1},"cloud.computing.instance_type":"ecs.gn7i-c8g1.2xlarge"}`, nil},
		{`{"name":"m","processor":"triton","metadata":{"instance":1,"gpu":0}}`, nil},
		{`{"name":"m","processor":"triton","metadata":{"instance":1,"gpu":2}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			s, err := Parse([]byte(tt.doc))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if s.Code.IsGPU() && !s.UsesGPU() {
					t.Errorf("accepted a GPU code on a service without a GPU")
				}
				return
			}
			if err == nil {
				t.Fatal("Parse accepted a device mismatch")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Path != "processor" {
				t.Errorf("errors.As FieldError: %#v", fe)
			}
		})
	}
}

func TestParseCode(t *testing.T) {
	tests := []struct {
		code string
		want Code
	}{
		{"tensorflow_gpu_1.15", Code{"tensorflow_gpu_1.15", "tensorflow", "gpu", "1.15"}},
		{"tensorflow_cpu_2.3", Code{"tensorflow_cpu_2.3", "tensorflow", "cpu", "2.3"}},
		{"pytorch_cpu_1.10", Code{"pytorch_cpu_1.10", "pytorch", "cpu", "1.10"}},
		{"pmml", Code{"pmml", "pmml", "cpu", ""}},
		{"parameter_sever", Code{"parameter_sever", "parameter_server", "cpu", ""}},
		{"onnx_cu100", Code{"onnx_cu100", "onnx", "gpu", ""}},
		{"caffe_gpu", Code{"caffe_gpu", "caffe", "gpu", ""}},
		{"triton", Code{"triton", "triton", "", ""}},
		{"echo", Code{"echo", "echo", "", ""}},
		{"easynlp", Code{"easynlp", "easynlp", "", ""}},
		{"text_encoder", Code{"text_encoder", "text_encoder", "", ""}},
	}
	for _, tt := range tests {
		got, err := ParseCode(tt.code)
		if err != nil || got != tt.want {
			t.Errorf("ParseCode(%q) = %+v, %v; want %+v", tt.code, got, err, tt.want)
		}
	}
	if slices.Contains(KnownCodes(), "tensorflow_gpu_2.3") {
		t.Error("tensorflow_gpu_2.3 is not an EAS code")
	}
	if n := len(KnownCodes()); n != 36 {
		t.Errorf("KnownCodes has %d codes, want 36: %v", n, KnownCodes())
	}
	for _, code := range KnownCodes() {
		if c, err := ParseCode(code); err != nil || c.Raw != code {
			t.Errorf("known code %q does not parse: %v", code, err)
		}
		if o := otherDevice(code); o != "" && otherDevice(o) != code {
			t.Errorf("device pair of %s is not symmetric: %s -> %s", code, o, otherDevice(o))
		}
	}
	for in, want := range map[string]string{
		"pytorch_gpu_1.8": "did you mean pytorch_gpu_1.",
		"pmm":             "did you mean pmml?",
		"Onnx_CPU":        "known codes: caffe_cpu",
		"":                "empty processor code",
	} {
		_, err := ParseCode(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCode(%q) error %v, want it to contain %q", in, err, want)
		}
	}
}

func TestIsGPUInstanceType(t *testing.T) {
	for typ, want := range map[string]bool{
		"ecs.gn6i-c4g1.xlarge":     true,
		"ecs.gn7i-c8g1.2xlarge":    true,
		"ecs.vgn6i-m4.xlarge":      true,
		"ecs.sgn7i-vws-m2.xlarge":  true,
		"ecs.ebmgn7e.32xlarge":     true,
		"ecs.gi6s.xlarge":          true,
		"ml.gu7i.c16m60.1-gu30":    true,
		"ECS.GN6V-C8G1.2XLARGE":    true,
		"ecs.c6.xlarge":            false,
		"ecs.g6.xlarge":            false,
		"ecs.r7.large":             false,
		"ml.c6.large":              false,
		"gn6i":                     false,
		"":                         false,
		"other.gn6i-c4g1.xlarge":   false,
		"ecs.hfg7.xlarge":          false,
		"ecs.ebmg7.32xlarge":       false,
		"ecs.c8i.gn-lookalike.big": false,
	} {
		if got := IsGPUInstanceType(typ); got != want {
			t.Errorf("IsGPUInstanceType(%q) = %v, want %v", typ, got, want)
		}
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	tests := []struct {
		doc       string
		line, col int
	}{
		{"{\n  \"name\": \"m\",\n  \"processor\" \"pmml\"\n}", 3, 15},
		{"{\"name\": \"m\",}", 1, 14},
		{"{\n\"a\": \"é\" x}", 2, 10},
		{"{\n", 2, 1},
		{"", 1, 1},
		{"{} {}", 1, 4},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.doc))
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("Parse(%q) = %v, want a FieldError", tt.doc, err)
		}
		if fe.Line != tt.line || fe.Column != tt.col {
			t.Errorf("Parse(%q): %v at %d:%d, want %d:%d", tt.doc, err, fe.Line, fe.Column, tt.line, tt.col)
		}
		if want := fmt.Sprintf("%d:%d: ", tt.line, tt.col); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Parse(%q) = %q, want prefix %q", tt.doc, err, want)
		}
	}
}

// TestAllProblemsAtOnce checks that problems in different parts of a file are
// all reported, in document order, and each reachable with errors.As.
func TestAllProblemsAtOnce(t *testing.T) {
	_, err := ParseFile("testdata/invalid/multiple_problems.json")
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T", err)
	}
	var paths []string
	for _, p := range errs.Problems {
		paths = append(paths, p.Path)
	}
	want := []string{"metdata", "metadata.rpc.keepalve", "metadata.instance", "metadata.rpc.max_batch_size",
		"metadata.rpc.keepalive", "metadata.rpc.worker_threads", "metadata.rpc.max_queue_size",
		"metadata.rpc.rate_limit", "metadata.rpc.decompressor", "name", "processor"}
	if !slices.Equal(paths, want) {
		t.Errorf("paths = %v\nwant    %v", paths, want)
	}
	if len(errs.Unwrap()) != len(errs.Problems) || strings.Count(err.Error(), "\n") != len(want)-1 {
		t.Errorf("Error/Unwrap do not carry every problem: %q", err)
	}
}

func TestNameRule(t *testing.T) {
	for name, ok := range map[string]bool{
		"m": true, "my_model_2": true, strings.Repeat("a", 64): true,
		strings.Repeat("a", 65): false, "": false, "Model": false, "my-model": false, "_m": false,
		"2m": false, "m.n": false, "m n": false, "模型": false,
	} {
		doc, _ := json.Marshal(map[string]any{"name": name, "processor": "pmml", "metadata": map[string]int{"instance": 1}})
		_, err := Parse(doc)
		if (err == nil) != ok {
			t.Errorf("name %q: err = %v, want ok = %v", name, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "name: ") {
			t.Errorf("name %q: error %q does not name the key", name, err)
		}
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		key    string
		ok, no any
	}{
		{"metadata.instance", 1000, 1001},
		{"metadata.rpc.max_batch_size", 1024, 1025},
		{"metadata.rpc.max_batch_timeout", 60000, 60001},
		{"metadata.rpc.keepalive", 600000, 600001},
		{"metadata.rpc.keepalive", 1, 0},
		{"metadata.rpc.worker_threads", 1024, 0},
		{"metadata.rpc.io_threads", 1, 1025},
		{"metadata.rpc.max_queue_size", 1000000, 1000001},
		{"metadata.rpc.rate_limit", 0, -1},
		{"metadata.cpu", 0, -1},
		{"metadata.gpu", 0, -1},
		{"metadata.gpu_core_percentage", 100, 101},
		{"metadata.eas.termination_grace_period", 3600, 3601},
		{"metadata.rpc.pad_value", "-1e300", "1e400"},
		{"metadata.rpc.decompressor", "LZ4", "br"},
		{"metadata.rpc.batching", "FALSE", "off"},
	}
	for _, tt := range tests {
		for _, v := range []any{tt.ok, tt.no} {
			doc := map[string]any{"name": "m", "processor": "echo", tt.key: v}
			if tt.key != "metadata.instance" {
				doc["metadata.instance"] = 1
			}
			b, _ := json.Marshal(doc)
			_, err := Parse(b)
			if (err == nil) != (v == tt.ok) {
				t.Errorf("%s = %v: err = %v", tt.key, v, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), tt.key+": ") {
				t.Errorf("%s = %v: error %q does not start with the key", tt.key, v, err)
			}
		}
	}
}

func TestSecretRedaction(t *testing.T) {
	s := mustParse(t, `{"name":"m","processor":"pmml","token":"hunter2-token","metadata":{"instance":1}}`)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("deploy", "token", s.Token, "service", s)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", s.Token), "%s": fmt.Sprintf("%s", s.Token), "%#v": fmt.Sprintf("%#v", s.Token),
		"%+v service": fmt.Sprintf("%+v", *s), "slog": logs.String(), "json": string(b),
	} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s leaks the token: %s", name, out)
		}
		if name != "%+v service" && !strings.Contains(out, Redacted) {
			t.Errorf("%s does not show %s: %s", name, Redacted, out)
		}
	}
	if s.Token.Reveal() != "hunter2-token" {
		t.Errorf("Reveal = %q", s.Token.Reveal())
	}
}

// TestKnownKeysCoverProtocol checks the key table against the keys listed in
// docs/service-json.md, so that a key dropped from the table fails here.
func TestKnownKeysCoverProtocol(t *testing.T) {
	keys := KnownKeys()
	for _, k := range []string{
		"name", "processor", "model_path", "model_entry", "model_config", "oss_endpoint", "token",
		"generate_token", "processor_path", "processor_entry", "processor_type", "processor_mainclass",
		"processor_params", "warm_up_data_path", "pre_process.processor_path", "pre_process.processor_type",
		"pre_process.processor_entry", "pre_process.model_config", "post_process.processor_path",
		"post_process.processor_type", "post_process.processor_entry", "post_process.model_config", "metadata.type",
		"queue.source.max_length", "queue.sink.max_length", "queue.source.max_payload_size_kb", "queue.sink.max_payload_size_kb",
		"queue.source.auto_evict", "queue.sink.auto_evict", "queue.max_delivery", "autoscaler.min", "autoscaler.max", "autoscaler.strategies",
		"autoscaler.scaleStrategies", "autoscaler.behavior.scaleUp.stabilizationWindowSeconds",
		"autoscaler.behavior.scaleDown.stabilizationWindowSeconds",
		"labels", "storage", "cloud.computing.instance_type", "containers", "networking",
		"runtime.enable_crash_block", "metadata.instance", "metadata.cpu", "metadata.memory", "metadata.gpu",
		"metadata.gpu_memory", "metadata.gpu_core_percentage", "metadata.cuda", "metadata.resource",
		"metadata.qos", "metadata.region", "metadata.workspace_id", "metadata.enable_grpc",
		"metadata.eas.termination_grace_period", "metadata.rolling_strategy.max_surge",
		"metadata.rolling_strategy.max_unavailable", "metadata.rpc.batching", "metadata.rpc.max_batch_size",
		"metadata.rpc.max_batch_timeout", "metadata.rpc.keepalive", "metadata.rpc.worker_threads",
		"metadata.rpc.io_threads", "metadata.rpc.max_queue_size", "metadata.rpc.rate_limit",
		"metadata.rpc.decompressor", "metadata.rpc.enable_sigterm", "metadata.rpc.enable_jemalloc",
	} {
		if !slices.Contains(keys, k) {
			t.Errorf("KnownKeys lacks %s", k)
		}
	}
}

func TestParseFileErrors(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "missing.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"metdata", "metadata", 1}, {"kitten", "sitting", 3}, {"keepalve", "keepalive", 1}} {
		if got := levenshtein(tt.a, tt.b); got != tt.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}

// TestProblemCap checks that a document with thousands of bad keys yields a
// bounded list of problems ending with a note that more were left out.
func TestProblemCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"name":"m","processor":"pmml","metadata":{"instance":1}`)
	for i := range 5000 {
		fmt.Fprintf(&b, `,"unknown_key_%d":1`, i)
	}
	b.WriteString("}")
	_, err := Parse([]byte(b.String()))
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T", err)
	}
	if len(errs.Problems) != maxProblems+1 {
		t.Errorf("%d problems, want %d", len(errs.Problems), maxProblems+1)
	}
	if last := errs.Problems[len(errs.Problems)-1]; !strings.Contains(last.Msg, "too many problems") {
		t.Errorf("last problem = %q", last.Msg)
	}
}

// TestOpenCloudSection checks that unknown keys under cloud are kept, while
// near misses of the keys we read there are still typos.
func TestOpenCloudSection(t *testing.T) {
	s := mustParse(t, `{"name":"m","processor":"pmml","metadata":{"instance":1},"cloud.foo.cpu":1,"cloud":{"computing":{"spot":{"x":1}}}}`)
	if len(s.Cloud.Extra) != 2 || string(s.Cloud.Extra["foo.cpu"]) != "1" || string(s.Cloud.Extra["computing.spot"]) != `{"x":1}` {
		t.Errorf("cloud extras = %v", s.Cloud.Extra)
	}
	_, err := Parse([]byte(`{"name":"m","processor":"pmml","metadata":{"instance":1},"cloud":{"netwroking":{}}}`))
	if err == nil || !strings.Contains(err.Error(), "cloud.netwroking: unknown key; did you mean cloud.networking?") {
		t.Errorf("typo under cloud: %v", err)
	}
}

// A token that is blank or padded with white space can never match: servers
// trim the Authorization header. Issue 14 found " " accepted.
func TestBlankTokenRefused(t *testing.T) {
	for _, tok := range []string{" ", "\t", "  \n ", " abc", "abc ", "a\x01b"} {
		doc := `{"name":"m","processor":"echo","token":` + jsonString(tok) + `,"metadata":{"instance":1}}`
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "token: ") {
			t.Errorf("token %q: got %v, want a problem naming token", tok, err)
			continue
		}
		if strings.Contains(err.Error(), tok) && strings.TrimSpace(tok) != "" {
			t.Errorf("token %q: the message repeats the token: %v", tok, err)
		}
	}
	// An empty token still means "generate one"; a normal one passes.
	for _, tok := range []string{"", "abc", "a b"} {
		mustParse(t, `{"name":"m","processor":"echo","token":`+jsonString(tok)+`,"metadata":{"instance":1}}`)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
