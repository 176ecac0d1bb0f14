package queue

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// apiServer serves one fresh queue's API and returns it and its URL.
func apiServer(t *testing.T) (Queue, string) {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	q, err := s.Queue(t.Context(), "sink", Config{MaxLength: 100})
	if err != nil {
		t.Fatal(err)
	}
	api := &API{Queue: q, Name: "svc/sink", MaxBody: 1 << 20}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.Serve(w, r) }))
	t.Cleanup(ts.Close)
	return q, ts.URL
}

func call(t *testing.T, method, url string, header ...string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// Issue 31: the Python and Java SDKs ask for the attributes without an
// Accept header and parse JSON; they got protobuf and read nothing. The
// attributes are JSON unless protobuf is asked for; frames stay protobuf
// unless JSON is.
func TestAnswerMediaByCall(t *testing.T) {
	q, url := apiServer(t)
	if _, _, err := q.Put(t.Context(), []byte("x"), nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query, accept, want string
	}{
		{"_attrs_=true", "", MediaJSON},
		{"_attrs_=true", "*/*", MediaJSON},
		{"_attrs_=true", MediaJSON, MediaJSON},
		{"_attrs_=true", MediaProtobuf, MediaProtobuf},
		{"_attrs_=true", "application/x-protobuf", MediaProtobuf},
		{"_attrs_=true", "application/json;q=0.9, application/vnd.google.protobuf", MediaJSON},
		{"_attrs_=true", "application/vnd.google.protobuf, application/json", MediaProtobuf},
		{"_index_=0&_length_=5", "", MediaProtobuf},
		{"_index_=0&_length_=5", "*/*", MediaProtobuf},
		{"_index_=0&_length_=5", MediaProtobuf, MediaProtobuf},
		{"_index_=0&_length_=5", "Application/JSON", MediaJSON},
		{"_search_=true&_index_=1", "", MediaJSON},
		{"_search_=true&_index_=1", MediaProtobuf, MediaJSON}, // no protobuf form
	} {
		code, ct, body := call(t, "GET", url+"?"+tc.query, "Accept", tc.accept)
		if code != 200 || ct != tc.want {
			t.Errorf("GET ?%s, Accept %q: %d %s, want %s", tc.query, tc.accept, code, ct, tc.want)
			continue
		}
		switch {
		case strings.HasPrefix(tc.query, "_attrs_") && ct == MediaJSON:
			var m map[string]string
			if err := json.Unmarshal(body, &m); err != nil || m["meta.name"] != "svc/sink" || m["stream.length"] != "1" {
				t.Errorf("JSON attributes %s: %v", body, err)
			}
		case strings.HasPrefix(tc.query, "_attrs_"):
			if m, err := ParseAttributes(body); err != nil || m["meta.name"] != "svc/sink" {
				t.Errorf("protobuf attributes %q: %v %v", body, m, err)
			}
		case strings.HasPrefix(tc.query, "_index_") && ct == MediaJSON:
			var fs []frameJSON
			if err := json.Unmarshal(body, &fs); err != nil || len(fs) != 1 || fs[0].Data != "eA==" {
				t.Errorf("JSON frames %s: %v", body, err)
			}
		case strings.HasPrefix(tc.query, "_index_"):
			if fs, err := ParseFrameList(body); err != nil || len(fs) != 1 || string(fs[0].Data) != "x" {
				t.Errorf("protobuf frames %q: %v %v", body, fs, err)
			}
		}
	}
}

// Issue 31: GET ?_search_=true&_index_=N (the Python SDK's search) fell
// through to a plain get. It answers where the entry stands, as JSON.
func TestSearchOverHTTP(t *testing.T) {
	q, url := apiServer(t)
	var idx []string
	for range 3 {
		i, _, err := q.Put(t.Context(), []byte("x"), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, jsonNum(i))
	}
	for k, i := range idx {
		code, _, body := call(t, "GET", url+"?_search_=true&_index_="+i)
		if want := `{"ConsumerId":"","IsPending":false,"WaitCount":` + jsonNum(uint64(k)) + `}`; code != 200 || string(body) != want {
			t.Errorf("search %s: %d %s, want %s", i, code, body, want)
		}
	}
	// A watcher over the HTTP stream, named as the Python SDK names itself.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"?_watch_=true&_window_=1", nil)
	req.Header.Set("X-EAS-QueueService-Redis-Uid", "u1")
	req.Header.Set("X-EAS-QueueService-Redis-Gid", "eas")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(n[:]))); err != nil {
		t.Fatal(err)
	}
	code, _, body := call(t, "GET", url+"?_search_=true&_index_="+idx[0])
	if want := `{"ConsumerId":"eas.u1","IsPending":true,"WaitCount":0}`; code != 200 || string(body) != want {
		t.Errorf("search of the watched entry: %d %s, want %s", code, body, want)
	}
	code, _, body = call(t, "GET", url+"?_search_=true&_index_="+idx[2])
	if want := `{"ConsumerId":"","IsPending":false,"WaitCount":1}`; code != 200 || string(body) != want {
		t.Errorf("search behind the watched entry: %d %s, want %s", code, body, want)
	}
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"_search_=true", 400, "_search_ needs _index_"},
		{"_search_=true&_index_=0", 400, "_index_"},
		{"_search_=true&_index_=x", 400, "_index_"},
		{"_search_=true&_index_=99", 404, "no such entry"},
		{"_search_=maybe&_index_=1", 400, "_search_"},
	} {
		code, _, body := call(t, "GET", url+"?"+tc.query)
		if code != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET ?%s: %d %q, want %d with %q", tc.query, code, body, tc.code, tc.want)
		}
	}
}

func jsonNum(i uint64) string { b, _ := json.Marshal(i); return string(b) }
