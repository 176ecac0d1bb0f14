package triton_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/eas-server/eas-server/internal/server"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/onnx"
	_ "github.com/eas-server/eas-server/processors/triton"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
)

// stack is a real eas-server (manager + router) on loopback.
type stack struct {
	URL   string
	state string // the manager's state dir; its model cache is state/cache
	mgr   *service.Manager
	ts    *httptest.Server
	srv   *server.Server
}

// newStack deploys services (service.json texts) and fails the test when
// one does not load.
func newStack(t *testing.T, services ...string) *stack {
	t.Helper()
	st := teststack.Start(t, services...)
	return &stack{URL: st.URL, state: st.StateDir, mgr: st.Manager, ts: st.HTTP, srv: st.Server}
}

// cachedFiles lists the files named name in the stack's model cache, to
// check that a remote repository was fetched there.
func (s *stack) cachedFiles(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(s.state, "cache"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == name {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("model cache: %v", err)
	}
	return out
}

// deployErr deploys one service.json on a fresh manager and returns the
// load error.
func deployErr(t *testing.T, js string) error {
	t.Helper()
	mgr := service.NewManager(service.Options{StateDir: t.TempDir()})
	t.Cleanup(func() { mgr.Shutdown(context.Background()) })
	spec, err := servicejson.Parse([]byte(js))
	if err != nil {
		return err
	}
	_, err = mgr.Deploy(t.Context(), spec)
	return err
}

type reply struct {
	code int
	body []byte
	hdr  http.Header
}

func do(t *testing.T, method, url string, body []byte, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: b, hdr: resp.Header}
}

// testCase is one case of processors/onnx/testdata/<model>.json, whose
// expected outputs were computed by the generator in float64.
type testCase struct {
	Name    string            `json:"name"`
	Inputs  []json.RawMessage `json:"inputs"`
	Outputs []json.RawMessage `json:"outputs"`
}

// loadCases reads the reference cases of an ONNX test model as KServe
// requests and expected responses.
func loadCases(t *testing.T, model string) []struct {
	name string
	req  []byte
	want []tensor.Tensor
} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "onnx", "testdata", model+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []testCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []struct {
		name string
		req  []byte
		want []tensor.Tensor
	}
	for _, c := range f.Cases {
		req, _ := json.Marshal(map[string]any{"inputs": c.Inputs})
		resp, _ := json.Marshal(map[string]any{"model_name": model, "outputs": c.Outputs})
		r, err := kserve.DecodeResponse(resp, "")
		if err != nil {
			t.Fatalf("%s %s: %v", model, c.Name, err)
		}
		out = append(out, struct {
			name string
			req  []byte
			want []tensor.Tensor
		}{c.Name, req, r.Outputs})
	}
	return out
}

func checkOutputs(t *testing.T, got, want []tensor.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d outputs, want %d", len(got), len(want))
	}
	byName := map[string]tensor.Tensor{}
	for _, g := range got {
		byName[g.Name] = g
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		if !ok {
			t.Fatalf("output %q missing", w.Name)
		}
		if err := tensor.Close(g, w, tensor.F32Accumulated); err != nil {
			t.Errorf("output %q: %v", w.Name, err)
		}
	}
}

func repoPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "model_repository"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func quote(s string) string { return strconv.Quote(s) }
