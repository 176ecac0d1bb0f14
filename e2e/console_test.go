package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eas-server/eas-server/internal/browsertest"
	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/teststack"
)

// artifacts is where the browser tests leave their screenshots:
// $EAS_TEST_ARTIFACTS/console, else test-artifacts/console at the
// repository root (ignored by git).
func artifacts(t *testing.T) string {
	t.Helper()
	base := os.Getenv("EAS_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join("..", "test-artifacts")
	}
	dir := filepath.Join(base, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs browser actions, failing the test with the step's name, the
// page's address and text, and a screenshot of it in the artifacts.
func run(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var url, text string
		var png []byte
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = chromedp.Run(short, chromedp.Location(&url), chromedp.Evaluate(`document.body ? document.body.innerText.slice(0, 2000) : ""`, &text),
			chromedp.FullScreenshot(&png, 100))
		if len(png) > 0 {
			_ = os.WriteFile(filepath.Join(artifacts(t), "failed-"+strings.ReplaceAll(step, " ", "-")+".png"), png, 0o644)
		}
		t.Fatalf("%s: %v\npage %s:\n%s", step, err, url, text)
	}
}

// waitJS polls a JavaScript expression until it is true.
func waitJS(expr string) chromedp.Action {
	return chromedp.Poll(expr, nil, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))
}

const adminToken = "console-admin-token"

