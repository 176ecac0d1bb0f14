package servicejson

import "strings"

// Warning is a key that Parse accepts, so that EAS files deploy unchanged,
// but that has no effect on this server. It is not an error: a user who
// copies a file from EAS must be told what is ignored, not be refused.
type Warning struct {
	Path string // the canonical key or section, e.g. "autoscaler" or "metadata.memory"
	Msg  string // why it has no effect and what to do instead
}

// String formats the warning as "path: msg", as problems are formatted.
func (w Warning) String() string { return w.Path + ": " + w.Msg }

// compat starts every no-effect message, so that a reader knows the key
// was accepted on purpose.
const compat = "accepted for EAS compatibility; "

// noEffect is the single list of accepted keys this server ignores: Parse,
// `eas-server validate`, the deploy events and the control plane all read
// it through Service.Warnings. A path names a key or a whole section (every
// key below it). when, if set, limits the warning to services it holds for.
//
// Keys that are not here are used: name, processor, model_*, oss_endpoint,
// token, generate_token, processor_params, warm_up_data_path,
// metadata.instance, cpu (ONNX Runtime threads), gpu (device rule and CUDA
// placement), eas.termination_grace_period and the rpc keys but io_threads,
// enable_sigterm and enable_jemalloc; processor_path, processor_type and
// processor_entry for custom processors (processor_type java fails deploy
// instead).
var noEffect = []struct {
	path string
	why  string
	when func(*Service) bool
}{
	{path: "autoscaler", why: compat + "this server does not autoscale under serve, which runs metadata.instance instances; it takes effect on Kubernetes, where eas-server controller turns it into a HorizontalPodAutoscaler"},
	{path: "labels", why: compat + "labels are stored with the service but used for nothing here"},
	{path: "storage", why: compat + "this server mounts no storage; point model_path at the model (oss://, http(s)://, file:// or a local path)"},
	{path: "containers", why: compat + "this server runs no containers; the built-in processor runs in the server's own process"},
	{path: "networking", why: compat + "this server configures no networking; it listens where serve --listen says"},
	{path: "cloud", why: compat + "this server runs on the machine it was started on and provisions nothing; cloud.computing.instance_type only counts toward the GPU rule of the processor code"},
	{path: "runtime.enable_crash_block", why: compat + "no effect here: a failed load leaves the service Failed with the reason, and a crash stops the server"},
	{path: "processor_entry", why: compat + "it applies only to custom processors (processor_path); a built-in processor has no entry", when: builtin},
	{path: "processor_mainclass", why: compat + "it applies only to Java processors (processor_type java), which this server does not run", when: notJava},
	{path: "queue.cpu", why: compat + "the queues run inside this server, not as a sub-service with resources of its own"},
	{path: "queue.memory", why: compat + "the queues live on disk in the state directory; bound them with queue.source.max_length and queue.sink.max_length"},
	{path: "queue.min_replica", why: compat + "the queues run inside this server, not as replicas"},
	{path: "queue.resource", why: compat + "there are no resource groups: the queues run on this server"},
	{path: "metadata.memory", why: compat + "this server does not limit memory per service; limit the server's process instead (a container memory limit, systemd MemoryMax)"},
	{path: "metadata.gpu_memory", why: compat + "this server does not share GPUs: it counts only toward the GPU rule of the processor code, and the service uses the machine's GPU"},
	{path: "metadata.gpu_core_percentage", why: compat + "this server does not share GPUs: the service uses the machine's GPU"},
	{path: "metadata.cuda", why: compat + "the CUDA version is the one of the ONNX Runtime or libtorch build the server loads"},
	{path: "metadata.resource", why: compat + "there are no resource groups: the service runs on this server"},
	{path: "metadata.qos", why: compat + "no effect here; bound a service with metadata.rpc.max_queue_size and rate_limit"},
	{path: "metadata.region", why: compat + "one server is one region (serve --region)"},
	{path: "metadata.workspace_id", why: compat + "there are no workspaces here"},
	{path: "metadata.enable_grpc", why: compat + "gRPC (KServe v2) serves every service when the server runs with --grpc-listen"},
	{path: "metadata.rolling_strategy", why: compat + "an update loads the new version beside the serving one and switches all traffic once it is ready; there is no per-instance rollout"},
	{path: "metadata.rpc.io_threads", why: compat + "Go's runtime does the I/O; size the model's concurrency with metadata.rpc.worker_threads"},
	{path: "metadata.rpc.enable_sigterm", why: compat + "the server always drains on SIGTERM, for metadata.eas.termination_grace_period"},
	{path: "metadata.rpc.enable_jemalloc", why: compat + "Go manages the server's memory; there is no allocator to choose"},
}

// builtin reports whether s names a built-in processor code.
func builtin(s *Service) bool { return s.Processor != "" }

// notJava reports whether s is anything but a Java custom processor (which
// deploy refuses with its own reason).
func notJava(s *Service) bool { return s.ProcessorType != "java" }

// Warnings lists the keys s gives that have no effect on this server, one
// per key or section of noEffect, in that table's order. A valid file with
// warnings deploys; the warnings say what it will not get.
func (s *Service) Warnings() []Warning {
	var out []Warning
	for _, n := range noEffect {
		if (n.when == nil || n.when(s)) && s.gives(n.path) {
			out = append(out, Warning{Path: n.path, Msg: n.why})
		}
	}
	return out
}

// gives reports whether the document set the key at path or any key below
// it (Cloud.Extra holds the cloud keys this package does not know).
func (s *Service) gives(path string) bool {
	for p := range s.given {
		if p == path || strings.HasPrefix(p, path+".") {
			return true
		}
	}
	if path == "cloud" || path == "cloud.computing" {
		return len(s.Cloud.Extra) > 0
	}
	return false
}
