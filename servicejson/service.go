// Package servicejson reads the service.json that describes one EAS service
// (docs/service-json.md): its name, processor, model, resources and the
// rpc settings the scheduler runs by.
//
// Parse is strict, because a typo in a deployment file that is silently
// ignored costs a user far more than an error does: an unknown key is an
// error that names the closest known key, and every problem of a file is
// reported at once, each as "<path>: <what is wrong>; <how to fix>". It is
// also lenient where EAS users have real files that depend on it: keys may be
// nested, dotted or dotted from the top level, and booleans and numbers may
// come as strings.
//
// The package imports nothing of this module, so the server, the CLI and the
// processors can all depend on it.
package servicejson

import (
	"encoding/json"
	"strconv"
	"time"
)

// Service is a parsed and validated service.json with the defaults filled
// in. A Service is a plain value: it is safe to read from many goroutines,
// and nothing in this package mutates it after Parse returns.
type Service struct {
	Name      string // service name: [a-z][a-z0-9_]*, at most 64 characters
	Processor string // built-in processor code as written; "" for a custom processor
	Code      Code   // Processor parsed; the zero Code for a custom processor

	ModelPath  string // oss://bucket/key, http(s)://..., file://... or a local path
	ModelEntry string // entry file inside the model package
	// ModelConfig is model_config exactly as given: either a JSON object or a
	// JSON string literal (quotes included). This is what processors.Spec
	// carries; ModelConfigBytes unwraps the string form.
	ModelConfig   json.RawMessage
	OSSEndpoint   string
	Token         Secret // "" when none was given
	GenerateToken bool

	ProcessorPath      string // custom processor package
	ProcessorEntry     string
	ProcessorType      string // cpp, java or python; set only with ProcessorPath
	ProcessorMainClass string
	ProcessorParams    []string // extra flags for the processor (Triton flags)
	WarmUpDataPath     string
	// PreProcess and PostProcess are custom processors run around a
	// built-in one, in the same request: PreProcess turns the request body
	// into the body the built-in processor decodes, PostProcess turns its
	// response body into the answer. Nil when not given.
	PreProcess, PostProcess *Hook

	Autoscaler *Autoscaler // nil when service.json has no autoscaler
	Labels     map[string]string
	Storage    []json.RawMessage // mount objects, kept as given
	Cloud      Cloud
	Containers []json.RawMessage // container objects, kept as given
	Networking json.RawMessage   // kept as given; nil when absent
	Runtime    Runtime
	Metadata   Metadata
	// Queue is the queue section of an asynchronous service
	// (metadata.type "Async"), defaults filled in.
	Queue Queue

	// Raw is the document as Parse received it (less a UTF-8 byte order
	// mark), so that the server persists exactly what the user wrote,
	// token included.
	Raw []byte

	given map[string]bool
	// scale holds the autoscaler strategies as read, until validate checks
	// them and fills Autoscaler.Strategies; Parse clears it.
	scale scaleInput
}

// ProcessorName names the processor for messages and listings: the
// built-in code, or "custom <type>" for a processor_path.
func (s *Service) ProcessorName() string {
	if s.Processor == "" && s.ProcessorType != "" {
		return "custom " + s.ProcessorType
	}
	return s.Processor
}

// IsAsync reports whether the service is asynchronous (metadata.type
// "Async").
func (s *Service) IsAsync() bool { return s.Metadata.Type == "Async" }

// Queue is the queue section: the input queue (source), the sink and the
// redelivery limit.
type Queue struct {
	Source, Sink QueueLimits
	MaxDelivery  int // deliveries of a request before it is dead-lettered; default 5
}

// QueueLimits bound one queue.
type QueueLimits struct {
	MaxLength    int  // entries; default 10000
	MaxPayloadKB int  // KB of one entry; default 8192
	AutoEvict    bool // a full queue drops its oldest entry instead of refusing
}

// Hook is pre_process or post_process: a custom processor's package, type
// (cpp or python), entry and model_config.
type Hook struct {
	Path   string
	Type   string
	Entry  string
	Config json.RawMessage // as given (an object or a string); nil when absent
}

