// Package frame is the wire between the server and the worker processes of
// a custom processor (processor_path): the C worker (package cworker) and the
// Python allspark package speak it over one Unix stream socket per worker
// process.
//
// A frame is a 13-byte header and a payload, integers big-endian:
//
//	u32 length   of kind + id + payload (so at least 9)
//	u8  kind     one of the Kind constants
//	u64 id       request id (0 for the handshake frames)
//	payload
//
// A worker process says Hello (JSON), the server answers Init (JSON), the
// worker runs the user's initialize and says Ready or Fail (a message). Then
// the server sends Request frames (the request body) and the worker answers
// each with an Answer frame (u32 HTTP status, then the body) of the same id,
// in any order: a worker may run several requests at once. A worker serving
// a batch-inference model class gets Batch frames instead: N requests'
// tensors in one frame (see AppendBatch), answered by one Answer.
//
// The format is small on purpose: the Python side reads it with struct and
// nothing else, and a fuzz test holds the Go reader to never panicking and
// to round-tripping whatever it accepts.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Kind says what a frame carries.
type Kind byte

// The frame kinds.
const (
	Hello   Kind = 'H' // worker -> server, first frame: HelloInfo as JSON
	Init    Kind = 'I' // server -> worker: InitInfo as JSON
	Ready   Kind = 'R' // worker -> server: initialize succeeded
	Fail    Kind = 'F' // worker -> server: initialize failed, or in place of Hello the worker cannot start; payload is the reason
	Request Kind = 'Q' // server -> worker: one request body
	Answer  Kind = 'A' // worker -> server: u32 status, then the response body
	// Batch is server -> worker: the tensors of several requests at once
	// (AppendBatch), for a batch-inference model class; the worker answers
	// with one Answer of the same id whose body, when the status is 200, is
	// each request's output tensors in the same form.
	Batch Kind = 'B'
)

// HeaderSize is the size of a frame header: length, kind and id.
const HeaderSize = 13

// minLength is the smallest length field: kind and id with no payload.
const minLength = 9

// Frame is one message.
type Frame struct {
	Kind    Kind
	ID      uint64
	Payload []byte
}

// HelloInfo is what a worker process says first.
type HelloInfo struct {
	PID     int    `json:"pid"`
	Runtime string `json:"runtime"` // e.g. "cpp", "python 3.11.2"
	// Processes is how many worker processes the user's code asks for
	// (allspark's worker_processes); the server starts the others. 0 or 1:
	// this one alone.
	Processes int `json:"worker_processes,omitempty"`
	// Threads is how many requests this process runs at once.
	Threads int `json:"worker_threads,omitempty"`
}

// InitInfo is what the server tells a worker to initialize with.
type InitInfo struct {
	Service     string `json:"service"`
	Entry       string `json:"processor_entry"` // absolute path of the entry file
	ModelPath   string `json:"model_path"`      // local model file or directory; "" when none
	ModelEntry  string `json:"model_entry"`     // what initialize receives as model_entry
	ModelConfig string `json:"model_config"`    // model_config as a string
	Threads     int    `json:"worker_threads"`  // requests at once (the C worker's threads)
}

// Known reports whether k is one of the kinds above.
func (k Kind) Known() bool {
	switch k {
	case Hello, Init, Ready, Fail, Request, Answer, Batch:
		return true
	}
	return false
}

// ErrTooLarge is returned by Read for a frame over its limit.
var ErrTooLarge = errors.New("frame: frame larger than the limit")

// Read reads one frame from r. A payload over max bytes is refused before it
// is read. The payload is a new slice the caller owns.
func Read(r io.Reader, max int) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f, n, err := parseHeader(h[:], max)
	if err != nil {
		return Frame{}, err
	}
	f.Payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}

// parseHeader checks a header and returns the frame without its payload
// and the payload's length.
func parseHeader(h []byte, max int) (Frame, int, error) {
	length := binary.BigEndian.Uint32(h[0:4])
	if length < minLength {
		return Frame{}, 0, fmt.Errorf("frame: length %d is shorter than a header", length)
	}
	n := int64(length) - minLength
	if n > int64(max) {
		return Frame{}, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, max)
	}
	k := Kind(h[4])
	if !k.Known() {
		return Frame{}, 0, fmt.Errorf("frame: unknown kind %q", h[4])
	}
	return Frame{Kind: k, ID: binary.BigEndian.Uint64(h[5:13])}, int(n), nil
}

// Append appends f's encoding to dst.
func Append(dst []byte, f Frame) []byte {
	return append(appendHeader(dst, f.Kind, f.ID, len(f.Payload)), f.Payload...)
}

// AppendParts appends one frame whose payload is the concatenation of
// parts, without building the payload first.
func AppendParts(dst []byte, k Kind, id uint64, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = appendHeader(dst, k, id, n)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

func appendHeader(dst []byte, k Kind, id uint64, payload int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(minLength+payload))
	dst = append(dst, byte(k))
	return binary.BigEndian.AppendUint64(dst, id)
}

// AnswerPayload is an Answer's payload: the status, then the body.
func AnswerPayload(status int, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(status)), body...)
}

// ParseAnswer splits an Answer's payload into the HTTP status and the body.
// A status outside 100..599 is an error: it came from user code, and no
// client could be sent it.
func ParseAnswer(p []byte) (status int, body []byte, err error) {
	if len(p) < 4 {
		return 0, nil, fmt.Errorf("frame: answer of %d bytes has no status", len(p))
	}
	s := binary.BigEndian.Uint32(p[:4])
	if s < 100 || s > 599 {
		return 0, nil, fmt.Errorf("frame: answer status %d is not an HTTP status (100..599)", s)
	}
	return int(s), p[4:], nil
}

// Writer sends frames on a stream from many goroutines and coalesces them:
// frames sent while a write is in progress leave together in the next
// write, so a busy connection costs about one system call per batch of
// frames rather than one per frame, and an idle one adds no delay.
type Writer struct {
	w io.Writer

	mu       sync.Mutex
	pending  []byte
	spare    []byte
	flushing bool
	err      error
}

// NewWriter makes a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// maxSpare bounds the buffer a Writer keeps between writes, so one large
// answer does not pin its memory.
const maxSpare = 1 << 20

// Send queues one frame whose payload is the concatenation of parts and
// returns once it is written or handed to the goroutine writing. The error
// is the stream's first write error, if any.
func (w *Writer) Send(k Kind, id uint64, parts ...[]byte) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	w.pending = AppendParts(w.pending, k, id, parts...)
	if w.flushing {
		w.mu.Unlock()
		return nil
	}
	w.flushing = true
	for len(w.pending) > 0 && w.err == nil {
		buf := w.pending
		w.pending = w.spare[:0]
		w.spare = nil
		w.mu.Unlock()
		_, err := w.w.Write(buf)
		w.mu.Lock()
		if cap(buf) <= maxSpare {
			w.spare = buf[:0]
		}
		if err != nil {
			w.err = err
		}
	}
	w.flushing = false
	err := w.err
	w.mu.Unlock()
	return err
}
