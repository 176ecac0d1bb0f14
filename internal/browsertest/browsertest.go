// Package browsertest starts Debian's headless chromium for the web
// console's browser tests (internal/console's module tests and e2e's
// console tests) and collects what goes wrong in its pages: console errors
// and warnings, uncaught exceptions, and the browser's own log (failed
// loads, CSP violations). A page that works but complains is a failure
// those tests must see, so the collection lives in one place and no test
// can forget part of it. It imports testing and is for tests only.
package browsertest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/eas-server/eas-server/internal/require"
)

// timeout bounds everything one test does in one browser, so a page that
// never becomes what a test waits for ends the test instead of hanging it
// until go test's own deadline.
const timeout = 3 * time.Minute

// Options says which browser a test wants. The zero value is a 1280 x 900
// window in which every problem counts.
type Options struct {
	// Width and Height are the window's size in pixels; 1280 and 900 when
	// zero.
	Width, Height int
	// ExpectedLoad says whether a failed load the browser logs is one the
	// test provokes on purpose (a request it expects the server to refuse),
	// so it is not a problem. url is the resource's address, text the
	// browser's message, which gives the status ("... status of 404 (Not
	// Found)"). nil: every failed load is a problem.
	ExpectedLoad func(url, text string) bool
}

// Chromium answers the path of Debian's chromium (or another Chrome on
// PATH). Without one t skips, saying so, unless EAS_REQUIRE_CHROMIUM=1
// (make test sets it) makes that a failure.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	require.Missing(t, require.Chromium, "no chromium on PATH; install Debian's chromium (make test-deps does) to run the console's browser tests")
	return ""
}

// Start starts a headless chromium for t (it ends through Chromium when
// there is none) and answers the context of its tab, for chromedp.Run, and
// a function listing the problems its pages have reported so far, each a
// line of text: "console.error: ...", "uncaught: ...", "network error:
// Failed to load resource: ... URL". The browser starts on the first
// chromedp.Run and stops when t ends; chromedp's own errors go to t.Log.
// The function is safe to call at any time, from any goroutine.
func Start(t testing.TB, o Options) (context.Context, func() []string) {
	t.Helper()
	if o.Width == 0 {
		o.Width = 1280
	}
	if o.Height == 0 {
		o.Height = 900
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		chromedp.WindowSize(o.Width, o.Height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp logs the protocol events this chromium has and it does not
	// know (it lags the browser); they are noise, anything else is kept.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })

	var mu sync.Mutex
	var problems []string
	add := func(p string) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, p)
	}
	// chromedp enables the runtime and log domains on every tab it
	// attaches, so these events come without the test asking for them.
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeWarning {
				var args []string
				for _, a := range ev.Args {
					// A primitive has its JSON value (a number its
					// description too); an object only its description.
					if len(a.Value) > 0 {
						args = append(args, string(a.Value))
					} else {
						args = append(args, a.Description)
					}
				}
				add(fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			add("uncaught: " + ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			// The browser's own log: failed loads (any 4xx or 5xx the
			// page's requests get), CSP violations, deprecations.
			e := ev.Entry
			if e.Level != cdplog.LevelError && e.Level != cdplog.LevelWarning {
				return
			}
			if e.Source == cdplog.SourceNetwork && o.ExpectedLoad != nil && o.ExpectedLoad(e.URL, e.Text) {
				return
			}
			add(fmt.Sprintf("%s %s: %s %s", e.Source, e.Level, e.Text, e.URL))
		}
	})
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// NoProblems fails t with each problem problems lists.
func NoProblems(t testing.TB, problems func() []string) {
	t.Helper()
	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}
