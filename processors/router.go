package processors

import "context"

// ModelRouter is implemented by processors that serve several named models
// behind one service, as Triton serves a model repository. The server
// resolves /v2/models/<model> to such a model when no service has that name,
// and /api/predict/<service>/<model> (or .../v2/models/<model>/infer, which
// is how Triton clients pointed at an EAS endpoint call it) straight to the
// model, so that each model keeps its own queue and batching instead of
// sharing the service's.
type ModelRouter interface {
	// Model returns the model called name at version ("" = its default
	// version); ok is false when there is no such model or version.
	Model(name, version string) (m RoutedModel, ok bool)
}

// RoutedModel is one model of a ModelRouter. Its methods are safe for
// concurrent use.
type RoutedModel interface {
	Name() string
	// Version is the version this handle runs; Versions lists every
	// version served, for KServe model metadata.
	Version() string
	Versions() []string
	// Platform names the runtime for KServe model metadata.
	Platform() string
	Metadata() Metadata
	// Do runs one payload through the model's own scheduler and returns
	// its result. It honours ctx's deadline: the server sets the service's
	// rpc.keepalive on it.
	Do(ctx context.Context, payload *TensorPayload) (*TensorResult, error)
}

// Admitter is implemented by routed models whose own scheduler can refuse
// a request before it exists: Admit answers what Do would answer at once
// (ErrRateLimited, ErrQueueFull) without admitting
// anything, so the server refuses before it reads and decodes the body.
type Admitter interface {
	Admit() error
}

// StatsReporter is implemented by routed models that keep KServe/Triton
// statistics; Stats returns one JSON-encodable model_stats entry.
type StatsReporter interface {
	Stats() any
}

// ConfigReporter is implemented by routed models that have a Triton model
// configuration; Config returns it JSON-encodable, as Triton's model
// configuration extension shows it (GET /v2/models/<model>/config).
type ConfigReporter interface {
	Config() any
}

// ModelLister is implemented by ModelRouters that can list what they serve:
// Models returns every served version of every ready model, by name then
// version; ok is false when the router cannot list its models (a proxy).
// The server answers Triton's statistics of every model, and of every
// version of one model, from it.
type ModelLister interface {
	Models() (models []RoutedModel, ok bool)
}

// StatusError is an error that carries the HTTP status the server answers
// with. A proxy uses it to pass an upstream's 4xx through, or to answer 502
// or 503 when the upstream fails, instead of a blanket 500.
type StatusError struct {
	Code int
	Err  error
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *StatusError) Unwrap() error { return e.Err }
