package processors

import (
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/scheduler"
)

// The contract speaks of two server-only packages, internal/badinput (the
// 400 error) and internal/scheduler (Spec.Schedulers, RouteConfig). Code
// outside this module cannot import them, so their few names that a
// processor written elsewhere needs are given here. They are aliases: the
// same types and values, not copies.

// BadInput is a problem with the caller's request (HTTP 400, gRPC
// InvalidArgument); its message names what was wrong and what to send.
type BadInput = badinput.Error

// BadInputf builds a *BadInput.
func BadInputf(format string, args ...any) error { return badinput.Errorf(format, args...) }

// IsBadInput reports whether err is, or wraps, a *BadInput.
func IsBadInput(err error) bool { return badinput.Is(err) }

// Scheduler admits, queues, batches and runs one model version's requests
// (what Schedulers.NewScheduler returns to a ModelRouter).
type Scheduler = scheduler.Scheduler

// SchedulerConfig is a scheduler's limits (what RouteConfig computes).
type SchedulerConfig = scheduler.Config

// RunFunc runs one batch, KeyFunc groups payloads into batches and
// SchedulerObserver receives a scheduler's measurements.
type (
	RunFunc           = scheduler.RunFunc
	KeyFunc           = scheduler.KeyFunc
	SchedulerObserver = scheduler.Observer
)

// The errors a Scheduler's Admit and Do answer for a refused request.
var (
	ErrQueueFull   = scheduler.ErrQueueFull   // 450
	ErrRateLimited = scheduler.ErrRateLimited // 429
	ErrStopped     = scheduler.ErrStopped     // 503
)
