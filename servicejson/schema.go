package servicejson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// kind is how a key's JSON value is read.
type kind int

const (
	kString       kind = iota // a JSON string
	kText                     // a string; a number is taken as its text (cuda: 11.2)
	kBool                     // true/false, also "true"/"false", 1/0 and "1"/"0"
	kInt                      // an integral number, also as a string ("5000")
	kFloat                    // a finite number, also as a string
	kIntOrPercent             // 2, "2" or "25%"
	kStrings                  // a list of strings
	kInts                     // a list of integers (elements also as strings)
	kStringMap                // an object of strings (numbers and booleans taken as text)
	kFloatMap                 // an object of numbers
	kObject                   // any JSON object, kept as given
	kObjects                  // a list of JSON objects, kept as given
	kArray                    // any JSON list, kept as given
	kConfig                   // a JSON object or a string, kept as given
)

// field describes one key of service.json: how to read it, its limits and
// where it goes. The table below is the single list of keys: the parser,
// the unknown-key suggestions and KnownKeys all read it.
type field struct {
	path   string
	kind   kind
	lo, hi float64 // inclusive limits for numbers (list elements for kInts); both 0: none
	unit   string  // shown with limits: ms, s, MB, GB
	enum   []string
	maxLen int    // longest list for kInts/kStrings; 0: 1024
	hint   string // how to fix a bad value
	set    func(s *Service, key string, v any)
}

func (f *field) ranged() bool { return f.lo != 0 || f.hi != 0 }

func (f *field) isMap() bool { return f.kind == kStringMap || f.kind == kFloatMap }

func ms(v any) time.Duration      { return time.Duration(v.(int)) * time.Millisecond }
func seconds(v any) time.Duration { return time.Duration(v.(int)) * time.Second }
func str(v any) string            { return v.(string) }
func integer(v any) int           { return v.(int) }
func boolean(v any) bool          { return v.(bool) }
func raw(v any) []byte            { return v.(json.RawMessage) }

// hookField is one key of pre_process or post_process (section), read into
// the Hook that of returns.
func hookField(section, key string, of func(*Service) **Hook) *field {
	hook := func(s *Service) *Hook {
		h := of(s)
		if *h == nil {
			*h = &Hook{}
		}
		return *h
	}
	f := &field{path: section + "." + key, kind: kString}
	switch key {
	case "processor_path":
		f.set = func(s *Service, _ string, v any) { hook(s).Path = str(v) }
	case "processor_type":
		f.enum = []string{"cpp", "python"}
		f.set = func(s *Service, _ string, v any) { hook(s).Type = str(v) }
	case "processor_entry":
		f.set = func(s *Service, _ string, v any) { hook(s).Entry = str(v) }
	case "model_config":
		f.kind = kConfig
		f.set = func(s *Service, _ string, v any) { hook(s).Config = raw(v) }
	}
	return f
}
func autoscaler(s *Service) *Autoscaler {
	if s.Autoscaler == nil {
		s.Autoscaler = &Autoscaler{}
	}
	return s.Autoscaler
}