// TestConsoleInBrowser drives the console in a real chromium: log in, deploy
// the echo example from the editor (a misspelled key first: the error shows
// at that key's line), see it Running, send a test request, see the
// requests chart move, modify it and roll back to version 1, delete it. No
// console error or warning may appear; screenshots of each page are saved.
func TestConsoleInBrowser(t *testing.T) {
	ctx, problems := browsertest.Start(t, browsertest.Options{})
	s := teststack.New(t, teststack.Options{Server: server.Options{AdminToken: adminToken}, HistoryInterval: 250 * time.Millisecond})
	shots := artifacts(t)

	// / sends the browser to the console, which asks for the token.
	run(t, ctx, "open", chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible("#login-token", chromedp.ByQuery))
	var url string
	run(t, ctx, "location", chromedp.Location(&url))
	if !strings.Contains(url, "/console/") {
		t.Fatalf("/ led to %s, want the console", url)
	}
	screenshot(t, ctx, shots, "1-login")
	// Keyboard only: type the token and press Enter.
	run(t, ctx, "login", chromedp.SendKeys("#login-token", adminToken+"\r", chromedp.ByQuery),
		chromedp.WaitVisible("table#services", chromedp.ByQuery))
	var stored string
	run(t, ctx, "storage", chromedp.Evaluate(`document.cookie + "|" + JSON.stringify(Object.keys(localStorage))`, &stored))
	if stored != "|[]" {
		t.Errorf("the token left the session storage: cookies and local storage %q", stored)
	}

	// Deploy from the editor, with a misspelled key first.
	const typo = `{
  "name": "console_echo",
  "processor": "echo",
  "metdata": {"instance": 1}
}`
	run(t, ctx, "editor", chromedp.Click("#deploy-link", chromedp.ByQuery), chromedp.WaitVisible("#editor", chromedp.ByQuery),
		setEditor(typo), chromedp.Click("#validate", chromedp.ByQuery),
		waitJS(`!!document.querySelector('.problem[data-path="metdata"]')`))
	var line, marked string
	run(t, ctx, "problem", chromedp.Evaluate(`document.querySelector('.problem[data-path="metdata"]').dataset.line`, &line),
		chromedp.Evaluate(`[...document.querySelectorAll('.error-line')].map(e => e.dataset.line).join(",")`, &marked))
	if line != "4" || !strings.Contains(","+marked+",", ",4,") {
		t.Errorf("the typo is on line 4; the problem says line %q and the gutter marks %q", line, marked)
	}
	screenshot(t, ctx, shots, "2-editor-error")
	fixed := strings.Replace(typo, "metdata", "metadata", 1)
	run(t, ctx, "deploy", setEditor(fixed), chromedp.Click("#validate", chromedp.ByQuery),
		waitJS(`document.querySelectorAll('.problem').length === 0`),
		chromedp.Click("#submit", chromedp.ByQuery),
		waitJS(`(document.querySelector('#state') || {}).textContent === 'Running'`))
	screenshot(t, ctx, shots, "3-service")

	// A test request from the panel.
	run(t, ctx, "test panel", setValue("#test-body", `{"hello": "console"}`), chromedp.Click("#test-send", chromedp.ByQuery),
		waitJS(`document.querySelector('#test-status').textContent.includes('200')`))
	var answer, latency string
	run(t, ctx, "answer", chromedp.Text("#test-answer", &answer, chromedp.ByQuery), chromedp.Text("#test-latency", &latency, chromedp.ByQuery))
	if !strings.Contains(answer, "console") || latency == "" {
		t.Errorf("test panel answer %q, latency %q", answer, latency)
	}

	// The requests chart moves as requests come in: a burst of 20 echo
	// requests shows as a rate far above the test panel's single request
	// (the sampler runs every 250 ms here).
	for range 20 {
		teststack.Do(t, "POST", s.URL+"/api/predict/console_echo", serviceToken(t, s, "console_echo"), []byte("x"))
	}
	run(t, ctx, "chart", waitJS(`+(document.querySelector('canvas[data-chart="rps"]').dataset.max || 0) >= 8`))
	screenshot(t, ctx, shots, "4-charts")

	// Modify (version 2), then roll back to version 1 from the versions table.
	// The editor shows at once but loads the current config before it is
	// enabled; text typed sooner is overwritten by that load.
	run(t, ctx, "modify", chromedp.Click("#btn-modify", chromedp.ByQuery), chromedp.WaitVisible("#editor", chromedp.ByQuery),
		waitJS(`!document.querySelector('#editor').disabled`),
		setEditor(strings.Replace(fixed, `"processor": "echo",`, `"processor": "echo", "model_config": {"sleep_ms": 1},`, 1)),
		chromedp.Click("#submit", chromedp.ByQuery),
		waitJS(`!!document.querySelector('table#versions tr[data-version="2"]') && (document.querySelector('#state') || {}).textContent === 'Running'`))
	// A switch asks no confirmation: the click alone rolls back.
	run(t, ctx, "roll back", chromedp.Click(`table#versions tr[data-version="1"] button.switch`, chromedp.ByQuery),
		waitJS(`!!document.querySelector('table#versions tr[data-version="1"].current')`))
	if info, err := s.Manager.Describe(t.Context(), "console_echo"); err != nil || info.CurrentVersion != 1 {
		t.Errorf("after the roll back: %+v, %v; want version 1", info.CurrentVersion, err)
	}

	// Delete, with confirmation.
	run(t, ctx, "delete", chromedp.Click("#btn-delete", chromedp.ByQuery), chromedp.WaitVisible("#confirm-yes", chromedp.ByQuery),
		chromedp.Click("#confirm-yes", chromedp.ByQuery),
		waitJS(`!!document.querySelector('table#services') && !document.querySelector('tr[data-service="console_echo"]')`))
	if _, err := s.Manager.Describe(t.Context(), "console_echo"); err == nil {
		t.Error("the service is still there after delete")
	}
	screenshot(t, ctx, shots, "5-services")

	// A narrow screen: the list still renders.
	narrow, narrowProblems := browsertest.Start(t, browsertest.Options{Width: 375, Height: 800})
	run(t, narrow, "narrow", chromedp.Navigate(s.URL+"/console/"), chromedp.WaitVisible("#login-token", chromedp.ByQuery),
		chromedp.SendKeys("#login-token", adminToken+"\r", chromedp.ByQuery), chromedp.WaitVisible("table#services", chromedp.ByQuery))
	screenshot(t, narrow, shots, "6-narrow")

	browsertest.NoProblems(t, problems)
	browsertest.NoProblems(t, narrowProblems)
	t.Logf("screenshots in %s", shots)
}

// setEditor replaces the editor's text as a user would, so its input
// handlers run.
func setEditor(text string) chromedp.Action { return setValue("#editor", text) }

func setValue(sel, text string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %s; e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, sel, strconv.Quote(text))
		var ok bool
		return chromedp.Evaluate(js, &ok).Do(ctx)
	})
}

