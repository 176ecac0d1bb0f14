package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// GenConfig is one run of the streaming load generator for generative
// services (issue 39): requests of a workload sent to an OpenAI-compatible
// POST /v1/completions with stream=true, their server-sent events read as
// they arrive.
//
// Each request's body is
//
//	{"prompt": [ids], "max_tokens": N, "stream": true,
//	 "stream_options": {"include_usage": true}, "temperature": 0,
//	 "ignore_eos": true, "logprobs": 0}
//
// plus "model" when Model is set, with Fields merged over it (a field whose
// value is null is removed: a server that refuses logprobs or ignore_eos
// can be driven with {"logprobs": null}).
//
// Closed loop (Clients > 0): that many clients each send a request, read its
// stream to the end and send the next. Open loop (Rate > 0): requests start
// at Poisson arrivals of Rate per second (exponential gaps from Seed),
// whatever is in flight. Either way requests are taken from the workload in
// its order, shared by all clients, wrapping around at its end.
//
// With Duration > 0 the run measures the window [Warmup, Warmup+Duration)
// after its start, then cancels what is in flight (a streaming client that
// disconnects frees its sequence on a server like ours). With Duration 0
// each workload request is sent exactly once and the window is the whole
// run, from the first request to the last answer.
type GenConfig struct {
	URL      string            // e.g. http://127.0.0.1:8080/api/predict/gpt2/v1/completions
	Header   map[string]string // e.g. Authorization: Bearer T
	Model    string            // the body's "model"; empty leaves it out
	Workload []GenRequest
	Fields   map[string]json.RawMessage // merged over the body; null removes a field
	Clients  int                        // closed loop
	Rate     float64                    // open loop: requests per second
	Duration time.Duration              // measured window; 0: the workload once through
	Warmup   time.Duration              // unmeasured time before the window
	PID      int                        // the server process whose CPU is read from /proc; 0: none
	Seed     uint64                     // the open loop's arrivals
}

// GenResult is what one run measured. Definitions:
//
//   - Tokens of a chunk: the number of entries of its
//     choices[0].logprobs.tokens when the server sends logprobs (the body
//     asks for "logprobs": 0, one entry per generated token), else 1 for a
//     chunk with non-empty text, else 0. When the last chunk's usage says
//     more tokens were generated than the chunks counted (a server whose
//     chunks carry several tokens without logprobs), the difference is
//     counted as arriving with the usage chunk.
//   - Output tokens/s: tokens whose chunk arrived inside the window, over
//     the window; requests/s: requests answered in full (200, stream to
//     [DONE]) inside the window, over the window.
//   - Time to first token (TTFT): from sending the request to the first
//     chunk with a token, for requests whose first token arrived inside the
//     window.
//   - Inter-token latency (ITL): a chunk after the first that arrives d
//     after the previous one and carries k tokens gives k samples of d/k
//     (the first chunk's extra tokens give k-1 samples of 0); samples of
//     chunks inside the window.
//   - TPOT: per request answered in the window, (last token's arrival -
//     first token's arrival) / (tokens - 1); the mean over requests.
//   - Short: requests answered with fewer completion tokens (usage, else
//     counted) than their max_tokens: a server that stopped early, which
//     ignore_eos should rule out.
//   - Errors by status: the HTTP status of answers other than 200, "error"
//     for a transport failure, "stream-error" for a stream that carried an
//     error event or ended without [DONE].
//   - Server CPU: the process's user+system time (/proc/PID/stat, in
//     USER_HZ = 100 ticks a second) over the window, in cores; -1 when no
//     PID was given or it could not be read.
//   - Server memory: the process's resident set (/proc/PID/status VmRSS)
//     at the window's end, in MiB; -1 as for the CPU.
type GenResult struct {
	Mode         string         `json:"mode"` // closed or open
	Clients      int            `json:"clients,omitempty"`
	Rate         float64        `json:"rate_rps,omitempty"`
	Seconds      float64        `json:"seconds"`
	Requests     int            `json:"requests"` // ended inside the window, any outcome
	OK           int            `json:"ok"`
	Short        int            `json:"short"`
	ByStatus     map[string]int `json:"by_status"`
	OutputTokens int            `json:"output_tokens"`
	PromptTokens int            `json:"prompt_tokens"` // of the requests answered in the window
	OutputTPS    float64        `json:"output_tokens_per_s"`
	RPS          float64        `json:"requests_per_s"`
	TTFTp50ms    float64        `json:"ttft_p50_ms"`
	TTFTp99ms    float64        `json:"ttft_p99_ms"`
	ITLp50ms     float64        `json:"itl_p50_ms"`
	ITLp99ms     float64        `json:"itl_p99_ms"`
	TPOTms       float64        `json:"tpot_mean_ms"`
	ServerCPU    float64        `json:"server_cpu_cores"`
	ServerRSSMiB float64        `json:"server_rss_mib"`
}

