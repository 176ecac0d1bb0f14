package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openQueues(t *testing.T, path string) (*Store, Queue, Queue) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Queue(t.Context(), "input", Config{MaxLength: 100, MaxPayload: 1 << 10, MaxDelivery: 2})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := s.Queue(t.Context(), "sink", Config{MaxLength: 3})
	if err != nil {
		t.Fatal(err)
	}
	return s, in, sink
}

// TestReopenKeepsEverything: entries, the last index, delivery counts and
// the end of stream survive closing the store (as after a crash: bbolt
// commits are durable when Put returns).
func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	s, in, sink := openQueues(t, path)
	for i := range 5 {
		if _, _, err := in.Put(ctx, fmt.Appendf(nil, "%d", i), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	w := in.Watch(WatchOptions{Window: 2})
	a, _ := w.Next(ctx)
	if _, err := s.Transfer(ctx, in, a.Index, sink, Frame{Data: []byte("answer"), Tags: a.Tags}); err != nil {
		t.Fatal(err)
	}
	b, _ := w.Next(ctx) // delivered, never answered: the crash
	if err := in.Delete(ctx, 5); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, in, sink = openQueues(t, path)
	defer s.Close()
	if st, _ := in.Stats(ctx); st.Length != 3 || st.Last != 5 {
		t.Fatalf("after reopen: %+v", st)
	}
	if idx, _, _ := in.Put(ctx, []byte("new"), nil, 0); idx != 6 {
		t.Errorf("an index is never reused: %d", idx)
	}
	fs, _ := sink.Get(ctx, 0, 10, 0, false, nil)
	if len(fs) != 1 || string(fs[0].Data) != "answer" || fs[0].Tags[RequestIDTag] != a.Tags[RequestIDTag] {
		t.Errorf("sink after reopen: %+v", fs)
	}
	w = in.Watch(WatchOptions{Window: 10})
	got, _ := w.Next(ctx)
	if got.Index != b.Index {
		t.Errorf("the unanswered entry comes first again: %d, want %d", got.Index, b.Index)
	}
}

func TestEndAndWaitRoom(t *testing.T) {
	ctx := context.Background()
	s, in, sink := openQueues(t, filepath.Join(t.TempDir(), "q.db"))
	defer s.Close()
	for i := range 3 {
		if _, _, err := sink.Put(ctx, fmt.Appendf(nil, "%d", i), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := sink.Put(ctx, []byte("4th"), nil, 0); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "raise queue.sink.max_length") {
		t.Errorf("full sink: %v, want ErrFull naming queue.sink.max_length", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	roomed := make(chan error, 1)
	go func() { defer wg.Done(); roomed <- sink.WaitRoom(ctx) }()
	select {
	case err := <-roomed:
		t.Fatalf("WaitRoom returned on a full queue: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := sink.Truncate(ctx, 2); err != nil { // drops index 1
		t.Fatal(err)
	}
	if err := <-roomed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	in.Put(ctx, []byte("last"), nil, 0)
	if err := in.End(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.Put(ctx, []byte("late"), nil, 0); !errors.Is(err, ErrEnded) {
		t.Errorf("put after the end: %v", err)
	}
	w := in.Watch(WatchOptions{AutoCommit: true})
	if f, err := w.Next(ctx); err != nil || string(f.Data) != "last" {
		t.Fatalf("the entry before the end: %+v %v", f, err)
	}
	if _, err := w.Next(ctx); err != io.EOF {
		t.Errorf("after the last entry: %v, want EOF", err)
	}
}

// TestTransferKeepsTheSinkLimits: an answer over the sink's payload limit
// becomes its reason (status 413); a full auto-evicting sink drops its
// oldest entry for the new answer.
func TestTransferKeepsTheSinkLimits(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, _ := s.Queue(ctx, "input", Config{MaxLength: 10})
	sink, _ := s.Queue(ctx, "sink", Config{MaxLength: 2, MaxPayload: 4, AutoEvict: true})
	w := in.Watch(WatchOptions{Window: 10})
	for i := range 3 {
		in.Put(ctx, fmt.Appendf(nil, "%d", i), nil, 0)
		f, _ := w.Next(ctx)
		data := []byte("ok")
		if i == 0 {
			data = []byte("too large")
		}
		if _, err := s.Transfer(ctx, in, f.Index, sink, Frame{Data: data, Tags: f.Tags}); err != nil {
			t.Fatal(err)
		}
	}
	fs, _ := sink.Get(ctx, 0, 10, 0, false, nil)
	if len(fs) != 2 || string(fs[0].Data) != "ok" || string(fs[1].Data) != "ok" {
		t.Fatalf("sink after eviction: %+v", fs)
	}
	s2, _ := Open(filepath.Join(t.TempDir(), "q2.db"), Options{})
	defer s2.Close()
	in2, _ := s2.Queue(ctx, "input", Config{})
	sink2, _ := s2.Queue(ctx, "sink", Config{MaxPayload: 4})
	in2.Put(ctx, []byte("x"), nil, 0)
	f, _ := in2.Watch(WatchOptions{}).Next(ctx)
	s2.Transfer(ctx, in2, f.Index, sink2, Frame{Data: []byte("too large"), Tags: f.Tags})
	fs, _ = sink2.Get(ctx, 0, 1, 0, false, nil)
	if len(fs) != 1 || fs[0].Data != nil || fs[0].Tags["status"] != "413" || !strings.Contains(fs[0].Message, "larger than the sink's limit") {
		t.Errorf("an oversized answer: %+v", fs)
	}
}
