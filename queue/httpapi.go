package queue

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// The headers the attributes name (meta.header.*): the SDKs send the
// caller's identity and a put's priority in them.
const (
	HeaderUser      = "X-Eas-Queueservice-User"
	HeaderGroup     = "X-Eas-Queueservice-Group"
	HeaderPriority  = "X-Eas-Queueservice-Priority"
	HeaderRequestID = "X-Eas-Queueservice-Request-Id"
	// HeaderNextIndex answers a get that its byte cap (API.MaxReadBytes)
	// cut short: the _index_ to read on from.
	HeaderNextIndex = "X-Eas-Queueservice-Next-Index"
)

// The identity headers the EAS Python and Java SDKs send whatever the
// attributes name: a watcher's consumer id is made of them when the
// attributes' ones are absent.
const (
	headerRedisUser  = "X-Eas-Queueservice-Redis-Uid"
	headerRedisGroup = "X-Eas-Queueservice-Redis-Gid"
)

// Op is what a queue API call does.
type Op int

// The queue API's operations.
const (
	OpPut Op = iota
	OpEnd
	OpAttrs
	OpGet
	OpWatch
	OpCommit
	OpNegative
	OpDelete
	OpTruncate
	OpSearch
)

// Call is one parsed queue API call.
type Call struct {
	Op         Op
	Tags       map[string]string // Put: the entry's tags; Get, Watch: the filter
	Priority   int64
	Index      uint64
	Length     int
	Timeout    time.Duration
	AutoDelete bool
	Raw        bool
	Window     int
	IndexOnly  bool
	AutoCommit bool
	Force      bool
	Indexes    []uint64
}

// maxGetLength bounds one Get; maxTimeout bounds its wait.
const (
	maxGetLength = 10000
	maxTimeout   = 10 * time.Minute
	maxIndexes   = 10000
)

// ParseCall reads a call from its method and query: the parameters are
// EAS's (_index_, _length_, _timeout_, _auto_delete_, _raw_, _watch_,
// _window_, _index_only_, _auto_commit_, _indexes_, _negative_, _trunc_,
// _eos_, _force_, _attrs_, _search_, _priority_); any other parameter is a
// tag.
func ParseCall(method string, q url.Values) (Call, error) {
	c := Call{Length: 1, Window: 1}
	var err error
	flag := func(name string) bool {
		if err != nil {
			return false
		}
		v := q.Get(name)
		if v == "" {
			return false
		}
		b, e := strconv.ParseBool(v)
		if e != nil {
			err = fmt.Errorf("%s: %q is not a boolean; use true or false", name, v)
		}
		return b
	}
	num := func(name string, lo, hi uint64) uint64 {
		if err != nil || q.Get(name) == "" {
			return 0
		}
		n, e := strconv.ParseUint(q.Get(name), 10, 64)
		if e != nil || n < lo || n > hi {
			err = fmt.Errorf("%s: %q is not a number from %d to %d", name, q.Get(name), lo, hi)
		}
		return n
	}
	for k, vs := range q {
		if !strings.HasPrefix(k, "_") && len(vs) > 0 {
			if c.Tags == nil {
				c.Tags = map[string]string{}
			}
			c.Tags[k] = vs[0]
		}
	}
	switch method {
	case http.MethodPost:
		c.Op = OpPut
		if flag("_eos_") {
			c.Op, c.Force = OpEnd, flag("_force_")
		}
		if p := q.Get("_priority_"); p != "" && err == nil {
			c.Priority, err = parsePriority(p)
		}
	case http.MethodGet:
		switch {
		case flag("_attrs_"):
			c.Op = OpAttrs
		case flag("_search_"):
			c.Op = OpSearch
			if q.Get("_index_") == "" && err == nil {
				err = errors.New("_search_ needs _index_: the index of the entry to find")
			}
			c.Index = num("_index_", 1, 1<<63)
		case flag("_watch_"):
			c.Op = OpWatch
			c.Index = num("_index_", 0, 1<<63)
			if w := num("_window_", 1, 1<<20); w > 0 {
				c.Window = int(w)
			}
			c.IndexOnly, c.AutoCommit = flag("_index_only_"), flag("_auto_commit_")
		default:
			c.Op = OpGet
			c.Index = num("_index_", 0, 1<<63)
			if l := num("_length_", 1, maxGetLength); l > 0 {
				c.Length = int(l)
			}
			c.AutoDelete, c.Raw = flag("_auto_delete_"), flag("_raw_")
			if t := q.Get("_timeout_"); t != "" && err == nil {
				c.Timeout, err = parseTimeout(t)
			}
		}
	case http.MethodPut:
		c.Op = OpCommit
		if flag("_negative_") {
			c.Op = OpNegative
		}
		if err == nil {
			c.Indexes, err = parseIndexes(q.Get("_indexes_"))
		}
	case http.MethodDelete:
		c.Op = OpDelete
		if flag("_trunc_") {
			c.Op = OpTruncate
			if q.Get("_index_") == "" && err == nil {
				err = errors.New("_trunc_ needs _index_: the entries below it are deleted")
			}
			c.Index = num("_index_", 0, 1<<63)
		} else if err == nil {
			c.Indexes, err = parseIndexes(q.Get("_indexes_"))
		}
	default:
		return c, fmt.Errorf("method %s is not a queue operation; use POST, GET, PUT or DELETE", method)
	}
	return c, err
}

