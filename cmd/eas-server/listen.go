package main

import (
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// limitListener accepts at most n connections open at once; Accept waits
// while n are open. It bounds the file descriptors and goroutines that
// clients can hold, whatever each connection does.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func limitConns(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

// slotConn gives its slot back once, on the first Close.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

// CloseWrite keeps the half-close that net/http uses to let a client read
// an answer before the connection goes.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// readHeaderTimeout bounds the request line and headers of every request.
const readHeaderTimeout = 30 * time.Second

// newHTTPServer builds the data- and control-plane server with the
// connection bounds of docs/protocol.md "Connections". ReadTimeout and
// WriteTimeout stay unset on purpose: net/http cancels a request's context
// when ReadTimeout passes, and a request may compute for its service's
// rpc.keepalive (up to 10 minutes); bodies are bounded per request instead
// (server.Options.BodyReadTimeout).
func newHTTPServer(h http.Handler, idle time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idle,
		MaxHeaderBytes:    1 << 20,
	}
}

// grpcLimits are the gRPC listener's bounds: idle connections close after
// idle, a connection carries at most maxStreams calls at once, and the
// handshake must finish within readHeaderTimeout.
func grpcLimits(idle time.Duration, maxStreams uint32) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(readHeaderTimeout),
	}
	if idle > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idle}))
	}
	return opts
}
