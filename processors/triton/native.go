package triton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
)

// onnxPlatform and onnxBackend are the ways a config.pbtxt names the ONNX
// Runtime backend; they are the only models served natively.
const (
	onnxPlatform = "onnxruntime_onnx"
	onnxBackend  = "onnxruntime"
)

// knownBackends maps the platforms and backends Triton has to what a user
// should do with them here.
var knownBackends = map[string]bool{
	"tensorrt_plan": true, "tensorrt": true, "tensorflow_graphdef": true, "tensorflow_savedmodel": true,
	"tensorflow": true, "pytorch_libtorch": true, "pytorch": true, "python": true, "openvino": true,
	"dali": true, "fil": true, "ensemble": true, "vllm": true, "tensorrtllm": true,
}

// version is one loaded version of a repository model: its own ONNX
// session and its own scheduler, sized by config.pbtxt.
type version struct {
	name    string
	version string
	cfg     *ModelConfig
	entry   *entry // the model this version belongs to
	rt      *onnx.Model
	sched   *scheduler.Scheduler // runs *onnx.Payload, made by rt.FromTensors
	meta    processors.Metadata
	stats   *stats
}

// entry is one model directory of the repository with the versions served.
type entry struct {
	name     string
	dir      string
	cfg      *ModelConfig
	versions map[string]*version
	order    []string // version numbers served, ascending
	state    string   // READY, UNAVAILABLE, UNLOADED
	reason   string   // why it is not READY
}

func (e *entry) latest() *version {
	if len(e.order) == 0 {
		return nil
	}
	return e.versions[e.order[len(e.order)-1]]
}

// loadEntry reads one model directory, checks it can be served here and
// loads the selected versions. On error nothing stays open.
func (p *Processor) loadEntry(ctx context.Context, name, dir string) (*entry, error) {
	cfg, err := p.readConfig(name, dir)
	if err != nil {
		return nil, err
	}
	if err := p.checkServable(cfg); err != nil {
		return nil, err
	}
	nums, err := selectVersions(dir, cfg.VersionPolicy)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", name, err)
	}
	e := &entry{name: name, dir: dir, cfg: cfg, versions: map[string]*version{}, state: "READY"}
	for _, n := range nums {
		v, err := p.loadVersion(ctx, e, strconv.FormatInt(n, 10))
		if err != nil {
			e.close(p.log)
			return nil, err
		}
		e.versions[v.version] = v
		e.order = append(e.order, v.version)
	}
	return e, nil
}

// maxConfigBytes bounds config.pbtxt: a model configuration is a few KB.
const maxConfigBytes = 16 << 20

// maxWarmupFileBytes bounds a model_warmup input_data_file: more than the
// largest warm-up tensor (1<<26 elements of 8 bytes).
const maxWarmupFileBytes = 1 << 30

// readConfig parses <dir>/config.pbtxt; without one (and without
// --strict-model-config) the model's own inputs and outputs are used, as
// Triton's auto-complete does for ONNX models.
func (p *Processor) readConfig(name, dir string) (*ModelConfig, error) {
	// Only a regular file is read (a FIFO would block the load), and no
	// more of it than any model configuration needs.
	data, err := processors.ReadModel(context.Background(), filepath.Join(dir, "config.pbtxt"), maxConfigBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if p.params.StrictConfig {
			return nil, fmt.Errorf("model %q: %s/config.pbtxt is missing and --strict-model-config is set; write one or drop the flag to auto-complete it from the ONNX model", name, name)
		}
		return &ModelConfig{Name: name, Platform: onnxPlatform, VersionPolicy: VersionPolicy{Kind: "latest", NumVersions: 1}}, nil
	case err != nil:
		return nil, fmt.Errorf("model %q: %w", name, err)
	}
	cfg, err := ParseModelConfig(data)
	if err != nil {
		return nil, fmt.Errorf("model %q: %s/config.pbtxt: %w", name, name, err)
	}
	if cfg.Name == "" {
		cfg.Name = name
	}
	if cfg.Name != name {
		// Triton's rule: the name in the config is the directory's.
		return nil, fmt.Errorf("model %q: config.pbtxt names the model %q; the name must match its directory %q", name, cfg.Name, name)
	}
	return cfg, nil
}

