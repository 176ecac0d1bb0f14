package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gin-gonic/gin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// This file gives every data-plane request an id and, with
// Options.AccessLog, one log line.

// RequestIDHeader carries a data-plane request's id, both ways: a client's
// own id is kept when sane (maxRequestIDBytes of printable ASCII), else
// the server makes one. gRPC calls carry it as x-request-id metadata.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDBytes bounds a client's request id; a longer one is replaced.
const maxRequestIDBytes = 128

// idPrefix makes the ids of this process differ from those of others; a
// counter follows it.
var (
	idPrefix = func() (p [12]byte) {
		var b [6]byte
		if _, err := rand.Read(b[:]); err == nil {
			hex.Encode(p[:], b[:])
		}
		return p
	}()
	idSeq atomicCounter
)

// saneRequestID reports whether a client's id may be kept: 1 to
// maxRequestIDBytes bytes, each printable ASCII other than space.
func saneRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// idBox holds a generated id and the header value that shows it, so that
// both cost one allocation.
type idBox struct {
	val [1]string
	buf [24]byte
}

// newRequestID returns a fresh id as a one-element header value: 12 hex
// digits of the process's prefix, then 12 of a counter.
func newRequestID() []string {
	box := new(idBox)
	copy(box.buf[:12], idPrefix[:])
	n := idSeq.next()
	const digits = "0123456789abcdef"
	for i := 23; i >= 12; i-- {
		box.buf[i] = digits[n&0xf]
		n >>= 4
	}
	box.val[0] = unsafe.String(&box.buf[0], len(box.buf)) // buf is never written again
	return box.val[:]
}

// tagRequest is the first handler of every data-plane route: it sets the
// answer's X-Request-Id (the client's own when sane, else a new one) and,
// with an access log, writes the request's line once it is answered.
func (s *Server) tagRequest(c *gin.Context) {
	v := c.Request.Header[RequestIDHeader]
	if len(v) != 1 || !saneRequestID(v[0]) {
		v = newRequestID()
	}
	c.Writer.Header()[RequestIDHeader] = v // the request's own slice when kept: no copy
	if s.opt.AccessLog == nil {
		c.Next()
		return
	}
	start := time.Now()
	c.Next()
	var n accessNote
	if x, ok := c.Get(accessKey); ok {
		n = *x.(*accessNote)
	} else { // answered before any handler noted it (a panic, a route's own 404)
		n.code = c.Writer.Status()
	}
	var body int64
	if gb, ok := c.Request.Body.(*guardedBody); ok {
		body = gb.n
	}
	s.opt.AccessLog.LogAttrs(c.Request.Context(), slog.LevelInfo, "access",
		slog.String("proto", "http"),
		slog.String("method", c.Request.Method),
		slog.String("path", c.Request.URL.Path), // the query is left out: it is the client's
		slog.String("service", n.service),
		slog.String("version", versionLabel(n.version)),
		slog.Int("status", n.code),
		slog.Duration("latency", time.Since(start)),
		slog.String("request_id", v[0]),
		slog.String("remote", c.Request.RemoteAddr),
		slog.Int64("body_bytes", body),
		slog.Int("answer_bytes", max(c.Writer.Size(), 0)),
	)
}

// accessKey is the gin key of a request's accessNote.
const accessKey = "eas-server/access"

// accessNote is what a handler tells the access log of its request.
type accessNote struct {
	service string
	version int
	code    int
}

// note records, for the access log, the service a request was for, the
// version that answered (0 = none) and the status sent: 499 sends none, so
// the handler's word is the one to log. Without an access log it does
// nothing.
func (s *Server) note(c *gin.Context, service string, version, code int) {
	if s.opt.AccessLog != nil {
		c.Set(accessKey, &accessNote{service: service, version: version, code: code})
	}
}

// versionLabel is a version number as metrics and logs show it; "" for
// none.
func versionLabel(v int) string {
	if v <= 0 {
		return ""
	}
	return strconv.Itoa(v)
}

// grpcRequestID returns a gRPC call's id (its x-request-id metadata when
// sane, else a new one) and sends it back in the response header.
func grpcRequestID(ctx context.Context) string {
	id := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-request-id"); len(v) == 1 && saneRequestID(v[0]) {
			id = v[0]
		}
	}
	if id == "" {
		id = newRequestID()[0]
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-request-id", id)) // fails only outside a call
	return id
}

// accessGRPC writes the access log line of a gRPC infer call.
func (s *Server) accessGRPC(ctx context.Context, id, service string, version int, err error, start time.Time, req proto.Message) {
	if s.opt.AccessLog == nil {
		return
	}
	remote := ""
	if p, ok := peerAddr(ctx); ok {
		remote = p
	}
	s.opt.AccessLog.LogAttrs(ctx, slog.LevelInfo, "access",
		slog.String("proto", "grpc"),
		slog.String("method", "ModelInfer"),
		slog.String("service", service),
		slog.String("version", versionLabel(version)),
		slog.String("status", status.Code(err).String()),
		slog.Duration("latency", time.Since(start)),
		slog.String("request_id", id),
		slog.String("remote", remote),
		slog.Int("body_bytes", proto.Size(req)),
	)
}

// atomicCounter hands out the request id counter's values.
type atomicCounter struct{ n atomic.Uint64 }

func (a *atomicCounter) next() uint64 { return a.n.Add(1) }

// peerAddr is the remote address of a gRPC call.
func peerAddr(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", false
	}
	return p.Addr.String(), true
}
