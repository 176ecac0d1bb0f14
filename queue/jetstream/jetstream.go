// Package jetstream keeps an asynchronous service's queues on a NATS
// JetStream server instead of the embedded store, so that the queues
// outlive one machine (serve --queue-broker nats://host:4222).
//
// Each queue is a work-queue stream, EAS_<service>_<queue>, whose subjects
// are eas.<service>.<queue>.<request id>: the stream sequence is the
// queue index, and a request id finds its entry with one last-message-by-
// subject lookup. Consumers share one durable pull consumer per queue, so
// each entry goes to one of them; each watcher fetches only while it holds
// fewer than its window, acknowledges on commit (which removes the entry)
// and naks on a negative acknowledgement or when it goes. An entry
// delivered past the delivery limit is dead-lettered by this package (the
// consumer's own MaxDeliver would strand it).
//
// Differences from the embedded store, all of them JetStream's: no
// priorities (entries are delivered in order); a consumer that dies
// without closing has its entries redelivered after AckWait (30 s), not at
// once; and Transfer is a publish deduplicated by the request id followed
// by the acknowledgement, so a crash between the two is absorbed by the
// stream's duplicate window (10 minutes) rather than by one transaction.
package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eas-server/eas-server/queue"
)

// AckWait is how long an entry held by a consumer that vanished waits
// before it is redelivered.
var AckWait = 30 * time.Second

const (
	dupWindow  = 10 * time.Minute
	tagsHeader = "Eas-Tags" // the tags, as a JSON object (header names lose their case)
	msgHeader  = "Eas-Message"
	consumerID = "eas-instances"
)

// Backend is one service's queues on a JetStream server.
type Backend struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	service string
	meta    jetstream.KeyValue

	mu     sync.Mutex
	queues map[string]*Queue
}