func serviceToken(t *testing.T, s *teststack.Stack, name string) string {
	t.Helper()
	info, err := s.Manager.Describe(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Token
}

// TestConsoleTestPanelPicksKServeForTensorServices: on a tensor service the
// test panel starts in the KServe v2 form, whose first Send answers 200
// (issue 34: it started with a raw JSON body, which the EAS door refuses
// as not being the EAS protobuf).
func TestConsoleTestPanelPicksKServeForTensorServices(t *testing.T) {
	ctx, problems := browsertest.Start(t, browsertest.Options{})
	model, err := filepath.Abs(filepath.Join(onnxTestdata, "mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	s := teststack.New(t, teststack.Options{Server: server.Options{AdminToken: adminToken}},
		fmt.Sprintf(`{"name":"tensors","processor":"onnx_cpu","model_path":%q,"metadata":{"instance":1}}`, model))
	run(t, ctx, "login", chromedp.Navigate(s.URL+"/console/"), chromedp.WaitVisible("#login-token", chromedp.ByQuery),
		chromedp.SendKeys("#login-token", adminToken+"\r", chromedp.ByQuery), chromedp.WaitVisible("table#services", chromedp.ByQuery))
	run(t, ctx, "detail", chromedp.Navigate(s.URL+"/console/#/services/tensors"),
		waitJS(`document.querySelector('#test-mode') && document.querySelector('#test-mode').value === 'kserve' && !!document.querySelector('#kserve-input-0')`))
	var n int
	run(t, ctx, "inputs", chromedp.Evaluate(`document.querySelector('#kserve-input-0-shape').value.split(',').map(Number).reduce((a, b) => a * Math.max(b, 1), 1)`, &n))
	values := strings.TrimSuffix(strings.Repeat("0.5,", n), ",")
	run(t, ctx, "send", setValue("#kserve-input-0", values), chromedp.Click("#test-send", chromedp.ByQuery),
		waitJS(`document.querySelector('#test-status').textContent.includes('200')`))
	browsertest.NoProblems(t, problems)
}

// TestConsoleServicesListFits: the services list fits its box at desktop
// widths and keeps the State column on a phone; the page of a service that
// does not exist says so instead of drawing a service's layout (issue 34:
// QPS and p99 were off screen at 1280 and 1700 px, State at 375 px).
func TestConsoleServicesListFits(t *testing.T) {
	var specs []string
	for _, name := range []string{"xgboost_breast_cancer_classifier", "pytorch_resnet50_image_classifier_v2", "echo"} {
		specs = append(specs, fmt.Sprintf(`{"name":%q,"processor":"echo","metadata":{"instance":1}}`, name))
	}
	s := teststack.New(t, teststack.Options{Server: server.Options{AdminToken: adminToken}}, specs...)
	for _, width := range []int{1280, 1700, 375} {
		ctx, problems := browsertest.Start(t, browsertest.Options{Width: width, Height: 900})
		run(t, ctx, "login", chromedp.Navigate(s.URL+"/console/"), chromedp.WaitVisible("#login-token", chromedp.ByQuery),
			chromedp.SendKeys("#login-token", adminToken+"\r", chromedp.ByQuery),
			waitJS(`document.querySelectorAll('table#services tbody tr[data-service]').length === 3`))
		var overflow, stateRight, wrapRight float64
		run(t, ctx, "measure", chromedp.Evaluate(`(() => { const w = document.querySelector('table#services').closest('.table-wrap'); return w.scrollWidth - w.clientWidth; })()`, &overflow),
			chromedp.Evaluate(`document.querySelector('table#services tbody td.state').getBoundingClientRect().right`, &stateRight),
			chromedp.Evaluate(`document.querySelector('table#services').closest('.table-wrap').getBoundingClientRect().right`, &wrapRight))
		if overflow > 0 {
			t.Errorf("at %d px the services table is %.0f px wider than its box", width, overflow)
		}
		if stateRight > wrapRight {
			t.Errorf("at %d px the State column ends at %.0f px, outside its box (%.0f px)", width, stateRight, wrapRight)
		}
		if width == 1280 {
			run(t, ctx, "no such service", chromedp.Navigate(s.URL+"/console/#/services/nosuch"),
				waitJS(`!!document.querySelector('#not-found') && !document.querySelector('#test-mode')`))
		}
		// The missing service is not asked for (the console finds it
		// absent from the list), so no failed load is expected.
		for _, p := range problems() {
			t.Errorf("browser console at %d px: %s", width, p)
		}
	}
}
