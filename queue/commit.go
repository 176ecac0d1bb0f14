package queue

import (
	"context"

	bolt "go.etcd.io/bbolt"
)

// committer is the store's group commit: writes queue up while a
// transaction commits, and the next transaction takes all of them, with
// one fsync. The batch size follows the disk: the slower an fsync, the
// more writes share the next one, and a lone write waits for no timer.
type committer struct {
	db   *bolt.DB
	work chan write
	quit chan struct{}
	done chan struct{}
}

type write struct {
	fn  func(*bolt.Tx) error
	err chan error
}

// maxGroup bounds one transaction's writes.
const maxGroup = 4096

func newCommitter(db *bolt.DB) *committer {
	c := &committer{db: db, work: make(chan write, maxGroup), quit: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// do runs fn in a transaction shared with the writes queued beside it and
// returns once it is durable. ctx bounds the wait for a place in the
// queue of writes; a write taken is not abandoned (it lands or fails as
// one), so do then waits for its result.
func (c *committer) do(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := write{fn: fn, err: make(chan error, 1)}
	select {
	case c.work <- w:
	case <-c.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-w.err
}

func (c *committer) run() {
	defer close(c.done)
	for {
		var group []write
		select {
		case w := <-c.work:
			group = append(group, w)
		case <-c.quit:
			return
		}
	more:
		for len(group) < maxGroup {
			select {
			case w := <-c.work:
				group = append(group, w)
			default:
				break more
			}
		}
		err := c.db.Update(func(tx *bolt.Tx) error {
			for _, w := range group {
				if err := w.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && len(group) > 1 {
			// One write failed the group: run each alone, so only it fails.
			for _, w := range group {
				w.err <- c.db.Update(w.fn)
			}
			continue
		}
		for _, w := range group {
			w.err <- err
		}
	}
}

// close stops the committer after the writes already taken.
func (c *committer) close() {
	close(c.quit)
	<-c.done
}
