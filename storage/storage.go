// Package storage brings a service's model_path (and warm-up data) to a
// local path the processor can open.
package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FetchError is a failed fetch; Retryable says whether trying again may help.
type FetchError struct {
	URL       string
	Retryable bool
	Err       error
}

func (e *FetchError) Error() string { return fmt.Sprintf("fetch %s: %v", e.URL, e.Err) }

func (e *FetchError) Unwrap() error { return e.Err }

// ErrUnsupportedScheme is returned for a URL scheme this build cannot fetch.
var ErrUnsupportedScheme = errors.New("unsupported scheme")

// Fetch makes url available locally and returns the local path. Local paths
// (plain or file://) are used in place; a relative path is resolved against
// baseDir. dst is the directory where remote models would be written.
func Fetch(ctx context.Context, url, baseDir, dst string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	switch {
	case strings.HasPrefix(url, "file://"):
		return local(url, strings.TrimPrefix(url, "file://"), baseDir)
	case strings.Contains(url, "://"):
		scheme := url[:strings.Index(url, "://")]
		return "", &FetchError{URL: url, Err: fmt.Errorf("%w %q: this build reads local paths only; download the model and give its local path", ErrUnsupportedScheme, scheme)}
	default:
		return local(url, url, baseDir)
	}
}

func local(url, path, baseDir string) (string, error) {
	if !filepath.IsAbs(path) && baseDir != "" {
		path = filepath.Join(baseDir, path)
	}
	if _, err := os.Stat(path); err != nil {
		return "", &FetchError{URL: url, Err: err}
	}
	return path, nil
}
