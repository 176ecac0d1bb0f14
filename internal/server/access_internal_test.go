package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestRequestIDAllocations: a client's sane id costs no allocation, a
// generated one exactly one (the id and its header value together).
func TestRequestIDAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	s := New(Options{})
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/api/predict/x", nil)
	c.Request.Header.Set(RequestIDHeader, "client-chosen-id")
	// c.Abort resets the handler index, which each c.Next advances.
	if n := testing.AllocsPerRun(100, func() { c.Abort(); s.tagRequest(c) }); n != 0 {
		t.Errorf("a client's id: %v allocations per request, want 0", n)
	}
	if got := c.Writer.Header().Get(RequestIDHeader); got != "client-chosen-id" {
		t.Fatalf("kept id: %q", got)
	}
	c.Request.Header.Del(RequestIDHeader)
	if n := testing.AllocsPerRun(100, func() { c.Abort(); s.tagRequest(c) }); n != 1 {
		t.Errorf("a generated id: %v allocations per request, want 1", n)
	}
}

// TestNewRequestIDsDiffer: ids are 24 hex digits, the process's prefix
// then a counter.
func TestNewRequestIDsDiffer(t *testing.T) {
	a, b := newRequestID()[0], newRequestID()[0]
	if a == b || len(a) != 24 || a[:12] != b[:12] {
		t.Fatalf("ids %q and %q", a, b)
	}
	for _, ch := range a {
		if !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
			t.Fatalf("id %q is not hex", a)
		}
	}
}
