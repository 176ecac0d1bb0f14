// Package processors is the contract between the server and a model family,
// and the registry that maps EAS processor codes (pmml, pytorch_cpu_1.6, ...)
// to the families that serve them.
//
// # Writing a processor
//
// A processor implements Typed[P, R] for its own payload type P (what one
// request decodes to) and result type R (what one payload's run produces):
//
//	Configure(spec)              check service.json; no I/O (also run by `eas-server validate`)
//	Load(ctx, files)             read the fetched model; files.ModelPath is local
//	Metadata()                   the inputs and outputs, for GET and KServe metadata
//	Decode(ctx, req) (P, error)  bytes -> payload, on the request's goroutine
//	Run(ctx, []P) ([]R, error)   one batch, on a scheduler worker
//	Encode(ctx, P, R)            payload + result -> bytes, on the request's goroutine
//
// and registers a factory with Register(code, description, func() *Engine {
// return Adapt[P, R](New()) }). Adapt erases the types for the scheduler and
// the server in one place, so every payload a Run receives came from the same
// processor's Decode (or FromTensors): a processor never type-asserts.
//
// The loader (package service) drives a fixed lifecycle: New -> Configure
// (before any download, so a model_config typo fails in milliseconds) ->
// fetch model_path -> Load -> optional Warmup -> serving -> Close.
//
// Rules a processor keeps:
//   - ctx is the first parameter of every call that can block or allocate
//     per request: Decode, Encode, FromTensors and ToTensors get the
//     request's context (it ends when the client goes away; Warmup's own
//     ctx when warm-up replays a request), Run the batch's. A processor
//     uses the ctx it is given and never stores one in a payload.
//   - Decode validates everything it can: a bad request is a *BadInput
//     (HTTP 400) before it queues, so one bad request never fails a batch.
//     Work done in Decode (parsed rows, inputs in model order) travels in P;
//     Run does not repeat it.
//   - Run is safe for concurrent use (several workers may call it) and
//     returns one R per payload, in order. An error fails the whole batch:
//     *BadInput answers 400, *StatusError its code, anything else 500.
//     To fail some payloads and not the others, Run returns a result for
//     every payload with a PayloadErrors: a payload with an error gets that
//     error (mapped the same way), the others their results. A failure
//     found in Decode never reaches Run.
//   - A panic is recovered by the scheduler and fails only that batch.
//   - Processors never import the server; queueing, deadlines, batching and
//     concurrency limits live in the scheduler, which the service builds
//     (a ModelRouter's per-model schedulers too, through Spec.Schedulers).
//
// Optional interfaces refine the contract: Batcher[P] (which payloads may
// share a run), Tensors[P, R] (the KServe v2 HTTP and gRPC doors), Warmer,
// Closer, Healther, MetadataJSONer and ModelRouter (a Triton repository).
package processors

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/eas-server/eas-server/tensor"
)

// Spec is what the loader hands Configure: the parts of service.json a
// processor may use. Nothing has been downloaded yet.
type Spec struct {
	Service string // service name
	Code    string // processor code, e.g. "pytorch_cpu_1.6"
	// ModelSource is model_path as written (oss://, http(s)://, a local
	// path); "" when none was given. Configure may check its form (an
	// extension it refuses), never read it: Load gets the local copy.
	ModelSource string
	ModelEntry  string // model_entry: the entry file inside model_path
	// ModelConfig is model_config as the bytes of a JSON value: the
	// object, or the contents of the string form; nil when absent. Read it
	// with DecodeConfig.
	ModelConfig []byte
	CPU         int      // metadata.cpu; 0 = unset
	GPU         int      // metadata.gpu; 0 = none
	Params      []string // processor_params as given (Triton's flags)
	// ProcessorType and ProcessorEntry are a custom processor's
	// processor_type (cpp, python, java) and processor_entry; "" for a
	// built-in code. Package custom reads them.
	ProcessorType  string
	ProcessorEntry string
	// WorkerThreads is metadata.rpc.worker_threads: how many runs the
	// scheduler may have in flight at once.
	WorkerThreads int
	// Keepalive is metadata.rpc.keepalive, a request's deadline; work a
	// processor does outside the scheduler (pre_process, post_process)
	// keeps to it. 0 means none.
	Keepalive time.Duration
	// PreProcess and PostProcess are custom processors to run around this
	// built-in one (service.json's pre_process, post_process); nil when
	// none. WithHooks wraps an Engine to run them.
	PreProcess, PostProcess *Hook
	// Batcher is metadata.rpc.batcher when batching is on: "concat" (the
	// default: payloads with equal trailing shapes share a run), "pad"
	// (payloads of equal rank are right-padded with PadValue to a common
	// shape) or "bucket" (like pad, within sequence-length Buckets).
	Batcher  string
	PadValue float64
	Buckets  []int
	Logger   *slog.Logger
	// MaxModelBytes bounds the model files this service's Load reads: a
	// model file larger than this is refused before it is read, and a file
	// that grows past it while being read fails the load (the server's
	// --max-model-size). 0 (or negative) means DefaultMaxModelBytes; pass
	// math.MaxInt64 for no limit. A format may bound its files lower (PMML:
	// pmml.MaxDocumentBytes). Read it with ModelLimit.
	MaxModelBytes int64
	// Fetcher downloads further sources a processor finds it needs (a
	// Triton repository named in processor_params) through the server's
	// cache, accounted to this service. Nil in `eas-server validate`.
	Fetcher Fetcher
	// Schedulers builds a ModelRouter's per-model schedulers from the
	// service's metadata.rpc limits and metrics. Nil outside the loader
	// (`eas-server validate`, a processor's own tests): a router then
	// uses RouteConfig over the scheduler's defaults, unobserved.
	Schedulers Schedulers
	// Event records something that happened to the loaded processor on
	// its own, outside the loader's lifecycle (a custom processor's
	// worker process crashed, or was restarted), in the service's events
	// (`eas-server events`). warning marks a Warning event, else
	// a Normal one; reason is a CamelCase word of the processor's own
	// (WorkerCrashed), never one of the loader's (Running, LoadFailed);
	// message says what happened. The processor logs what it reports
	// itself: the service records it without logging it again. It may be
	// called from any goroutine, at any time until Close returns. Nil
	// outside the loader; call it through Report.
	Event func(warning bool, reason, message string)
}

