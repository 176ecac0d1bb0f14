package triton

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/eas-server/eas-server/processors/triton/pbtxt"
	"github.com/eas-server/eas-server/tensor"
)

// ModelConfig is the part of Triton's ModelConfig (config.pbtxt) that
// decides how a model is served here.
type ModelConfig struct {
	Name                 string
	Platform             string // e.g. onnxruntime_onnx
	Backend              string // e.g. onnxruntime, python
	MaxBatchSize         int    // 0: the model has no batch dimension
	Inputs               []IOConfig
	Outputs              []IOConfig
	DynamicBatching      *DynamicBatching // nil: requests run as they come
	InstanceGroups       []InstanceGroup
	VersionPolicy        VersionPolicy
	Warmup               []Warmup
	DefaultModelFilename string
	// Unsupported names a scheduling field we cannot honour
	// (sequence_batching, ensemble_scheduling); "" when none.
	Unsupported string
}

// IOConfig is one input or output. Dims exclude the batch dimension when
// MaxBatchSize > 0; -1 is a variable dimension.
type IOConfig struct {
	Name     string
	DataType string // TYPE_FP32, ...
	DType    tensor.DType
	Dims     []int64
	Optional bool
}

// DynamicBatching holds dynamic_batching.
type DynamicBatching struct {
	PreferredBatchSizes []int
	MaxQueueDelay       time.Duration
	PreserveOrdering    bool
	// MaxQueueSize is default_queue_policy.max_queue_size; 0 = unbounded
	// in Triton, the scheduler's default here.
	MaxQueueSize int
	// QueueTimeout is default_queue_policy.default_timeout_microseconds;
	// 0 = none.
	QueueTimeout time.Duration
}

// InstanceGroup holds one instance_group entry.
type InstanceGroup struct {
	Name  string
	Count int
	Kind  string // KIND_AUTO, KIND_CPU, KIND_GPU, KIND_MODEL
	GPUs  []int
}

// VersionPolicy holds version_policy: Kind is latest, all or specific.
type VersionPolicy struct {
	Kind        string
	NumVersions int
	Versions    []int64
}

// Warmup holds one model_warmup entry.
type Warmup struct {
	Name      string
	BatchSize int
	Count     int
	Inputs    map[string]WarmupInput
}

// WarmupInput is the data of one warm-up input: zeros, random values or a
// file of raw bytes in the model directory's warmup/ folder.
type WarmupInput struct {
	DataType      string
	DType         tensor.DType
	Dims          []int64
	ZeroData      bool
	RandomData    bool
	InputDataFile string
}

// dataTypes maps Triton's TYPE_* names to tensors.
var dataTypes = map[string]tensor.DType{
	"TYPE_BOOL": tensor.Bool, "TYPE_UINT8": tensor.Uint8, "TYPE_UINT16": tensor.Uint16,
	"TYPE_UINT32": tensor.Uint32, "TYPE_UINT64": tensor.Uint64, "TYPE_INT8": tensor.Int8,
	"TYPE_INT16": tensor.Int16, "TYPE_INT32": tensor.Int32, "TYPE_INT64": tensor.Int64,
	"TYPE_FP16": tensor.Float16, "TYPE_BF16": tensor.BFloat16, "TYPE_FP32": tensor.Float32,
	"TYPE_FP64": tensor.Float64, "TYPE_STRING": tensor.String,
}

// ignoredFields are ModelConfig fields that are valid but change nothing
// here (GPU optimisation, response cache, tags ...). They are accepted so a
// repository written for Triton loads unchanged.
var ignoredFields = map[string]bool{
	"optimization": true, "parameters": true, "model_transaction_policy": true,
	"response_cache": true, "cc_model_filenames": true, "metric_tags": true,
	"model_repository_agents": true, "model_operations": true, "runtime": true,
	"batch_input": true, "batch_output": true, "model_metrics": true,
}

// maxDim bounds a configured dimension and maxCount an instance or batch
// count, so absurd configs fail at parse time.
const (
	maxDim   = 1 << 31
	maxCount = 1 << 16
)

