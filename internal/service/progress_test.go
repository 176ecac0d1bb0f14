package service

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFetchReportRateRetriesInInfo: the service's Info carries the
// download's bytes, rate, time left and retries while the version loads,
// the Message says them, and a retry is a Warning event.
func TestFetchReportRateRetriesInInfo(t *testing.T) {
	m := newManager(t, t.TempDir())
	svc, _, err := m.register(parse(t, v1)) // a create in progress: version 1 pending
	if err != nil {
		t.Fatal(err)
	}
	defer m.leave(svc)
	progress, retry := m.fetchReport("svc", "model_path")
	progress(0, 4<<20)
	// Not synchronisation: the rate is bytes over wall time, and it needs
	// over 50 ms between two reports.
	time.Sleep(100 * time.Millisecond)
	progress(1<<20, 4<<20)
	in := svc.Info(t.Context())
	p := in.Progress
	if p == nil || p.Version != 1 || p.Key != "model_path" || p.DoneBytes != 1<<20 || p.TotalBytes != 4<<20 || p.BytesPerSecond <= 0 || p.ETASeconds <= 0 {
		t.Fatalf("progress %+v", p)
	}
	if !strings.Contains(in.Message, "1.0 MiB of 4.0 MiB (25%), ") || !strings.Contains(in.Message, "/s, ") || !strings.Contains(in.Message, " left") {
		t.Fatalf("message %q", in.Message)
	}
	retry(2, 5, errors.New("connection reset"))
	in = svc.Info(t.Context())
	if p := in.Progress; p.Retries != 1 || p.Retry != 2 || p.MaxRetries != 5 || p.LastError != "connection reset" || p.BytesPerSecond != 0 || p.ETASeconds != -1 {
		t.Fatalf("progress after a retry %+v", p)
	}
	if !strings.HasSuffix(in.Message, "; retry 2/5 after: connection reset") {
		t.Fatalf("message %q", in.Message)
	}
	ev := svc.Events()
	if last := ev[len(ev)-1]; last.Type != EventWarning || last.Reason != "DownloadRetry" || last.Message != "version 1: model_path at 1.0 MiB: retry 2/5 after: connection reset" {
		t.Fatalf("last event %+v", last)
	}
	// A new download starts afresh.
	progress, _ = m.fetchReport("svc", "model_path")
	if svc.Info(t.Context()).Progress != nil {
		t.Fatal("a new download shows the last one's progress")
	}
	progress(0, 10)
	if p := svc.Info(t.Context()).Progress; p.Retries != 0 || p.DoneBytes != 0 || p.TotalBytes != 10 {
		t.Fatalf("fresh progress %+v", p)
	}
}