// fields is every key of docs/service-json.md plus the batching keys of
// our scheduler (preferred_batch_sizes, batcher, pad_value, buckets).
//
// The limits are ours, chosen to catch typos and unit mistakes rather than to
// forbid real deployments: instance 1..1000; cpu 0..1024 cores; memory
// 0..4194304 MB (4 TiB); gpu 0..64; gpu_memory 0..1024 GB;
// gpu_core_percentage 0..100; termination_grace_period 0..3600 s;
// max_batch_size 1..1024; max_batch_timeout 0..60000 ms; keepalive
// 1..600000 ms (10 min); worker_threads and io_threads 1..1024;
// max_queue_size 1..1000000; rate_limit 0..1000000 QPS; autoscaler min and
// max 1..1000; autoscaler stabilizationWindowSeconds 0..3600 (autoscaling/v2's
// limit); at most 16 scaleStrategies, whose metrics and thresholds (and those
// of strategies) autoscaler.go checks; buckets 1..1048576 each, at most 256
// of them.
var fields = []*field{
	{path: "name", kind: kString, hint: `e.g. "my_service"`, set: func(s *Service, _ string, v any) { s.Name = str(v) }},
	{path: "processor", kind: kString, hint: `a built-in code such as "pmml"`, set: func(s *Service, _ string, v any) { s.Processor = str(v) }},
	{path: "model_path", kind: kString, set: func(s *Service, _ string, v any) { s.ModelPath = str(v) }},
	{path: "model_entry", kind: kString, set: func(s *Service, _ string, v any) { s.ModelEntry = str(v) }},
	{path: "model_config", kind: kConfig, set: func(s *Service, _ string, v any) { s.ModelConfig = raw(v) }},
	{path: "oss_endpoint", kind: kString, set: func(s *Service, _ string, v any) { s.OSSEndpoint = str(v) }},
	{path: "token", kind: kString, set: func(s *Service, _ string, v any) { s.Token = NewSecret(str(v)) }},
	{path: "generate_token", kind: kBool, set: func(s *Service, _ string, v any) { s.GenerateToken = boolean(v) }},
	{path: "processor_path", kind: kString, set: func(s *Service, _ string, v any) { s.ProcessorPath = str(v) }},
	{path: "processor_entry", kind: kString, set: func(s *Service, _ string, v any) { s.ProcessorEntry = str(v) }},
	{path: "processor_type", kind: kString, enum: []string{"cpp", "java", "python"},
		set: func(s *Service, _ string, v any) { s.ProcessorType = str(v) }},
	{path: "processor_mainclass", kind: kString, set: func(s *Service, _ string, v any) { s.ProcessorMainClass = str(v) }},
	{path: "processor_params", kind: kStrings, set: func(s *Service, _ string, v any) { s.ProcessorParams = v.([]string) }},
	{path: "warm_up_data_path", kind: kString, set: func(s *Service, _ string, v any) { s.WarmUpDataPath = str(v) }},
	hookField("pre_process", "processor_path", func(s *Service) **Hook { return &s.PreProcess }),
	hookField("pre_process", "processor_type", func(s *Service) **Hook { return &s.PreProcess }),
	hookField("pre_process", "processor_entry", func(s *Service) **Hook { return &s.PreProcess }),
	hookField("pre_process", "model_config", func(s *Service) **Hook { return &s.PreProcess }),
	hookField("post_process", "processor_path", func(s *Service) **Hook { return &s.PostProcess }),
	hookField("post_process", "processor_type", func(s *Service) **Hook { return &s.PostProcess }),
	hookField("post_process", "processor_entry", func(s *Service) **Hook { return &s.PostProcess }),
	hookField("post_process", "model_config", func(s *Service) **Hook { return &s.PostProcess }),

	{path: "autoscaler.min", kind: kInt, lo: 1, hi: 1000, hint: "the fewest instances the autoscaler keeps",
		set: func(s *Service, _ string, v any) { autoscaler(s).Min = integer(v) }},
	{path: "autoscaler.max", kind: kInt, lo: 1, hi: 1000, hint: "the most instances the autoscaler starts",
		set: func(s *Service, _ string, v any) { autoscaler(s).Max = integer(v) }},
	{path: "autoscaler.strategies", kind: kFloatMap,
		hint: `give thresholds by metric such as {"qps": 10, "cpu": 80} (or a list in autoscaler.scaleStrategies)`,
		set: func(s *Service, k string, v any) {
			autoscaler(s)
			if s.scale.byKey == nil {
				s.scale.byKey = map[string]float64{}
			}
			s.scale.byKey[k] = v.(float64)
		}},
	{path: "autoscaler.scaleStrategies", kind: kObjects, maxLen: 16,
		hint: `give a list such as [{"metricName": "qps", "threshold": 10}, {"metricName": "cpu", "threshold": 80}]`,
		set: func(s *Service, _ string, v any) {
			autoscaler(s)
			s.scale.list = v.([]json.RawMessage)
		}},
	{path: "autoscaler.behavior.scaleUp.stabilizationWindowSeconds", kind: kInt, lo: 0, hi: 3600, unit: "s",
		hint: "seconds the autoscaler looks back before it scales up, e.g. 0",
		set:  func(s *Service, _ string, v any) { d := seconds(v); autoscaler(s).ScaleUpWindow = &d }},
	{path: "autoscaler.behavior.scaleDown.stabilizationWindowSeconds", kind: kInt, lo: 0, hi: 3600, unit: "s",
		hint: "seconds the autoscaler looks back before it scales down, e.g. 300",
		set:  func(s *Service, _ string, v any) { d := seconds(v); autoscaler(s).ScaleDownWindow = &d }},

	{path: "labels", kind: kStringMap, set: func(s *Service, k string, v any) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[k] = str(v)
	}},
	{path: "storage", kind: kObjects, hint: "give a list of mount objects",
		set: func(s *Service, _ string, v any) { s.Storage = v.([]json.RawMessage) }},
	{path: "containers", kind: kObjects, hint: "give a list of container objects",
		set: func(s *Service, _ string, v any) { s.Containers = v.([]json.RawMessage) }},
	{path: "networking", kind: kObject, set: func(s *Service, _ string, v any) { s.Networking = raw(v) }},
	{path: "cloud.computing.instance_type", kind: kString, hint: "give an instance type such as ecs.c6.xlarge or ecs.gn6i-c4g1.xlarge",
		set: func(s *Service, _ string, v any) { s.Cloud.InstanceType = str(v) }},
	{path: "cloud.computing.instances", kind: kArray, set: func(s *Service, _ string, v any) { s.Cloud.Instances = raw(v) }},
	{path: "cloud.networking", kind: kObject, set: func(s *Service, _ string, v any) { s.Cloud.Networking = raw(v) }},
	{path: "runtime.enable_crash_block", kind: kBool, set: func(s *Service, _ string, v any) { s.Runtime.EnableCrashBlock = boolean(v) }},

	{path: "metadata.instance", kind: kInt, lo: 1, hi: 1000, hint: "the number of replicas, e.g. 1",
		set: func(s *Service, _ string, v any) { s.Metadata.Instance = integer(v) }},
	{path: "metadata.cpu", kind: kInt, lo: 0, hi: 1024, hint: "whole CPU cores per instance, e.g. 2",
		set: func(s *Service, _ string, v any) { s.Metadata.CPU = integer(v) }},
	{path: "metadata.memory", kind: kInt, lo: 0, hi: 4194304, unit: "MB", hint: "memory per instance in MB, e.g. 4000",
		set: func(s *Service, _ string, v any) { s.Metadata.Memory = integer(v) }},
	{path: "metadata.gpu", kind: kInt, lo: 0, hi: 64, hint: "whole GPUs per instance; 0 for a CPU service",
		set: func(s *Service, _ string, v any) { s.Metadata.GPU = integer(v) }},
	{path: "metadata.gpu_memory", kind: kInt, lo: 0, hi: 1024, unit: "GB", hint: "GPU memory per instance in GB",
		set: func(s *Service, _ string, v any) { s.Metadata.GPUMemory = integer(v) }},
	{path: "metadata.gpu_core_percentage", kind: kInt, lo: 0, hi: 100, hint: "a percentage of one GPU's cores",
		set: func(s *Service, _ string, v any) { s.Metadata.GPUCorePercentage = integer(v) }},
	{path: "metadata.cuda", kind: kText, set: func(s *Service, _ string, v any) { s.Metadata.CUDA = str(v) }},
	{path: "metadata.resource", kind: kString, set: func(s *Service, _ string, v any) { s.Metadata.Resource = str(v) }},
	{path: "metadata.qos", kind: kString, set: func(s *Service, _ string, v any) { s.Metadata.QoS = str(v) }},
	{path: "metadata.region", kind: kString, set: func(s *Service, _ string, v any) { s.Metadata.Region = str(v) }},
	{path: "metadata.workspace_id", kind: kText, set: func(s *Service, _ string, v any) { s.Metadata.WorkspaceID = str(v) }},
	{path: "metadata.type", kind: kString, enum: []string{"async"}, hint: `"Async" makes an asynchronous service (a queue service in front of the processor); leave it out for a synchronous one`,
		set: func(s *Service, _ string, v any) { s.Metadata.Type = "Async" }},
	{path: "queue.source.max_length", kind: kInt, lo: 1, hi: 100000000, hint: "entries the input queue holds before it refuses puts (429), e.g. 10000",
		set: func(s *Service, _ string, v any) { s.Queue.Source.MaxLength = integer(v) }},
	{path: "queue.sink.max_length", kind: kInt, lo: 1, hi: 100000000, hint: "entries the sink holds; a full sink pauses the workers, e.g. 10000",
		set: func(s *Service, _ string, v any) { s.Queue.Sink.MaxLength = integer(v) }},
	{path: "queue.source.max_payload_size_kb", kind: kInt, lo: 1, hi: 1048576, unit: "KB", hint: "the largest request, e.g. 8192",
		set: func(s *Service, _ string, v any) { s.Queue.Source.MaxPayloadKB = integer(v) }},
	{path: "queue.sink.max_payload_size_kb", kind: kInt, lo: 1, hi: 1048576, unit: "KB", hint: "the largest answer, e.g. 8192",
		set: func(s *Service, _ string, v any) { s.Queue.Sink.MaxPayloadKB = integer(v) }},
	{path: "queue.source.auto_evict", kind: kBool, set: func(s *Service, _ string, v any) { s.Queue.Source.AutoEvict = boolean(v) }},
	{path: "queue.sink.auto_evict", kind: kBool, set: func(s *Service, _ string, v any) { s.Queue.Sink.AutoEvict = boolean(v) }},
	{path: "queue.max_delivery", kind: kInt, lo: 1, hi: 1000, hint: "deliveries of a request before it is dead-lettered to the sink, e.g. 5",
		set: func(s *Service, _ string, v any) { s.Queue.MaxDelivery = integer(v) }},
	{path: "queue.cpu", kind: kInt, lo: 0, hi: 1024, set: func(*Service, string, any) {}},
	{path: "queue.memory", kind: kInt, lo: 0, hi: 4194304, set: func(*Service, string, any) {}},
	{path: "queue.min_replica", kind: kInt, lo: 0, hi: 1000, set: func(*Service, string, any) {}},
	{path: "queue.resource", kind: kString, set: func(*Service, string, any) {}},
	{path: "metadata.enable_grpc", kind: kBool, set: func(s *Service, _ string, v any) { s.Metadata.EnableGRPC = boolean(v) }},
	{path: "metadata.eas.termination_grace_period", kind: kInt, lo: 0, hi: 3600, unit: "s", hint: "seconds a stopping instance may drain, e.g. 30",
		set: func(s *Service, _ string, v any) {
			s.Metadata.TerminationGracePeriod = time.Duration(integer(v)) * time.Second
		}},
	{path: "metadata.rolling_strategy.max_surge", kind: kIntOrPercent, lo: 0, hi: 1000,
		set: func(s *Service, _ string, v any) { p := v.(IntOrPercent); s.Metadata.RollingStrategy.MaxSurge = &p }},
	{path: "metadata.rolling_strategy.max_unavailable", kind: kIntOrPercent, lo: 0, hi: 1000,
		set: func(s *Service, _ string, v any) {
			p := v.(IntOrPercent)
			s.Metadata.RollingStrategy.MaxUnavailable = &p
		}},

	{path: "metadata.rpc.batching", kind: kBool, set: func(s *Service, _ string, v any) { s.Metadata.RPC.Batching = boolean(v) }},
	{path: "metadata.rpc.max_batch_size", kind: kInt, lo: 1, hi: 1024, hint: "the largest batch the model takes, e.g. 16",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.MaxBatchSize = integer(v) }},
	{path: "metadata.rpc.max_batch_timeout", kind: kInt, lo: 0, hi: 60000, unit: "ms", hint: "milliseconds a request may wait for a batch to fill, e.g. 50",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.MaxBatchTimeout = ms(v) }},
	{path: "metadata.rpc.keepalive", kind: kInt, lo: 1, hi: 600000, unit: "ms", hint: "the per-request deadline in milliseconds, e.g. 5000",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.Keepalive, s.Metadata.RPC.KeepaliveSet = ms(v), true }},
	{path: "metadata.rpc.worker_threads", kind: kInt, lo: 1, hi: 1024, hint: "concurrent executions per instance, e.g. 5",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.WorkerThreads = integer(v) }},
	{path: "metadata.rpc.io_threads", kind: kInt, lo: 1, hi: 1024, hint: "e.g. 4",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.IOThreads = integer(v) }},
	{path: "metadata.rpc.max_queue_size", kind: kInt, lo: 1, hi: 1000000, hint: "requests queued per instance before 450, e.g. 64",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.MaxQueueSize = integer(v) }},
	{path: "metadata.rpc.rate_limit", kind: kInt, lo: 0, hi: 1000000, hint: "requests per second per instance before 429, 0 for no limit",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.RateLimit = integer(v) }},
	{path: "metadata.rpc.decompressor", kind: kString, enum: []string{"none", "zlib", "gzip", "snappy", "zstd", "lz4"},
		set: func(s *Service, _ string, v any) {
			if d := str(v); d != "none" {
				s.Metadata.RPC.Decompressor = d
			}
		}},
	{path: "metadata.rpc.enable_sigterm", kind: kBool, set: func(s *Service, _ string, v any) { s.Metadata.RPC.EnableSigterm = boolean(v) }},
	{path: "metadata.rpc.enable_jemalloc", kind: kBool, set: func(s *Service, _ string, v any) { s.Metadata.RPC.EnableJemalloc = boolean(v) }},
	{path: "metadata.rpc.preferred_batch_sizes", kind: kInts, lo: 1, hi: 1024, hint: "give ascending batch sizes such as [4, 8, 16]",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.PreferredBatchSizes = v.([]int) }},
	{path: "metadata.rpc.batcher", kind: kString, enum: []string{"concat", "pad", "bucket"},
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.Batcher = str(v) }},
	{path: "metadata.rpc.pad_value", kind: kFloat, hint: "the number to pad with, e.g. 0",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.PadValue = v.(float64) }},
	{path: "metadata.rpc.buckets", kind: kInts, lo: 1, hi: 1 << 20, maxLen: 256, hint: "give ascending sequence-length bounds such as [32, 64, 128]",
		set: func(s *Service, _ string, v any) { s.Metadata.RPC.Buckets = v.([]int) }},
}

