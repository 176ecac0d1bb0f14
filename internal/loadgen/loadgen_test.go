package loadgen

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/torchpb"
)

func TestRunCountsStatusesAndLatency(t *testing.T) {
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "T" {
			w.WriteHeader(401)
			return
		}
		if n.Add(1)%4 == 0 {
			w.WriteHeader(450)
			return
		}
		time.Sleep(time.Millisecond) // the handler's latency the percentiles must show, not synchronisation
	}))
	defer ts.Close()
	res, err := Run(t.Context(), Config{URL: ts.URL, Body: []byte("x"), Header: map[string]string{"Authorization": "T"},
		Concurrency: 4, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK == 0 || res.ByStatus["450"] == 0 || res.ByStatus["401"] != 0 {
		t.Fatalf("by status = %v", res.ByStatus)
	}
	if res.OK+res.ByStatus["450"] != res.Requests {
		t.Errorf("requests %d != ok %d + 450s %d", res.Requests, res.OK, res.ByStatus["450"])
	}
	if res.P50ms < 0.5 || res.P99ms < res.P50ms {
		t.Errorf("percentiles p50=%v p99=%v: want p50 >= the 1ms handler time and p99 >= p50", res.P50ms, res.P99ms)
	}
}

func TestGeneratedBodiesDecode(t *testing.T) {
	spec, err := ParseTensorSpec("input:FP32:2x3")
	if err != nil {
		t.Fatal(err)
	}
	in := spec.Generate(rand.New(rand.NewPCG(1, 1)))
	b, _, err := EncodeBody("torch", []tensor.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	req, err := torchpb.DecodeRequest(b, []string{"input"})
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Inputs) != 1 || !tensor.Equal(req.Inputs[0], in) {
		t.Fatalf("torch body decodes to %+v, want %+v", req.Inputs, in)
	}
	b, h, err := EncodeBody("kserve-binary", []tensor.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	kr, err := kserve.DecodeRequest(b, h[kserve.HeaderContentLength])
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.Equal(kr.Inputs[0], in) {
		t.Fatal("kserve binary body does not round-trip")
	}
	for _, bad := range []string{"x", "a:FP32", "a:NOPE:1", "a:FP32:1xq", "a:BYTES:1"} {
		if _, err := ParseTensorSpec(bad); err == nil {
			t.Errorf("ParseTensorSpec(%q) accepted", bad)
		}
	}
}

func TestRunBodiesInTurn(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[string(b)]++
		mu.Unlock()
	}))
	defer ts.Close()
	res, err := Run(t.Context(), Config{URL: ts.URL, Bodies: [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")},
		Concurrency: 3, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.OK == 0 || len(seen) != 3 {
		t.Fatalf("ok %d, bodies seen %v", res.OK, seen)
	}
	for _, n := range seen { // sent in turn: the counts differ by at most one
		if n < seen["ccc"] || n > seen["a"] {
			t.Fatalf("bodies not sent in turn: %v", seen)
		}
	}
}

// An answer sent during the warm-up and arriving inside the window counts:
// with answers slower than the warm-up, every client's first answer does.
// The server holds the 4 first requests until the warm-up is over and the
// others until the window has closed, so exactly those 4 count.
func TestRunCountsAnswersArrivingInWindow(t *testing.T) {
	const warmup, window = 50 * time.Millisecond, time.Second
	var n atomic.Int64
	inWindow := make(chan struct{})
	afterWindow := make(chan struct{})
	time.AfterFunc(3*warmup, func() { close(inWindow) })
	time.AfterFunc(warmup+window+300*time.Millisecond, func() { close(afterWindow) })
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) <= 4 {
			<-inWindow
		} else {
			<-afterWindow
		}
	}))
	defer ts.Close()
	res, err := Run(t.Context(), Config{URL: ts.URL, Body: []byte("x"), Concurrency: 4,
		Warmup: warmup, Duration: window})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 4 {
		t.Fatalf("ok = %d, want the 4 answers sent in the warm-up and released inside the window", res.OK)
	}
}