// checkServable refuses what we cannot run, by name, before any load.
func (p *Processor) checkServable(cfg *ModelConfig) error {
	backend := cfg.Backend
	if backend == "" {
		backend = cfg.Platform
	}
	switch {
	case backend == "" || backend == onnxPlatform || backend == onnxBackend:
	case knownBackends[backend]:
		return fmt.Errorf("model %q: backend %q cannot be served natively here (only %s / %s models are); run the repository on Triton and proxy to it with processor_params --url=http://<triton-host>:8000, or export the model to ONNX", cfg.Name, backend, onnxBackend, onnxPlatform)
	default:
		return fmt.Errorf("model %q: unknown backend or platform %q; this server runs %s (platform %s) models", cfg.Name, backend, onnxBackend, onnxPlatform)
	}
	if cfg.Unsupported != "" {
		return fmt.Errorf("model %q: %s is not supported natively; use dynamic_batching, or proxy to Triton with --url", cfg.Name, cfg.Unsupported)
	}
	for i, g := range cfg.InstanceGroups {
		gname := g.Name
		if gname == "" {
			gname = fmt.Sprintf("%s_%d", cfg.Name, i)
		}
		if g.Kind == "KIND_GPU" && p.spec.GPU == 0 {
			// Triton's own wording, so the message is searchable.
			return fmt.Errorf("instance group %s of model %s has kind KIND_GPU but no GPUs are available; set metadata.gpu >= 1 or use kind: KIND_CPU", gname, cfg.Name)
		}
		if g.Kind == "KIND_MODEL" {
			return fmt.Errorf("instance group %s of model %s has kind KIND_MODEL, which this server does not place; use KIND_CPU or KIND_GPU", gname, cfg.Name)
		}
		for _, gpu := range g.GPUs {
			if gpu >= p.spec.GPU {
				return fmt.Errorf("instance group %s of model %s specifies invalid or unsupported gpu id %d; the service has metadata.gpu = %d", gname, cfg.Name, gpu, p.spec.GPU)
			}
		}
	}
	return nil
}

// selectVersions lists the numeric version directories and applies the
// version policy.
func selectVersions(dir string, pol VersionPolicy) ([]int64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var have []int64
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		n, err := strconv.ParseInt(de.Name(), 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != de.Name() {
			continue // Triton skips non-numeric directories too
		}
		have = append(have, n)
	}
	slices.Sort(have)
	var out []int64
	switch pol.Kind {
	case "all":
		out = have
	case "specific":
		for _, v := range pol.Versions {
			if !slices.Contains(have, v) {
				return nil, fmt.Errorf("version_policy asks for version %d, but there is no directory %d/ (found %v)", v, v, have)
			}
			out = append(out, v)
		}
		slices.Sort(out)
		out = slices.Compact(out)
	default:
		n := max(pol.NumVersions, 1)
		out = have[max(0, len(have)-n):]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no version directory (1/, 2/, ...) holding the model file")
	}
	return out, nil
}

// loadVersion opens <dir>/<v>/model.onnx with ONNX Runtime, reconciles it
// with config.pbtxt and starts its scheduler.
func (p *Processor) loadVersion(ctx context.Context, e *entry, v string) (*version, error) {
	file := e.cfg.DefaultModelFilename
	if file == "" {
		file = "model.onnx"
	}
	path := filepath.Join(e.dir, v, file)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("model %q version %s: %s/%s/%s is missing: %w", e.name, v, e.name, v, file, err)
	}
	gpu, device := gpuPlacement(e.cfg)
	code, modelConfig := "onnx_cpu", []byte(nil)
	if gpu {
		code = "onnx_cu100"
		modelConfig = fmt.Appendf(nil, `{"device_id": %d}`, device)
	}
	rt := onnx.New(code)
	if err := rt.Configure(processors.Spec{
		Service: p.spec.Service, Code: code, ModelSource: path, CPU: p.spec.CPU, GPU: p.spec.GPU,
		ModelConfig: modelConfig, MaxModelBytes: p.spec.MaxModelBytes,
		Logger: p.log.With("model", e.name, "model_version", v),
	}); err != nil {
		return nil, fmt.Errorf("model %q version %s: %w", e.name, v, err)
	}
	if err := rt.Load(ctx, processors.Files{ModelPath: path}); err != nil {
		rt.Close()
		return nil, fmt.Errorf("model %q version %s: %w", e.name, v, err)
	}
	mv := &version{name: e.name, version: v, entry: e, rt: rt, stats: newStats()}
	cfg, err := reconcile(e.cfg, rt.Metadata(), p.params.StrictConfig)
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("model %q version %s: %w", e.name, v, err)
	}
	mv.cfg = cfg
	mv.meta = metadataOf(cfg)
	mv.sched = p.newScheduler(mv)
	if err := mv.warmup(ctx); err != nil {
		mv.close(p.log)
		return nil, fmt.Errorf("model %q version %s: warm-up: %w", e.name, v, err)
	}
	return mv, nil
}

