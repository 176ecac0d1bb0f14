// Package queuetest is the behaviour every queue.Backend keeps, as a test
// suite: the embedded store and the JetStream backend run the same one.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/eas-server/eas-server/queue"
)

// Caps says what a backend supports beyond the common behaviour.
type Caps struct {
	Priority bool // a put's priority orders delivery
}

// Run runs the suite; open makes a new, empty backend for each test.
func Run(t *testing.T, open func(t *testing.T) queue.Backend, caps Caps) {
	t.Run("PutGetWatchCommit", func(t *testing.T) { putGetWatchCommit(t, open(t), caps) })
	t.Run("RedeliveryAndDeadLetter", func(t *testing.T) { redeliveryAndDeadLetter(t, open(t)) })
	t.Run("TransferDeleteTruncateEnd", func(t *testing.T) { transferDeleteTruncateEnd(t, open(t)) })
	t.Run("Search", func(t *testing.T) { search(t, open(t), caps) })
	t.Run("FullAndContext", func(t *testing.T) { fullAndContext(t, open(t)) })
	t.Run("ReadWithinBytes", func(t *testing.T) { readWithinBytes(t, open(t)) })
}

// pages is a queue.FrameWriter that keeps what a read hands it.
type pages struct {
	begun  int
	next   uint64
	frames []queue.Frame
}

func (p *pages) Begin(next uint64) error {
	p.begun++
	p.next = next
	return nil
}

func (p *pages) Frame(f queue.Frame) error {
	if p.begun != 1 {
		return fmt.Errorf("frame %d before Begin", f.Index)
	}
	f.Data = append([]byte(nil), f.Data...) // valid only during the call
	p.frames = append(p.frames, f)
	return nil
}

