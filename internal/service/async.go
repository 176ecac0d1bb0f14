package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eas-server/eas-server/internal/httpstatus"
	"github.com/eas-server/eas-server/internal/metrics"
	"github.com/eas-server/eas-server/internal/openai"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/queue"
	"github.com/eas-server/eas-server/queue/jetstream"
	"github.com/eas-server/eas-server/servicejson"
)

// StatusTag is the sink tag that holds a request's HTTP status; a failed
// request's frame also carries the error as its message.
const StatusTag = "status"

// DeliveriesTag is set on the answer of a request that was delivered more
// than once (its first instance died or stopped): how many times.
const DeliveriesTag = "deliveries"

// Queues is an asynchronous service's queue service: the input queue
// (/api/predict/<name>) and the sink (/api/predict/<name>/sink), in one
// store in the service's state directory.
type Queues struct {
	store       queue.Backend
	Input, Sink queue.Queue
	dir         string // a temporary directory to remove on close; "" in the state dir
	// statsFailing says which of Input, Sink failed to report its stats
	// at the last scrape, so that a failure is logged once.
	statsFailing [2]atomic.Bool
}

// queuesFor opens (once) the queues of an asynchronous service and sets
// their limits from spec. It runs under the service's operation lock, so
// it never races itself; the data plane reads the result lock-free.
func (m *Manager) queuesFor(ctx context.Context, s *Service, spec *servicejson.Service) (*Queues, error) {
	lim := func(l servicejson.QueueLimits) queue.Config {
		return queue.Config{MaxLength: l.MaxLength, MaxPayload: l.MaxPayloadKB << 10, MaxDelivery: spec.Queue.MaxDelivery, AutoEvict: l.AutoEvict}
	}
	if qs := s.queues.Load(); qs != nil { // a new version: new limits
		if _, err := qs.store.Queue(ctx, "input", lim(spec.Queue.Source)); err != nil {
			return nil, err
		}
		if _, err := qs.store.Queue(ctx, "sink", lim(spec.Queue.Sink)); err != nil {
			return nil, err
		}
		return qs, nil
	}
	qs, err := m.openQueues(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	if qs.Input, err = qs.store.Queue(ctx, "input", lim(spec.Queue.Source)); err == nil {
		qs.Sink, err = qs.store.Queue(ctx, "sink", lim(spec.Queue.Sink))
	}
	if err != nil {
		qs.close()
		return nil, err
	}
	in, sink := qs.Input, qs.Sink
	in.SetDeadLetter(func(ctx context.Context, f queue.Frame, reason string) error {
		tags := maps.Clone(f.Tags)
		tags[StatusTag] = "500"
		_, err := qs.store.Transfer(ctx, in, f.Index, sink, queue.Frame{Tags: tags, Message: reason})
		return err
	})
	s.queues.Store(qs) // published whole: readers never see half a Queues
	return qs, nil
}

// openQueues opens a service's queue backend: the broker when one is
// set, else a store in the service's state directory (a temporary one
// without a state dir).
func (m *Manager) openQueues(ctx context.Context, name string) (*Queues, error) {
	if m.opt.QueueBroker != "" {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		b, err := jetstream.Open(ctx, m.opt.QueueBroker, name)
		if err != nil {
			return nil, err
		}
		return &Queues{store: b}, nil
	}
	var path, tmp string
	if m.persistent() {
		if err := os.MkdirAll(m.svcDir(name), 0o700); err != nil {
			return nil, err
		}
		path = filepath.Join(m.svcDir(name), "queues.db")
	} else {
		var err error
		if tmp, err = os.MkdirTemp("", "eas-queues-"); err != nil {
			return nil, err
		}
		path = filepath.Join(tmp, "queues.db")
	}
	st, err := queue.Open(path, queue.Options{SyncEachPut: m.opt.QueueSyncEachPut})
	if err != nil {
		return nil, err
	}
	return &Queues{store: st, dir: tmp}, nil
}

// close closes the store (and removes a temporary one).
func (q *Queues) close() {
	q.store.Close() //nolint:errcheck // closing at delete or shutdown
	if q.dir != "" {
		os.RemoveAll(q.dir)
	}
}

// Queues returns an asynchronous service's queues; nil for a synchronous
// one (or before its first load). It takes no lock: the data plane asks on
// every request.
func (s *Service) Queues() *Queues { return s.queues.Load() }

// consumers are the instances of an asynchronous version taking requests
// from the input queue: metadata.instance consumers, each holding at most
// metadata.rpc.worker_threads requests (its window) at once, each request
// run through the version's scheduler and processor like a synchronous one
// and its answer moved to the sink in the same transaction that commits it.
type consumers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startConsumers starts l's consumers on qs.
func startConsumers(l *Live, qs *Queues, log *slog.Logger) *consumers {
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumers{cancel: cancel}
	window := max(l.Spec.Metadata.RPC.WorkerThreads, 1)
	for i := range max(l.Spec.Metadata.Instance, 1) {
		w := qs.Input.Watch(queue.WatchOptions{Window: window})
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			var inflight sync.WaitGroup
			defer func() {
				inflight.Wait()
				// ctx is done by now; giving back what it held is not.
				if err := w.Close(context.WithoutCancel(ctx), "the instance stopped"); err != nil {
					log.Warn("async instance stopped; what it held goes back to the queue after the broker's ack wait", "instance", i, "err", err)
				}
			}()
			for {
				f, err := w.Next(ctx)
				if err != nil {
					if !errors.Is(err, context.Canceled) && !errors.Is(err, queue.ErrClosed) && !errors.Is(err, io.EOF) {
						log.Warn("async instance stopped taking requests", "instance", i, "err", err)
					}
					return
				}
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					answer(ctx, l, qs, f, log)
				}()
			}
		}()
	}
	return c
}