// gpuPlacement says whether a model runs on a GPU (an instance group of
// KIND_GPU) and on which: the first id a KIND_GPU group lists, else 0. One
// ONNX Runtime session serves every instance, so one device is used where
// Triton would place instances on each listed GPU.
func gpuPlacement(cfg *ModelConfig) (gpu bool, device int) {
	listed := false
	for _, g := range cfg.InstanceGroups {
		if g.Kind != "KIND_GPU" {
			continue
		}
		gpu = true
		if !listed && len(g.GPUs) > 0 {
			device, listed = g.GPUs[0], true
		}
	}
	return gpu, device
}

// reconcile checks config.pbtxt against the ONNX model and fills what the
// config leaves out (auto-complete). It returns a new config.
func reconcile(in *ModelConfig, md processors.Metadata, strict bool) (*ModelConfig, error) {
	cfg := *in
	batchable := true
	for _, s := range append(slices.Clone(md.Inputs), md.Outputs...) {
		if len(s.Shape) == 0 || s.Shape[0] != -1 {
			batchable = false
		}
	}
	if in.MaxBatchSize == 0 && len(in.Inputs) == 0 && !strict && batchable {
		// Triton's ONNX auto-complete: a model whose tensors all start
		// with a variable dimension batches, up to 4, dynamically.
		cfg.MaxBatchSize = 4
		if cfg.DynamicBatching == nil {
			cfg.DynamicBatching = &DynamicBatching{}
		}
	}
	if cfg.MaxBatchSize > 0 && !batchable {
		return nil, fmt.Errorf("max_batch_size is %d, but the ONNX model has a tensor whose first dimension is not variable (-1); for the model to support batching every input and output must start with a dynamic batch dimension, else set max_batch_size: 0", cfg.MaxBatchSize)
	}
	var err error
	if cfg.Inputs, err = reconcileIO("input", in.Inputs, md.Inputs, cfg.MaxBatchSize, strict); err != nil {
		return nil, err
	}
	if cfg.Outputs, err = reconcileIO("output", in.Outputs, md.Outputs, cfg.MaxBatchSize, strict); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func reconcileIO(kind string, conf []IOConfig, model []processors.IOSpec, maxBatch int, strict bool) ([]IOConfig, error) {
	byName := map[string]processors.IOSpec{}
	for _, s := range model {
		byName[s.Name] = s
	}
	trim := func(shape []int64) []int64 {
		if maxBatch > 0 && len(shape) > 0 {
			return slices.Clone(shape[1:])
		}
		return slices.Clone(shape)
	}
	if len(conf) == 0 {
		if strict {
			return nil, fmt.Errorf("config.pbtxt lists no %ss and --strict-model-config is set; list them or drop the flag", kind)
		}
		out := make([]IOConfig, len(model))
		for i, s := range model {
			dt, err := tensor.ParseDType(s.DType)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", kind, s.Name, err)
			}
			out[i] = IOConfig{Name: s.Name, DataType: tritonType(dt), DType: dt, Dims: trim(s.Shape)}
		}
		return out, nil
	}
	if kind == "input" && len(conf) != len(model) {
		// Triton's check: every model input must be configured (outputs
		// may be a subset).
		return nil, fmt.Errorf("configuration expects %d inputs, model provides %d; list every input of the ONNX model in config.pbtxt", len(conf), len(model))
	}
	for _, c := range conf {
		s, ok := byName[c.Name]
		if !ok {
			names := make([]string, len(model))
			for i, m := range model {
				names[i] = m.Name
			}
			return nil, fmt.Errorf("unexpected %s %q in config.pbtxt; the ONNX model's %ss are %s", kind, c.Name, kind, strings.Join(names, ", "))
		}
		if c.DType.String() != s.DType {
			return nil, fmt.Errorf("%s %q: config.pbtxt says %s, but the ONNX model has %s", kind, c.Name, c.DataType, s.DType)
		}
		want := trim(s.Shape)
		if !dimsCompatible(c.Dims, want) {
			return nil, fmt.Errorf("%s %q: config.pbtxt dims %v do not match the ONNX model's %v (without the batch dimension when max_batch_size > 0)", kind, c.Name, c.Dims, want)
		}
	}
	return conf, nil
}