// Metadata is the metadata section: replicas, resources and rpc settings.
// Zero means unset for the resource counts.
type Metadata struct {
	Instance          int // replicas; required, 1..1000
	CPU               int // cores per instance
	Memory            int // MB per instance
	GPU               int // whole GPUs per instance
	GPUMemory         int // GB of GPU memory per instance (shared GPU)
	GPUCorePercentage int // percent of a GPU's cores per instance (shared GPU)
	CUDA              string
	Resource          string // resource group
	QoS               string
	Region            string
	WorkspaceID       string
	// Type is "Async" for an asynchronous service (requests go through
	// its input queue, answers to its sink); "" for a synchronous one.
	Type       string
	EnableGRPC bool
	// TerminationGracePeriod is metadata.eas.termination_grace_period: how
	// long a stopping instance may drain. Default 30s.
	TerminationGracePeriod time.Duration
	RollingStrategy        RollingStrategy
	RPC                    RPC
}

// RPC is metadata.rpc: how the scheduler admits, batches and times out
// requests. Parse fills every field with its default when absent.
type RPC struct {
	Batching        bool          // default false
	MaxBatchSize    int           // default 16, 1..1024
	MaxBatchTimeout time.Duration // default 50ms; the oldest request's longest wait for a batch
	Keepalive       time.Duration // default 5s; per-request deadline from arrival, then 408
	// KeepaliveSet says keepalive was written in service.json: a generative
	// service (llm_*) has a deadline only then, since the default would cut
	// most streams (docs/generation.md).
	KeepaliveSet   bool
	WorkerThreads  int    // default 5; concurrent executions per instance
	IOThreads      int    // default 4
	MaxQueueSize   int    // default 64; a full queue answers 450
	RateLimit      int    // QPS per instance, then 429; default 0 = off
	Decompressor   string // "" (none), zlib, gzip, snappy, zstd or lz4
	EnableSigterm  bool
	EnableJemalloc bool // accepted for compatibility; no effect here
	// PreferredBatchSizes are batch sizes the batcher aims for (ascending,
	// each at most MaxBatchSize); nil means any size.
	PreferredBatchSizes []int
	Batcher             string  // concat (default), pad or bucket
	PadValue            float64 // the value pad and bucket batchers pad with; default 0
	// Buckets are ascending sequence-length bounds for the bucket batcher;
	// required with Batcher "bucket", rejected with the others.
	Buckets []int
}

// RollingStrategy is metadata.rolling_strategy. Nil fields were not given.
type RollingStrategy struct {
	MaxSurge       *IntOrPercent
	MaxUnavailable *IntOrPercent
}

// IntOrPercent is a count of instances ("2") or a share of them ("25%").
type IntOrPercent struct {
	Value   int
	Percent bool // Value is a percentage 0..100
}

// String writes the value as service.json would: 2 or 25%.
func (v IntOrPercent) String() string {
	if v.Percent {
		return strconv.Itoa(v.Value) + "%"
	}
	return strconv.Itoa(v.Value)
}

// Autoscaler is the autoscaler section. serve does not autoscale; the
// Kubernetes backend turns it into an autoscaling/v2 HorizontalPodAutoscaler.
// metadata.instance, which Parse checks lies in [Min, Max], is the starting
// count.
type Autoscaler struct {
	Min int // 1..1000
	Max int // 1..1000, at least Min
	// Strategies are the metrics to scale on, from autoscaler.scaleStrategies
	// ([{"metricName": "qps", "threshold": 10}]) or the older
	// autoscaler.strategies ({"qps": 10}), which mean the same: sorted by
	// Metric, at most one per metric. Nil when the file gives none.
	Strategies []ScaleStrategy
	// ScaleUpWindow and ScaleDownWindow are
	// autoscaler.behavior.scaleUp.stabilizationWindowSeconds and
	// .scaleDown.stabilizationWindowSeconds: whole seconds, 0..3600 (the
	// limit of autoscaling/v2). Nil when not given, so that the HPA's own
	// defaults (0 up, 300 s down) apply.
	ScaleUpWindow   *time.Duration
	ScaleDownWindow *time.Duration
}

// ScaleStrategy is one metric the autoscaler scales on.
type ScaleStrategy struct {
	Metric string // MetricQPS or MetricCPU
	// Threshold is the target per instance: for qps the requests per second
	// each instance should take (> 0, not necessarily whole); for cpu the
	// average use in percent of the requested CPU, a whole number 1..100.
	Threshold float64
}

