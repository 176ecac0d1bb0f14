package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func startHTTP(t *testing.T, idle time.Duration, maxConns int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), idle)
	go hs.Serve(limitConns(ln, maxConns))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// Issue 14: idle keep-alive connections were never closed. The server
// closes one after --idle-timeout.
func TestIdleKeepAliveConnectionClosed(t *testing.T) {
	addr := startHTTP(t, 200*time.Millisecond, 0)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed at once; the test needs a kept-alive connection")
	}
	// Idle now. The deadline only keeps a broken server from hanging the
	// test: the server must close (EOF), not leave the read waiting.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection: %v, want the server to close it (EOF)", err)
	}
}

// --max-connections: with a cap of 1, a second connection is not served
// while the first is open, and is once it closes.
func TestMaxConnections(t *testing.T) {
	addr := startHTTP(t, time.Minute, 1)
	get := func(c net.Conn) (*http.Response, error) {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		return http.ReadResponse(bufio.NewReader(c), nil)
	}
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(first); err != nil {
		t.Fatal(err)
	}
	second, err := net.Dial("tcp", addr) // the kernel accepts; the server does not
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := get(second); err == nil {
		t.Fatal("a second connection was served past --max-connections 1")
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the first closed, the second is not served: %v", err)
	}
}

func TestParseZones(t *testing.T) {
	z, err := parseZones("+08:00, -05:30")
	if err != nil || len(z) != 2 || z[0] != 8*time.Hour || z[1] != -(5*time.Hour+30*time.Minute) {
		t.Fatalf("%v %v", z, err)
	}
	if _, err := parseZones("CST"); err == nil {
		t.Fatal("CST accepted")
	}
}