// ParseModelConfig reads config.pbtxt. Unknown field names are errors, as in
// Triton, where the text is parsed against the ModelConfig schema; every
// problem found is reported at once.
func ParseModelConfig(data []byte) (*ModelConfig, error) {
	m, err := pbtxt.Parse(data)
	if err != nil {
		return nil, err
	}
	d := &decoder{}
	cfg := &ModelConfig{VersionPolicy: VersionPolicy{Kind: "latest", NumVersions: 1}}
	for _, f := range m.Fields {
		v := f.Value
		switch f.Name {
		case "name":
			cfg.Name = d.str(f.Name, v)
		case "platform":
			cfg.Platform = d.str(f.Name, v)
		case "backend":
			cfg.Backend = d.str(f.Name, v)
		case "default_model_filename":
			cfg.DefaultModelFilename = d.str(f.Name, v)
		case "max_batch_size":
			cfg.MaxBatchSize = d.count(f.Name, v)
		case "input":
			cfg.Inputs = append(cfg.Inputs, d.io("input", v))
		case "output":
			cfg.Outputs = append(cfg.Outputs, d.io("output", v))
		case "dynamic_batching":
			cfg.DynamicBatching = d.dynamicBatching(v)
		case "instance_group":
			cfg.InstanceGroups = append(cfg.InstanceGroups, d.instanceGroup(v))
		case "version_policy":
			cfg.VersionPolicy = d.versionPolicy(v)
		case "model_warmup":
			cfg.Warmup = append(cfg.Warmup, d.warmup(v))
		case "sequence_batching", "ensemble_scheduling":
			d.msg(f.Name, v)
			cfg.Unsupported = f.Name
		default:
			if !ignoredFields[f.Name] {
				d.errf(v.Pos, "unknown field %q in ModelConfig", f.Name)
			}
		}
	}
	if err := errors.Join(d.errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decoder collects every problem instead of stopping at the first.
type decoder struct {
	errs []error
}

func (d *decoder) errf(pos pbtxt.Pos, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("line %s: %s", pos, fmt.Sprintf(format, args...)))
}

func (d *decoder) str(name string, v pbtxt.Value) string {
	if v.Kind != pbtxt.String {
		d.errf(v.Pos, "%s: expected a quoted string, found %s %q", name, v.Kind, v.Text)
		return ""
	}
	return v.Text
}

func (d *decoder) msg(name string, v pbtxt.Value) *pbtxt.Message {
	if v.Kind != pbtxt.Msg {
		d.errf(v.Pos, "%s: expected a message { ... }, found %s %q", name, v.Kind, v.Text)
		return &pbtxt.Message{}
	}
	return v.Msg
}

func (d *decoder) enum(name string, v pbtxt.Value, allowed map[string]bool) string {
	if v.Kind != pbtxt.Ident || !allowed[v.Text] {
		d.errf(v.Pos, "%s: %q is not one of %s", name, v.Text, strings.Join(sortedKeys(allowed), ", "))
		return ""
	}
	return v.Text
}

func (d *decoder) boolean(name string, v pbtxt.Value) bool {
	b, err := v.Bool()
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("%s: %w", name, err))
	}
	return b
}

// count reads a non-negative integer no larger than maxCount.
func (d *decoder) count(name string, v pbtxt.Value) int {
	n, err := v.Int(64)
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("%s: %w", name, err))
		return 0
	}
	if n < 0 || n > maxCount {
		d.errf(v.Pos, "%s: must be between 0 and %d, got %d", name, maxCount, n)
		return 0
	}
	return int(n)
}

func (d *decoder) micros(name string, v pbtxt.Value) time.Duration {
	n, err := v.Uint(64)
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("%s: %w", name, err))
		return 0
	}
	if n > math.MaxInt64/uint64(time.Microsecond) {
		d.errf(v.Pos, "%s: %d microseconds is too long", name, n)
		return 0
	}
	return time.Duration(n) * time.Microsecond
}

func (d *decoder) dim(name string, v pbtxt.Value) int64 {
	n, err := v.Int(64)
	if err != nil {
		d.errs = append(d.errs, fmt.Errorf("%s: %w", name, err))
		return 0
	}
	if n < -1 || n > maxDim {
		d.errf(v.Pos, "%s: a dimension must be -1 (variable) or between 0 and %d, got %d", name, int64(maxDim), n)
	}
	return n
}