func dimsCompatible(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != -1 && b[i] != -1 && a[i] != b[i] {
			return false
		}
	}
	return true
}

// tritonType is the TYPE_* name of a tensor dtype.
func tritonType(dt tensor.DType) string {
	for name, d := range dataTypes {
		if d == dt {
			return name
		}
	}
	return "TYPE_INVALID"
}

// metadataOf is KServe metadata as Triton reports it: the batch dimension
// shown as -1 when the model batches.
func metadataOf(cfg *ModelConfig) processors.Metadata {
	spec := func(ios []IOConfig) []processors.IOSpec {
		out := make([]processors.IOSpec, len(ios))
		for i, io := range ios {
			shape := slices.Clone(io.Dims)
			if cfg.MaxBatchSize > 0 {
				shape = append([]int64{-1}, shape...)
			}
			out[i] = processors.IOSpec{Name: io.Name, DType: io.DType.String(), Shape: shape}
		}
		return out
	}
	return processors.Metadata{
		Processor: "triton",
		Inputs:    spec(cfg.Inputs),
		Outputs:   spec(cfg.Outputs),
		Extra: map[string]any{
			"platform":       onnxPlatform,
			"max_batch_size": cfg.MaxBatchSize,
		},
	}
}

// newScheduler asks the service for a version's scheduler
// (processors.Schedulers): its metadata.rpc limits combined with what
// config.pbtxt asks for, by processors.RouteConfig's rule, and its eas_*
// metrics under the model's name, besides the model's own statistics.
func (p *Processor) newScheduler(v *version) *scheduler.Scheduler {
	cfg := v.cfg
	ms := processors.ModelSchedule{
		Model: v.name, Version: v.version, MaxBatchSize: cfg.MaxBatchSize,
		Logger: p.log.With("model", v.name, "model_version", v.version),
	}
	for _, g := range cfg.InstanceGroups {
		ms.Instances += g.Count
	}
	if db := cfg.DynamicBatching; db != nil {
		ms.DynamicBatching = true
		ms.PreferredBatchSizes = db.PreferredBatchSizes
		ms.MaxQueueDelay = db.MaxQueueDelay
		ms.QueueSize = db.MaxQueueSize
		ms.Timeout = db.QueueTimeout
	}
	obs := scheduler.Observer{QueueWait: v.stats.queued}
	eng := processors.Adapt[*onnx.Payload, *processors.TensorResult](v.rt)
	key := scheduler.KeyFunc(eng.BatchKey())
	// Triton's batch_stats count a run's batch size in rows (the requests'
	// batch dimensions added up), not in requests, so the run is timed
	// here rather than by the scheduler's Batch observer.
	run := func(ctx context.Context, batch []any) ([]any, error) {
		start := time.Now()
		out, err := eng.Run(ctx, batch)
		v.stats.execution(v.rows(batch), time.Since(start))
		return out, err
	}
	if p.spec.Schedulers == nil {
		// Outside the loader (the package's own tests): the rule over
		// the scheduler's defaults, the caller's deadline only.
		return scheduler.New(processors.RouteConfig(scheduler.Config{Timeout: -1}, ms), run, key, obs, ms.Logger)
	}
	return p.spec.Schedulers.NewScheduler(ms, run, key, obs)
}

