package wait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Poll(10*time.Second, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollTimesOutWithTheLastError(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Poll(30*time.Millisecond, func() error {
		calls++
		return fmt.Errorf("still missing (call %d)", calls)
	})
	took := time.Since(start)
	if err == nil || err.Error() != fmt.Sprintf("still missing (call %d)", calls) {
		t.Fatalf("Poll = %v, want the last call's error (call %d)", err, calls)
	}
	if took < 30*time.Millisecond || calls < 2 {
		t.Errorf("gave up after %v and %d calls, want at least the 30ms timeout and a call after it", took, calls)
	}
}

// recorder is a testing.TB whose Fatalf records instead of ending the
// goroutine.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestUntilFailsSayingWhatIsMissing(t *testing.T) {
	r := &recorder{TB: t}
	Until(r, 10*time.Millisecond, func() error { return errors.New("the queue still holds 3 entries") })
	if !strings.Contains(r.fatal, "after 10ms: the queue still holds 3 entries") {
		t.Errorf("Until failed with %q, want the timeout and the condition's last error", r.fatal)
	}
	r = &recorder{TB: t}
	Until(r, time.Second, func() error { return nil })
	if r.fatal != "" {
		t.Errorf("Until failed with %q on a condition that holds", r.fatal)
	}
}