func parsePriority(s string) (int64, error) {
	p, err := strconv.ParseInt(s, 10, 64)
	if err != nil || p < 0 {
		return 0, fmt.Errorf("priority: %q is not a number >= 0", s)
	}
	return p, nil
}

// parseTimeout reads a Go duration ("5s", what the Go SDK sends) or a
// number of seconds.
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, e := strconv.ParseFloat(s, 64)
		if e != nil || n != n {
			return 0, fmt.Errorf("_timeout_: %q is neither a duration (5s) nor a number of seconds", s)
		}
		d = time.Duration(n * float64(time.Second))
	}
	if d < 0 || d > maxTimeout {
		return 0, fmt.Errorf("_timeout_: %s is outside 0..%s", d, maxTimeout)
	}
	return d, nil
}

func parseIndexes(s string) ([]uint64, error) {
	if s == "" {
		return nil, errors.New("_indexes_ is required: a comma-separated list of indexes, e.g. _indexes_=1,2,3")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxIndexes {
		return nil, fmt.Errorf("_indexes_: %d indexes, at most %d at once", len(parts), maxIndexes)
	}
	out := make([]uint64, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("_indexes_: %q is not an index", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// API serves one queue over HTTP, as EAS's queue service does.
type API struct {
	Queue   Queue
	Name    string // the queue's name in the attributes: <service> or <service>/sink
	MaxBody int64  // the largest body a put reads
	// MaxReadBytes caps a get's answer (the entries' bytes as stored); 0:
	// DefaultMaxReadBytes. A get answers at least one entry.
	MaxReadBytes int64
}

// StatusOf maps a queue error to an HTTP status.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrFull):
		return http.StatusTooManyRequests
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrEnded):
		return http.StatusConflict
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrNoEntry):
		return http.StatusNotFound
	case errors.Is(err, context.Canceled):
		return 499
	}
	return http.StatusInternalServerError
}

func fail(w http.ResponseWriter, code int, msg string) int {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n") //nolint:errcheck // the client may be gone
	return code
}

// mediaOf picks the codec of an answer: the first of JSON and protobuf
// that the request's Accept names, else def. EAS's defaults differ by call,
// as the SDKs show: the attributes are JSON unless protobuf is asked for
// (the Python and Java SDKs send no Accept and parse JSON; the Go SDK asks
// for protobuf), frames are protobuf unless JSON is asked for (every SDK
// asks for protobuf; the Python SDK's older client sent no Accept and
// parsed protobuf).
func mediaOf(r *http.Request, def string) string {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch mt = strings.ToLower(strings.TrimSpace(mt)); mt {
		case MediaJSON:
			return MediaJSON
		case MediaProtobuf, "application/x-protobuf", "application/protobuf":
			return MediaProtobuf
		}
	}
	return def
}