func (d *decoder) dataType(name string, v pbtxt.Value) (string, tensor.DType) {
	if v.Kind != pbtxt.Ident {
		d.errf(v.Pos, "%s: expected a TYPE_* name, found %s %q", name, v.Kind, v.Text)
		return "", tensor.Invalid
	}
	dt, ok := dataTypes[v.Text]
	if !ok {
		d.errf(v.Pos, "%s: unknown data type %q; use one of %s", name, v.Text, strings.Join(sortedKeys(dataTypes), ", "))
	}
	return v.Text, dt
}

func (d *decoder) io(kind string, v pbtxt.Value) IOConfig {
	var io IOConfig
	for _, f := range d.msg(kind, v).Fields {
		switch f.Name {
		case "name":
			io.Name = d.str(kind+".name", f.Value)
		case "data_type":
			io.DataType, io.DType = d.dataType(kind+".data_type", f.Value)
		case "dims":
			io.Dims = append(io.Dims, d.dim(kind+".dims", f.Value))
		case "optional":
			io.Optional = d.boolean(kind+".optional", f.Value)
		case "format", "reshape", "is_shape_tensor", "allow_ragged_batch", "label_filename", "is_non_linear_format_io":
			// Layout hints and labels: valid, nothing to do here.
		default:
			d.errf(f.Value.Pos, "unknown field %q in %s", f.Name, kind)
		}
	}
	if io.Name == "" {
		d.errf(v.Pos, "%s: name is required", kind)
	}
	if io.DataType == "" {
		d.errf(v.Pos, "%s %q: data_type is required", kind, io.Name)
	}
	return io
}

func (d *decoder) dynamicBatching(v pbtxt.Value) *DynamicBatching {
	db := &DynamicBatching{}
	for _, f := range d.msg("dynamic_batching", v).Fields {
		switch f.Name {
		case "preferred_batch_size":
			n := d.count("dynamic_batching.preferred_batch_size", f.Value)
			if n < 1 {
				d.errf(f.Value.Pos, "dynamic_batching.preferred_batch_size: must be at least 1, got %d", n)
			}
			db.PreferredBatchSizes = append(db.PreferredBatchSizes, n)
		case "max_queue_delay_microseconds":
			db.MaxQueueDelay = d.micros("dynamic_batching.max_queue_delay_microseconds", f.Value)
		case "preserve_ordering":
			db.PreserveOrdering = d.boolean("dynamic_batching.preserve_ordering", f.Value)
		case "default_queue_policy":
			for _, q := range d.msg("default_queue_policy", f.Value).Fields {
				switch q.Name {
				case "max_queue_size":
					db.MaxQueueSize = d.count("default_queue_policy.max_queue_size", q.Value)
				case "default_timeout_microseconds":
					db.QueueTimeout = d.micros("default_queue_policy.default_timeout_microseconds", q.Value)
				case "timeout_action":
					d.enum("default_queue_policy.timeout_action", q.Value, map[string]bool{"REJECT": true, "DELAY": true})
				case "allow_timeout_override":
					d.boolean("default_queue_policy.allow_timeout_override", q.Value)
				default:
					d.errf(q.Value.Pos, "unknown field %q in default_queue_policy", q.Name)
				}
			}
		case "priority_levels", "default_priority_level", "priority_queue_policy", "default_queue_policy_override":
			// Priorities are not scheduled here; accepted so configs load.
		default:
			d.errf(f.Value.Pos, "unknown field %q in dynamic_batching", f.Name)
		}
	}
	return db
}

var kinds = map[string]bool{"KIND_AUTO": true, "KIND_CPU": true, "KIND_GPU": true, "KIND_MODEL": true}

func (d *decoder) instanceGroup(v pbtxt.Value) InstanceGroup {
	g := InstanceGroup{Count: 1, Kind: "KIND_AUTO"}
	for _, f := range d.msg("instance_group", v).Fields {
		switch f.Name {
		case "name":
			g.Name = d.str("instance_group.name", f.Value)
		case "count":
			g.Count = d.count("instance_group.count", f.Value)
		case "kind":
			g.Kind = d.enum("instance_group.kind", f.Value, kinds)
		case "gpus":
			g.GPUs = append(g.GPUs, d.count("instance_group.gpus", f.Value))
		case "profile", "passive", "host_policy", "rate_limiter", "secondary_devices":
		default:
			d.errf(f.Value.Pos, "unknown field %q in instance_group", f.Name)
		}
	}
	return g
}

