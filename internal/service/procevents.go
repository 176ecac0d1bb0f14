package service

import "fmt"

// maxProcessorEvents bounds the events of one reason a processor reports
// (processors.Spec.Event) that a service keeps: the oldest of that reason
// goes first, so a worker that crashes in a loop keeps its latest crashes
// without pushing the service's lifecycle (Created, Running, ...) out of
// its MaxEvents.
const maxProcessorEvents = 8

// processorEvents is processors.Spec.Event for version v of s: what the
// loaded processor reports on its own (a custom processor's worker crashed,
// was restarted) becomes one of the service's events, saved with them. The
// processor has logged it already: it is not logged again.
func (m *Manager) processorEvents(s *Service, v int) func(warning bool, reason, message string) {
	return func(warning bool, reason, message string) {
		typ := EventNormal
		if warning {
			typ = EventWarning
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.deleted {
			return
		}
		s.processorEventLocked(typ, reason, fmt.Sprintf("version %d: %s", v, message))
		_ = m.saveLocked(s)
	}
}

// processorEventLocked records a processor's event, keeping at most
// maxProcessorEvents of its reason.
func (s *Service) processorEventLocked(typ, reason, msg string) {
	n := 0
	for _, e := range s.rec.Events {
		if e.Reason == reason {
			n++
		}
	}
	if n >= maxProcessorEvents {
		for i, e := range s.rec.Events {
			if e.Reason == reason {
				s.rec.Events = append(s.rec.Events[:i:i], s.rec.Events[i+1:]...)
				break
			}
		}
	}
	s.appendEventLocked(typ, reason, msg)
}
