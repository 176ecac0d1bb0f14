// Package httpstatus maps the errors of a request's run (a processor's,
// the scheduler's) to EAS's HTTP status codes. It is the one map: the
// synchronous doors answer with it, and asynchronous services write it
// into the sink with a failed request's message.
package httpstatus

import (
	"errors"
	"net/http"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
)

// Of maps err to a status code: a processor's *StatusError its code, a bad
// request 400, the scheduler's sentinels 450, 429, 408, 499 and 503, and
// anything else (a processor failure, a recovered panic) 500.
func Of(err error) int {
	var se *processors.StatusError
	switch {
	case errors.As(err, &se):
		return se.Code
	case badinput.Is(err):
		return http.StatusBadRequest
	case errors.Is(err, scheduler.ErrQueueFull):
		return 450
	case errors.Is(err, scheduler.ErrRateLimited):
		return http.StatusTooManyRequests
	case errors.Is(err, scheduler.ErrDeadline):
		return http.StatusRequestTimeout
	case errors.Is(err, scheduler.ErrCanceled):
		return 499
	case errors.Is(err, scheduler.ErrStopped):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
