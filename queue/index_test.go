package queue

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// getIndexes answers a get over the API and returns the indexes and the
// continuation header.
func getIndexes(t *testing.T, api *API, query string) ([]uint64, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/?"+query, nil)
	w := httptest.NewRecorder()
	api.Serve(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", query, w.Code, w.Body.String())
	}
	fs, err := ParseFrameList(w.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var idx []uint64
	for _, f := range fs {
		idx = append(idx, f.Index)
	}
	return idx, w.Header().Get(HeaderNextIndex)
}

// A get stops before the entry that would pass MaxReadBytes and names it
// in HeaderNextIndex; reading on from there gets the rest; a single
// entry larger than the cap is still answered.
func TestGetStopsAtTheByteCap(t *testing.T) {
	_, q := openSink(t, Config{MaxLength: 100})
	fill(t, q, 10, 1000, func(i int) map[string]string { return map[string]string{"even": strconv.FormatBool(i%2 == 0)} })
	for _, tc := range []struct {
		name, filter string
		want         int
	}{{"unfiltered", "", 10}, {"by tag", "even=true&", 5}} {
		api := &API{Queue: q, Name: "svc/sink", MaxReadBytes: 3500}
		var all []uint64
		from := "0"
		for pages := 0; from != ""; pages++ {
			if pages > 10 {
				t.Fatalf("%s: no end to the pages", tc.name)
			}
			idx, next := getIndexes(t, api, tc.filter+"_length_=100&_index_="+from)
			if len(idx) != 3 && next != "" || len(idx) > 3 {
				t.Fatalf("%s: a page of entries of ~1000 bytes under a cap of 3500: %v, next %q", tc.name, idx, next)
			}
			if next != "" {
				n, _ := strconv.ParseUint(next, 10, 64)
				if n <= idx[len(idx)-1] {
					t.Fatalf("%s: next %d after %v", tc.name, n, idx)
				}
			}
			all = append(all, idx...)
			from = next
		}
		if len(all) != tc.want || !slices.IsSorted(all) || len(slices.Compact(slices.Clone(all))) != tc.want {
			t.Errorf("%s: the pages hold %v; want %d entries, each once, in order", tc.name, all, tc.want)
		}
		api.MaxReadBytes = 10
		if idx, next := getIndexes(t, api, tc.filter+"_length_=100"); len(idx) != 1 || next == "" {
			t.Errorf("%s: under a cap smaller than one entry: %v, next %q; want one entry and a next", tc.name, idx, next)
		}
	}
	// _length_ alone ends a page without the header.
	if idx, next := getIndexes(t, &API{Queue: q}, "_length_=2"); len(idx) != 2 || next != "" {
		t.Errorf("_length_=2 under the default cap: %v, next %q", idx, next)
	}
}

// A watcher with a tag filter and a waiting read by request id look at the
// entries of that tag only: with 2000 entries in the sink, passes that
// find nothing examine nothing, and one that finds its entry examines it.
func TestFilterExaminesOnlyMatches(t *testing.T) {
	_, q := openSink(t, Config{MaxLength: 10000})
	fill(t, q, 2000, 16, noTags)
	bq := q.(*boltQueue)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	w := q.Watch(WatchOptions{Filter: map[string]string{"k": "v"}})
	before := bq.examined.Load()
	for range 50 {
		w.Next(done) //nolint:errcheck // one pass, canceled
	}
	if n := bq.examined.Load() - before; n != 0 {
		t.Errorf("50 passes of a watcher matching nothing: %d entries examined; want 0", n)
	}

	// A read waiting for a request id wakes at each put and looks at its
	// entry alone.
	id := NewRequestID()
	got := make(chan []Frame, 1)
	go func() {
		fs, _ := q.Get(context.Background(), 0, 1, time.Minute, false, map[string]string{RequestIDTag: id})
		got <- fs
	}()
	before = bq.examined.Load()
	fill(t, q, 20, 16, noTags)
	if _, _, err := q.Put(t.Context(), []byte("it"), map[string]string{RequestIDTag: id}, 0); err != nil {
		t.Fatal(err)
	}
	if fs := <-got; len(fs) != 1 || string(fs[0].Data) != "it" {
		t.Fatalf("the waiting read: %+v", fs)
	}
	if n := bq.examined.Load() - before; n > 2 {
		t.Errorf("a read waiting for one request id through 21 puts: %d entries examined; want at most 2", n)
	}
}

// The tag index follows the entries through every change (delete,
// truncate, auto-delete, redelivery, transfer, eviction, reopen): a
// filtered read and watch find what an unfiltered scan finds, and the
// index keeps nothing of the entries gone.
func TestTagIndexFollowsTheEntries(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "q.db")
	s, in, sink := openQueues(t, path)
	tags := func(i int) map[string]string { return map[string]string{"m": fmt.Sprint(i % 3)} }
	fill(t, in, 30, 8, tags)
	check := func(q Queue) {
		t.Helper()
		all, err := q.Get(ctx, 0, 1000, 0, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]uint64{}
		for _, f := range all {
			want[f.Tags["m"]] = append(want[f.Tags["m"]], f.Index)
			byID, _ := q.Get(ctx, 0, 10, 0, false, map[string]string{RequestIDTag: f.Tags[RequestIDTag]})
			if len(byID) != 1 || byID[0].Index != f.Index {
				t.Errorf("%s: by request id %s: %+v; want index %d", q.Name(), f.Tags[RequestIDTag], byID, f.Index)
			}
		}
		for m := range 3 {
			fs, _ := q.Get(ctx, 0, 1000, 0, false, map[string]string{"m": fmt.Sprint(m)})
			var got []uint64
			for _, f := range fs {
				got = append(got, f.Index)
			}
			if !slices.Equal(got, want[fmt.Sprint(m)]) {
				t.Errorf("%s: m=%d: %v; want %v", q.Name(), m, got, want[fmt.Sprint(m)])
			}
		}
		bq := q.(*boltQueue)
		bq.mu.Lock()
		n := 0
		for _, p := range bq.byTag {
			n += p.len()
			p.each(func(e *entry) {
				if bq.entries[e.index] != e {
					t.Errorf("%s: the index holds entry %d, which the queue does not", q.Name(), e.index)
				}
			})
		}
		if tagsPerEntry := 2; n != tagsPerEntry*len(bq.entries) {
			t.Errorf("%s: the index holds %d entries for %d entries of 2 tags", q.Name(), n, len(bq.entries))
		}
		bq.mu.Unlock()
	}
	check(in)
	if err := in.Delete(ctx, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := in.Truncate(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Get(ctx, 0, 2, 0, true, map[string]string{"m": "1"}); err != nil {
		t.Fatal(err)
	}
	check(in)
	w := in.Watch(WatchOptions{Window: 4, Filter: map[string]string{"m": "2"}})
	var held []uint64
	for range 4 {
		f, err := w.Next(ctx)
		if err != nil || f.Tags["m"] != "2" {
			t.Fatalf("a watcher with m=2: %+v, %v", f, err)
		}
		held = append(held, f.Index)
	}
	if err := in.Negative(ctx, "again", held[0]); err != nil {
		t.Fatal(err)
	}
	if f, err := w.Next(ctx); err != nil || f.Index != held[0] {
		t.Fatalf("the redelivered entry comes first again: %+v, %v; want %d", f, err, held[0])
	}
	// Transfers into a sink of 3 that evicts its oldest entries.
	if _, err := s.Queue(ctx, "sink", Config{MaxLength: 3, AutoEvict: true}); err != nil {
		t.Fatal(err)
	}
	for _, i := range held {
		if _, err := s.Transfer(ctx, in, i, sink, Frame{Data: []byte("a"), Tags: map[string]string{"m": "2", RequestIDTag: NewRequestID()}}); err != nil {
			t.Fatal(err)
		}
	}
	check(in)
	check(sink)
	if err := w.Close(ctx, "bye"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, in, sink = openQueues(t, path)
	defer s.Close()
	check(in)
	check(sink)
	if st, _ := sink.Stats(ctx); st.Length != 3 {
		t.Errorf("the sink holds %d entries after reopen; want 3 (evicted down to its limit)", st.Length)
	}
}

// A store failure before a get has written anything is its status (500
// with the error); after the answer has begun, the connection is cut, so
// that the client sees a broken answer, never a shorter list.
func TestStoreFailureDuringAGet(t *testing.T) {
	s, q := openSink(t, Config{MaxLength: 10})
	api := &API{Queue: q, Name: "svc/sink"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.Serve(w, r) }))
	t.Cleanup(srv.Close)
	ctx := t.Context()
	big := make([]byte, readBatchBytes) // a batch of its own, flushed before the next is read
	i1, _, err := q.Put(ctx, big, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	i2, _, err := q.Put(ctx, []byte("x"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("sink/data")).Put(idxKey(i2), []byte{0xff}) }); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "?_length_=2")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Errorf("a get meeting a corrupt entry after %d bytes: %d, %d bytes read, %v; want 200 and a broken body", len(big), resp.StatusCode, len(body), err)
	}
	code, _, msg := call(t, http.MethodGet, fmt.Sprintf("%s?_index_=%d", srv.URL, i2))
	if code != http.StatusInternalServerError || !strings.Contains(string(msg), "corrupt") && !strings.Contains(string(msg), "malformed") {
		t.Errorf("a get of the corrupt entry alone: %d %q; want 500 naming it", code, msg)
	}
	if fs, err := q.Get(ctx, i1, 1, 0, false, nil); err != nil || len(fs) != 1 {
		t.Errorf("the sound entry: %d frames, %v", len(fs), err)
	}
}
