package triton

import (
	"strconv"

	"github.com/eas-server/eas-server/processors"
)

// ConfigJSON is a model's configuration as Triton's model configuration
// extension shows it (GET /v2/models/<model>/config): the ModelConfig
// fields in their protobuf names, with what auto-complete filled in and
// the values the model is served with. Fields this processor takes no
// notice of are left out.
type ConfigJSON struct {
	Name                 string              `json:"name"`
	Platform             string              `json:"platform"`
	Backend              string              `json:"backend"`
	VersionPolicy        map[string]any      `json:"version_policy"`
	MaxBatchSize         int                 `json:"max_batch_size"`
	Input                []IOConfigJSON      `json:"input"`
	Output               []IOConfigJSON      `json:"output"`
	DynamicBatching      *DynamicBatchJSON   `json:"dynamic_batching,omitempty"`
	InstanceGroup        []InstanceGroupJSON `json:"instance_group"`
	DefaultModelFilename string              `json:"default_model_filename"`
}

// IOConfigJSON is one input or output; Dims exclude the batch dimension
// when MaxBatchSize > 0.
type IOConfigJSON struct {
	Name     string  `json:"name"`
	DataType string  `json:"data_type"`
	Dims     []int64 `json:"dims"`
	Optional bool    `json:"optional,omitempty"`
}

// DynamicBatchJSON is dynamic_batching.
type DynamicBatchJSON struct {
	PreferredBatchSize        []int           `json:"preferred_batch_size"`
	MaxQueueDelayMicroseconds int64           `json:"max_queue_delay_microseconds"`
	PreserveOrdering          bool            `json:"preserve_ordering"`
	DefaultQueuePolicy        QueuePolicyJSON `json:"default_queue_policy"`
}

// QueuePolicyJSON is dynamic_batching.default_queue_policy.
type QueuePolicyJSON struct {
	MaxQueueSize               int   `json:"max_queue_size"`
	DefaultTimeoutMicroseconds int64 `json:"default_timeout_microseconds"`
}

// InstanceGroupJSON is one instance_group entry, its kind resolved as the
// model runs (KIND_AUTO becomes KIND_CPU or KIND_GPU).
type InstanceGroupJSON struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	GPUs  []int  `json:"gpus"`
}

// configJSON describes cfg, the configuration a version of model name is
// served with (after auto-complete).
func configJSON(name string, cfg *ModelConfig) ConfigJSON {
	io := func(ios []IOConfig) []IOConfigJSON {
		out := make([]IOConfigJSON, len(ios))
		for i, c := range ios {
			dims := c.Dims
			if dims == nil {
				dims = []int64{}
			}
			out[i] = IOConfigJSON{Name: c.Name, DataType: c.DataType, Dims: dims, Optional: c.Optional}
		}
		return out
	}
	out := ConfigJSON{
		Name: name, Platform: onnxPlatform, Backend: onnxBackend,
		MaxBatchSize: cfg.MaxBatchSize, Input: io(cfg.Inputs), Output: io(cfg.Outputs),
		DefaultModelFilename: cfg.DefaultModelFilename,
	}
	if out.DefaultModelFilename == "" {
		out.DefaultModelFilename = "model.onnx"
	}
	switch pol := cfg.VersionPolicy; pol.Kind {
	case "all":
		out.VersionPolicy = map[string]any{"all": map[string]any{}}
	case "specific":
		out.VersionPolicy = map[string]any{"specific": map[string]any{"versions": pol.Versions}}
	default:
		out.VersionPolicy = map[string]any{"latest": map[string]any{"num_versions": max(pol.NumVersions, 1)}}
	}
	if db := cfg.DynamicBatching; db != nil {
		pref := db.PreferredBatchSizes
		if pref == nil {
			pref = []int{}
		}
		out.DynamicBatching = &DynamicBatchJSON{
			PreferredBatchSize:        pref,
			MaxQueueDelayMicroseconds: db.MaxQueueDelay.Microseconds(),
			PreserveOrdering:          db.PreserveOrdering,
			DefaultQueuePolicy:        QueuePolicyJSON{MaxQueueSize: db.MaxQueueSize, DefaultTimeoutMicroseconds: db.QueueTimeout.Microseconds()},
		}
	}
	gpu, _ := gpuPlacement(cfg)
	for i, g := range cfg.InstanceGroups {
		ig := InstanceGroupJSON{Name: g.Name, Kind: g.Kind, Count: g.Count, GPUs: g.GPUs}
		if ig.Name == "" {
			ig.Name = name + "_" + strconv.Itoa(i)
		}
		if ig.Kind == "KIND_AUTO" {
			ig.Kind = "KIND_CPU"
			if gpu {
				ig.Kind = "KIND_GPU"
			}
		}
		if ig.GPUs == nil {
			ig.GPUs = []int{}
		}
		out.InstanceGroup = append(out.InstanceGroup, ig)
	}
	if out.InstanceGroup == nil {
		// One instance runs when the config names none.
		out.InstanceGroup = []InstanceGroupJSON{{Name: name, Kind: "KIND_CPU", Count: 1, GPUs: []int{}}}
	}
	return out
}

// Config implements processors.ConfigReporter.
func (v *version) Config() any { return configJSON(v.name, v.cfg) }

var _ processors.ConfigReporter = (*version)(nil)