// Serve answers one call and returns the status sent.
func (a *API) Serve(w http.ResponseWriter, r *http.Request) int {
	c, err := ParseCall(r.Method, r.URL.Query())
	if err != nil {
		if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodDelete {
			w.Header().Set("Allow", "GET, POST, PUT, DELETE")
			return fail(w, http.StatusMethodNotAllowed, err.Error())
		}
		return fail(w, http.StatusBadRequest, err.Error())
	}
	q := a.Queue
	switch c.Op {
	case OpPut:
		if h := r.Header.Get(HeaderPriority); h != "" {
			if c.Priority, err = parsePriority(h); err != nil {
				return fail(w, http.StatusBadRequest, err.Error())
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.MaxBody))
		if err != nil {
			return fail(w, http.StatusRequestEntityTooLarge, "reading the body: "+err.Error())
		}
		idx, id, err := q.Put(r.Context(), body, c.Tags, c.Priority)
		if err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		w.Header().Set(HeaderRequestID, id)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, strconv.FormatUint(idx, 10)) //nolint:errcheck
		return http.StatusOK
	case OpEnd:
		if err := q.End(r.Context(), c.Force); err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		return http.StatusOK
	case OpAttrs:
		attrs, err := a.Attributes(r.Context())
		if err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		media := mediaOf(r, MediaJSON)
		w.Header().Set("Content-Type", media)
		if media == MediaJSON {
			return writeJSON(w, attrs)
		}
		w.Write(AppendAttributes(nil, attrs)) //nolint:errcheck
		return http.StatusOK
	case OpGet:
		return a.get(w, r, c)
	case OpSearch:
		pos, err := q.Search(r.Context(), c.Index)
		if err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		w.Header().Set("Content-Type", MediaJSON)
		return writeJSON(w, searchJSON{ConsumerID: pos.Consumer, IsPending: pos.InFlight, WaitCount: pos.Ahead})
	case OpWatch:
		return a.watch(w, r, c)
	case OpCommit:
		if err := q.Commit(r.Context(), c.Indexes...); err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		return http.StatusOK
	case OpNegative:
		r.ParseForm() //nolint:errcheck // a missing reason is still a negative ack
		reason := strings.TrimSpace(r.PostForm.Get("_code_") + " " + r.PostForm.Get("_reason_"))
		if reason == "" {
			reason = "negative acknowledgement"
		}
		if err := q.Negative(r.Context(), reason, c.Indexes...); err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		return http.StatusOK
	case OpDelete:
		if err := q.Delete(r.Context(), c.Indexes...); err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		return http.StatusOK
	case OpTruncate:
		if err := q.Truncate(r.Context(), c.Index); err != nil {
			return fail(w, StatusOf(err), err.Error())
		}
		return http.StatusOK
	}
	return fail(w, http.StatusBadRequest, "unknown queue operation")
}

// get answers a get: the frames are encoded onto the connection as the
// store hands them over, within MaxReadBytes; HeaderNextIndex says where
// to read on when the cap cut the answer short.
func (a *API) get(w http.ResponseWriter, r *http.Request, c Call) int {
	media := mediaOf(r, MediaProtobuf)
	o := ReadOptions{From: c.Index, Length: c.Length, Timeout: c.Timeout, AutoDelete: c.AutoDelete, Filter: c.Tags, MaxBytes: a.MaxReadBytes}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxReadBytes
	}
	if c.Raw {
		o.Length = 1
	}
	fw := &httpFrames{w: w, media: media, raw: c.Raw}
	n, err := a.Queue.Read(r.Context(), o, fw)
	if err == nil && fw.begun {
		err = fw.end()
	}
	switch {
	case fw.werr != nil:
		return 499 // the client went away while the answer was written
	case err != nil && fw.sent == 0:
		w.Header().Del(HeaderNextIndex)
		return fail(w, StatusOf(err), err.Error())
	case err != nil:
		// The status is sent: cut the connection, so that the client sees
		// a broken answer rather than a short list.
		if conn, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
			conn.Close()
		}
		return http.StatusOK
	case n == 0 && c.Raw:
		return fail(w, http.StatusNotFound, "no entry matches")
	case n == 0:
		w.Header().Set("Content-Type", media)
		w.Write(EncodeFrames(media, nil)) //nolint:errcheck
	}
	return http.StatusOK
}

// httpFrames encodes a read's frames onto an answer, one at a time.
type httpFrames struct {
	w     http.ResponseWriter
	bw    *bufio.Writer
	media string
	raw   bool // the first frame's data alone
	begun bool
	n     int
	sent  int64 // bytes that reached w: past 0 the status is sent
	werr  error // w's error: the client is gone
}

func (h *httpFrames) Write(b []byte) (int, error) {
	n, err := h.w.Write(b)
	h.sent += int64(n)
	if err != nil {
		h.werr = err
	}
	return n, err
}

func (h *httpFrames) Begin(next uint64) error {
	h.begun = true
	h.bw = bufio.NewWriterSize(h, 64<<10)
	if next > 0 {
		h.w.Header().Set(HeaderNextIndex, strconv.FormatUint(next, 10))
	}
	switch {
	case h.raw:
		h.w.Header().Set("Content-Type", "application/octet-stream")
	case h.media == MediaJSON:
		h.w.Header().Set("Content-Type", h.media)
		return h.bw.WriteByte('[')
	default:
		h.w.Header().Set("Content-Type", h.media)
	}
	return nil
}