// The metrics this server scales on. EAS knows more (gpu, rt, ...); Parse
// refuses those.
const (
	MetricCPU = "cpu"
	MetricQPS = "qps"
)

// Strategy returns the threshold of metric and whether the autoscaler
// scales on it.
func (a *Autoscaler) Strategy(metric string) (float64, bool) {
	for _, st := range a.Strategies {
		if st.Metric == metric {
			return st.Threshold, true
		}
	}
	return 0, false
}

// Cloud is the cloud section. Only the instance type is read by this server;
// the rest is kept for a cloud backend.
type Cloud struct {
	InstanceType string          // cloud.computing.instance_type, e.g. ecs.gn6i-c4g1.xlarge
	Instances    json.RawMessage // cloud.computing.instances, kept as given
	Networking   json.RawMessage // cloud.networking, kept as given
	// Extra holds other keys under cloud and cloud.computing (EAS adds new
	// ones over time), by their path below cloud, e.g. "computing.foo".
	Extra map[string]json.RawMessage
}

// Runtime is the runtime section.
type Runtime struct {
	EnableCrashBlock bool
}

// Default values of metadata. They live here and nowhere else: the scheduler
// and the docs read these constants.
const (
	DefaultMaxBatchSize           = 16
	DefaultMaxBatchTimeout        = 50 * time.Millisecond
	DefaultKeepalive              = 5000 * time.Millisecond
	DefaultWorkerThreads          = 5
	DefaultIOThreads              = 4
	DefaultMaxQueueSize           = 64
	DefaultBatcher                = "concat"
	DefaultTerminationGracePeriod = 30 * time.Second
	DefaultQueueLength            = 10000
	DefaultQueuePayloadKB         = 8192
	DefaultMaxDelivery            = 5
)

// applyDefaults sets every default. Parse calls it before it applies the
// keys of the document, so a value given explicitly (even 0) always wins.
func (s *Service) applyDefaults() {
	s.Metadata.TerminationGracePeriod = DefaultTerminationGracePeriod
	s.Queue = Queue{
		Source:      QueueLimits{MaxLength: DefaultQueueLength, MaxPayloadKB: DefaultQueuePayloadKB},
		Sink:        QueueLimits{MaxLength: DefaultQueueLength, MaxPayloadKB: DefaultQueuePayloadKB},
		MaxDelivery: DefaultMaxDelivery,
	}
	s.Metadata.RPC = RPC{
		MaxBatchSize:    DefaultMaxBatchSize,
		MaxBatchTimeout: DefaultMaxBatchTimeout,
		Keepalive:       DefaultKeepalive,
		WorkerThreads:   DefaultWorkerThreads,
		IOThreads:       DefaultIOThreads,
		MaxQueueSize:    DefaultMaxQueueSize,
		Batcher:         DefaultBatcher,
	}
}

// IsSet reports whether the document gave the key at the canonical dotted
// path (in any spelling), as opposed to it holding its default. For map keys
// (labels, autoscaler.strategies) it answers for the map as a whole.
func (s *Service) IsSet(path string) bool { return s.given[path] }

// UsesGPU reports whether the service asks for a GPU: whole GPUs, a share of
// GPU memory, or a GPU instance type.
func (s *Service) UsesGPU() bool {
	return s.Metadata.GPU > 0 || s.Metadata.GPUMemory > 0 || IsGPUInstanceType(s.Cloud.InstanceType)
}

// ModelConfigBytes returns model_config as the bytes a processor decodes: the
// contents of the string when model_config was a JSON string, the object's
// JSON text when it was an object, and nil when it was absent.
func (s *Service) ModelConfigBytes() []byte { return configBytes(s.ModelConfig) }

// ConfigBytes is the hook's model_config as ModelConfigBytes reads the
// service's.
func (h *Hook) ConfigBytes() []byte { return configBytes(h.Config) }

// configBytes unwraps a model_config given as a JSON string.
func configBytes(c json.RawMessage) []byte {
	if len(c) == 0 {
		return nil
	}
	if c[0] == '"' {
		var str string
		if json.Unmarshal(c, &str) == nil {
			return []byte(str)
		}
	}
	return c
}
