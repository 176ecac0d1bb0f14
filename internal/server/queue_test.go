package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	"github.com/eas-server/eas-server/queue"
	"github.com/eas-server/eas-server/queue/jetstream/natstest"
)

const asyncToken = "async-token"

func asyncSpec(name, modelConfig string, instances, window int) string {
	return fmt.Sprintf(`{"name": %q, "processor": "echo", "token": %q, "model_config": %s,
		"metadata": {"instance": %d, "type": "Async", "rpc": {"worker_threads": %d, "keepalive": 30000}},
		"queue": {"sink": {"max_length": 1000}, "max_delivery": 2}}`, name, asyncToken, modelConfig, instances, window)
}

func queues(st *teststack.Stack, name string) (*queue.Client, *queue.Client) {
	in := &queue.Client{URL: st.URL + "/api/predict/" + name, Token: asyncToken}
	sink := &queue.Client{URL: in.URL + "/sink", Token: asyncToken}
	return in, sink
}

// TestAsyncServiceAnswersThroughTheSink: requests put into the input queue
// are run by the service's instances and their answers reach the sink with
// the request's id and tags, over a websocket watch and an HTTP stream.
func TestAsyncServiceAnswersThroughTheSink(t *testing.T) {
	ctx := context.Background()
	st := teststack.Start(t, asyncSpec("aecho", `{"panic_on": "boom"}`, 2, 2),
		`{"name": "sync", "processor": "echo", "token": "async-token", "metadata": {"instance": 1}}`)
	in, sink := queues(st, "aecho")
	// A synchronous service beside it answers as ever.
	if code, body, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/sync", asyncToken, []byte("now")); code != 200 || string(body) != "now" {
		t.Errorf("the synchronous service: %d %q", code, body)
	}
	attrs, err := in.Attributes(ctx)
	if err != nil || attrs["meta.header.user"] == "" || attrs["meta.name"] != "aecho" || attrs["meta.header.priority"] == "" {
		t.Fatalf("attributes %v %v", attrs, err)
	}
	ids := map[string]string{}
	for i := range 20 {
		body := fmt.Sprintf("req-%d", i)
		idx, id, err := in.Put(ctx, []byte(body), map[string]string{"user": "u1"}, 0)
		if err != nil || idx == 0 || id == "" {
			t.Fatalf("put: %d %q %v", idx, id, err)
		}
		ids[id] = body
	}
	_, boomID, err := in.Put(ctx, []byte("boom"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ch, err := sink.Watch(wctx, 0, 5, false, true, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for f := range ch {
		id := f.Tags[queue.RequestIDTag]
		if id == boomID {
			if f.Tags["status"] != "500" || !strings.Contains(f.Message, "processor panic") {
				t.Errorf("the failing request's answer: %+v", f)
			}
		} else if want, ok := ids[id]; !ok || string(f.Data) != want || f.Tags["status"] != "200" || f.Tags["user"] != "u1" {
			t.Errorf("answer %+v: want %q", f, want)
		}
		if seen++; seen == len(ids)+1 {
			break
		}
	}
	if seen != len(ids)+1 {
		t.Fatalf("%d answers over the websocket, want %d", seen, len(ids)+1)
	}
	cancel()
	// The HTTP stream watch, and the input queue is empty again.
	_, id, _ := in.Put(ctx, []byte("streamed"), nil, 0)
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	sch, err := sink.Watch(sctx, 0, 1, false, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if f := <-sch; string(f.Data) != "streamed" || f.Tags[queue.RequestIDTag] != id {
		t.Errorf("stream watch: %+v", f)
	}
	scancel()
	if a, _ := in.Attributes(ctx); a["stream.length"] != "0" {
		t.Errorf("input attributes after the answers: %v", a)
	}
}

// TestAsyncWindow: two instances with a window of two never run more than
// four requests at once, and do run four.
func TestAsyncWindow(t *testing.T) {
	ctx := context.Background()
	st := teststack.Start(t, asyncSpec("slow", `{"sleep_ms": 150}`, 2, 2))
	in, sink := queues(st, "slow")
	for i := range 16 {
		if _, _, err := in.Put(ctx, fmt.Appendf(nil, "%d", i), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	svc, _ := st.Manager.Get("slow")
	// Sample the requests in flight until every one is answered.
	peak := 0
	wait.Until(t, 30*time.Second, func() error {
		s, err := svc.Queues().Input.Stats(ctx)
		if err != nil {
			return err
		}
		peak = max(peak, s.InFlight)
		if s.Length != 0 {
			return fmt.Errorf("%d requests still queued (%d in flight, peak %d)", s.Length, s.InFlight, peak)
		}
		return nil
	})
	if peak != 4 {
		t.Errorf("peak in flight %d, want 4 (2 instances x window 2)", peak)
	}
	fs, err := sink.Get(ctx, 0, 100, 0, false, nil)
	if err != nil || len(fs) != 16 {
		t.Fatalf("sink holds %d answers (%v), want 16", len(fs), err)
	}
}

// TestQueueAPI covers the calls of the SDKs' QueueClient on a queue:
// priority, get by index and by request id, commit, negative, delete,
// truncate, end of stream, and the errors.
func TestQueueAPI(t *testing.T) {
	ctx := context.Background()
	// The calls go to the sink, which no instance consumes.
	st := teststack.Start(t, asyncSpec("api", `{}`, 1, 1))
	_, sink := queues(st, "api")
	var idx []uint64
	var ids []string
	for i := range 5 {
		x, id, err := sink.Put(ctx, fmt.Appendf(nil, "s%d", i), map[string]string{"k": fmt.Sprint(i % 2)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		idx, ids = append(idx, x), append(ids, id)
	}
	urgent, _, _ := sink.Put(ctx, []byte("urgent"), nil, 9)
	fs, err := sink.Get(ctx, idx[1], 2, 0, false, nil)
	if err != nil || len(fs) != 2 || string(fs[0].Data) != "s1" || string(fs[1].Data) != "s2" {
		t.Fatalf("get by index: %+v %v", fs, err)
	}
	fs, err = sink.Get(ctx, 0, 1, 0, false, map[string]string{queue.RequestIDTag: ids[3]})
	if err != nil || len(fs) != 1 || string(fs[0].Data) != "s3" {
		t.Fatalf("get by request id: %+v %v", fs, err)
	}
	// A watch gets the prioritized entry first; a negative ack gives it back.
	wctx, cancel := context.WithCancel(ctx)
	ch, err := sink.Watch(wctx, 0, 1, false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if f := <-ch; f.Index != urgent {
		t.Errorf("first watched %d, want the prioritized %d", f.Index, urgent)
	}
	if err := sink.Negative(ctx, "Retry", "not now", urgent); err != nil {
		t.Fatal(err)
	}
	if f := <-ch; f.Index != urgent {
		t.Errorf("after the negative ack %d, want %d again", f.Index, urgent)
	}
	if err := sink.Commit(ctx, urgent); err != nil {
		t.Fatal(err)
	}
	if f := <-ch; f.Index != idx[0] {
		t.Errorf("after the commit %d, want %d", f.Index, idx[0])
	}
	cancel()
	if err := sink.Del(ctx, idx[4]); err != nil {
		t.Fatal(err)
	}
	if err := sink.Truncate(ctx, idx[2]); err != nil {
		t.Fatal(err)
	}
	fs, _ = sink.Get(ctx, 0, 10, 0, false, nil)
	var left []string
	for _, f := range fs {
		left = append(left, string(f.Data))
	}
	sort.Strings(left)
	if strings.Join(left, ",") != "s2,s3" {
		t.Errorf("after delete and truncate: %v", left)
	}
	// Filtered get with auto delete.
	fs, _ = sink.Get(ctx, 0, 10, 0, true, map[string]string{"k": "1"})
	if len(fs) != 1 || string(fs[0].Data) != "s3" {
		t.Errorf("filtered get: %+v", fs)
	}
	if err := sink.End(ctx, false); err != nil {
		t.Fatal(err)
	}
	var se *queue.StatusError
	if _, _, err := sink.Put(ctx, []byte("late"), nil, 0); !errors.As(err, &se) || se.Code != http.StatusConflict {
		t.Errorf("put after the end: %v", err)
	}
	// Bad calls: a readable 400; a wrong token 401; an unknown sub-path 404.
	for _, tc := range []struct {
		method, query, token, path string
		code                       int
		want                       string
	}{
		{"GET", "_index_=x", asyncToken, "/sink", 400, "_index_"},
		{"PUT", "", asyncToken, "/sink", 400, "_indexes_ is required"},
		{"GET", "_timeout_=forever", asyncToken, "/sink", 400, "_timeout_"},
		{"GET", "_attrs_=true", "wrong", "/sink", 401, ""},
		{"GET", "", asyncToken, "/other", 404, "two queues"},
		{"PATCH", "", asyncToken, "/sink", 405, "not a queue operation"},
	} {
		code, body, _ := teststack.Do(t, tc.method, st.URL+"/api/predict/api"+tc.path+"?"+tc.query, tc.token, nil)
		if code != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s?%s: %d %q, want %d with %q", tc.method, tc.path, tc.query, code, body, tc.code, tc.want)
		}
	}
}

// TestAsyncQueuesInDescAndMetrics: desc shows the queues' lengths and
// consumers; /metrics exports them.
func TestAsyncQueuesInDescAndMetrics(t *testing.T) {
	ctx := context.Background()
	st := teststack.Start(t, asyncSpec("seen", `{"sleep_ms": 600000}`, 1, 1))
	in, _ := queues(st, "seen")
	for range 3 {
		if _, _, err := in.Put(ctx, []byte("x"), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	wait.Until(t, 10*time.Second, func() error {
		info, err := st.Manager.Describe(t.Context(), "seen")
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Queues) != 2 || info.Queues[0].Queue != "input" || info.Queues[0].Length != 3 || info.Queues[0].InFlight != 1 || info.Queues[0].Consumers != 1 {
			return fmt.Errorf("desc queues %+v, want input first with 3 entries, 1 in flight, 1 consumer, then the sink", info.Queues)
		}
		return nil
	})
	_, body, _ := teststack.Do(t, http.MethodGet, st.URL+"/metrics", "", nil)
	for _, want := range []string{
		`eas_async_queue_length{queue="input",service="seen"} 3`,
		`eas_async_queue_in_flight{queue="input",service="seen"} 1`,
		`eas_async_queue_consumers{queue="input",service="seen"} 1`,
		`eas_async_queue_length{queue="sink",service="seen"} 0`,
		`eas_async_queue_oldest_age_seconds{queue="input",service="seen"}`,
		`eas_async_queue_redeliveries_total{queue="input",service="seen"} 0`,
		`eas_async_queue_dead_lettered_total{queue="sink",service="seen"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestAsyncOnJetStream: the same service with its queues on a real NATS
// JetStream server.
func TestAsyncOnJetStream(t *testing.T) {
	ctx := context.Background()
	st := teststack.New(t, teststack.Options{Service: service.Options{QueueBroker: natstest.Start(t)}}, asyncSpec("onnats", `{}`, 2, 2))
	in, sink := queues(st, "onnats")
	ids := map[string]string{}
	for i := range 10 {
		body := fmt.Sprintf("n%d", i)
		_, id, err := in.Put(ctx, []byte(body), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = body
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ch, err := sink.Watch(wctx, 0, 5, false, true, false)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for f := range ch {
		if want := ids[f.Tags[queue.RequestIDTag]]; string(f.Data) != want || f.Tags["status"] != "200" {
			t.Errorf("answer %+v, want %q", f, want)
		}
		if got++; got == len(ids) {
			break
		}
	}
	if got != len(ids) {
		t.Fatalf("%d answers, want %d", got, len(ids))
	}
	if a, err := in.Attributes(ctx); err != nil || a["stream.length"] != "0" {
		t.Errorf("input after the answers: %v %v", a, err)
	}
}

// TestQueueReadBytesOption: Options.QueueReadBytes (serve
// --queue-max-read-bytes) caps a read of a queue; the answer names where
// to read on.
func TestQueueReadBytesOption(t *testing.T) {
	st := teststack.New(t, teststack.Options{Server: server.Options{QueueReadBytes: 100}}, asyncSpec("capped", `{}`, 1, 1))
	_, sink := queues(st, "capped")
	var idx []uint64
	for range 3 {
		x, _, err := sink.Put(t.Context(), []byte(strings.Repeat("d", 80)), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, x)
	}
	code, body, hdr := teststack.Do(t, "GET", st.URL+"/api/predict/capped/sink?_length_=3", asyncToken, nil, "Accept", "application/json")
	if code != 200 || strings.Count(string(body), `"index"`) != 1 || hdr.Get(queue.HeaderNextIndex) != fmt.Sprint(idx[1]) {
		t.Fatalf("a read over the cap: %d %s, next index %q, want one entry and %d", code, body, hdr.Get(queue.HeaderNextIndex), idx[1])
	}
}
