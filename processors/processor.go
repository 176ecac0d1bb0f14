// Package processors holds the processor contract and the registry that maps
// EAS processor codes (pmml, pytorch_cpu_1.6, ...) to factories.
//
// A processor is driven by one loader (package service) through a fixed
// lifecycle: New -> Configure (no I/O) -> Load -> optional Warmup -> ready.
// Requests then flow: Decode (bytes -> payload) -> scheduler -> Run on a batch
// of payloads -> Encode (payload + result -> bytes). Processors never import
// the server; concurrency limits live in the scheduler, not in processors.
package processors

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/eas-server/eas-server/tensor"
)

// Spec is what the loader hands a processor: the parts of service.json it may
// use, with model_path already fetched to a local path.
type Spec struct {
	Service     string          // service name
	Code        string          // processor code, e.g. "pytorch_cpu_1.6"
	ModelPath   string          // local file or directory after fetch; "" when none was given
	ModelEntry  string          // model_entry: the entry file inside ModelPath
	ModelConfig json.RawMessage // model_config as a JSON value (object, or a string)
	WarmupPath  string          // local path of warm_up_data_path; "" when none
	CPU         int             // metadata.cpu; 0 = unset
	GPU         int             // metadata.gpu; 0 = none
	Params      []string        // processor_params as given (Triton's flags)
	// Batcher is metadata.rpc.batcher when batching is on: "concat" (the
	// default: payloads with equal trailing shapes share a run), "pad"
	// (payloads of equal rank are right-padded with PadValue to a common
	// shape) or "bucket" (like pad, within sequence-length Buckets).
	Batcher  string
	PadValue float64
	Buckets  []int
	Logger   *slog.Logger
}

// Request is one data-plane call as the processor sees it.
type Request struct {
	Body  []byte // the (decompressed) request body
	Path  string // extra path after /api/predict/<name>, "" or starting with "/"
	Query string // raw query string
	// Header is the caller's headers, not a copy: read-only, and it holds
	// the service's Authorization, which a processor must never forward.
	Header http.Header
}

// Response is what Encode returns for a successful call.
type Response struct {
	Body        []byte
	ContentType string // "" means application/octet-stream
}

// Processor is the contract every model family implements. Run must be safe
// for concurrent use: the scheduler may call it from several workers at once.
type Processor interface {
	// Configure checks spec (model_config, entry names) without any I/O.
	Configure(spec Spec) error
	// Load reads the model from spec.ModelPath and prepares it to Run.
	Load(ctx context.Context) error
	// Metadata describes the model's inputs and outputs for GET requests.
	Metadata() Metadata
	// Decode turns a request into the payload Run accepts. A bad body is an
	// *InputError (HTTP 400).
	Decode(req *Request) (any, error)
	// Run executes a batch of payloads (one per request) and returns one
	// result per payload, in order. An error fails every request of the batch;
	// an *InputError answers 400, any other error 500. A result that is itself
	// an error fails only its own request.
	Run(ctx context.Context, batch []any) ([]any, error)
	// Encode serialises the result of one payload.
	Encode(payload, result any) (*Response, error)
}

// Batcher is implemented by processors whose payloads can be merged into one
// run. BatchKey returns a key: payloads with equal keys may share a batch.
// ok=false means this payload always runs alone.
type Batcher interface {
	BatchKey(payload any) (key string, ok bool)
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

// TensorModel is implemented by tensor processors; it lets the KServe v2
// routes decode and encode on their own and share the scheduler.
type TensorModel interface {
	Processor
	// Platform names the runtime for KServe model metadata, e.g. "onnxruntime_onnx".
	Platform() string
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