// stop stops taking requests and waits for the ones running; those cut
// short go back to the input queue.
func (c *consumers) stop() {
	c.cancel()
	c.wg.Wait()
}

// answer runs one request and moves its answer to the sink. A run cut
// short by the instance stopping leaves the request in the input queue.
func answer(ctx context.Context, l *Live, qs *Queues, f queue.Frame, log *slog.Logger) {
	if err := qs.Sink.WaitRoom(ctx); err != nil { // back pressure: a full sink pauses the instance
		return
	}
	body, err := run(ctx, l, f.Data)
	if ctx.Err() != nil {
		return
	}
	tags := maps.Clone(f.Tags)
	if f.Deliveries > 1 {
		tags[DeliveriesTag] = strconv.FormatInt(f.Deliveries, 10) // a redelivery: an instance stopped holding it
	}
	out := queue.Frame{Tags: tags, Data: body}
	if err != nil {
		tags[StatusTag] = strconv.Itoa(httpstatus.Of(err))
		out.Message, out.Data = err.Error(), nil
	} else {
		tags[StatusTag] = "200"
	}
	// The run is over: its answer is written even if the instance stops
	// meanwhile (stop waits for it).
	if _, err := qs.store.Transfer(context.WithoutCancel(ctx), qs.Input, f.Index, qs.Sink, out); err != nil {
		log.Error("async answer not written; the request stays queued", "index", f.Index, "err", err)
	}
}

