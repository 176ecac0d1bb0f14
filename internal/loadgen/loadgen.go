// Package loadgen is a closed-loop HTTP load generator in the spirit of
// Triton's perf_analyzer: C concurrent clients each send one request, wait
// for the answer and send the next, for a fixed duration. It reports
// throughput, latency percentiles and answers by status code.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// Config is one load run.
type Config struct {
	URL         string            // full URL, e.g. http://127.0.0.1:8080/api/predict/echo
	Method      string            // default POST
	Body        []byte            // request body sent by every request
	Bodies      [][]byte          // instead of Body: the bodies in turn, shared by all clients (request n sends Bodies[n%len])
	Header      map[string]string // extra headers (Authorization, Inference-Header-Content-Length)
	Concurrency int               // concurrent clients
	Duration    time.Duration     // measured time
	Warmup      time.Duration     // unmeasured time before it
}

// Result is the outcome of one run.
type Result struct {
	Concurrency int            `json:"concurrency"`
	Requests    int            `json:"requests"`
	Seconds     float64        `json:"seconds"`
	Throughput  float64        `json:"throughput_rps"`
	P50ms       float64        `json:"p50_ms"`
	P90ms       float64        `json:"p90_ms"`
	P99ms       float64        `json:"p99_ms"`
	MeanMs      float64        `json:"mean_ms"`
	ByStatus    map[string]int `json:"by_status"` // "200", "450", ..., "error" for transport errors
	OK          int            `json:"ok"`
}

// Run drives the load described by cfg.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Concurrency <= 0 {
		return Result{}, fmt.Errorf("concurrency must be at least 1, got %d", cfg.Concurrency)
	}
	if cfg.Duration <= 0 {
		return Result{}, fmt.Errorf("duration must be positive, got %v", cfg.Duration)
	}
	if cfg.Method == "" {
		cfg.Method = http.MethodPost
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        cfg.Concurrency * 2,
		MaxIdleConnsPerHost: cfg.Concurrency * 2,
		MaxConnsPerHost:     0,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	type worker struct {
		lat    []time.Duration
		status map[string]int
	}
	workers := make([]*worker, cfg.Concurrency)
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	var next atomic.Uint64
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{status: map[string]int{}}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				body := cfg.Body
				if len(cfg.Bodies) > 0 {
					body = cfg.Bodies[(next.Add(1)-1)%uint64(len(cfg.Bodies))]
				}
				code := send(ctx, client, &cfg, body)
				t1 := time.Now()
				// An answer counts when it arrives inside the window,
				// whenever it was sent: a closed loop whose answers take
				// seconds would otherwise lose up to one answer per client
				// at the window's start.
				if t1.Before(measureFrom) || t1.After(end) {
					continue // warm-up, or after the end
				}
				w.lat = append(w.lat, t1.Sub(t0))
				w.status[code]++
			}
		}()
	}
	wg.Wait()

	res := Result{Concurrency: cfg.Concurrency, Seconds: cfg.Duration.Seconds(), ByStatus: map[string]int{}}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.lat...)
		for k, v := range w.status {
			res.ByStatus[k] += v
		}
	}
	res.Requests = len(all)
	res.OK = res.ByStatus["200"]
	res.Throughput = float64(res.OK) / res.Seconds
	if len(all) > 0 {
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		var sum time.Duration
		for _, d := range all {
			sum += d
		}
		res.MeanMs = ms(sum / time.Duration(len(all)))
		res.P50ms = ms(percentile(all, 0.50))
		res.P90ms = ms(percentile(all, 0.90))
		res.P99ms = ms(percentile(all, 0.99))
	}
	return res, ctx.Err()
}

func send(ctx context.Context, client *http.Client, cfg *Config, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, cfg.Method, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return "error"
	}
	for k, v := range cfg.Header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "error"
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// percentile takes the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteTable prints results as an aligned table.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\trequests/s\tp50 ms\tp90 ms\tp99 ms\tok\terrors by status\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%.1f\t%.3f\t%.3f\t%.3f\t%d\t%s\t\n", r.Concurrency, r.Throughput, r.P50ms, r.P90ms, r.P99ms, r.OK, errorsByStatus(r.ByStatus))
	}
	return tw.Flush()
}

func errorsByStatus(m map[string]int) string {
	var parts []string
	for k, v := range m {
		if k != "200" {
			parts = append(parts, k+":"+strconv.Itoa(v))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// WriteJSON prints results as a JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}
