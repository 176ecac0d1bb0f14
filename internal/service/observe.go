package service

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/internal/storage"
)

// This file is where the lifecycle becomes visible outside the service's
// events: every event is logged here (versionEventLocked calls
// logEventLocked), and every published change of state or current version
// updates the service's metrics here (publishLocked calls observeLocked).

// allStates are the values of eas_service_state's state label.
var allStates = []string{string(Creating), string(Running), string(Updating), string(Failed), string(Stopped)}

// shown is what the metrics last showed of a service.
type shown struct {
	status    Status
	version   int
	processor string
}

// observeLocked brings eas_service_state and eas_service_info up to date
// with the service's state and current version. A deleted service shows
// nothing: its series are forgotten and must not come back.
func (s *Service) observeLocked() {
	if s.mgr == nil || s.deleted {
		return
	}
	mt := s.mgr.opt.Metrics
	if s.rec.Status != s.shown.status {
		s.shown.status = s.rec.Status
		mt.ServiceState(s.Name, string(s.rec.Status), allStates)
	}
	proc := ""
	if s.spec != nil {
		proc = s.spec.ProcessorName()
	}
	if v := s.rec.CurrentVersion; v != s.shown.version || proc != s.shown.processor {
		s.shown.version, s.shown.processor = v, proc
		mt.ServiceInfo(s.Name, strconv.Itoa(v), proc)
	}
}

// logEventLocked writes an event as one log line: service, the version it
// concerns (v; 0 = the version being loaded, else the current one), its
// reason and its message. Warnings log at Warn.
func (s *Service) logEventLocked(v int, typ, reason, msg string) {
	if s.mgr == nil || reason == "IgnoredKeys" { // IgnoredKeys: the caller logs the keys itself
		return
	}
	if v == 0 {
		v = s.pending
	}
	if v == 0 {
		v = s.rec.CurrentVersion
	}
	level := slog.LevelInfo
	if typ == EventWarning {
		level = slog.LevelWarn
	}
	s.mgr.log.LogAttrs(context.Background(), level, "lifecycle",
		slog.String("service", s.Name), slog.Int("version", v), slog.String("reason", reason), slog.String("detail", msg))
}

// loadFailureReason is the stage a load failed at, the reason label of
// eas_model_load_failures_total: canceled (stop, delete, shutdown), fetch
// (model_path, warm_up_data_path), load, warmup, or config (the processor
// refused its configuration). The prefixes are the ones load writes.
func loadFailureReason(err error) string {
	var fe *storage.FetchError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.As(err, &fe):
		return "fetch"
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "load:"):
		return "load"
	case strings.HasPrefix(msg, "warm-up:"):
		return "warmup"
	case strings.Contains(msg, "does not support warm-up"):
		return "config"
	case strings.HasPrefix(msg, "model_path:"), strings.HasPrefix(msg, "warm_up_data_path:"):
		return "fetch"
	}
	return "config"
}
