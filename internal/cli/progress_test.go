package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/internal/teststack"
)

// throttledModel serves one file slowly, with an ETag and ranges; the first
// whole-file GET is cut halfway, as a dropped connection.
type throttledModel struct {
	data    []byte
	dropped atomic.Bool
}

func (m *throttledModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/m.bin" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"m1"`)
	tw := &throttledWriter{ResponseWriter: w, drop: -1}
	if r.Header.Get("Range") == "" && !m.dropped.Swap(true) {
		tw.drop = len(m.data) / 2
	}
	http.ServeContent(tw, r, "m.bin", time.Time{}, bytes.NewReader(m.data))
}

// throttledWriter writes 16 KiB every 20 ms; at drop bytes it cuts the
// connection.
type throttledWriter struct {
	http.ResponseWriter
	written, drop int
}

func (w *throttledWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), 16<<10)]
		if w.drop >= 0 && w.written+len(chunk) > w.drop {
			k, _ := w.ResponseWriter.Write(chunk[:w.drop-w.written])
			w.ResponseWriter.(http.Flusher).Flush()
			if conn, _, err := w.ResponseWriter.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return n + k, http.ErrHandlerTimeout
		}
		time.Sleep(20 * time.Millisecond) // the throttle under test: a slow download, not synchronisation
		k, err := w.ResponseWriter.Write(chunk)
		w.ResponseWriter.(http.Flusher).Flush()
		n += k
		w.written += k
		if err != nil {
			return n, err
		}
		p = p[len(chunk):]
	}
	return n, nil
}

// TestCLICreateShowsDownloadProgress: create against a server that fetches
// a slow model whose download drops once shows the bytes growing, the rate
// and the retry before the service runs.
func TestCLICreateShowsDownloadProgress(t *testing.T) {
	t.Setenv("EAS_ADMIN_TOKEN", "")
	t.Setenv("EAS_ENDPOINT", "")
	old := progressLineEvery
	progressLineEvery = 100 * time.Millisecond
	defer func() { progressLineEvery = old }()

	model := httptest.NewServer(&throttledModel{data: bytes.Repeat([]byte("0123456789abcdef"), 1<<16)}) // 1 MiB
	defer model.Close()
	dir := t.TempDir()
	fetcher := &storage.Fetcher{CacheDir: filepath.Join(dir, "cache"), ProgressInterval: 50 * time.Millisecond, RetryBackoff: 50 * time.Millisecond}
	ts := teststack.New(t, teststack.Options{Service: service.Options{StateDir: dir, Fetcher: fetcher}, Server: server.Options{AdminToken: testAdmin}})

	f := teststack.WriteFile(t, t.TempDir(), "s.json", `{"name":"slow","processor":"echo","model_path":"`+model.URL+`/m.bin","metadata":{"instance":1}}`)
	out, errOut, code := ctl(t, ts.URL, "create", f)
	if code != 0 || !strings.Contains(out, "[OK] Service slow is running at version 1") {
		t.Fatalf("create: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// Progress lines: "[hh:mm:ss] model_path: 320.0 KiB of 1.0 MiB (31%), 780.0 KiB/s, ETA 1s".
	line := regexp.MustCompile(`(?m)^\[\d\d:\d\d:\d\d\] model_path: ([\d.]+) (B|KiB|MiB) of 1\.0 MiB \((\d+)%\)(.*)$`)
	var pcts []int
	rate, retryLine := false, false
	retryAt := -1
	for _, m := range line.FindAllStringSubmatch(errOut, -1) {
		p, _ := strconv.Atoi(m[3])
		pcts = append(pcts, p)
		rate = rate || regexp.MustCompile(`, [\d.]+ (B|KiB|MiB)/s, ETA \d+s`).MatchString(m[4])
		if strings.Contains(m[4], "retry 1/5 after: ") && !retryLine {
			retryLine, retryAt = true, len(pcts)-1
		}
	}
	grew := 0
	for i := 1; i < len(pcts); i++ {
		if pcts[i] > pcts[i-1] {
			grew++
		}
	}
	if grew < 3 || !rate || !retryLine || retryAt == len(pcts)-1 || !strings.Contains(errOut, "(after 1 retry)") {
		t.Fatalf("want progress lines with growing bytes (%d rises in %v), a rate and ETA (%v), a retry line (%v) with progress after it:\n%s", grew, pcts, rate, retryLine, errOut)
	}
	if !strings.Contains(errOut, "DownloadRetry: version 1: model_path at ") {
		t.Fatalf("no DownloadRetry event:\n%s", errOut)
	}
	// The object carries no Progress once the load is over.
	out, _, _ = ctl(t, ts.URL, "desc", "slow", "-o", "json")
	if strings.Contains(out, `"Progress"`) {
		t.Fatalf("desc after the load still has a Progress:\n%s", out)
	}
}

// TestProgressViewOnATerminal: on a terminal the line is redrawn in place
// and cleared.
func TestProgressViewOnATerminal(t *testing.T) {
	var b bytes.Buffer
	v := &progressView{w: &b, tty: true}
	v.show(&controlapi.ProgressObject{Key: "model_path", DoneBytes: 1 << 20, TotalBytes: 4 << 20, BytesPerSecond: 1 << 20, ETASeconds: 3})
	v.show(&controlapi.ProgressObject{Key: "model_path", DoneBytes: 2 << 20, TotalBytes: 4 << 20, Retries: 1, Retry: 2, MaxRetries: 5, LastError: "connection reset", ETASeconds: -1})
	v.show(&controlapi.ProgressObject{Key: "model_path", TotalBytes: -1, Retries: 1, Retry: 1, MaxRetries: 5, LastError: strings.Repeat("x", 200), ETASeconds: -1})
	v.clear()
	want := "\rmodel_path: 1.0 MiB of 4.0 MiB (25%), 1.0 MiB/s, ETA 3s" +
		"\rmodel_path: 2.0 MiB of 4.0 MiB (50%); retry 2/5 after: connection reset" +
		"\rmodel_path: 0 B; retry 1/5 after: " + strings.Repeat("x", 100-34-3) + "..." +
		"\r" + strings.Repeat(" ", 100) + "\r"
	if b.String() != want {
		t.Fatalf("drew %q\nwant %q", b.String(), want)
	}
}
