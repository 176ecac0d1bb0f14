package service

import (
	"context"
	"fmt"
	"testing"
)

// TestProcessorEvents: what a loaded processor reports (Spec.Event) joins
// the service's events, under its version, and its state dir; a worker
// crashing in a loop keeps its latest maxProcessorEvents of a reason and
// does not push the service's own history (Created, Running) out.
func TestProcessorEvents(t *testing.T) {
	dir := t.TempDir()
	m1 := NewManager(Options{StateDir: dir})
	if _, err := m1.Deploy(t.Context(), parse(t, `{"name":"e","processor":"echo","token":"t","metadata":{"instance":1}}`)); err != nil {
		t.Fatal(err)
	}
	s, _ := m1.Get("e")
	report := m1.processorEvents(s, 1)
	for i := range 3 * MaxEvents {
		report(true, "WorkerCrashed", fmt.Sprintf("crash %d", i))
		report(false, "WorkerRestarted", fmt.Sprintf("restart %d", i))
	}
	m1.Shutdown(context.Background())
	m2 := newManager(t, dir)
	if n, problems := m2.Restore(); n != 1 || len(problems) != 0 {
		t.Fatalf("restored %d, problems %v", n, problems)
	}
	s, _ = m2.Get("e")
	count := map[string]int{}
	last := map[string]Event{}
	for _, e := range s.Events() {
		count[e.Reason]++
		last[e.Reason] = e
	}
	if count["Created"] != 1 || count["Running"] == 0 {
		t.Errorf("the service's own events went: %v", count)
	}
	for reason, want := range map[string]Event{
		"WorkerCrashed":   {Type: EventWarning, Message: fmt.Sprintf("version 1: crash %d", 3*MaxEvents-1)},
		"WorkerRestarted": {Type: EventNormal, Message: fmt.Sprintf("version 1: restart %d", 3*MaxEvents-1)},
	} {
		if count[reason] != maxProcessorEvents || last[reason].Type != want.Type || last[reason].Message != want.Message {
			t.Errorf("%s: %d events, the last %+v; want %d, the last %s %q", reason, count[reason], last[reason], maxProcessorEvents, want.Type, want.Message)
		}
	}
}