// unsupported are EAS keys this server knows of but cannot honour, with why
// and what to do instead: an edit-distance suggestion would mislead there.
var unsupported = map[string]string{
	"autoscaler.behavior.onZero": "is EAS's scale to zero, which this server does not support (autoscaler.min is at least 1); remove it",
}

// openNamespaces are sections where keys this package does not know are
// kept (in Cloud.Extra) instead of rejected: EAS grows its cloud section
// faster than we follow. A key there that is a near miss of a known key is
// still rejected as a typo.
var openNamespaces = map[string]bool{"cloud": true, "cloud.computing": true}

var (
	fieldIndex = map[string]*field{}
	namespaces = map[string]bool{"": true}
	// allPaths is every known path, leaf or section, sorted, for suggestions.
	allPaths []string
)

func init() {
	seen := map[string]bool{}
	for _, f := range fields {
		fieldIndex[f.path] = f
		seen[f.path] = true
		for i := range len(f.path) {
			if f.path[i] == '.' {
				namespaces[f.path[:i]] = true
				seen[f.path[:i]] = true
			}
		}
	}
	for p := range seen {
		allPaths = append(allPaths, p)
	}
	slices.Sort(allPaths)
}

// KnownKeys lists the canonical dotted path of every key Parse reads, sorted.
func KnownKeys() []string {
	keys := make([]string, 0, len(fields))
	for _, f := range fields {
		keys = append(keys, f.path)
	}
	slices.Sort(keys)
	return keys
}

