package service

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eas-server/eas-server/servicejson"
)

// MaxEvents bounds the events kept (and persisted) per service; older ones
// are dropped first.
const MaxEvents = 64

// Event types, as EAS names them.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is one entry of a service's history: what happened and when.
type Event struct {
	Time    time.Time
	Type    string // EventNormal or EventWarning
	Reason  string // a CamelCase word: Created, Loading, Running, LoadFailed, ...
	Message string
}

// Info is a snapshot of a service for the control plane. Token is the real
// token: only the admin-authenticated control plane hands it out.
type Info struct {
	Name            string
	Status          Status
	Message         string
	Reason          string
	Token           string
	CreateTime      time.Time
	UpdateTime      time.Time
	CurrentVersion  int // the version that serves (or would, once started)
	LatestVersion   int // the highest version number
	PendingVersion  int // the version being loaded; 0 when no operation runs
	RunningInstance int // replicas serving now
	TotalInstance   int // metadata.instance of the current version
	Config          []byte
	// Progress is the download of the version being loaded; nil when
	// none runs.
	Progress *Progress
	// Queues are an asynchronous service's input queue and sink; nil for
	// a synchronous service.
	Queues []QueueInfo
}

// VersionInfo describes one stored version of a service.
type VersionInfo struct {
	Version    int
	CreateTime time.Time
	Current    bool
	Config     []byte
}

// record is what the state dir keeps of a service besides its version
// files and token: state.json.
type record struct {
	Name           string          `json:"name"`
	CreateTime     time.Time       `json:"create_time"`
	UpdateTime     time.Time       `json:"update_time"`
	CurrentVersion int             `json:"current_version"`
	LatestVersion  int             `json:"latest_version"`
	Stopped        bool            `json:"stopped"` // stopped on request: restore leaves it stopped
	Status         Status          `json:"status"`  // as last seen; recomputed on restore
	Message        string          `json:"message,omitempty"`
	Reason         string          `json:"reason,omitempty"`
	Versions       []versionRecord `json:"versions"`
	Events         []Event         `json:"events"`
	// LoadAttempts counts loads of the current version that started while
	// nothing served and have not finished: a server that dies while
	// loading (a model that exhausts memory) leaves it above zero, and
	// restore stops retrying after maxLoadAttempts instead of crashing
	// again at every start.
	LoadAttempts int `json:"load_attempts,omitempty"`
	// Retryable marks a failed load that may succeed unchanged (a network
	// error, a load cut short by shutdown): restore loads it again; any
	// other failed load stays Failed until start or modify.
	Retryable bool `json:"retryable,omitempty"`
}

type versionRecord struct {
	Version    int       `json:"version"`
	CreateTime time.Time `json:"create_time"`
}

// Service is one deployed service. The data plane reads it with Acquire,
// State and Ready; everything else goes through the Manager.
type Service struct {
	Name string

	live atomic.Pointer[Live] // the serving version; nil when none
	// gate is what the data plane reads when no version serves: the token
	// to check and the state to report. It is republished under mu on
	// every change and read without it, so a request never waits for a
	// lifecycle operation that holds mu while it writes to disk.
	gate atomic.Pointer[gate]
	op   sync.Mutex // held for the whole of a lifecycle operation

	mu       sync.Mutex // guards the fields below
	rec      record
	spec     *servicejson.Service // config of rec.CurrentVersion; nil when unreadable
	configs  map[int][]byte       // every version's service.json as given
	token    string               // the effective token ("" = open)
	pending  int                  // version being loaded; 0 = none
	progress *Progress            // the download of a load (of version progress.Version); nil = none yet
	since    time.Time            // when rec.Status began
	cancelOp func()               // cancels the asynchronous operation in progress
	// busy is true from the start of an operation until its outcome is
	// published. An operation that finds the lock held but busy false only
	// waits for the other's short tail (saving state, handing off a drain)
	// instead of failing with ErrBusy, so that a client that saw the
	// outcome can go on at once.
	busy    bool
	deleted bool
	// queues is an asynchronous service's queue service; nil until its
	// first load. Written under op, read without a lock.
	queues atomic.Pointer[Queues]

	mgr   *Manager // logs the events and keeps the metrics (observe.go); nil in bare tests
	shown shown    // what the metrics show of the service
}

// gate is an immutable snapshot of a service's token and state.
type gate struct {
	token   string
	status  Status
	message string
	since   time.Time
}

// publishLocked makes the current token and state visible to the data
// plane. Every change of either calls it with mu held.
func (s *Service) publishLocked() {
	s.gate.Store(&gate{token: s.token, status: s.rec.Status, message: s.rec.Message, since: s.since})
	s.observeLocked()
}

// loadGate returns the published snapshot. A service being registered has
// published nothing yet: it reads as Creating, with a token nobody can
// present.
func (s *Service) loadGate() *gate {
	if g := s.gate.Load(); g != nil {
		return g
	}
	return &gate{token: unpublished, status: Creating, message: "being created"}
}