// RunGeneration drives the load cfg describes.
func RunGeneration(ctx context.Context, cfg GenConfig) (GenResult, error) {
	if (cfg.Clients > 0) == (cfg.Rate > 0) {
		return GenResult{}, fmt.Errorf("give either clients (closed loop) or a rate (open loop)")
	}
	if len(cfg.Workload) == 0 {
		return GenResult{}, fmt.Errorf("the workload is empty")
	}
	if cfg.Duration < 0 || cfg.Warmup < 0 {
		return GenResult{}, fmt.Errorf("duration and warm-up must not be negative")
	}
	bodies, err := genBodies(cfg)
	if err != nil {
		return GenResult{}, err
	}
	conns := max(cfg.Clients, 64)
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	once := cfg.Duration == 0
	start := time.Now()
	win := window{from: start.Add(cfg.Warmup), to: start.Add(cfg.Warmup + cfg.Duration)}
	if once {
		win = window{from: start, to: time.Unix(1<<40, 0)}
	}
	// runCtx ends the requests still in flight at the window's end.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	end1 := make(chan procSample, 1) // read at the window's end
	if !once {
		t := time.AfterFunc(time.Until(win.to), func() {
			if cfg.PID > 0 {
				end1 <- sampleProc(cfg.PID)
			}
			cancel()
		})
		defer t.Stop()
	}
	cpu0 := make(chan int64, 1)
	if cfg.PID > 0 {
		go func() {
			if d := time.Until(win.from); d > 0 {
				select {
				case <-time.After(d):
				case <-runCtx.Done():
				}
			}
			cpu0 <- cpuTicks(cfg.PID)
		}()
	}

	var (
		mu  sync.Mutex
		all []reqStats
	)
	record := func(s reqStats) {
		mu.Lock()
		all = append(all, s)
		mu.Unlock()
	}
	var next atomic.Int64
	take := func() (int, bool) {
		n := int(next.Add(1) - 1)
		if once && n >= len(bodies) {
			return 0, false
		}
		return n % len(bodies), true
	}
	var wg sync.WaitGroup
	if cfg.Clients > 0 {
		for range cfg.Clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for runCtx.Err() == nil {
					i, ok := take()
					if !ok {
						return
					}
					record(streamOne(runCtx, client, &cfg, bodies[i], cfg.Workload[i]))
				}
			}()
		}
	} else {
		rng := rand.New(rand.NewPCG(cfg.Seed, 0x39))
		at := start
	arrivals:
		for runCtx.Err() == nil {
			i, ok := take()
			if !ok {
				break
			}
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-runCtx.Done():
					break arrivals
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				record(streamOne(runCtx, client, &cfg, bodies[i], cfg.Workload[i]))
			}()
			at = at.Add(time.Duration(rng.ExpFloat64() / cfg.Rate * float64(time.Second)))
		}
	}
	wg.Wait()
	end := time.Now()
	if once {
		win.to = end.Add(time.Nanosecond)
	}
	res := summarize(all, win)
	res.ServerCPU, res.ServerRSSMiB = -1, -1
	if cfg.PID > 0 {
		c0 := <-cpu0
		var e procSample
		select {
		case e = <-end1:
		default: // the workload once through, or a run that ended early
			e = sampleProc(cfg.PID)
		}
		if span := res.Seconds; c0 >= 0 && e.ticks >= c0 && span > 0 {
			res.ServerCPU = float64(e.ticks-c0) / userHZ / span
		}
		if e.rssKiB >= 0 {
			res.ServerRSSMiB = float64(e.rssKiB) / 1024
		}
	}
	if cfg.Clients > 0 {
		res.Mode, res.Clients = "closed", cfg.Clients
	} else {
		res.Mode, res.Rate = "open", cfg.Rate
	}
	return res, ctx.Err()
}

// userHZ is the unit of /proc/PID/stat's times: fixed at 100 by Linux's
// ABI (USER_HZ) whatever the kernel's tick.
const userHZ = 100

// procSample is a process's CPU time (USER_HZ ticks) and resident memory
// (KiB) at one moment, each -1 when it could not be read.
type procSample struct{ ticks, rssKiB int64 }

