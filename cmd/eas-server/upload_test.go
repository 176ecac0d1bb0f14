package main

import (
	"bytes"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/eas-server/eas-server/internal/storage"
)

func TestUploadVerb(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer srv.Close()
	t.Setenv("OSS_ENDPOINT", srv.URL)
	t.Setenv("OSS_ACCESS_KEY_ID", "LTAItest")
	t.Setenv("OSS_ACCESS_KEY_SECRET", "secret")

	blob := make([]byte, 2_500_000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range blob {
		blob[i] = byte(r.Uint32())
	}
	src := filepath.Join(t.TempDir(), "weights.bin")
	os.WriteFile(src, blob, 0o644)

	stdout, stderr, code := runCLI(t, "upload", "--part-size", "1", "--checkpoint-dir", t.TempDir(), src, "oss://models/resnet/")
	if code != 0 || stdout != "oss://models/resnet/weights.bin\n" {
		t.Fatalf("upload: code %d, stdout %q, stderr %q; want the oss:// path", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "weights.bin") || !strings.Contains(stderr, "100%") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
	f := &storage.Fetcher{CacheDir: t.TempDir()}
	p, err := f.Fetch(t.Context(), strings.TrimSpace(stdout), storage.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, blob) {
		t.Errorf("fetched back %d bytes; want the %d uploaded", len(got), len(blob))
	}

	_, stderr, code = runCLI(t, "upload", "-q", filepath.Join(t.TempDir(), "missing.onnx"), "oss://models/x/")
	if code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("missing file: code %d, stderr %q", code, stderr)
	}
}
