package queue

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// fill puts n entries of size bytes into q from 16 goroutines (so that the
// group commit batches them); tags(i) are the i-th entry's tags. It
// returns the request ids by i.
func fill(t *testing.T, q Queue, n, size int, tags func(i int) map[string]string) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < n; i += 16 {
				data := bytes.Repeat([]byte{byte('a' + i%26)}, size)
				_, id, err := q.Put(context.Background(), data, tags(i), 0)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	return ids
}

func noTags(int) map[string]string { return nil }

func openSink(t *testing.T, cfg Config) (*Store, Queue) {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	q, err := s.Queue(t.Context(), "sink", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, q
}

// countWriter is a client that reads an answer and keeps only its size.
type countWriter struct {
	h    http.Header
	code int
	n    int64
}

func (c *countWriter) Header() http.Header         { return c.h }
func (c *countWriter) WriteHeader(code int)        { c.code = code }
func (c *countWriter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

// Issue: four parallel JSON gets of a sink of 40 entries of 8 MiB took the
// server from 0.6 to 12.8 GB: every entry was copied out of the store,
// then the whole body was built (base64 for JSON). The answer is streamed
// now: what a get allocates is about one entry and a batch, whatever the
// number of entries.
func TestGetStreamsLargeEntries(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's own allocations would be measured")
	}
	const entries, size = 32, 1 << 20
	_, q := openSink(t, Config{MaxLength: 100})
	fill(t, q, entries, size, noTags)
	api := &API{Queue: q, Name: "svc/sink", MaxBody: 1 << 30}
	for _, media := range []string{MediaJSON, MediaProtobuf} {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/?_length_=%d", entries), nil)
		r.Header.Set("Accept", media)
		w := &countWriter{h: http.Header{}}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		api.Serve(w, r)
		runtime.ReadMemStats(&after)
		min := int64(entries * size)
		if media == MediaJSON {
			min = min * 4 / 3
		}
		if w.code != 0 && w.code != http.StatusOK || w.n < min {
			t.Fatalf("%s: status %d, %d bytes, want 200 and at least %d", media, w.code, w.n, min)
		}
		// An entry, a batch, and their copies' growth: well under the
		// 32 MiB of data (48 MiB as base64) the answer carries.
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes answered, %d allocated", media, w.n, alloc)
		if alloc > 8*size {
			t.Errorf("%s: a get of %d entries of %d bytes allocated %d bytes; want at most %d", media, entries, size, alloc, 8*size)
		}
	}
}

// Issue: a read by request id (the README's way to take an answer) went
// through every entry of the sink, unmarshalling each: 650 round trips/s
// on an empty sink, 18/s on one of 40k entries. It looks at the request's
// entry alone now, so its allocations do not grow with the sink.
func TestRequestIDGetDoesNotGrowWithTheSink(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's own allocations would be counted")
	}
	_, q := openSink(t, Config{MaxLength: 10000})
	ids := fill(t, q, 3000, 16, func(i int) map[string]string { return map[string]string{"n": fmt.Sprint(i)} })
	ctx := t.Context()
	want := map[string]string{RequestIDTag: ids[1500]}
	allocs := testing.AllocsPerRun(20, func() {
		fs, err := q.Get(ctx, 0, 1, 0, false, want)
		if err != nil || len(fs) != 1 || fs[0].Tags["n"] != "1500" {
			t.Fatalf("get by request id: %+v, %v", fs, err)
		}
	})
	t.Logf("%.0f allocations a get", allocs)
	if allocs > 100 {
		t.Errorf("a get by request id on a sink of 3000 entries: %.0f allocations; want at most 100", allocs)
	}
}

