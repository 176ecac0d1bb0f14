package browsertest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eas-server/eas-server/internal/browsertest"
	"github.com/eas-server/eas-server/internal/wait"
)

// page's script makes one problem of each kind, after a failed load the
// test expects and a console.log, which are none (its icon is inline, so
// the browser asks for no /favicon.ico, which would fail). The expected load is
// awaited first, so its log entry (if it were kept) comes before the
// others'.
const page = `<!doctype html><title>problems</title><link rel="icon" href="data:,"><script>
(async () => {
  await fetch('/expected');
  console.log('not a problem');
  console.error('an error', 7);
  console.warn('a warning');
  await fetch('/missing');
  setTimeout(() => { throw new Error('thrown on purpose'); });
})();
</script>`

// TestStartCollectsEachKindOfProblem: the problems are the page's console
// errors and warnings, its uncaught exceptions and the failed loads in the
// browser's log, less the one ExpectedLoad allows; the window has the
// size asked for.
func TestStartCollectsEachKindOfProblem(t *testing.T) {
	var mu sync.Mutex
	var expected []string
	ctx, problems := browsertest.Start(t, browsertest.Options{Width: 640, Height: 480, ExpectedLoad: func(addr, text string) bool {
		u, err := url.Parse(addr)
		if err == nil && u.Path == "/expected" && strings.Contains(text, "status of 503") {
			mu.Lock()
			defer mu.Unlock()
			expected = append(expected, addr)
			return true
		}
		return false
	}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
		case "/expected":
			http.Error(w, "refused on purpose", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	var width int
	if err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.Evaluate(`window.innerWidth`, &width)); err != nil {
		t.Fatal(err)
	}
	if width != 640 {
		t.Errorf("window.innerWidth %d, want 640", width)
	}
	want := []string{
		`console.error: "an error" 7`,
		`console.warning: "a warning"`,
		"network error: Failed to load resource: the server responded with a status of 404 (Not Found) " + srv.URL + "/missing",
		"uncaught: ",
	}
	wait.Until(t, time.Minute, func() error {
		if got := problems(); len(got) < len(want) {
			return fmt.Errorf("%d problems so far, want %d: %q", len(got), len(want), got)
		}
		return nil
	})
	got := problems()
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d is %q, want it to start %q", i, got[i], w)
		}
	}
	if !strings.Contains(got[3], "thrown on purpose") {
		t.Errorf("the uncaught exception reads %q, without its message", got[3])
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(expected, []string{srv.URL + "/expected"}) {
		t.Errorf("ExpectedLoad allowed %q, want the one load of /expected", expected)
	}
}