// Report calls s.Event when it is set: the event for the service's
// history, or nothing outside the loader.
func (s Spec) Report(warning bool, reason, message string) {
	if s.Event != nil {
		s.Event(warning, reason, message)
	}
}

// Hook is a custom processor run around a built-in one.
type Hook struct {
	Path   string // processor_path, as given; Load fetches it with Spec.Fetcher
	Type   string // cpp or python
	Entry  string // processor_entry
	Config []byte // its model_config (the string form unwrapped); nil when none
}

// Fetcher fetches a source (oss://, http(s)://, a local path) to a local
// path that stays valid until the processor is closed.
type Fetcher interface {
	Fetch(ctx context.Context, source string) (local string, err error)
}

// Files are the local copies Load works from.
type Files struct {
	ModelPath  string // model_path fetched: a local file or directory; "" when none was given
	WarmupPath string // warm_up_data_path fetched; "" when none
	// ProcessorPath is processor_path fetched (a custom processor's
	// package: a file, or the directory an archive was unpacked to); ""
	// when none was given.
	ProcessorPath string
}

// Request is one data-plane call as the processor sees it. Its context is
// not here: Decode takes it as its first parameter.
type Request struct {
	Body  []byte // the (decompressed) request body
	Path  string // extra path after /api/predict/<name>, "" or starting with "/"
	Query string // raw query string
	// Header is the caller's headers, not a copy: read-only, and it holds
	// the service's Authorization, which a processor must never forward.
	Header http.Header
}

// UnknownFieldsHeader is the response header that names, under
// model_config "unknown_fields" "warn", the record keys a request sent that
// the model does not read (package processors/unknownfields builds its
// value). It is part of the contract because the server, not the
// processor, counts the responses that carry it (eas_unknown_fields_total).
const UnknownFieldsHeader = "X-Eas-Unknown-Fields"

// Response is what Encode returns for a successful call.
type Response struct {
	Body        []byte
	ContentType string // "" means application/octet-stream
	// Header holds extra response headers for the EAS HTTP door (such as
	// UnknownFieldsHeader); nil for none.
	Header http.Header
	// Status is the HTTP status of the EAS HTTP door; 0 means 200. Only
	// custom processors, whose user code returns a status with its body,
	// set it.
	Status int
}

// Processor is the lifecycle every model family implements; Typed adds its
// data path.
type Processor interface {
	// Configure checks spec (model_config, entry names) without any I/O.
	Configure(spec Spec) error
	// Load reads the model from files and prepares it to Run.
	Load(ctx context.Context, files Files) error
	// Metadata describes the model's inputs and outputs for GET requests.
	Metadata() Metadata
}