// Issue: 200 watchers with a tag filter that matches nothing, on a sink of
// 40k entries, made every put cost 200 x 40k store transactions (one per
// entry, under the queue's lock, to read its tags): round trips stalled.
// A watcher's pass now reads no entry from the store.
func TestFilteredWatchReadsNoEntry(t *testing.T) {
	s, q := openSink(t, Config{MaxLength: 10000})
	fill(t, q, 2000, 16, func(i int) map[string]string { return map[string]string{"k": fmt.Sprint(i % 7)} })
	done, cancel := context.WithCancel(t.Context())
	cancel() // Next makes one pass and returns
	var ws []Watcher
	for range 20 {
		ws = append(ws, q.Watch(WatchOptions{Filter: map[string]string{"k": "none"}}))
	}
	tx := s.db.Stats().TxN
	for _, w := range ws {
		if _, err := w.Next(done); err != context.Canceled {
			t.Fatalf("a watcher matching nothing: %v", err)
		}
	}
	if n := s.db.Stats().TxN - tx; n > 0 {
		t.Errorf("20 passes of watchers matching nothing on 2000 entries: %d store transactions; want 0", n)
	}
	// And a matching one still gets its entry, the first in order.
	first, err := q.Get(t.Context(), 0, 1, 0, false, map[string]string{"k": "3"})
	if err != nil || len(first) != 1 {
		t.Fatalf("get k=3: %+v, %v", first, err)
	}
	w := q.Watch(WatchOptions{Filter: map[string]string{"k": "3"}})
	f, err := w.Next(t.Context())
	if err != nil || f.Tags["k"] != "3" || f.Index != first[0].Index {
		t.Fatalf("a watcher with k=3: %+v, %v; want index %d", f, err, first[0].Index)
	}
}

// The streamed answer is byte for byte what EncodeFrames makes of the
// same frames (what the EAS SDKs parse), in both media, data, tags and
// messages included, and an empty answer stays empty ("[]" in JSON).
func TestStreamedGetIsTheEncodedList(t *testing.T) {
	s, in := openSink(t, Config{MaxLength: 100})
	sink, err := s.Queue(t.Context(), "sink2", Config{MaxLength: 100, MaxPayload: 32})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i, data := range []string{"", "x", "<&> \"quoted\" ünïcode", "an answer larger than 32 bytes, the limit"} {
		if _, _, err := in.Put(ctx, []byte(data), map[string]string{"i": fmt.Sprint(i), "a<b": "c&d"}, 0); err != nil {
			t.Fatal(err)
		}
		f, err := in.Watch(WatchOptions{}).Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The largest answer passes the sink's limit: it gets a message.
		if _, err := s.Transfer(ctx, in, f.Index, sink, Frame{Data: f.Data, Tags: f.Tags}); err != nil {
			t.Fatal(err)
		}
	}
	api := &API{Queue: sink, Name: "svc/sink", MaxBody: 1 << 20}
	frames, err := sink.Get(ctx, 0, 10, 0, false, nil)
	if err != nil || len(frames) != 4 || frames[3].Message == "" {
		t.Fatalf("the sink: %+v, %v", frames, err)
	}
	for _, tc := range []struct {
		query string
		want  []Frame
	}{{"_length_=10", frames}, {"_length_=2&_index_=2", frames[1:3]}, {"a%3Cb=c%26d&i=2&_length_=10", frames[2:3]}, {"i=9", nil}} {
		for _, media := range []string{MediaJSON, MediaProtobuf} {
			r := httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil)
			r.Header.Set("Accept", media)
			w := httptest.NewRecorder()
			api.Serve(w, r)
			if want := EncodeFrames(media, tc.want); w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), want) || w.Header().Get("Content-Type") != media {
				t.Errorf("%s, %s: %d %s\n%q\nwant\n%q", tc.query, media, w.Code, w.Header().Get("Content-Type"), w.Body.Bytes(), want)
			}
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/?_raw_=true&i=2", nil)
	w := httptest.NewRecorder()
	api.Serve(w, r)
	if w.Code != http.StatusOK || w.Body.String() != "<&> \"quoted\" ünïcode" {
		t.Errorf("a raw get: %d %q", w.Code, w.Body.String())
	}
}
