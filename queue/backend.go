package queue

import (
	"context"
	"fmt"
	"time"
)

// Backend holds a service's queues: the embedded Store, or a broker
// (package queue/jetstream) when the queues must outlive one machine.
//
// Every method that may wait (on the disk's group commit, on a broker's
// round trip, for an entry or for room) takes a context first and gives up
// with its error once it is done. The embedded store honours ctx while a
// write waits for its turn; a write already handed to the group commit
// finishes (it is durable or failed, never half done) and its result is
// returned.
type Backend interface {
	// Queue opens the named queue ("input", "sink") with its limits.
	Queue(ctx context.Context, name string, cfg Config) (Queue, error)
	// Transfer appends answer to out and removes the delivered entry
	// index from in, as one step: a crash leaves the request answered or
	// still queued, not both (the embedded store: one transaction; a
	// broker: deduplicated by the request id).
	Transfer(ctx context.Context, in Queue, index uint64, out Queue, answer Frame) (uint64, error)
	Close() error
}

// Queue is one queue of frames with consumer windows, as EAS's queue
// service defines it; the queue API (API) and an asynchronous service's
// instances use it.
type Queue interface {
	Name() string
	// Put appends a frame and returns its index and request id once it is
	// durable.
	Put(ctx context.Context, data []byte, tags map[string]string, priority int64) (uint64, string, error)
	// Get reads up to length frames from index from (0: the head) whose
	// tags match filter, waiting up to timeout for one.
	Get(ctx context.Context, from uint64, length int, timeout time.Duration, autoDelete bool, filter map[string]string) ([]Frame, error)
	// Read is Get handing each frame to w as it is read, within
	// o.MaxBytes: the queue API's get, which never holds its answer whole.
	Read(ctx context.Context, o ReadOptions, w FrameWriter) (int, error)
	// Watch adds a consumer; it does not wait.
	Watch(o WatchOptions) Watcher
	// Commit acknowledges delivered entries (they are done and removed).
	Commit(ctx context.Context, indexes ...uint64) error
	// Negative gives delivered entries back (or dead-letters them past
	// the delivery limit).
	Negative(ctx context.Context, reason string, indexes ...uint64) error
	Delete(ctx context.Context, indexes ...uint64) error
	// Truncate deletes the entries below index.
	Truncate(ctx context.Context, index uint64) error
	// Search says where the entry index stands: held by a consumer, or
	// waiting behind how many; ErrNoEntry when the queue does not hold it.
	Search(ctx context.Context, index uint64) (Position, error)
	// End ends the stream; force drops what is still queued.
	End(ctx context.Context, force bool) error
	// Stats reads the queue's numbers; on a broker that is a round trip,
	// which may fail.
	Stats(ctx context.Context) (Stats, error)
	// WaitRoom waits until the queue can take one more entry.
	WaitRoom(ctx context.Context) error
	// SetDeadLetter sets where an entry goes after its last delivery; f
	// gets the context of the call that dead-letters it (Negative, a
	// watcher's Next or Close).
	SetDeadLetter(f DeadLetterFunc)
}

// DeadLetterFunc takes an entry past its last delivery, with the reason;
// it removes the entry from its queue (the input queue's go to the sink
// through Backend.Transfer).
type DeadLetterFunc func(ctx context.Context, f Frame, reason string) error

// Position is where an entry stands in its queue (the queue API's search).
type Position struct {
	// InFlight: delivered to a consumer and not committed.
	InFlight bool
	// Consumer is the id of the consumer holding it (WatchOptions.Consumer),
	// when InFlight.
	Consumer string
	// Ahead counts the entries waiting to be delivered before it; 0 when
	// InFlight.
	Ahead int
}

// Watcher is one consumer of a queue.
type Watcher interface {
	// Next waits for the next entry the consumer may take (within its
	// window) and delivers it; io.EOF after the end of the stream.
	Next(ctx context.Context) (Frame, error)
	// Close ends the consumer; what it held uncommitted is redelivered
	// (or dead-lettered past the delivery limit). Pass a context that
	// outlives the consumer's own (context.WithoutCancel): giving entries
	// back must happen after the consumer's context is done.
	Close(ctx context.Context, reason string) error
}

var (
	_ Backend = (*Store)(nil)
	_ Queue   = (*boltQueue)(nil)
	_ Watcher = (*boltWatcher)(nil)
)

// FullError is the ErrFull of queue name holding its limit of entries,
// naming the service.json key that sets it (queue.source.max_length for
// the input queue, queue.sink.max_length for the sink); cause is the
// backend's own error, or nil.
func FullError(name string, limit int, cause error) error {
	key := "max_length"
	switch name {
	case "input":
		key = "queue.source.max_length"
	case "sink":
		key = "queue.sink.max_length"
	}
	what := "its limit"
	if limit > 0 {
		what = fmt.Sprintf("%d entries, its limit", limit)
	}
	if cause != nil {
		return fmt.Errorf("%w: the %s queue holds %s (%s); retry later, or raise %s: %w", ErrFull, name, what, key, key, cause)
	}
	return fmt.Errorf("%w: the %s queue holds %s (%s); retry later, or raise %s", ErrFull, name, what, key, key)
}