func (h *httpFrames) Frame(f Frame) error {
	defer func() { h.n++ }()
	switch {
	case h.raw:
		_, err := h.bw.Write(f.Data)
		return err
	case h.media == MediaJSON:
		if h.n > 0 {
			if err := h.bw.WriteByte(','); err != nil {
				return err
			}
		}
		return writeFrameJSON(h.bw, f)
	}
	return writeListFrame(h.bw, f)
}

// end closes the JSON array and flushes.
func (h *httpFrames) end() error {
	if h.media == MediaJSON && !h.raw {
		if err := h.bw.WriteByte(']'); err != nil {
			return err
		}
	}
	return h.bw.Flush()
}

// Attributes are what GET ?_attrs_=true answers: the keys the SDKs need.
// It fails when the queue's numbers cannot be read (a broker's error).
func (a *API) Attributes(ctx context.Context) (map[string]string, error) {
	st, err := a.Queue.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue %s: attributes: %w", a.Name, err)
	}
	state := "Normal"
	if st.Ended {
		state = "End"
	}
	return map[string]string{
		"meta.backend":           "eas-server",
		"meta.name":              a.Name,
		"meta.state":             state,
		"meta.maxPayloadBytes":   strconv.Itoa(st.MaxPayload),
		"meta.header.user":       HeaderUser,
		"meta.header.group":      HeaderGroup,
		"meta.header.priority":   HeaderPriority,
		"stream.length":          strconv.Itoa(st.Length),
		"stream.approxMaxLength": strconv.Itoa(st.MaxLength),
		"stream.lastEntry":       strconv.FormatUint(st.Last, 10),
		"stream.firstEntry":      strconv.FormatUint(st.First, 10),
		"consumers.status.total": strconv.Itoa(st.Consumers),
	}, nil
}

// watch streams frames to a consumer: over a websocket (one binary
// message per DataFrameProto) when the request asks to upgrade, else as a
// stream of length-delimited frames (a 4-byte big-endian length, then the
// frame). The consumer's uncommitted entries are redelivered when it goes.
func (a *API) watch(w http.ResponseWriter, r *http.Request, c Call) int {
	media := mediaOf(r, MediaProtobuf)
	opts := WatchOptions{From: c.Index, Window: c.Window, Filter: c.Tags, AutoCommit: c.AutoCommit, IndexOnly: c.IndexOnly, Consumer: consumerOf(r)}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		websocket.Server{Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			go func() { // reads answer the client's pings and see it go
				defer cancel()
				var b []byte
				for websocket.Message.Receive(ws, &b) == nil {
				}
			}()
			wt := a.Queue.Watch(opts)
			defer wt.Close(context.WithoutCancel(r.Context()), "the consumer disconnected") //nolint:errcheck // the client is gone; its entries go back
			for {
				f, err := wt.Next(ctx)
				if err != nil {
					return
				}
				if websocket.Message.Send(ws, EncodeFrame(media, f)) != nil {
					return
				}
			}
		}}.ServeHTTP(w, r)
		return http.StatusSwitchingProtocols
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", media)
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	wt := a.Queue.Watch(opts)
	defer wt.Close(context.WithoutCancel(r.Context()), "the consumer disconnected") //nolint:errcheck // the client is gone; its entries go back
	for {
		f, err := wt.Next(r.Context())
		if err != nil {
			return http.StatusOK
		}
		b := EncodeFrame(media, f)
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], uint32(len(b)))
		if _, err := w.Write(append(h[:], b...)); err != nil {
			return http.StatusOK
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// searchJSON is the answer of a search (our rule: the EAS SDKs read it as a
// JSON object and name no field): the consumer holding the entry, whether
// one does, and how many entries are delivered before it.
type searchJSON struct {
	ConsumerID string `json:"ConsumerId"`
	IsPending  bool   `json:"IsPending"`
	WaitCount  int    `json:"WaitCount"`
}

// consumerOf names a watcher "<group>.<user>" from the identity headers the
// SDKs send (the attributes' ones, else the Python and Java SDKs' own);
// "" when the request names no user.
func consumerOf(r *http.Request) string {
	user := r.Header.Get(HeaderUser)
	if user == "" {
		user = r.Header.Get(headerRedisUser)
	}
	if user == "" {
		return ""
	}
	group := r.Header.Get(HeaderGroup)
	if group == "" {
		group = r.Header.Get(headerRedisGroup)
	}
	if group == "" {
		return user
	}
	return group + "." + user
}