// Open connects to the JetStream server at url for service's queues.
func Open(ctx context.Context, url, service string) (*Backend, error) {
	nc, err := nats.Connect(url, nats.Name("eas-server "+service), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("queue broker %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: streamName(service, "META"), Storage: jetstream.FileStorage})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("queue broker %s: JetStream: %w (start nats-server with -js)", url, err)
	}
	return &Backend{nc: nc, js: js, service: service, meta: kv, queues: map[string]*Queue{}}, nil
}

// streamName makes a stream name from a service name (letters, digits, _).
func streamName(service, queue string) string {
	return "EAS_" + service + "_" + strings.ToUpper(queue)
}

// Close disconnects; the queues stay on the server.
func (b *Backend) Close() error {
	b.mu.Lock()
	for _, q := range b.queues {
		q.close()
	}
	b.mu.Unlock()
	b.nc.Close()
	return nil
}

// Queue creates or updates the queue's stream and consumer.
func (b *Backend) Queue(ctx context.Context, name string, cfg queue.Config) (queue.Queue, error) {
	if cfg.MaxDelivery <= 0 {
		cfg.MaxDelivery = 5
	}
	subject := "eas." + b.service + "." + name
	sc := jetstream.StreamConfig{
		Name: streamName(b.service, name), Subjects: []string{subject + ".>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
		Discard: jetstream.DiscardNew, Duplicates: dupWindow,
	}
	if cfg.MaxLength > 0 {
		sc.MaxMsgs = int64(cfg.MaxLength)
	}
	if cfg.MaxPayload > 0 {
		sc.MaxMsgSize = int32(min(cfg.MaxPayload+64<<10, 1<<30)) // room for the tag headers
	}
	if cfg.AutoEvict {
		sc.Discard = jetstream.DiscardOld
	}
	st, err := b.js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("queue %s: stream %s: %w", name, sc.Name, err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: consumerID, AckPolicy: jetstream.AckExplicitPolicy, AckWait: AckWait,
		MaxAckPending: -1, MaxDeliver: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s: consumer: %w", name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[name]
	if q == nil {
		q = &Queue{b: b, name: name, subject: subject, stream: st, cons: cons, held: map[uint64]held{}, watchers: map[*Watcher]bool{}, quit: make(chan struct{})}
		b.queues[name] = q
	}
	q.mu.Lock()
	q.cfg = cfg
	q.stream, q.cons = st, cons
	q.mu.Unlock()
	return q, nil
}

// Transfer publishes the answer (deduplicated by the request id, so a
// redelivered request answers once) and then acknowledges the input
// entry, which removes it.
func (b *Backend) Transfer(ctx context.Context, in queue.Queue, index uint64, out queue.Queue, answer queue.Frame) (uint64, error) {
	input, ok1 := in.(*Queue)
	sink, ok2 := out.(*Queue)
	if !ok1 || !ok2 {
		return 0, errors.New("jetstream: Transfer between queues of another backend")
	}
	id := answer.Tags[queue.RequestIDTag]
	if id == "" {
		id = queue.NewRequestID()
	}
	idx, err := sink.publish(ctx, answer.Data, answer.Tags, answer.Message, "answer-"+id)
	if err != nil {
		return 0, err
	}
	return idx, input.Commit(ctx, index)
}

// Queue is one queue on the JetStream server.
type Queue struct {
	b       *Backend
	name    string
	subject string

	mu           sync.Mutex
	cfg          queue.Config
	stream       jetstream.Stream
	cons         jetstream.Consumer
	held         map[uint64]held // delivered, not yet acknowledged
	watchers     map[*Watcher]bool
	deadLetter   queue.DeadLetterFunc
	redeliver    int64
	ackErrors    atomic.Int64 // acks and naks no caller saw fail
	deadLettered atomic.Int64 // messages given back past MaxDelivery (Stats.DeadLettered)
	consumers    int          // watchers made, for their default ids
	quit         chan struct{}
	lengthSeen   int       // the stream's length as last asked
	lengthAt     time.Time // when

	isEnded    atomic.Bool
	endedAsked atomic.Int64 // unix nanoseconds of the last ask
}

type held struct {
	msg jetstream.Msg
	w   *Watcher
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// SetDeadLetter sets where an entry goes after its last delivery.
func (q *Queue) SetDeadLetter(f queue.DeadLetterFunc) {
	q.mu.Lock()
	q.deadLetter = f
	q.mu.Unlock()
}

// ended reports the end of stream. The broker is asked at most once a
// second (another server may have ended the queue), not on every put, and
// never again once it said yes: an end is final. A failed ask is an error
// (and is asked again at the next call).
func (q *Queue) ended(ctx context.Context) (bool, error) {
	if q.isEnded.Load() {
		return true, nil
	}
	now := time.Now().UnixNano()
	last := q.endedAsked.Load()
	if now-last < int64(time.Second) || !q.endedAsked.CompareAndSwap(last, now) {
		return false, nil
	}
	_, err := q.b.meta.Get(ctx, q.name+".ended")
	switch {
	case err == nil:
		q.isEnded.Store(true)
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	q.endedAsked.CompareAndSwap(now, last) // not known: ask again next time
	return false, fmt.Errorf("queue %s: end of stream: %w", q.name, err)
}

// countAckError counts an acknowledgement (ack, nak, term) or a dead
// letter that failed where no caller sees the error (Stats.AckErrors);
// the broker redelivers the entry after AckWait.
func (q *Queue) countAckError(err error) {
	if err != nil {
		q.ackErrors.Add(1)
	}
}

// length is the stream's entry count, asked of the broker at most every
// 20 ms: WaitRoom runs before every answer.
func (q *Queue) length(ctx context.Context) (int, error) {
	q.mu.Lock()
	if time.Since(q.lengthAt) < 20*time.Millisecond {
		n := q.lengthSeen
		q.mu.Unlock()
		return n, nil
	}
	q.mu.Unlock()
	info, err := q.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	q.lengthSeen, q.lengthAt = int(info.State.Msgs), time.Now()
	q.mu.Unlock()
	return int(info.State.Msgs), nil
}

// Put publishes a frame; the stream sequence is its index.
func (q *Queue) Put(ctx context.Context, data []byte, tags map[string]string, _ int64) (uint64, string, error) {
	q.mu.Lock()
	limit := q.cfg.MaxPayload
	q.mu.Unlock()
	if limit > 0 && len(data) > limit {
		return 0, "", fmt.Errorf("%w: %d bytes, limit %d", queue.ErrTooLarge, len(data), limit)
	}
	if ended, err := q.ended(ctx); err != nil {
		return 0, "", err
	} else if ended {
		return 0, "", queue.ErrEnded
	}
	t := maps.Clone(tags)
	if t == nil {
		t = map[string]string{}
	}
	id := t[queue.RequestIDTag]
	if id == "" {
		id = queue.NewRequestID()
		t[queue.RequestIDTag] = id
	}
	idx, err := q.publish(ctx, data, t, "", id)
	return idx, id, err
}

// errCodeStoreFailed is the JetStream API error a stream answers a
// publish it cannot store with; on a DiscardNew stream bounded by MaxMsgs
// (and no byte limit) that is a full stream. nats.go names no constant
// for it.
const errCodeStoreFailed jetstream.ErrorCode = 10077

func (q *Queue) publish(ctx context.Context, data []byte, tags map[string]string, message, msgID string) (uint64, error) {
	m := nats.NewMsg(q.subject + "." + subjectToken(tags[queue.RequestIDTag]))
	m.Data = data
	if len(tags) > 0 {
		b, _ := json.Marshal(tags)
		m.Header.Set(tagsHeader, string(b))
	}
	if message != "" {
		m.Header.Set(msgHeader, message)
	}
	ack, err := q.b.js.PublishMsg(ctx, m, jetstream.WithMsgID(msgID))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeStoreFailed {
			return 0, queue.FullError(q.name, 0, err)
		}
		return 0, fmt.Errorf("queue %s: publish: %w", q.name, err)
	}
	return ack.Sequence, nil
}

// subjectToken keeps a request id usable as a subject token.
func subjectToken(id string) string {
	if id == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' {
			return '_'
		}
		return r
	}, id)
}

// frameOf reads a stored message back into a frame.
func frameOf(seq uint64, data []byte, h nats.Header) queue.Frame {
	f := queue.Frame{Index: seq, Data: data, Tags: map[string]string{}}
	if t := h.Get(tagsHeader); t != "" {
		json.Unmarshal([]byte(t), &f.Tags) //nolint:errcheck // written by publish
	}
	if m := h.Get(msgHeader); m != "" {
		f.Message = m
	}
	return f
}

// Get reads frames by index (or by request id), waiting up to timeout.
func (q *Queue) Get(ctx context.Context, from uint64, length int, timeout time.Duration, autoDelete bool, filter map[string]string) ([]queue.Frame, error) {
	out, _, err := q.read(ctx, queue.ReadOptions{From: from, Length: length, Timeout: timeout, AutoDelete: autoDelete, Filter: filter})
	return out, err
}

// Read is Get within o.MaxBytes: the messages are fetched one at a time
// and held up to the cap, then handed to w.
func (q *Queue) Read(ctx context.Context, o queue.ReadOptions, w queue.FrameWriter) (int, error) {
	out, next, err := q.read(ctx, o)
	if err != nil || len(out) == 0 {
		return 0, err
	}
	if err := w.Begin(next); err != nil {
		return 0, err
	}
	for i, f := range out {
		if err := w.Frame(f); err != nil {
			return i, err
		}
	}
	return len(out), nil
}

func (q *Queue) read(ctx context.Context, o queue.ReadOptions) ([]queue.Frame, uint64, error) {
	length := max(o.Length, 1)
	deadline := time.Now().Add(o.Timeout)
	for {
		out, next, err := q.scan(ctx, o.From, length, o.Filter, o.MaxBytes)
		if err != nil {
			return nil, 0, err
		}
		if len(out) > 0 {
			if o.AutoDelete {
				for _, f := range out {
					if err := q.Delete(ctx, f.Index); err != nil {
						return nil, 0, err
					}
				}
			}
			return out, next, nil
		}
		if time.Until(deadline) <= 0 {
			return nil, 0, nil
		}
		select {
		case <-time.After(min(50*time.Millisecond, time.Until(deadline))):
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// scan reads up to length matching frames from index from on, stopping
// before the one that would pass maxBytes (queue.SizeOf; at least one):
// next is that one's index.
func (q *Queue) scan(ctx context.Context, from uint64, length int, filter map[string]string, maxBytes int64) ([]queue.Frame, uint64, error) {
	if id := filter[queue.RequestIDTag]; id != "" {
		m, err := q.stream.GetLastMsgForSubject(ctx, q.subject+"."+subjectToken(id))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		f := frameOf(m.Sequence, m.Data, m.Header)
		if m.Sequence < from || !queue.Matches(f.Tags, filter) {
			return nil, 0, nil
		}
		return []queue.Frame{f}, 0, nil
	}
	info, err := q.stream.Info(ctx)
	if err != nil {
		return nil, 0, err
	}
	var out []queue.Frame
	var total int64
	for seq := max(from, info.State.FirstSeq); seq <= info.State.LastSeq && len(out) < length && info.State.Msgs > 0; seq++ {
		m, err := q.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		f := frameOf(m.Sequence, m.Data, m.Header)
		if !queue.Matches(f.Tags, filter) {
			continue
		}
		n := queue.SizeOf(f)
		if maxBytes > 0 && len(out) > 0 && total+n > maxBytes {
			return out, f.Index, nil
		}
		total += n
		out = append(out, f)
	}
	return out, 0, nil
}

// Watch adds a consumer: a watcher fetching from the shared durable
// consumer while it holds fewer than its window. From and Filter are not
// applied on a broker (the durable consumer delivers in order).
func (q *Queue) Watch(o queue.WatchOptions) queue.Watcher {
	w := &Watcher{q: q, id: o.Consumer, window: max(o.Window, 1), autoCommit: o.AutoCommit, indexOnly: o.IndexOnly, inflight: map[uint64]bool{}}
	q.mu.Lock()
	q.consumers++
	if w.id == "" {
		w.id = fmt.Sprintf("%s.consumer-%d", q.name, q.consumers)
	}
	q.watchers[w] = true
	q.mu.Unlock()
	return w
}

// Commit acknowledges entries: a work-queue stream removes them.
func (q *Queue) Commit(ctx context.Context, indexes ...uint64) error {
	for _, i := range indexes {
		h, ok := q.take(i)
		if ok {
			if err := h.msg.DoubleAck(ctx); err != nil {
				return fmt.Errorf("queue %s: commit %d: %w", q.name, i, err)
			}
			continue
		}
		if err := q.deleteMsg(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// deleteMsg deletes the entry at seq; one the stream does not hold is no
// error. nats.go reports a delete the server refused as
// ErrMsgDeleteUnsuccessful with the server's reason as text only; on these
// streams (no DenyDelete, not sealed) the server refuses only a sequence
// it does not hold.
func (q *Queue) deleteMsg(ctx context.Context, seq uint64) error {
	err := q.stream.DeleteMsg(ctx, seq)
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return nil
	}
	return fmt.Errorf("queue %s: delete %d: %w", q.name, seq, err)
}

// take removes a delivered entry from its watcher's hold.
func (q *Queue) take(i uint64) (held, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	h, ok := q.held[i]
	if ok {
		delete(q.held, i)
		delete(h.w.inflight, i)
	}
	return h, ok
}

// Negative gives entries back at once (nak), or dead-letters those
// delivered MaxDelivery times.
func (q *Queue) Negative(ctx context.Context, reason string, indexes ...uint64) error {
	for _, i := range indexes {
		h, ok := q.take(i)
		q.mu.Lock()
		dl, limit := q.deadLetter, q.cfg.MaxDelivery
		q.mu.Unlock()
		if !ok {
			continue
		}
		md, err := h.msg.Metadata()
		if err == nil && md.NumDelivered >= uint64(limit) {
			if err := q.dead(ctx, h.msg, dl, fmt.Sprintf("dead-lettered after %d deliveries: %s", md.NumDelivered, reason)); err != nil {
				return err
			}
			continue
		}
		q.mu.Lock()
		q.redeliver++
		q.mu.Unlock()
		if err := h.msg.Nak(); err != nil {
			return fmt.Errorf("queue %s: negative %d: %w", q.name, i, err)
		}
	}
	return nil
}

// dead hands a message to the dead-letter function (which removes it
// through Transfer) or terminates it.
func (q *Queue) dead(ctx context.Context, m jetstream.Msg, dl queue.DeadLetterFunc, reason string) error {
	q.deadLettered.Add(1)
	md, _ := m.Metadata()
	f := frameOf(md.Sequence.Stream, m.Data(), m.Headers())
	if dl != nil {
		q.mu.Lock()
		q.held[f.Index] = held{msg: m, w: &Watcher{inflight: map[uint64]bool{}}}
		q.mu.Unlock()
		return dl(ctx, f, reason)
	}
	if err := m.Term(); err != nil {
		return fmt.Errorf("queue %s: terminate %d: %w", q.name, f.Index, err)
	}
	return nil
}

// Delete removes entries whatever their state.
func (q *Queue) Delete(ctx context.Context, indexes ...uint64) error {
	for _, i := range indexes {
		q.take(i)
		if err := q.deleteMsg(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// Truncate purges the entries below index.
func (q *Queue) Truncate(ctx context.Context, index uint64) error {
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSequence(index)); err != nil {
		return fmt.Errorf("queue %s: truncate: %w", q.name, err)
	}
	return nil
}

// End marks the end of the stream in the backend's key-value bucket.
func (q *Queue) End(ctx context.Context, force bool) error {
	if _, err := q.b.meta.Put(ctx, q.name+".ended", []byte("1")); err != nil {
		return fmt.Errorf("queue %s: end of stream: %w", q.name, err)
	}
	q.isEnded.Store(true)
	if force {
		if err := q.stream.Purge(ctx); err != nil {
			return fmt.Errorf("queue %s: end of stream: purge: %w", q.name, err)
		}
	}
	return nil
}

// Search says where an entry stands. Delivery on a broker is in stream
// order, so the entries ahead of a waiting one are those of lower sequence
// still in the stream; an entry held by another server's consumer counts as
// waiting here (only this server's holds are known).
func (q *Queue) Search(ctx context.Context, index uint64) (queue.Position, error) {
	q.mu.Lock()
	h, held := q.held[index]
	q.mu.Unlock()
	if held {
		return queue.Position{InFlight: true, Consumer: h.w.id}, nil
	}
	if _, err := q.stream.GetMsg(ctx, index); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return queue.Position{}, fmt.Errorf("%w: index %d (already answered, committed or deleted, or never put)", queue.ErrNoEntry, index)
		}
		return queue.Position{}, err
	}
	info, err := q.stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return queue.Position{}, err
	}
	first := info.State.FirstSeq
	if index < first {
		return queue.Position{}, nil
	}
	ahead := int(index - first)
	for _, d := range info.State.Deleted {
		if d >= first && d < index {
			ahead--
		}
	}
	q.mu.Lock()
	for i := range q.held {
		if i >= first && i < index {
			ahead--
		}
	}
	q.mu.Unlock()
	return queue.Position{Ahead: max(ahead, 0)}, nil
}

// Stats reads the stream's and the consumer's numbers: a round trip to
// the broker, whose failure is the error.
func (q *Queue) Stats(ctx context.Context) (queue.Stats, error) {
	q.mu.Lock()
	st := queue.Stats{Consumers: len(q.watchers), InFlight: len(q.held), Redeliveries: q.redeliver, AckErrors: q.ackErrors.Load(), DeadLettered: q.deadLettered.Load(),
		MaxLength: q.cfg.MaxLength, MaxPayload: q.cfg.MaxPayload}
	stream := q.stream
	q.mu.Unlock()
	info, err := stream.Info(ctx)
	if err != nil {
		return queue.Stats{}, fmt.Errorf("queue %s: stats: %w", q.name, err)
	}
	st.Length, st.First, st.Last = int(info.State.Msgs), info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs > 0 && !info.State.FirstTime.IsZero() {
		st.OldestAge = time.Since(info.State.FirstTime)
	}
	if st.Ended, err = q.ended(ctx); err != nil {
		return queue.Stats{}, err
	}
	return st, nil
}

// WaitRoom polls until the stream holds fewer than MaxLength entries.
func (q *Queue) WaitRoom(ctx context.Context) error {
	for {
		q.mu.Lock()
		limit, evict := q.cfg.MaxLength, q.cfg.AutoEvict
		q.mu.Unlock()
		if limit <= 0 || evict {
			return nil
		}
		if n, err := q.length(ctx); err == nil && n < limit {
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		case <-q.quit:
			return queue.ErrClosed
		}
	}
}

func (q *Queue) close() {
	q.mu.Lock()
	select {
	case <-q.quit:
	default:
		close(q.quit)
	}
	q.mu.Unlock()
}

// Watcher is one consumer of a Queue.
type Watcher struct {
	q          *Queue
	id         string
	window     int
	autoCommit bool
	indexOnly  bool
	inflight   map[uint64]bool // guarded by q.mu
	done       bool
	buf        []jetstream.Msg // fetched, not yet handed out (they count toward the window)
}

// Next fetches the next entry while the watcher holds fewer than its
// window; io.EOF once the stream has ended and nothing is left.
func (w *Watcher) Next(ctx context.Context) (queue.Frame, error) {
	q := w.q
	for {
		q.mu.Lock()
		full, done := len(w.inflight) >= w.window, w.done
		q.mu.Unlock()
		if done {
			return queue.Frame{}, queue.ErrClosed
		}
		if full {
			select {
			case <-time.After(5 * time.Millisecond):
				continue
			case <-ctx.Done():
				return queue.Frame{}, ctx.Err()
			case <-q.quit:
				return queue.Frame{}, queue.ErrClosed
			}
		}
		m, err := w.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return queue.Frame{}, ctx.Err()
			}
			select {
			case <-q.quit:
				return queue.Frame{}, queue.ErrClosed
			default:
			}
			if ended, _ := q.ended(ctx); ended { // a failed ask: not known to have ended yet
				if n, err := q.length(ctx); err == nil && n == 0 {
					return queue.Frame{}, io.EOF
				}
			}
			continue // nothing yet
		}
		md, err := m.Metadata()
		if err != nil { // not a JetStream message: nothing to acknowledge
			q.countAckError(err)
			continue
		}
		f := frameOf(md.Sequence.Stream, m.Data(), m.Headers())
		f.Deliveries = int64(md.NumDelivered)
		q.mu.Lock()
		limit, dl := q.cfg.MaxDelivery, q.deadLetter
		q.mu.Unlock()
		if md.NumDelivered > uint64(limit) { // given back too often: a dead letter
			// Not this consumer's error to return: counted, and the broker
			// redelivers it after AckWait to be dead-lettered again.
			q.countAckError(q.dead(ctx, m, dl, fmt.Sprintf("dead-lettered after %d deliveries", md.NumDelivered-1)))
			continue
		}
		if w.autoCommit {
			if err := m.DoubleAck(ctx); err != nil {
				return queue.Frame{}, fmt.Errorf("queue %s: auto-commit %d: %w", q.name, f.Index, err)
			}
		} else {
			q.mu.Lock()
			q.held[f.Index] = held{msg: m, w: w}
			w.inflight[f.Index] = true
			q.mu.Unlock()
		}
		if w.indexOnly {
			f.Data = nil
		}
		return f, nil
	}
}

// fetch hands out the next fetched message, fetching as many as the
// window has room for in one pull request when none is left.
func (w *Watcher) fetch(ctx context.Context) (jetstream.Msg, error) {
	if len(w.buf) > 0 {
		m := w.buf[0]
		w.buf = w.buf[1:]
		return m, nil
	}
	w.q.mu.Lock()
	room := w.window - len(w.inflight)
	w.q.mu.Unlock()
	// What is there now, up to the room; when nothing is, wait for one.
	if batch, err := w.q.cons.FetchNoWait(max(room, 1)); err == nil {
		for m := range batch.Messages() {
			w.buf = append(w.buf, m)
		}
	}
	if len(w.buf) == 0 {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return w.q.cons.Next(jetstream.FetchContext(fctx))
	}
	m := w.buf[0]
	w.buf = w.buf[1:]
	return m, nil
}

// Close naks what the watcher holds, so it is redelivered at once.
func (w *Watcher) Close(ctx context.Context, reason string) error {
	q := w.q
	q.mu.Lock()
	if w.done {
		q.mu.Unlock()
		return nil
	}
	w.done = true
	delete(q.watchers, w)
	var idx []uint64
	for i := range w.inflight {
		idx = append(idx, i)
	}
	buf := w.buf
	w.buf = nil
	q.mu.Unlock()
	for _, m := range buf { // fetched, never handed out: back at once
		q.countAckError(m.Nak()) // failed: the ack wait redelivers it
	}
	return q.Negative(ctx, reason, idx...)
}

var (
	_ queue.Backend = (*Backend)(nil)
	_ queue.Queue   = (*Queue)(nil)
	_ queue.Watcher = (*Watcher)(nil)
)