func (d *decoder) versionPolicy(v pbtxt.Value) VersionPolicy {
	m := d.msg("version_policy", v)
	if len(m.Fields) != 1 {
		d.errf(v.Pos, "version_policy: set exactly one of latest, all, specific; got %d fields", len(m.Fields))
		return VersionPolicy{Kind: "latest", NumVersions: 1}
	}
	f := m.Fields[0]
	p := VersionPolicy{Kind: f.Name}
	sub := d.msg("version_policy."+f.Name, f.Value)
	switch f.Name {
	case "latest":
		p.NumVersions = 1
		for _, g := range sub.Fields {
			if g.Name != "num_versions" {
				d.errf(g.Value.Pos, "unknown field %q in version_policy.latest", g.Name)
				continue
			}
			p.NumVersions = d.count("version_policy.latest.num_versions", g.Value)
		}
		if p.NumVersions < 1 {
			d.errf(f.Value.Pos, "version_policy.latest.num_versions: must be at least 1, got %d", p.NumVersions)
		}
	case "all":
		for _, g := range sub.Fields {
			d.errf(g.Value.Pos, "unknown field %q in version_policy.all", g.Name)
		}
	case "specific":
		for _, g := range sub.Fields {
			if g.Name != "versions" {
				d.errf(g.Value.Pos, "unknown field %q in version_policy.specific", g.Name)
				continue
			}
			n, err := g.Value.Int(64)
			if err != nil || n < 0 {
				d.errf(g.Value.Pos, "version_policy.specific.versions: expected a version number >= 0, found %q", g.Value.Text)
				continue
			}
			p.Versions = append(p.Versions, n)
		}
		if len(p.Versions) == 0 {
			d.errf(f.Value.Pos, "version_policy.specific: list at least one version")
		}
	default:
		d.errf(f.Value.Pos, "version_policy: unknown policy %q; use latest, all or specific", f.Name)
	}
	return p
}

func (d *decoder) warmup(v pbtxt.Value) Warmup {
	w := Warmup{BatchSize: 1, Count: 1, Inputs: map[string]WarmupInput{}}
	for _, f := range d.msg("model_warmup", v).Fields {
		switch f.Name {
		case "name":
			w.Name = d.str("model_warmup.name", f.Value)
		case "batch_size":
			w.BatchSize = d.count("model_warmup.batch_size", f.Value)
		case "count":
			w.Count = d.count("model_warmup.count", f.Value)
		case "inputs":
			var key string
			var in WarmupInput
			for _, e := range d.msg("model_warmup.inputs", f.Value).Fields {
				switch e.Name {
				case "key":
					key = d.str("model_warmup.inputs.key", e.Value)
				case "value":
					in = d.warmupInput(e.Value)
				default:
					d.errf(e.Value.Pos, "unknown field %q in model_warmup.inputs", e.Name)
				}
			}
			if key == "" {
				d.errf(f.Value.Pos, "model_warmup.inputs: key (the input name) is required")
			}
			w.Inputs[key] = in
		default:
			d.errf(f.Value.Pos, "unknown field %q in model_warmup", f.Name)
		}
	}
	return w
}

func (d *decoder) warmupInput(v pbtxt.Value) WarmupInput {
	var in WarmupInput
	sources := 0
	for _, f := range d.msg("model_warmup.inputs.value", v).Fields {
		switch f.Name {
		case "data_type":
			in.DataType, in.DType = d.dataType("model_warmup.inputs.value.data_type", f.Value)
		case "dims":
			in.Dims = append(in.Dims, d.dim("model_warmup.inputs.value.dims", f.Value))
		case "zero_data":
			in.ZeroData = d.boolean("zero_data", f.Value)
			sources++
		case "random_data":
			in.RandomData = d.boolean("random_data", f.Value)
			sources++
		case "input_data_file":
			in.InputDataFile = d.str("input_data_file", f.Value)
			sources++
		default:
			d.errf(f.Value.Pos, "unknown field %q in model_warmup.inputs.value", f.Name)
		}
	}
	if sources != 1 {
		d.errf(v.Pos, "model_warmup input: set exactly one of zero_data, random_data, input_data_file")
	}
	for _, x := range in.Dims {
		if x < 0 {
			d.errf(v.Pos, "model_warmup input: dims must be fixed (>= 0), got %v", in.Dims)
			break
		}
	}
	return in
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