// jsonKind names the kind of a JSON value by its first byte.
func jsonKind(v []byte) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// show renders a JSON value for a message: scalars as written (cut to 60
// characters), objects and lists by their kind.
func show(v []byte) string {
	switch k := jsonKind(v); k {
	case "object":
		return "an object"
	case "list":
		return "a list"
	}
	s := string(bytes.TrimSpace(v))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// withHint joins what is wrong and how to fix it.
func (f *field) withHint(msg string) string {
	if f.hint == "" {
		return msg
	}
	return msg + "; " + f.hint
}

// scalarText returns the text of a JSON number or the contents of a JSON
// string, and whether v was a string.
func scalarText(v []byte) (text string, quoted, ok bool) {
	switch jsonKind(v) {
	case "number":
		return string(bytes.TrimSpace(v)), false, true
	case "string":
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false, false
		}
		return s, true, true
	}
	return "", false, false
}

// parseInt reads an integer from JSON number text or a string; 5.0 and 1e3
// are integers, 5.5 is not.
func parseInt(text string) (int64, bool) {
	text = strings.TrimSpace(text)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, true
	}
	x, err := strconv.ParseFloat(text, 64)
	if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return 0, false
	}
	return int64(x), true
}

func parseFloat(text string) (float64, bool) {
	x, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, false
	}
	return x, true
}

