package server

import (
	"time"

	"github.com/eas-server/eas-server/internal/service"
)

// The control plane's wire types, named after EAS's OpenAPI (2021-07-01) so
// that EAS tooling and habits carry over. The CLI decodes the same types.

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
