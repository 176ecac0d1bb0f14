package storage

import (
	"sync"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/wait"
)

// TestHTTPRetryHookHearsEveryRetry: FetchOptions.Retry hears of a dropped
// download's retry, with its number, the limit and the failure, and so does
// a second caller that shares the download.
func TestHTTPRetryHookHearsEveryRetry(t *testing.T) {
	ms, srv := newModelServer(t)
	blob := randomBytes(300_000, 7)
	ms.put("/models/r.bin", blob)
	ms.drop["/models/r.bin"] = true
	ms.gate = make(chan struct{})

	type retry struct {
		n, max int
		err    string
	}
	var mu sync.Mutex
	heard := map[int][]retry{}
	f := testFetcher(t.TempDir())
	var wg sync.WaitGroup
	for caller := range 2 {
		wg.Go(func() {
			_, err := f.Fetch(t.Context(), srv.URL+"/models/r.bin", FetchOptions{Retry: func(n, max int, err error) {
				mu.Lock()
				defer mu.Unlock()
				heard[caller] = append(heard[caller], retry{n, max, err.Error()})
			}})
			if err != nil {
				t.Errorf("caller %d: Fetch: %v", caller, err)
			}
		})
	}
	wait.Until(t, 10*time.Second, waitersAre(f, 2)) // both callers join the one download before it starts
	close(ms.gate)
	wg.Wait()
	for caller := range 2 {
		got := heard[caller]
		if len(got) != 1 || got[0].n != 1 || got[0].max != f.Retries || got[0].err == "" {
			t.Errorf("caller %d heard retries %+v; want one, number 1 of %d, with the error", caller, got, f.Retries)
		}
	}
}