// inRange checks x against the field's limits and returns the problem, if any.
func (f *field) inRange(x float64, what string) string {
	if !f.ranged() || (x >= f.lo && x <= f.hi) {
		return ""
	}
	unit := ""
	if f.unit != "" {
		unit = " " + f.unit
	}
	if f.hi == math.MaxFloat64 {
		return f.withHint(fmt.Sprintf("%s at least %s%s, got %s", what, num(f.lo), unit, num(x)))
	}
	return f.withHint(fmt.Sprintf("%s between %s and %s%s, got %s", what, num(f.lo), num(f.hi), unit, num(x)))
}

// convert reads a JSON value for the field. It returns the typed value or a
// message saying what is wrong and how to fix it.
func (f *field) convert(v json.RawMessage) (any, string) {
	switch f.kind {
	case kString, kText:
		text, quoted, ok := scalarText(v)
		if !ok || (!quoted && f.kind == kString) {
			return nil, f.withHint("must be a string, got " + show(v))
		}
		if f.enum != nil {
			lower := strings.ToLower(strings.TrimSpace(text))
			if !slices.Contains(f.enum, lower) {
				return nil, fmt.Sprintf("must be one of %s, got %s", strings.Join(f.enum, ", "), show(v))
			}
			text = lower
		}
		return text, ""
	case kBool:
		if b, ok := parseBool(v); ok {
			return b, ""
		}
		return nil, fmt.Sprintf("must be true or false, got %s; write true or false (\"true\" and 1 also work)", show(v))
	case kInt:
		text, _, ok := scalarText(v)
		n, isInt := parseInt(text)
		if !ok || !isInt {
			unit := ""
			if f.unit != "" {
				unit = " (" + f.unit + ")"
			}
			return nil, f.withHint("must be a whole number" + unit + ", got " + show(v))
		}
		if p := f.inRange(float64(n), "must be"); p != "" {
			return nil, p
		}
		return int(n), ""
	case kFloat:
		text, _, ok := scalarText(v)
		x, isNum := parseFloat(text)
		if !ok || !isNum {
			return nil, f.withHint("must be a number, got " + show(v))
		}
		if p := f.inRange(x, "must be"); p != "" {
			return nil, p
		}
		return x, ""
	case kIntOrPercent:
		text, _, ok := scalarText(v)
		if ok {
			t := strings.TrimSpace(text)
			if p, found := strings.CutSuffix(t, "%"); found {
				if n, isInt := parseInt(p); isInt && n >= 0 && n <= 100 {
					return IntOrPercent{Value: int(n), Percent: true}, ""
				}
				return nil, "a percentage must be between 0% and 100%, got " + show(v)
			}
			if n, isInt := parseInt(t); isInt {
				if p := f.inRange(float64(n), "must be"); p != "" {
					return nil, p
				}
				return IntOrPercent{Value: int(n)}, ""
			}
		}
		return nil, "must be a whole number of instances (2) or a percentage (\"25%\"), got " + show(v)
	case kStrings:
		elems, p := f.list(v)
		if p != "" {
			return nil, p
		}
		out := make([]string, 0, len(elems))
		for i, e := range elems {
			text, quoted, ok := scalarText(e)
			if !ok || !quoted {
				return nil, fmt.Sprintf("element %d must be a string, got %s", i, show(e))
			}
			out = append(out, text)
		}
		return out, ""
	case kInts:
		elems, p := f.list(v)
		if p != "" {
			return nil, p
		}
		out := make([]int, 0, len(elems))
		for i, e := range elems {
			text, _, ok := scalarText(e)
			n, isInt := parseInt(text)
			if !ok || !isInt {
				return nil, f.withHint(fmt.Sprintf("element %d must be a whole number, got %s", i, show(e)))
			}
			if p := f.inRange(float64(n), fmt.Sprintf("element %d must be", i)); p != "" {
				return nil, p
			}
			out = append(out, int(n))
		}
		return out, ""
	case kObject:
		if jsonKind(v) != "object" {
			return nil, f.withHint("must be a JSON object, got " + show(v))
		}
		return compactCopy(v), ""
	case kArray:
		if jsonKind(v) != "list" {
			return nil, f.withHint("must be a JSON list, got " + show(v))
		}
		return compactCopy(v), ""
	case kObjects:
		elems, p := f.list(v)
		if p != "" {
			return nil, p
		}
		out := make([]json.RawMessage, 0, len(elems))
		for i, e := range elems {
			if jsonKind(e) != "object" {
				return nil, f.withHint(fmt.Sprintf("element %d must be a JSON object, got %s", i, show(e)))
			}
			out = append(out, compactCopy(e))
		}
		return out, ""
	case kConfig:
		if k := jsonKind(v); k != "object" && k != "string" {
			return nil, "must be a JSON object or a string, got " + show(v) + `; e.g. {"threshold": 0.5} or "{\"threshold\": 0.5}"`
		}
		return compactCopy(v), ""
	}
	return nil, "internal error: no reader for this key"
}

