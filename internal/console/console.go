// Package console serves the web console: static files embedded in the
// binary (web/), at /console/ on the server's own port. The console has no
// endpoint of its own: every call it makes goes through the control-plane
// API (/api/v2) with the admin token the user types, kept in the browser's
// session storage, so it can do nothing the CLI cannot. The files are
// plain JavaScript modules, CSS and HTML, with no build step.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed web
var embedded embed.FS

// Files is the console's file tree (index.html at its root).
func Files() fs.FS {
	sub, err := fs.Sub(embedded, "web")
	if err != nil {
		panic(err) // the embed directive guarantees web/
	}
	return sub
}

// securityHeaders keep the console's pages to their own files: no script,
// style or connection to another origin, no inline script, no framing.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
	// The files change with the binary; revalidating is cheap (they are
	// small) and never shows a stale console after an upgrade.
	"Cache-Control": "no-cache",
}

// Handler serves the console's files; mount it with the /console/ prefix
// stripped.
func Handler() http.Handler {
	files := http.FileServer(http.FS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		files.ServeHTTP(w, r)
	})
}
