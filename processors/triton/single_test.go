package triton_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/wire/kserve"
)

// TestSingleModelPlainPredict sends KServe bodies to /api/predict/<service>
// itself: with one model in the repository they reach it through the
// service's scheduler, and GET answers the model's metadata.
func TestSingleModelPlainPredict(t *testing.T) {
	repo := tempRepo(t, `name: "m" max_batch_size: 8 dynamic_batching { }`)
	s := newStack(t, `{"name":"one","processor":"triton","token":"`+token+`","processor_params":["--model-repository=`+repo+`"],"metadata":{"instance":1}}`)
	auth := map[string]string{"Authorization": token}
	for _, c := range loadCases(t, "mlp") {
		r := do(t, "POST", s.URL+"/api/predict/one", c.req, auth)
		if r.code != 200 || !strings.HasPrefix(r.hdr.Get("Content-Type"), "application/json") {
			t.Fatalf("%s: %d %s", c.name, r.code, r.body)
		}
		resp, err := kserve.DecodeResponse(r.body, "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.ModelName != "m" || resp.ModelVersion != "1" {
			t.Errorf("model %q version %q", resp.ModelName, resp.ModelVersion)
		}
		checkOutputs(t, resp.Outputs, c.want)
	}
	r := do(t, "GET", s.URL+"/api/predict/one", nil, auth)
	var md processors.Metadata
	if r.code != 200 || json.Unmarshal(r.body, &md) != nil || md.Processor != "triton" || len(md.Inputs) != 1 || md.Inputs[0].Name != "input" {
		t.Fatalf("GET: %d %s", r.code, r.body)
	}
	if r := do(t, "POST", s.URL+"/api/predict/one/some/other/path", []byte("x"), auth); r.code != 404 {
		t.Errorf("unknown path in native mode: %d %s", r.code, r.body)
	}
}

// TestRepositoryFromHTTPArchive serves a repository packed as .tar.gz on an
// HTTP server, the third form --model-repository takes.
func TestRepositoryFromHTTPArchive(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	root := filepath.Join("testdata", "model_repository", "mlp")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "repo/mlp/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	gz.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/repo.tar.gz" {
			http.NotFound(w, r)
			return
		}
		w.Write(buf.Bytes())
	}))
	t.Cleanup(srv.Close)
	s := newStack(t, `{"name":"tri","processor":"triton","token":"`+token+`","processor_params":["--model-repository=`+srv.URL+`/repo.tar.gz"],"metadata":{"instance":1}}`)
	if got := s.cachedFiles(t, "model.onnx"); len(got) != 1 {
		t.Fatalf("the archive was not unpacked into the server's model cache: %v", got)
	}
	c := loadCases(t, "mlp")[0]
	r := do(t, "POST", s.URL+"/v2/models/mlp/infer", c.req, map[string]string{"Authorization": token})
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
}