// convertEntry reads one value of a map key (labels.x, autoscaler.strategies.qps).
func (f *field) convertEntry(v json.RawMessage) (any, string) {
	switch f.kind {
	case kStringMap:
		if jsonKind(v) == "boolean" {
			b, _ := parseBool(v)
			return strconv.FormatBool(b), ""
		}
		if text, _, ok := scalarText(v); ok {
			return text, ""
		}
		return nil, "must be a string, got " + show(v)
	case kFloatMap:
		text, _, ok := scalarText(v)
		x, isNum := parseFloat(text)
		if !ok || !isNum {
			return nil, f.withHint("must be a number, got " + show(v))
		}
		if p := f.inRange(x, "must be"); p != "" {
			return nil, p
		}
		return x, ""
	}
	return nil, "internal error: not a map key"
}

// list splits a JSON list into its elements.
func (f *field) list(v json.RawMessage) ([]json.RawMessage, string) {
	if jsonKind(v) != "list" {
		return nil, f.withHint("must be a JSON list, got " + show(v))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		return nil, "must be a JSON list: " + err.Error()
	}
	limit := f.maxLen
	if limit == 0 {
		limit = 1024
	}
	if len(elems) > limit {
		return nil, fmt.Sprintf("must have at most %d elements, got %d", limit, len(elems))
	}
	return elems, ""
}

func parseBool(v []byte) (bool, bool) {
	switch jsonKind(v) {
	case "boolean":
		return bytes.HasPrefix(bytes.TrimSpace(v), []byte("true")), true
	case "number", "string":
		text, _, _ := scalarText(v)
		switch strings.ToLower(strings.TrimSpace(text)) {
		case "true", "1":
			return true, true
		case "false", "0":
			return false, true
		}
	}
	return false, false
}

// compactCopy returns v without insignificant white space, in a buffer of
// its own so that the Service does not pin the caller's input.
func compactCopy(v []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return append(json.RawMessage(nil), v...)
	}
	return b.Bytes()
}
