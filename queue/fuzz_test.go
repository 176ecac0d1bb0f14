package queue

import (
	"bytes"
	"net/url"
	"testing"
)

// FuzzParseCall holds the query-parameter decoder to never panicking and to
// bounded results on any method and query.
func FuzzParseCall(f *testing.F) {
	for _, s := range []string{"GET _attrs_=true", "GET _index_=3&_length_=10&_timeout_=5s&_auto_delete_=true&requestId=x",
		"GET _watch_=true&_window_=4&_index_only_=false&_auto_commit_=true&tag=v", "PUT _indexes_=1,2,3",
		"PUT _indexes_=1&_negative_=true", "DELETE _index_=9&_trunc_=true", "DELETE _indexes_=4", "POST _eos_=true&_force_=true",
		"POST k=v&_priority_=3", "GET _timeout_=2.5", "GET _length_=0", "PATCH ", "GET _search_=true&_index_=7",
		"GET _search_=true", "GET _search_=1&_index_=0&_watch_=true"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		method, raw, _ := bytes.Cut([]byte(s), []byte(" "))
		q, err := url.ParseQuery(string(raw))
		if err != nil {
			return
		}
		c, err := ParseCall(string(method), q)
		if err != nil {
			return
		}
		if c.Length < 1 || c.Length > maxGetLength || c.Window < 1 || len(c.Indexes) > maxIndexes || c.Timeout < 0 || c.Timeout > maxTimeout || c.Priority < 0 {
			t.Fatalf("%q: out of bounds: %+v", s, c)
		}
		if c.Op == OpSearch && c.Index < 1 {
			t.Fatalf("%q: a search of index 0 (no entry has it) was accepted: %+v", s, c)
		}
	})
}

// FuzzFrames holds the protobuf decoders (what clients send back and what
// the store reads) to never panicking and to round-tripping what they
// accept.
func FuzzFrames(f *testing.F) {
	f.Add(AppendFrame(nil, Frame{Index: 7, Data: []byte("x"), Tags: map[string]string{"a": "b"}, Message: "m"}))
	f.Add(AppendFrameList(nil, []Frame{{Index: 1}, {Index: 2, Data: []byte{0}}}))
	f.Add(AppendAttributes(nil, map[string]string{"meta.name": "q"}))
	f.Add((&record{Frame: Frame{Data: []byte("d"), Tags: map[string]string{"k": "v"}}, Priority: 3, Deliveries: 2}).marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		if fr, err := ParseFrame(b); err == nil {
			again, err := ParseFrame(AppendFrame(nil, fr))
			if err != nil || again.Index != fr.Index || !bytes.Equal(again.Data, fr.Data) || again.Message != fr.Message || len(again.Tags) != len(fr.Tags) {
				t.Fatalf("frame round trip: %+v -> %+v, %v", fr, again, err)
			}
		}
		if fr, err := ParseFrame(b); err == nil {
			// The streamed encoders write what the whole-answer ones build.
			var list, js bytes.Buffer
			if writeListFrame(&list, fr) != nil || !bytes.Equal(list.Bytes(), AppendFrameList(nil, []Frame{fr})) {
				t.Fatalf("streamed protobuf %x, want %x", list.Bytes(), AppendFrameList(nil, []Frame{fr}))
			}
			if writeFrameJSON(&js, fr) != nil || !bytes.Equal(js.Bytes(), EncodeFrame(MediaJSON, fr)) {
				t.Fatalf("streamed JSON %s, want %s", js.Bytes(), EncodeFrame(MediaJSON, fr))
			}
		}
		ParseFrameList(b)  //nolint:errcheck // must not panic
		ParseAttributes(b) //nolint:errcheck // must not panic
		var r record
		if r.unmarshal(b) == nil {
			var again record
			if err := again.unmarshal(r.marshal()); err != nil || !bytes.Equal(again.Data, r.Data) || again.Priority != r.Priority || again.Deliveries != r.Deliveries {
				t.Fatalf("record round trip: %+v -> %+v, %v", r, again, err)
			}
		}
	})
}
