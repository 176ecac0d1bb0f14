// Package badinput is the error type for a caller's bad request: the server
// answers it 400 (gRPC InvalidArgument) with its message. It is a leaf
// package so that the wire codecs, which find most bad input, can use it
// without importing the processors above them.
package badinput

import (
	"errors"
	"fmt"
)

// Error is a problem with the caller's request, not with the server or the
// model. Its message names what was wrong and, where it can, what to send.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// Errorf builds an *Error.
func Errorf(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// Is reports whether err is, or wraps, an *Error.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
