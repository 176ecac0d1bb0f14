package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/teststack"
)

// TestConsoleRoutes: / sends a browser to the console, whose files come
// from the binary with a policy that keeps them to their own origin; with
// NoConsole neither route exists.
func TestConsoleRoutes(t *testing.T) {
	s := teststack.Start(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /: %d to %q, want 302 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for path, ctype := range map[string]string{"/console/": "text/html", "/console/app.js": "javascript", "/console/style.css": "text/css"} {
		code, body, h := teststack.Do(t, http.MethodGet, s.URL+path, "", nil)
		if code != http.StatusOK || !strings.Contains(h.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s: %d %q", path, code, h.Get("Content-Type"))
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	if code, _, _ := teststack.Do(t, http.MethodGet, s.URL+"/console/nope.js", "", nil); code != http.StatusNotFound {
		t.Errorf("a missing file: %d", code)
	}
	off := teststack.New(t, teststack.Options{Server: server.Options{NoConsole: true}})
	if code, _, _ := teststack.Do(t, http.MethodGet, off.URL+"/console/", "", nil); code != http.StatusNotFound {
		t.Errorf("NoConsole: /console/ answers %d", code)
	}
}
