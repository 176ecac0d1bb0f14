package service

import (
	"strings"
	"testing"
)

// TestNoEffectKeysAreWarningEvents: a version whose service.json holds keys
// this server ignores deploys, and its events say which, as a Warning.
func TestNoEffectKeysAreWarningEvents(t *testing.T) {
	m := newManager(t, t.TempDir())
	spec := parse(t, `{"name":"w","processor":"echo","autoscaler":{"min":1,"max":3},"metadata":{"instance":1,"memory":4000}}`)
	svc, err := m.Deploy(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	warned := func(version string) bool {
		for _, e := range svc.Events() {
			if e.Type == EventWarning && e.Reason == "IgnoredKeys" && strings.Contains(e.Message, version) &&
				strings.Contains(e.Message, "autoscaler: accepted for EAS compatibility") && strings.Contains(e.Message, "metadata.memory") {
				return true
			}
		}
		return false
	}
	if !warned("version 1") {
		t.Fatalf("no IgnoredKeys warning for version 1 in %+v", svc.Events())
	}
	if _, err := m.Update(t.Context(), "w", parse(t, `{"name":"w","processor":"echo","autoscaler":{"min":1,"max":4},"metadata":{"instance":1,"memory":4000}}`)); err != nil {
		t.Fatal(err)
	}
	settle(t, m, "w")
	if !warned("version 2") {
		t.Errorf("no IgnoredKeys warning for version 2 in %+v", svc.Events())
	}
	clean, err := m.Deploy(t.Context(), parse(t, `{"name":"clean","processor":"echo","metadata":{"instance":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range clean.Events() {
		if e.Type == EventWarning {
			t.Errorf("a plain service.json got a warning: %+v", e)
		}
	}
}
