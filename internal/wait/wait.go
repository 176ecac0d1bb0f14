// Package wait is the one way tests wait for something another goroutine or
// process does: Until polls a condition that says what is still missing,
// and fails the test with that description when the time runs out.
//
// A test that sleeps "long enough" and then looks passes without checking
// when the thing has not happened yet (a negative check sees nothing) and
// fails on a loaded machine when it happens late; a hand-written polling
// loop tends to forget the deadline, or to break out of it silently and
// let the assertions after it pass or fail for the wrong reason. Waiting
// on an observable condition with one bounded, self-describing helper
// avoids both.
package wait

import (
	"testing"
	"time"
)

// The polling interval starts at minInterval and doubles up to
// maxInterval: a condition that holds soon is seen soon, and one that
// takes seconds (a child process, a Kubernetes rollout) is not asked
// hundreds of times a second.
const (
	minInterval = time.Millisecond
	maxInterval = 50 * time.Millisecond
)

// Until calls cond until it returns nil, and fails t with cond's last error
// (what was still missing) when timeout passes first. cond runs on the
// calling goroutine, so it may use t itself (t.Fatal on a state that can
// never turn right); Until must therefore be called from the test's own
// goroutine, as t.Fatalf requires. cond is called at least once, and once
// more after the deadline, so a timeout is never reported on a stale
// answer.
func Until(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("after %v: %v", timeout, err)
	}
}

// Poll is Until without a test: it returns nil once cond does, else cond's
// last error when timeout has passed. For waits inside helpers that have
// no testing.TB, or on goroutines where t.Fatal is not allowed.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	interval := minInterval
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(interval, left))
		interval = min(2*interval, maxInterval)
	}
}