// rows is how many batch rows payloads hold: their inputs' first
// dimensions for a model that batches (max_batch_size > 0), else one each.
func (v *version) rows(payloads []any) int {
	n := 0
	for _, p := range payloads {
		rows := int64(1)
		if pl, ok := p.(*onnx.Payload); ok && v.cfg.MaxBatchSize > 0 {
			if b, err := tensor.BatchSize(pl.Inputs); err == nil {
				rows = b
			}
		}
		n += int(rows)
	}
	return n
}

// check validates a request against config.pbtxt with Triton's wording, so
// that clients see the errors they know.
func (v *version) check(tp *processors.TensorPayload) error {
	cfg := v.cfg
	byName := map[string]*IOConfig{}
	for i := range cfg.Inputs {
		byName[cfg.Inputs[i].Name] = &cfg.Inputs[i]
	}
	seen := map[string]bool{}
	for _, in := range tp.Inputs {
		c, ok := byName[in.Name]
		if !ok {
			return badinput.Errorf("unexpected inference input '%s' for model '%s'", in.Name, v.name)
		}
		if seen[in.Name] {
			return badinput.Errorf("input '%s' is given twice for model '%s'", in.Name, v.name)
		}
		seen[in.Name] = true
		if in.DType != c.DType {
			return badinput.Errorf("inference input '%s' data-type is '%s', but model '%s' expects '%s'", in.Name, in.DType, v.name, c.DType)
		}
		dims := in.Shape
		if cfg.MaxBatchSize > 0 {
			if len(dims) == 0 {
				return badinput.Errorf("input '%s' for model '%s' has no batch dimension; model '%s' batches, so its shape is [batch, %s]", in.Name, v.name, v.name, joinDims(c.Dims))
			}
			if dims[0] > int64(cfg.MaxBatchSize) || dims[0] < 1 {
				return badinput.Errorf("inference request batch-size must be <= %d for '%s', got %d", cfg.MaxBatchSize, v.name, dims[0])
			}
			dims = dims[1:]
		}
		if !dimsCompatible(c.Dims, dims) {
			want := slices.Clone(c.Dims)
			if cfg.MaxBatchSize > 0 {
				want = append([]int64{-1}, want...)
			}
			return badinput.Errorf("unexpected shape for input '%s' for model '%s'. Expected [%s], got [%s]", in.Name, v.name, joinDims(want), joinDims(in.Shape))
		}
	}
	for _, c := range cfg.Inputs {
		if !seen[c.Name] && !c.Optional {
			return badinput.Errorf("expected %d inputs but got %d inputs for model '%s'; missing '%s'", len(cfg.Inputs), len(tp.Inputs), v.name, c.Name)
		}
	}
	return nil
}