// unpublished is a token no request can match: "\x00" never survives in
// an HTTP header or gRPC metadata value.
const unpublished = "\x00unpublished"

// State returns the status, its message and when it began. It does not
// wait for lifecycle operations.
func (s *Service) State() (Status, string, time.Time) {
	g := s.loadGate()
	return g.status, g.message, g.since
}

// Ready reports whether a version serves requests.
func (s *Service) Ready() bool { return s.live.Load() != nil }

// Token returns the service's effective token, for requests that find no
// serving version (they are still authenticated before being told so).
// It does not wait for lifecycle operations.
func (s *Service) Token() string { return s.loadGate().token }

// Info returns a snapshot of the service. ctx bounds the reading of an
// asynchronous service's queue numbers (a round trip to a broker).
func (s *Service) Info(ctx context.Context) Info {
	s.mu.Lock()
	in := s.infoLocked()
	s.mu.Unlock()
	// Outside the lock: on a broker, reading a queue's numbers is a round
	// trip to it.
	in.Queues = queueInfos(ctx, s.Queues())
	return in
}

func (s *Service) infoLocked() Info {
	in := Info{
		Name:           s.Name,
		Status:         s.rec.Status,
		Message:        s.rec.Message,
		Reason:         s.rec.Reason,
		Token:          s.token,
		CreateTime:     s.rec.CreateTime,
		UpdateTime:     s.rec.UpdateTime,
		CurrentVersion: s.rec.CurrentVersion,
		LatestVersion:  s.rec.LatestVersion,
		PendingVersion: s.pending,
		Config:         s.configs[s.rec.CurrentVersion],
	}
	if l := s.live.Load(); l != nil {
		in.RunningInstance = l.Instances()
	}
	if p := s.progress; p != nil && s.pending != 0 && p.Version == s.pending {
		cp := *p
		in.Progress = &cp
	}
	if s.spec != nil {
		in.TotalInstance = s.spec.Metadata.Instance
	}
	return in
}

// Events returns the service's events, oldest first.
func (s *Service) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.rec.Events...)
}

// Versions returns every stored version, oldest first.
func (s *Service) Versions() []VersionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]VersionInfo, 0, len(s.rec.Versions))
	for _, v := range s.rec.Versions {
		out = append(out, VersionInfo{
			Version:    v.Version,
			CreateTime: v.CreateTime,
			Current:    v.Version == s.rec.CurrentVersion,
			Config:     s.configs[v.Version],
		})
	}
	return out
}

func (s *Service) setStatusLocked(st Status, msg, reason string) {
	now := time.Now()
	s.rec.Status, s.rec.Message, s.rec.Reason = st, msg, reason
	s.rec.UpdateTime = now
	s.since = now
	s.publishLocked()
}

func (s *Service) eventLocked(typ, reason, msg string) {
	s.versionEventLocked(0, typ, reason, msg)
}

// versionEventLocked records an event about version v (0 = the version
// being loaded, else the current one) and logs it: the one place where
// lifecycle transitions are recorded.
func (s *Service) versionEventLocked(v int, typ, reason, msg string) {
	s.logEventLocked(v, typ, reason, msg)
	s.appendEventLocked(typ, reason, msg)
}

// appendEventLocked adds an event to the history, dropping the oldest past
// MaxEvents.
func (s *Service) appendEventLocked(typ, reason, msg string) {
	s.rec.Events = append(s.rec.Events, Event{Time: time.Now().UTC(), Type: typ, Reason: reason, Message: msg})
	if n := len(s.rec.Events); n > MaxEvents {
		s.rec.Events = append([]Event(nil), s.rec.Events[n-MaxEvents:]...)
	}
}

// noEffectEventLocked records, as one Warning event, the keys of version
// v's service.json that have no effect on this server (servicejson's
// Warnings), so that whoever deployed an EAS file sees what it will not
// get. It returns the event's message, "" when there was none.
func (s *Service) noEffectEventLocked(v int, spec *servicejson.Service) string {
	ws := spec.Warnings()
	if len(ws) == 0 {
		return ""
	}
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	msg := fmt.Sprintf("version %d: keys with no effect here: %s", v, strings.Join(parts, "; "))
	s.eventLocked(EventWarning, "IgnoredKeys", msg)
	return msg
}

// sameConfig reports whether two configurations mean the same service,
// however they were spelled.
func sameConfig(a, b *servicejson.Service) bool {
	x, y := *a, *b
	x.Raw, y.Raw = nil, nil
	return reflect.DeepEqual(x, y)
}

// scaleOnly reports whether b differs from a in metadata.instance alone,
// which a new scheduler over the loaded model serves without a reload.
func scaleOnly(a, b *servicejson.Service) bool {
	if a.Metadata.Instance == b.Metadata.Instance {
		return false
	}
	x, y := *a, *b
	x.Raw, y.Raw = nil, nil
	x.Metadata.Instance, y.Metadata.Instance = 0, 0
	return reflect.DeepEqual(x, y)
}