// Typed is a processor whose requests decode to payloads of type P and
// whose runs produce one R per payload. See the package comment for the
// rules each method keeps.
type Typed[P, R any] interface {
	Processor
	// Decode turns a request into a payload, under the request's ctx. A
	// bad body is a *BadInput (HTTP 400).
	Decode(ctx context.Context, req *Request) (P, error)
	// Run executes a batch of payloads, one per request, and returns one
	// result per payload, in order.
	Run(ctx context.Context, batch []P) ([]R, error)
	// Encode serialises the result of one payload, under the request's
	// ctx.
	Encode(ctx context.Context, p P, r R) (*Response, error)
}

// PayloadErrors is the error Run returns to fail some payloads of a batch
// and not the others: a non-nil PayloadErrors[i] is payload i's own error,
// and Run's result i is ignored; every other payload gets its result. It has
// one entry per payload. Build it with make(PayloadErrors, len(batch)) and
// return Err, which is nil when no entry is set.
type PayloadErrors []error

// Err returns nil when no payload failed, the payload's own error for a
// batch of one (a batch of one fails as a whole), and e otherwise.
func (e PayloadErrors) Err() error {
	for _, err := range e {
		if err != nil {
			if len(e) == 1 {
				return err
			}
			return e
		}
	}
	return nil
}

// Error names how many payloads failed and the first failure.
func (e PayloadErrors) Error() string {
	n := 0
	var first error
	for _, err := range e {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if n == 0 {
		return "no payload failed"
	}
	return fmt.Sprintf("%d of %d payloads failed; the first: %v", n, len(e), first)
}

// Unwrap returns the payloads' errors, so errors.Is and errors.As see them.
func (e PayloadErrors) Unwrap() []error {
	var errs []error
	for _, err := range e {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Batcher is implemented by processors whose payloads can be merged into one
// run. BatchKey returns a key: payloads with equal keys may share a batch.
// ok=false means this payload always runs alone. It runs on the request's
// goroutine before the payload queues.
type Batcher[P any] interface {
	BatchKey(p P) (key string, ok bool)
}

// BatchSizer is implemented by processors whose loaded model says how it
// batches (a batch-inference model class's @batching max_batch_size).
// While metadata.rpc.batching is off, the service's scheduler batches with
// these instead: up to maxBatchSize requests, the first waiting at most
// timeout for the others. ok is false when the model says nothing.
type BatchSizer interface {
	BatchSize() (maxBatchSize int, timeout time.Duration, ok bool)
}

// Warmer is implemented by processors that can replay warm_up_data_path
// before the service reports ready.
type Warmer interface {
	Warmup(ctx context.Context, path string) error
}

// MetadataJSONer is implemented by processors whose EAS family answers
// GET /api/predict/<name> with a body of its own shape (TensorFlow's
// signature JSON); others answer with Metadata.
type MetadataJSONer interface {
	MetadataJSON() any
}

// Closer is implemented by processors holding resources (sessions, files).
type Closer interface {
	Close() error
}

// Healther is implemented by processors that can become unhealthy after load
// (a proxy whose upstream went away).
type Healther interface {
	Healthy(ctx context.Context) error
}

// TensorPayload is the payload of every tensor processor, whichever codec
// (EAS protobufs, KServe v2) produced it. Each input's first dimension is the
// batch dimension.
type TensorPayload struct {
	Inputs  []tensor.Tensor
	Outputs []string // wanted output names; nil = all
}

// TensorResult is the result of a tensor processor for one payload.
type TensorResult struct {
	Outputs []tensor.Tensor
}

// Tensors is implemented by processors that also answer the KServe v2
// doors (HTTP and gRPC), which decode and encode tensors themselves.
type Tensors[P, R any] interface {
	// Platform names the runtime for KServe model metadata, e.g. "onnxruntime_onnx".
	Platform() string
	// FromTensors makes the payload Run takes from KServe tensors, with
	// the checks Decode makes (a *BadInput for a bad request),
	// under the request's ctx.
	FromTensors(ctx context.Context, tp *TensorPayload) (P, error)
	// ToTensors turns one payload's result into tensors, under the
	// request's ctx.
	ToTensors(ctx context.Context, p P, r R) (*TensorResult, error)
}

// Metadata describes a model for GET /api/predict/<name> and KServe metadata.
type Metadata struct {
	Processor string         `json:"processor"`
	Inputs    []IOSpec       `json:"inputs"`
	Outputs   []IOSpec       `json:"outputs"`
	Extra     map[string]any `json:"extra,omitempty"`
}

// IOSpec is one input or output. Shape uses -1 for a dynamic dimension.
// DType is a KServe datatype name for tensors, or a PMML dataType for records.
type IOSpec struct {
	Name  string  `json:"name"`
	DType string  `json:"datatype"`
	Shape []int64 `json:"shape,omitempty"`
}