// run is one request through the processor, as the synchronous door runs
// it; a full scheduler queue or the rate limit (rpc.rate_limit) is waited
// out rather than answered 450 or 429: the input queue is the queue.
func run(ctx context.Context, l *Live, body []byte) ([]byte, error) {
	if l.Sequences != nil {
		return runGeneration(ctx, l, body)
	}
	p, err := l.Engine.Decode(ctx, &processors.Request{Body: body})
	if err != nil {
		return nil, err
	}
	var r any
	for {
		r, err = l.Scheduler.Do(ctx, p)
		if !errors.Is(err, scheduler.ErrQueueFull) && !errors.Is(err, scheduler.ErrRateLimited) {
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	resp, err := l.Engine.Encode(ctx, p, r)
	if err != nil {
		return nil, err
	}
	if resp.Status != 0 && resp.Status != 200 {
		return nil, &processors.StatusError{Code: resp.Status, Err: fmt.Errorf("%s", resp.Body)}
	}
	return resp.Body, nil
}

// QueueInfo is one queue of an asynchronous service, for desc.
type QueueInfo struct {
	Queue        string  `json:"Queue"` // input or sink
	Length       int     `json:"Length"`
	MaxLength    int     `json:"MaxLength"`
	InFlight     int     `json:"InFlight"`
	Consumers    int     `json:"Consumers"`
	OldestAgeSec float64 `json:"OldestAgeSeconds"`
	Redeliveries int64   `json:"Redeliveries"`
	LastIndex    uint64  `json:"LastIndex"`
	AckErrors    int64   `json:"AckErrors,omitempty"`
	// DeadLettered counts entries given back past queue.max_delivery
	// (Stats.DeadLettered): on the sink, answers deleted unread.
	DeadLettered int64 `json:"DeadLettered"`
	// Error says why the numbers could not be read (a broker's error);
	// the other fields but Queue are then zero.
	Error string `json:"Error,omitempty"`
}

// queueInfos describes an asynchronous service's queues; nil for a
// synchronous service. A queue whose numbers cannot be read is listed
// with its Error.
func queueInfos(ctx context.Context, qs *Queues) []QueueInfo {
	if qs == nil || qs.Input == nil {
		return nil
	}
	var out []QueueInfo
	for _, q := range []queue.Queue{qs.Input, qs.Sink} {
		st, err := q.Stats(ctx)
		if err != nil {
			out = append(out, QueueInfo{Queue: q.Name(), Error: err.Error()})
			continue
		}
		out = append(out, QueueInfo{Queue: q.Name(), Length: st.Length, MaxLength: st.MaxLength, InFlight: st.InFlight,
			Consumers: st.Consumers, OldestAgeSec: st.OldestAge.Seconds(), Redeliveries: st.Redeliveries, LastIndex: st.Last,
			AckErrors: st.AckErrors, DeadLettered: st.DeadLettered})
	}
	return out
}

// asyncQueueStats lists every asynchronous service's queues for /metrics.
// A queue whose numbers cannot be read is left out of the scrape; its
// error is logged when it starts failing, not at every scrape.
func (m *Manager) asyncQueueStats() []metrics.QueueStat {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	var out []metrics.QueueStat
	for _, s := range m.List() {
		qs := s.Queues()
		if qs == nil || qs.Input == nil {
			continue
		}
		for i, q := range []queue.Queue{qs.Input, qs.Sink} {
			st, err := q.Stats(ctx)
			if was := qs.statsFailing[i].Swap(err != nil); err != nil && !was {
				m.log.Warn("async queue stats not read; left out of /metrics until they are", "service", s.Name, "queue", q.Name(), "err", err)
			}
			if err != nil {
				continue
			}
			out = append(out, metrics.QueueStat{Service: s.Name, Queue: q.Name(), Length: st.Length, InFlight: st.InFlight,
				Consumers: st.Consumers, OldestAge: st.OldestAge, Redeliveries: st.Redeliveries, DeadLettered: st.DeadLettered})
		}
	}
	return out
}

// runGeneration is run for a generative service: the body is the plain
// form (a prompt or messages, as POST /api/predict/<service> takes), its
// answer the completion object, the same bytes the synchronous door
// answers; a full sequence scheduler is waited out like a full queue.
func runGeneration(ctx context.Context, l *Live, body []byte) ([]byte, error) {
	api := &openai.Service{Name: l.Spec.Name, Backend: l.Sequences, Created: l.Started}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/predict/"+l.Spec.Name, nil)
		if err != nil {
			return nil, err
		}
		w := &answerBuffer{header: http.Header{}}
		code := api.ServePlain(w, req, func() ([]byte, error) { return body, nil })
		switch {
		case code == http.StatusOK:
			return w.body.Bytes(), nil
		case code != http.StatusTooManyRequests && code != 450: // 450: EAS's queue full
			return nil, &processors.StatusError{Code: code, Err: fmt.Errorf("%s", bytes.TrimSpace(w.body.Bytes()))}
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answerBuffer is an http.ResponseWriter that keeps the answer.
type answerBuffer struct {
	header http.Header
	body   bytes.Buffer
}

func (b *answerBuffer) Header() http.Header         { return b.header }
func (b *answerBuffer) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *answerBuffer) WriteHeader(int)             {}
func (b *answerBuffer) Flush()                      {}