func sampleProc(pid int) procSample { return procSample{cpuTicks(pid), rssKiB(pid)} }

// readProc reads /proc/PID/name.
func readProc(pid int, name string) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
}

// cpuTicks reads a process's user+system time in USER_HZ ticks, -1 when it
// cannot.
func cpuTicks(pid int) int64 {
	b, err := readProc(pid, "stat")
	if err != nil {
		return -1
	}
	return parseStatTicks(b)
}

// parseStatTicks takes utime + stime (fields 14 and 15) from a
// /proc/PID/stat line; the command name (field 2) may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func parseStatTicks(b []byte) int64 {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 {
		return -1
	}
	return u + s
}

// rssKiB reads a process's resident set in KiB, -1 when it cannot.
func rssKiB(pid int) int64 {
	b, err := readProc(pid, "status")
	if err != nil {
		return -1
	}
	return parseStatusRSS(b)
}

// parseStatusRSS takes VmRSS from a /proc/PID/status text ("VmRSS:  1234
// kB"), -1 when it is missing.
func parseStatusRSS(b []byte) int64 {
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil && n >= 0 {
					return n
				}
			}
			return -1
		}
	}
	return -1
}

// genBodies encodes every workload request's body once.
func genBodies(cfg GenConfig) ([][]byte, error) {
	out := make([][]byte, len(cfg.Workload))
	for i, r := range cfg.Workload {
		body := map[string]any{
			"prompt": r.Prompt, "max_tokens": r.MaxTokens, "stream": true,
			"stream_options": map[string]any{"include_usage": true},
			"temperature":    0, "ignore_eos": true, "logprobs": 0,
		}
		if cfg.Model != "" {
			body["model"] = cfg.Model
		}
		for k, v := range cfg.Fields {
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				delete(body, k)
			} else {
				body[k] = v
			}
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// chunkAt is one chunk's arrival and the tokens it carried.
type chunkAt struct {
	at     time.Time
	tokens int
}

// reqStats is what one request gave.
type reqStats struct {
	sent, ended time.Time
	status      string // "200", "450", "error", "stream-error", "cancelled"
	chunks      []chunkAt
	tokens      int // usage's completion_tokens, else the chunks' sum
	maxTokens   int
	prompt      int
}

func streamOne(ctx context.Context, client *http.Client, cfg *GenConfig, body []byte, r GenRequest) (s reqStats) {
	s = reqStats{sent: time.Now(), maxTokens: r.MaxTokens, prompt: len(r.Prompt), status: "error"}
	defer func() {
		s.ended = time.Now()
		if s.status != "200" && ctx.Err() != nil {
			s.status = "cancelled" // at the window's end: not counted
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range cfg.Header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		s.status = strconv.Itoa(resp.StatusCode)
		return s
	}
	usage, err := ReadStream(resp.Body, func(tokens int) {
		s.chunks = append(s.chunks, chunkAt{at: time.Now(), tokens: tokens})
	})
	if err != nil {
		s.status = "stream-error"
		return s
	}
	counted := 0
	for _, c := range s.chunks {
		counted += c.tokens
	}
	s.tokens = counted
	if usage > counted {
		s.chunks = append(s.chunks, chunkAt{at: time.Now(), tokens: usage - counted})
		s.tokens = usage
	}
	s.status = "200"
	return s
}

// ErrStreamError is returned by ReadStream for a stream that carried an
// error event.
var ErrStreamError = errors.New("the stream carried an error event")

// maxEventLine bounds one server-sent event line.
const maxEventLine = 16 << 20

// ReadStream reads an OpenAI completions stream (server-sent events, each
// `data: <json>` line one chunk, `data: [DONE]` the end), calling onChunk
// with each chunk's token count as it arrives (see GenResult for the count)
// for chunks that carry a choice, and returns the completion_tokens of the
// last usage seen (0 without one). Other SSE lines (comments, event:, id:,
// blank) are skipped. A stream that ends without [DONE], a chunk that is not
// JSON, or an error event is an error.
func ReadStream(r io.Reader, onChunk func(tokens int)) (usage int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if err != nil {
			if err == io.EOF {
				return usage, fmt.Errorf("the stream ended without [DONE]")
			}
			return usage, err
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return usage, nil
		}
		var c struct {
			Choices []struct {
				Text     string `json:"text"`
				Logprobs *struct {
					Tokens []json.RawMessage `json:"tokens"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return usage, fmt.Errorf("a chunk is not JSON: %v", err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return usage, fmt.Errorf("%w: %.200s", ErrStreamError, c.Error)
		}
		if c.Usage != nil && c.Usage.CompletionTokens > 0 {
			usage = c.Usage.CompletionTokens
		}
		if len(c.Choices) == 0 {
			continue
		}
		n := 0
		for _, ch := range c.Choices {
			switch {
			case ch.Logprobs != nil && ch.Logprobs.Tokens != nil:
				n += len(ch.Logprobs.Tokens)
			case ch.Text != "":
				n++
			}
		}
		onChunk(n)
	}
}

// readLine reads one line without its end, refusing lines over
// maxEventLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		if len(buf)+len(part) > maxEventLine {
			return nil, fmt.Errorf("an event line is over %d bytes", maxEventLine)
		}
		if !isPrefix {
			if buf == nil {
				return part, nil
			}
			return append(buf, part...), nil
		}
		buf = append(buf, part...)
	}
}

type window struct{ from, to time.Time }

func (w window) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// summarize measures the requests over the window (see GenResult).
func summarize(all []reqStats, w window) GenResult {
	res := GenResult{ByStatus: map[string]int{}, Seconds: w.to.Sub(w.from).Seconds()}
	var ttft, itl []time.Duration
	var tpotSum float64
	tpotN := 0
	for _, s := range all {
		first := true
		var prev time.Time
		var firstTok, lastTok time.Time
		for _, c := range s.chunks {
			if c.tokens == 0 {
				continue
			}
			in := w.has(c.at)
			if in {
				res.OutputTokens += c.tokens
			}
			if first {
				if in {
					ttft = append(ttft, c.at.Sub(s.sent))
					for range c.tokens - 1 {
						itl = append(itl, 0)
					}
				}
				first, firstTok = false, c.at
			} else if in {
				d := c.at.Sub(prev) / time.Duration(c.tokens)
				for range c.tokens {
					itl = append(itl, d)
				}
			}
			prev, lastTok = c.at, c.at
		}
		if !w.has(s.ended) || s.status == "cancelled" {
			continue
		}
		res.Requests++
		res.ByStatus[s.status]++
		if s.status != "200" {
			continue
		}
		res.OK++
		res.PromptTokens += s.prompt
		if s.tokens < s.maxTokens {
			res.Short++
		}
		if s.tokens > 1 && !firstTok.IsZero() {
			tpotSum += lastTok.Sub(firstTok).Seconds() / float64(s.tokens-1)
			tpotN++
		}
	}
	if res.Seconds > 0 {
		res.OutputTPS = float64(res.OutputTokens) / res.Seconds
		res.RPS = float64(res.OK) / res.Seconds
	}
	sortDur(ttft)
	sortDur(itl)
	if len(ttft) > 0 {
		res.TTFTp50ms, res.TTFTp99ms = ms(percentile(ttft, 0.5)), ms(percentile(ttft, 0.99))
	}
	if len(itl) > 0 {
		res.ITLp50ms, res.ITLp99ms = ms(percentile(itl, 0.5)), ms(percentile(itl, 0.99))
	}
	if tpotN > 0 {
		res.TPOTms = math.Round(tpotSum/float64(tpotN)*1e6) / 1e3
	}
	return res
}

func sortDur(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// WriteGenTable prints generation results as an aligned table.
func WriteGenTable(w io.Writer, results []GenResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\ttokens/s\trequests/s\tTTFT p50 ms\tTTFT p99 ms\tITL p50 ms\tITL p99 ms\tTPOT ms\tok\tshort\terrors\tserver CPU\tserver MiB\t")
	for _, r := range results {
		load := fmt.Sprintf("%d clients", r.Clients)
		if r.Mode == "open" {
			load = fmt.Sprintf("%.2f req/s", r.Rate)
		}
		cpu, rss := "-", "-"
		if r.ServerCPU >= 0 {
			cpu = fmt.Sprintf("%.2f", r.ServerCPU)
		}
		if r.ServerRSSMiB >= 0 {
			rss = fmt.Sprintf("%.0f", r.ServerRSSMiB)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%s\t%s\t%s\t\n", load, r.OutputTPS, r.RPS,
			r.TTFTp50ms, r.TTFTp99ms, r.ITLp50ms, r.ITLp99ms, r.TPOTms, r.OK, r.Short, errorsByStatus(r.ByStatus), cpu, rss)
	}
	return tw.Flush()
}

// WriteGenJSON prints generation results as a JSON array.
func WriteGenJSON(w io.Writer, results []GenResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}
