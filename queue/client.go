package queue

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// Client speaks the queue API to one queue as the EAS SDKs' QueueClient
// does (the same query parameters, headers and protobuf messages): the
// load generator, the tests and scripts use it.
type Client struct {
	URL   string // the queue: http://host/api/predict/<service>[/sink]
	Token string
	HTTP  *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) do(ctx context.Context, method string, q url.Values, body io.Reader, header http.Header) ([]byte, http.Header, error) {
	u := c.URL
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", c.Token)
	req.Header.Set(HeaderUser, "eas-server-client")
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", MediaProtobuf)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, resp.Header, &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	return b, resp.Header, nil
}

// StatusError is an answer other than 200.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("queue answered %d: %s", e.Code, e.Body) }

// Put appends data with tags and a priority (0: none) and returns its index
// and request id.
func (c *Client) Put(ctx context.Context, data []byte, tags map[string]string, priority int64) (uint64, string, error) {
	q := url.Values{}
	for k, v := range tags {
		q.Set(k, v)
	}
	h := http.Header{}
	if priority > 0 {
		h.Set(HeaderPriority, strconv.FormatInt(priority, 10))
	}
	b, hdr, err := c.do(ctx, http.MethodPost, q, bytes.NewReader(data), h)
	if err != nil {
		return 0, "", err
	}
	idx, err := strconv.ParseUint(string(b), 10, 64)
	return idx, hdr.Get(HeaderRequestID), err
}

// Get reads up to length frames from index on (0: the head) that match
// tags, waiting up to timeout.
func (c *Client) Get(ctx context.Context, index uint64, length int, timeout time.Duration, autoDelete bool, tags map[string]string) ([]Frame, error) {
	q := url.Values{"_index_": {strconv.FormatUint(index, 10)}, "_length_": {strconv.Itoa(length)},
		"_timeout_": {timeout.String()}, "_raw_": {"false"}, "_auto_delete_": {strconv.FormatBool(autoDelete)}}
	for k, v := range tags {
		q.Set(k, v)
	}
	b, _, err := c.do(ctx, http.MethodGet, q, nil, nil)
	if err != nil {
		return nil, err
	}
	return ParseFrameList(b)
}

// Attributes reads the queue's attributes.
func (c *Client) Attributes(ctx context.Context) (map[string]string, error) {
	b, _, err := c.do(ctx, http.MethodGet, url.Values{"_attrs_": {"true"}}, nil, nil)
	if err != nil {
		return nil, err
	}
	return ParseAttributes(b)
}

// Search says where the entry index stands in the queue (the queue API's
// _search_); a *StatusError with Code 404 when the queue does not hold it.
func (c *Client) Search(ctx context.Context, index uint64) (Position, error) {
	b, _, err := c.do(ctx, http.MethodGet, url.Values{"_search_": {"true"}, "_index_": {strconv.FormatUint(index, 10)}}, nil,
		http.Header{"Accept": {MediaJSON}})
	if err != nil {
		return Position{}, err
	}
	var s searchJSON
	if err := json.Unmarshal(b, &s); err != nil {
		return Position{}, fmt.Errorf("search answer %q: %w", b, err)
	}
	return Position{InFlight: s.IsPending, Consumer: s.ConsumerID, Ahead: s.WaitCount}, nil
}

func indexList(idx []uint64) string {
	s := make([]string, len(idx))
	for i, x := range idx {
		s[i] = strconv.FormatUint(x, 10)
	}
	return strings.Join(s, ",")
}

// Commit acknowledges delivered frames.
func (c *Client) Commit(ctx context.Context, indexes ...uint64) error {
	_, _, err := c.do(ctx, http.MethodPut, url.Values{"_indexes_": {indexList(indexes)}}, nil, nil)
	return err
}

// Negative gives delivered frames back, with a code and reason.
func (c *Client) Negative(ctx context.Context, code, reason string, indexes ...uint64) error {
	form := url.Values{"_code_": {code}, "_reason_": {reason}}
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	_, _, err := c.do(ctx, http.MethodPut, url.Values{"_indexes_": {indexList(indexes)}, "_negative_": {"true"}}, strings.NewReader(form.Encode()), h)
	return err
}

// Del deletes frames.
func (c *Client) Del(ctx context.Context, indexes ...uint64) error {
	_, _, err := c.do(ctx, http.MethodDelete, url.Values{"_indexes_": {indexList(indexes)}}, nil, nil)
	return err
}

// Truncate deletes the frames below index.
func (c *Client) Truncate(ctx context.Context, index uint64) error {
	_, _, err := c.do(ctx, http.MethodDelete, url.Values{"_index_": {strconv.FormatUint(index, 10)}, "_trunc_": {"true"}}, nil, nil)
	return err
}

// End ends the stream.
func (c *Client) End(ctx context.Context, force bool) error {
	_, _, err := c.do(ctx, http.MethodPost, url.Values{"_eos_": {"true"}, "_force_": {strconv.FormatBool(force)}}, nil, nil)
	return err
}

// Watch streams frames from index on, at most window uncommitted, over a
// websocket (the SDKs' default) or, with stream, an HTTP stream of
// length-delimited frames. The channel closes when the watch ends (ctx
// done, the server gone); the returned error is the connection's.
func (c *Client) Watch(ctx context.Context, index uint64, window int, indexOnly, autoCommit, stream bool) (<-chan Frame, error) {
	return c.WatchMatching(ctx, nil, index, window, indexOnly, autoCommit, stream)
}

// WatchMatching is Watch of the entries whose tags hold every key and
// value of tags.
func (c *Client) WatchMatching(ctx context.Context, tags map[string]string, index uint64, window int, indexOnly, autoCommit, stream bool) (<-chan Frame, error) {
	q := url.Values{"_watch_": {"true"}, "_index_": {strconv.FormatUint(index, 10)}, "_window_": {strconv.Itoa(window)},
		"_index_only_": {strconv.FormatBool(indexOnly)}, "_auto_commit_": {strconv.FormatBool(autoCommit)}}
	for k, v := range tags {
		q.Set(k, v)
	}
	ch := make(chan Frame, 100)
	if !stream {
		u := strings.Replace(c.URL, "http", "ws", 1) + "?" + q.Encode()
		cfg, err := websocket.NewConfig(u, c.URL)
		if err != nil {
			return nil, err
		}
		cfg.Header = http.Header{"Authorization": {c.Token}, "Accept": {MediaProtobuf}, HeaderUser: {"eas-server-client"}}
		ws, err := cfg.DialContext(ctx)
		if err != nil {
			return nil, err
		}
		go func() {
			<-ctx.Done()
			ws.Close()
		}()
		go pump(ch, func() ([]byte, error) {
			var b []byte
			err := websocket.Message.Receive(ws, &b)
			return b, err
		})
		return ch, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", c.Token)
	req.Header.Set("Accept", MediaProtobuf)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, &StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	r := bufio.NewReader(resp.Body)
	go func() {
		defer resp.Body.Close()
		pump(ch, func() ([]byte, error) {
			var h [4]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return nil, err
			}
			b := make([]byte, binary.BigEndian.Uint32(h[:]))
			_, err := io.ReadFull(r, b)
			return b, err
		})
	}()
	return ch, nil
}

// pump sends the frames read, one message each, until a read or a frame
// fails, then closes ch.
func pump(ch chan<- Frame, read func() ([]byte, error)) {
	defer close(ch)
	for {
		b, err := read()
		if err != nil {
			return
		}
		f, err := ParseFrame(b)
		if err != nil {
			return
		}
		ch <- f
	}
}