// readWithinBytes: a read stops before the entry that would pass MaxBytes,
// says which one that is, answers one entry however large, and reads by
// tag and request id as Get does.
func readWithinBytes(t *testing.T, b queue.Backend) {
	ctx := t.Context()
	_, sink := queues(t, b)
	var idx []uint64
	var ids []string
	for i := range 6 {
		data := make([]byte, 1000)
		for j := range data {
			data[j] = byte('a' + i)
		}
		n, id, err := sink.Put(ctx, data, map[string]string{"odd": fmt.Sprint(i%2 == 1)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		idx, ids = append(idx, n), append(ids, id)
	}
	read := func(o queue.ReadOptions) *pages {
		t.Helper()
		var p pages
		n, err := sink.Read(ctx, o, &p)
		if err != nil || n != len(p.frames) {
			t.Fatalf("read %+v: %d frames, %v; the writer took %d", o, n, err, len(p.frames))
		}
		return &p
	}
	p := read(queue.ReadOptions{Length: 10, MaxBytes: 2500})
	if len(p.frames) != 2 || p.frames[0].Index != idx[0] || p.frames[1].Data[0] != 'b' || p.next != idx[2] {
		t.Errorf("a read of entries of 1000 bytes under a cap of 2500: %d frames, next %d; want 2, next %d", len(p.frames), p.next, idx[2])
	}
	p = read(queue.ReadOptions{From: idx[2], Length: 10, MaxBytes: 2500, Filter: map[string]string{"odd": "true"}})
	if len(p.frames) != 2 || p.frames[0].Index != idx[3] || p.frames[1].Index != idx[5] || p.next != 0 {
		t.Errorf("odd entries from %d: %+v, next %d; want %d and %d, no next", idx[2], p.frames, p.next, idx[3], idx[5])
	}
	p = read(queue.ReadOptions{Length: 10, MaxBytes: 1})
	if len(p.frames) != 1 || p.next != idx[1] {
		t.Errorf("under a cap smaller than one entry: %d frames, next %d; want one, next %d", len(p.frames), p.next, idx[1])
	}
	p = read(queue.ReadOptions{Length: 10, MaxBytes: 1, Filter: map[string]string{queue.RequestIDTag: ids[4]}, AutoDelete: true})
	if len(p.frames) != 1 || p.frames[0].Index != idx[4] || p.next != 0 {
		t.Errorf("by request id: %+v, next %d", p.frames, p.next)
	}
	p = read(queue.ReadOptions{Length: 10, Filter: map[string]string{"odd": "maybe"}})
	if p.begun != 0 || len(p.frames) != 0 {
		t.Errorf("a read matching nothing began %d times, took %d frames", p.begun, len(p.frames))
	}
	if fs, _ := sink.Get(ctx, 0, 10, 0, false, map[string]string{queue.RequestIDTag: ids[4]}); len(fs) != 0 {
		t.Errorf("auto-deleted, still there: %+v", fs)
	}
}

func queues(t *testing.T, b queue.Backend) (queue.Queue, queue.Queue) {
	t.Helper()
	t.Cleanup(func() { b.Close() })
	in, err := b.Queue(t.Context(), "input", queue.Config{MaxLength: 100, MaxPayload: 1 << 10, MaxDelivery: 2})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := b.Queue(t.Context(), "sink", queue.Config{MaxLength: 100})
	if err != nil {
		t.Fatal(err)
	}
	return in, sink
}

func stats(t *testing.T, q queue.Queue) queue.Stats {
	t.Helper()
	st, err := q.Stats(t.Context())
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	return st
}

func next(t *testing.T, w queue.Watcher) queue.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return f
}

func putGetWatchCommit(t *testing.T, b queue.Backend, caps Caps) {
	ctx := context.Background()
	in, _ := queues(t, b)
	i1, id1, err := in.Put(ctx, []byte("a"), map[string]string{"k": "v"}, 0)
	if err != nil || i1 == 0 || id1 == "" {
		t.Fatalf("put: %d %q %v", i1, id1, err)
	}
	i2, _, _ := in.Put(ctx, []byte("b"), nil, 0)
	i3, _, _ := in.Put(ctx, []byte("c"), nil, 7)
	if !(i1 < i2 && i2 < i3) {
		t.Errorf("indexes %d %d %d do not ascend", i1, i2, i3)
	}
	if _, _, err := in.Put(ctx, make([]byte, 2<<10), nil, 0); !errors.Is(err, queue.ErrTooLarge) {
		t.Errorf("oversized put: %v", err)
	}
	fs, err := in.Get(ctx, 0, 10, 0, false, map[string]string{queue.RequestIDTag: id1})
	if err != nil || len(fs) != 1 || string(fs[0].Data) != "a" || fs[0].Tags["k"] != "v" || fs[0].Index != i1 {
		t.Fatalf("get by request id: %+v %v", fs, err)
	}
	fs, err = in.Get(ctx, i2, 10, 0, false, nil)
	if err != nil || len(fs) != 2 || fs[0].Index != i2 {
		t.Fatalf("get from an index: %+v %v", fs, err)
	}
	w := in.Watch(queue.WatchOptions{Window: 2})
	defer w.Close(ctx, "done")
	f, g := next(t, w), next(t, w)
	if caps.Priority && f.Index != i3 {
		t.Errorf("first delivery %d, want the prioritized %d", f.Index, i3)
	}
	if f.Index == g.Index || f.Deliveries != 1 {
		t.Errorf("deliveries %+v %+v", f, g)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := w.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past the window: %v, want a wait", err)
	}
	cancel()
	if err := in.Commit(ctx, f.Index); err != nil {
		t.Fatal(err)
	}
	h := next(t, w)
	if h.Index == f.Index || h.Index == g.Index {
		t.Errorf("after a commit: %d again", h.Index)
	}
	if st := stats(t, in); st.Length != 2 || st.InFlight != 2 || st.Consumers != 1 {
		t.Errorf("stats %+v: want 2 entries (one committed), both in flight, 1 consumer", st)
	}
}

func redeliveryAndDeadLetter(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	in, sink := queues(t, b)
	var dead []string
	in.SetDeadLetter(func(ctx context.Context, f queue.Frame, reason string) error {
		dead = append(dead, reason)
		_, err := b.Transfer(ctx, in, f.Index, sink, queue.Frame{Tags: f.Tags, Message: reason})
		return err
	})
	idx, id, _ := in.Put(ctx, []byte("x"), nil, 0)
	for round := 1; round <= 2; round++ {
		w := in.Watch(queue.WatchOptions{Window: 1})
		f := next(t, w)
		if f.Index != idx || f.Deliveries != int64(round) {
			t.Fatalf("round %d: %+v", round, f)
		}
		if err := w.Close(ctx, "consumer gone"); err != nil {
			t.Fatal(err)
		}
	}
	if len(dead) != 1 || dead[0] != "dead-lettered after 2 deliveries: consumer gone" {
		t.Fatalf("dead letters %q", dead)
	}
	fs, err := sink.Get(ctx, 0, 10, time.Second, false, map[string]string{queue.RequestIDTag: id})
	if err != nil || len(fs) != 1 || fs[0].Message != dead[0] {
		t.Errorf("sink %+v %v", fs, err)
	}
	if fs, _ := in.Get(ctx, 0, 10, 0, false, nil); len(fs) != 0 {
		t.Errorf("the dead letter is still in the input queue: %+v", fs)
	}
	if st := stats(t, in); st.Redeliveries != 1 || st.DeadLettered != 1 {
		t.Errorf("redeliveries %d, dead-lettered %d, want 1 and 1 (the first consumer's close; the second dead-letters)", st.Redeliveries, st.DeadLettered)
	}

	// The sink has no dead-letter function: an answer its readers took
	// MaxDelivery times (the default, 5) without committing is deleted,
	// and counted.
	for range 5 {
		w := sink.Watch(queue.WatchOptions{Window: 1})
		next(t, w)
		if err := w.Close(ctx, "reader gone"); err != nil {
			t.Fatal(err)
		}
	}
	if fs, _ := sink.Get(ctx, 0, 10, 0, false, nil); len(fs) != 0 {
		t.Errorf("the sink still holds the answer read twice uncommitted: %+v", fs)
	}
	if st := stats(t, sink); st.DeadLettered != 1 {
		t.Errorf("sink dead-lettered %d, want 1: the deleted answer must be counted", st.DeadLettered)
	}
}

func transferDeleteTruncateEnd(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	in, sink := queues(t, b)
	idx, id, _ := in.Put(ctx, []byte("q"), map[string]string{"user": "u"}, 0)
	w := in.Watch(queue.WatchOptions{Window: 1})
	f := next(t, w)
	if _, err := b.Transfer(ctx, in, f.Index, sink, queue.Frame{Data: []byte("answer"), Tags: f.Tags}); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx, "done") //nolint:errcheck
	fs, err := sink.Get(ctx, 0, 1, time.Second, false, map[string]string{queue.RequestIDTag: id})
	if err != nil || len(fs) != 1 || string(fs[0].Data) != "answer" || fs[0].Tags["user"] != "u" {
		t.Fatalf("the answer: %+v %v", fs, err)
	}
	if fs, _ := in.Get(ctx, idx, 1, 0, false, nil); len(fs) != 0 {
		t.Errorf("the answered request is still queued: %+v", fs)
	}
	var idxs []uint64
	for i := range 4 {
		x, _, err := sink.Put(ctx, fmt.Appendf(nil, "s%d", i), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		idxs = append(idxs, x)
	}
	if err := sink.Delete(ctx, idxs[3]); err != nil {
		t.Fatal(err)
	}
	if err := sink.Truncate(ctx, idxs[1]); err != nil {
		t.Fatal(err)
	}
	fs, _ = sink.Get(ctx, 0, 10, 0, false, nil)
	if len(fs) != 2 || string(fs[0].Data) != "s1" || string(fs[1].Data) != "s2" {
		t.Errorf("after delete and truncate: %+v", fs)
	}
	if err := sink.End(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sink.Put(ctx, []byte("late"), nil, 0); !errors.Is(err, queue.ErrEnded) {
		t.Errorf("put after the end: %v", err)
	}
	sw := sink.Watch(queue.WatchOptions{Window: 10, AutoCommit: true})
	defer sw.Close(ctx, "done")
	next(t, sw)
	next(t, sw)
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := sw.Next(ectx); err != io.EOF {
		t.Errorf("after the last entry of an ended queue: %v, want EOF", err)
	}
}

// search: a waiting entry counts the entries delivered before it; a held
// one names its consumer; a gone one is ErrNoEntry.
func search(t *testing.T, b queue.Backend, caps Caps) {
	ctx := t.Context()
	in, _ := queues(t, b)
	var idx []uint64
	for i := range 3 {
		x, _, err := in.Put(ctx, fmt.Appendf(nil, "e%d", i), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, x)
	}
	for k, x := range idx {
		if p, err := in.Search(ctx, x); err != nil || p.InFlight || p.Ahead != k {
			t.Errorf("search %d: %+v %v, want waiting behind %d", x, p, err, k)
		}
	}
	w := in.Watch(queue.WatchOptions{Window: 1, Consumer: "grp.me"})
	defer w.Close(ctx, "done")
	if f := next(t, w); f.Index != idx[0] {
		t.Fatalf("delivered %d, want %d", f.Index, idx[0])
	}
	if p, err := in.Search(ctx, idx[0]); err != nil || !p.InFlight || p.Consumer != "grp.me" || p.Ahead != 0 {
		t.Errorf("search of the held entry: %+v %v", p, err)
	}
	if p, err := in.Search(ctx, idx[2]); err != nil || p.InFlight || p.Ahead != 1 {
		t.Errorf("search behind a held entry: %+v %v, want 1 ahead", p, err)
	}
	if caps.Priority {
		hi, _, _ := in.Put(ctx, []byte("urgent"), nil, 9)
		if p, err := in.Search(ctx, hi); err != nil || p.Ahead != 0 {
			t.Errorf("search of a prioritized entry: %+v %v, want first in line", p, err)
		}
		if p, err := in.Search(ctx, idx[1]); err != nil || p.Ahead != 1 {
			t.Errorf("search behind a prioritized entry: %+v %v, want 1 ahead", p, err)
		}
	}
	if err := in.Commit(ctx, idx[0]); err != nil {
		t.Fatal(err)
	}
	for _, x := range []uint64{idx[0], idx[2] + 100} {
		if p, err := in.Search(ctx, x); !errors.Is(err, queue.ErrNoEntry) {
			t.Errorf("search of %d, not in the queue: %+v %v, want ErrNoEntry", x, p, err)
		}
	}
}

// fullAndContext: a put beyond MaxLength is ErrFull (a broker's refusal
// matched by its error code); a call whose context is done gives up with
// the context's error.
func fullAndContext(t *testing.T, b queue.Backend) {
	ctx := t.Context()
	t.Cleanup(func() { b.Close() })
	q, err := b.Queue(ctx, "small", queue.Config{MaxLength: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, _, err := q.Put(ctx, fmt.Appendf(nil, "%d", i), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := q.Put(ctx, []byte("3rd"), nil, 0); !errors.Is(err, queue.ErrFull) {
		t.Errorf("put into a full queue: %v, want ErrFull", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := q.WaitRoom(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitRoom on a full queue: %v, want the deadline", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := q.Put(done, []byte("late"), nil, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("put under a done context: %v, want context.Canceled", err)
	}
	if err := q.Truncate(ctx, 2); err != nil { // the first entry goes
		t.Fatal(err)
	}
	if _, _, err := q.Put(ctx, []byte("3rd"), nil, 0); err != nil {
		t.Errorf("put after a truncate: %v", err)
	}
}