func joinDims(d []int64) string {
	s := make([]string, len(d))
	for i, x := range d {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

// Do runs one request through the version's scheduler. Before it queues,
// the request is checked against config.pbtxt, in Triton's wording, then by
// the ONNX model (FromTensors), which arranges its inputs in the model's
// order once; the batch key and the run trust the payload it makes.
func (v *version) Do(ctx context.Context, tp *processors.TensorPayload) (*processors.TensorResult, error) {
	start := time.Now()
	if err := v.check(tp); err != nil {
		v.stats.done(false, 0, time.Since(start))
		return nil, err
	}
	payload, err := v.rt.FromTensors(ctx, tp)
	if err != nil {
		v.stats.done(false, 0, time.Since(start))
		return nil, err
	}
	rows := int64(v.rows([]any{payload}))
	res, err := v.sched.Do(ctx, payload)
	if err != nil {
		v.stats.done(false, 0, time.Since(start))
		return nil, err
	}
	tr, ok := res.(*processors.TensorResult)
	if !ok {
		v.stats.done(false, 0, time.Since(start))
		return nil, fmt.Errorf("model %q returned %T, want tensors", v.name, res)
	}
	v.stats.done(true, rows, time.Since(start))
	return tr, nil
}

// warmup runs config.pbtxt's model_warmup requests.
func (v *version) warmup(ctx context.Context) error {
	for _, w := range v.cfg.Warmup {
		tp := &processors.TensorPayload{}
		names := make([]string, 0, len(w.Inputs))
		for n := range w.Inputs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			in := w.Inputs[n]
			shape := slices.Clone(in.Dims)
			if v.cfg.MaxBatchSize > 0 {
				shape = append([]int64{int64(max(w.BatchSize, 1))}, shape...)
			}
			t, err := warmupTensor(v.entry.dir, n, in, shape)
			if err != nil {
				return fmt.Errorf("%s: input %q: %w", w.Name, n, err)
			}
			tp.Inputs = append(tp.Inputs, t)
		}
		for range max(w.Count, 1) {
			if _, err := v.Do(ctx, tp); err != nil {
				return fmt.Errorf("%s: %w", w.Name, err)
			}
		}
	}
	return nil
}

func warmupTensor(dir, name string, in WarmupInput, shape []int64) (tensor.Tensor, error) {
	t := tensor.Tensor{Name: name, DType: in.DType, Shape: shape}
	n := t.NumElements()
	if n > 1<<26 {
		return t, fmt.Errorf("shape %v is too large for a warm-up request", shape)
	}
	if in.InputDataFile != "" {
		if !filepath.IsLocal(in.InputDataFile) {
			return t, fmt.Errorf("input_data_file %q must be a file name inside the model's warmup/ directory", in.InputDataFile)
		}
		b, err := processors.ReadModel(context.Background(), filepath.Join(dir, "warmup", in.InputDataFile), maxWarmupFileBytes)
		if err != nil {
			return t, err
		}
		if in.DType == tensor.String {
			t.Strings = make([][]byte, n)
			for i := range t.Strings {
				t.Strings[i] = b
			}
			return t, nil
		}
		if int64(len(b)) != n*int64(in.DType.Size()) {
			return t, fmt.Errorf("input_data_file %s holds %d bytes; shape %v of %s needs %d", in.InputDataFile, len(b), shape, in.DataType, n*int64(in.DType.Size()))
		}
		t.Data = b
		return t, nil
	}
	if in.DType == tensor.String {
		t.Strings = make([][]byte, n)
		for i := range t.Strings {
			t.Strings[i] = []byte{}
		}
		return t, nil
	}
	t.Data = make([]byte, n*int64(in.DType.Size()))
	if in.RandomData {
		// Any bytes do for warming a session; a fixed pattern keeps
		// warm-up reproducible and avoids NaN floats.
		for i := range t.Data {
			t.Data[i] = byte(i % 7)
		}
		if in.DType == tensor.Float32 || in.DType == tensor.Float64 || in.DType == tensor.Float16 || in.DType == tensor.BFloat16 || in.DType == tensor.Bool {
			clear(t.Data)
		}
	}
	return t, nil
}

func (v *version) close(log *slog.Logger) {
	if v.sched != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := v.sched.Stop(ctx); err != nil {
			log.Warn("model drain cut short", "model", v.name, "model_version", v.version, "err", err)
		}
		cancel()
	}
	if v.rt != nil {
		if err := v.rt.Close(); err != nil {
			log.Warn("closing model", "model", v.name, "model_version", v.version, "err", err)
		}
	}
}

func (e *entry) close(log *slog.Logger) {
	for _, v := range e.versions {
		v.close(log)
	}
	e.versions, e.order = map[string]*version{}, nil
}

// The routed-model view of a version (processors.RoutedModel).

func (v *version) Name() string                  { return v.name }
func (v *version) Version() string               { return v.version }
func (v *version) Versions() []string            { return slices.Clone(v.entry.order) }
func (v *version) Platform() string              { return onnxPlatform }
func (v *version) Metadata() processors.Metadata { return v.meta }
func (v *version) Stats() any                    { return v.stats.snapshot(v.name, v.version) }

// Admit answers what the version's scheduler would answer at once (the
// service's rate limit, a full queue), so the server refuses before it
// reads the body.
func (v *version) Admit() error { return v.sched.Admit() }

var (
	_ processors.RoutedModel   = (*version)(nil)
	_ processors.StatsReporter = (*version)(nil)
	_ processors.Admitter      = (*version)(nil)
)
