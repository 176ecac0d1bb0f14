// Package nativelib finds the native libraries the server opens at run time
// (ONNX Runtime, the TorchScript shim) by one rule, so a library installed
// by the project's scripts is found the same way from the binary, from
// `go test` in any package, and from an explicit setting.
package nativelib

import (
	"os"
	"path/filepath"
)

// Search says where one library is looked for.
type Search struct {
	// Explicit is a path set by a flag or an environment variable (the
	// file, or the directory holding File). When set it is the only
	// candidate, so a typo is reported rather than silently falling back.
	Explicit string
	// Dir is the library's folder below third_party/, e.g.
	// "onnxruntime/lib", where the project's scripts install it.
	Dir  string
	File string
	// System lists further full paths, tried last.
	System []string
}

// levels is how far up from the executable and the working directory
// third_party/ is looked for: bin/eas-server, a package directory in tests.
const levels = 6

// Candidates lists where the library is looked for, in order: Explicit
// alone when set; else third_party/<Dir>/<File> beside or above the
// executable and the working directory, then System.
func (s Search) Candidates() (cands []string, explicit bool) {
	if s.Explicit != "" {
		p := s.Explicit
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, s.File)
		}
		return []string{p}, true
	}
	var roots []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		roots = append(roots, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, wd)
	}
	seen := map[string]bool{}
	for _, root := range roots {
		dir := root
		for range levels {
			p := filepath.Join(dir, "third_party", s.Dir, s.File)
			if !seen[p] {
				seen[p] = true
				cands = append(cands, p)
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return append(cands, s.System...), false
}

// Find returns the first candidate that is a file ("" when none is), with
// the candidates for the caller's message.
func (s Search) Find() (path string, cands []string, explicit bool) {
	cands, explicit = s.Candidates()
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, cands, explicit
		}
	}
	return "", cands, explicit
}
