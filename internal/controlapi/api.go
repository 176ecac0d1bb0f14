// Package controlapi is the control plane's API (/api/v2): the wire types,
// named after EAS's OpenAPI (2021-07-01) so that EAS tooling and habits
// carry over, and ControlPlane, what the API drives.
//
// It is a package of its own so that each side of the API depends on it and
// not on the other: internal/server serves it, internal/kube implements
// ControlPlane on Kubernetes objects, and the CLI's client verbs
// (cmd/eas-server) decode its answers, none of them importing
// internal/server for a type.
package controlapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/servicejson"
)

// ServiceObject is a service as the control plane shows it.
type ServiceObject struct {
	ServiceName      string
	Region           string
	Status           string // Creating, Running, Updating, Failed, Stopped
	Message          string
	Reason           string
	AccessToken      string
	IntranetEndpoint string // http://<host>/api/predict/<name>
	InternetEndpoint string
	ServiceConfig    string // the current version's service.json as given
	CreateTime       time.Time
	UpdateTime       time.Time
	CurrentVersion   int
	LatestVersion    int
	// PendingVersion is the version being loaded by the operation in
	// progress; 0 when none runs. A client that changed the service waits
	// until it is 0 and then compares CurrentVersion with the version it
	// asked for.
	PendingVersion  int
	RunningInstance int
	TotalInstance   int
	// Progress is the download of PendingVersion's model while it runs;
	// absent otherwise.
	Progress *ProgressObject `json:",omitempty"`
	// Queues are an asynchronous service's input queue and sink: length,
	// in flight, consumers, oldest entry; absent for a synchronous one.
	Queues []service.QueueInfo `json:",omitempty"`
}

// ServiceList answers GET /api/v2/services.
type ServiceList struct {
	Services   []ServiceObject
	TotalCount int
}

// EventObject is one event of a service.
type EventObject struct {
	Time    time.Time
	Type    string
	Reason  string
	Message string
}

// EventList answers GET .../events.
type EventList struct {
	ServiceName string
	Events      []EventObject
}

// VersionObject is one stored version of a service.
type VersionObject struct {
	Version       int
	CreateTime    time.Time
	Current       bool
	Processor     string // the processor code of that version's config
	ServiceConfig string
}

// VersionList answers GET .../versions.
type VersionList struct {
	ServiceName    string
	CurrentVersion int
	LatestVersion  int
	Versions       []VersionObject
}

// VersionRequest is the body of PUT .../version.
type VersionRequest struct {
	Version int
}

// ErrorObject is the body of every control-plane error.
type ErrorObject struct {
	Code    string // Unauthorized, NotFound, Conflict, InvalidParameter, ...
	Message string
}

// InstanceObject is one replica of a service: in serve, metadata.instance
// of them run in this process, sharing one loaded model; on Kubernetes
// each is a pod.
type InstanceObject struct {
	InstanceName string // serve: <service>-v<version>-<index>; Kubernetes: the pod's name
	Status       string // Running; on Kubernetes also a pod's waiting reason or phase
	Version      int
	StartTime    time.Time
	QueueDepth   int    // requests waiting, for the whole service (serve only)
	HostIP       string `json:",omitempty"` // Kubernetes: the node's address
	InstanceIP   string `json:",omitempty"` // Kubernetes: the pod's address
	Restarts     int    `json:",omitempty"` // Kubernetes: container restarts
}

// InstanceList answers GET .../instances.
type InstanceList struct {
	ServiceName string
	Instances   []InstanceObject
	TotalCount  int
}

// ChangeAnswer answers create and modify: the service, and the keys of the
// service.json sent that are accepted for EAS compatibility but have no
// effect on this server, each as "key: why" (servicejson's Warnings).
type ChangeAnswer struct {
	ServiceObject
	Warnings []string `json:",omitempty"`
}

// ProgressObject is how far the download of the version being loaded has
// come (ServiceObject.Progress), for desc and the CLI's progress.
type ProgressObject struct {
	Key            string  // what is fetched: model_path, warm_up_data_path
	DoneBytes      int64   // bytes on disk so far
	TotalBytes     int64   // the download's size; -1 when unknown
	BytesPerSecond float64 // the recent rate; 0 until measured and right after a retry
	ETASeconds     float64 // seconds left at that rate; -1 when unknown
	Retries        int     // retries of this download so far
	Retry          int     // the latest retry's number in a row, of MaxRetries
	MaxRetries     int
	LastError      string `json:",omitempty"` // what the latest retry was after
	UpdateTime     time.Time
}

// CacheList is GET /api/v2/cache: the model cache's entries and totals.
type CacheList struct {
	Entries []storage.CacheEntry `json:"entries"`
	Usage   storage.CacheUsage   `json:"usage"`
}

// ControlPlane is what /api/v2/services drives. serve drives its
// in-process service.Manager; eas-server controller drives Kubernetes
// objects (internal/kube). The two share the API, its wire types, its
// authentication and its error mapping (internal/server's controlErr):
// errors wrap
// service.ErrNotFound, ErrExists, ErrBusy, ErrInvalid or ErrShuttingDown
// to get their status codes.
type ControlPlane interface {
	Create(ctx context.Context, spec *servicejson.Service) (service.Info, error)
	Update(ctx context.Context, name string, spec *servicejson.Service) (service.Info, error)
	Describe(ctx context.Context, name string) (service.Info, error)
	List(ctx context.Context) ([]service.Info, error)
	Start(ctx context.Context, name string) (service.Info, error)
	Stop(ctx context.Context, name string) (service.Info, error)
	Delete(ctx context.Context, name string) error
	SwitchVersion(ctx context.Context, name string, version int) (service.Info, error)
	Events(ctx context.Context, name string) ([]EventObject, error)
	Instances(ctx context.Context, name string) ([]InstanceObject, error)
	Versions(ctx context.Context, name string) (VersionList, error)
}

// NewVersionObject renders one stored version, naming its processor.
func NewVersionObject(v service.VersionInfo) VersionObject {
	vo := VersionObject{Version: v.Version, CreateTime: v.CreateTime, Current: v.Current, ServiceConfig: string(v.Config)}
	var head struct {
		Processor     string `json:"processor"`
		ProcessorType string `json:"processor_type"`
	}
	if json.Unmarshal(v.Config, &head) == nil {
		vo.Processor = head.Processor
		if vo.Processor == "" && head.ProcessorType != "" {
			vo.Processor = "custom " + head.ProcessorType
		}
	}
	return vo
}
