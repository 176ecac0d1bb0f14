package triton_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/triton"
	"github.com/eas-server/eas-server/wire/kserve"
)

// TestRemoteRepositoryNotFetchedByConfigure checks that Configure, which
// `eas-server validate` runs, leaves a remote repository alone, and that a
// Load without the server's Fetcher says why it cannot fetch it instead of
// downloading it somewhere of its own.
func TestRemoteRepositoryNotFetchedByConfigure(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	p := triton.New()
	if err := p.Configure(processors.Spec{Service: "tri", Code: triton.Code, Params: []string{"--model-repository=" + srv.URL + "/repo.tar.gz"}}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("Configure made %d requests to the repository", n)
	}
	err := p.Load(t.Context(), processors.Files{})
	if err == nil || !strings.Contains(err.Error(), "no model cache") {
		t.Fatalf("Load without a Fetcher: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("Load without a Fetcher made %d requests to the repository", n)
	}
}

// TestRepositorySchemeRefusedByConfigure checks that a --model-repository
// the fetch would refuse is refused before any load.
func TestRepositorySchemeRefusedByConfigure(t *testing.T) {
	err := triton.New().Configure(processors.Spec{Service: "tri", Code: triton.Code, Params: []string{"--model-repository=s3://bucket/models/"}})
	if err == nil || !strings.Contains(err.Error(), `unsupported scheme "s3"`) {
		t.Fatalf("got %v, want the scheme refused", err)
	}
	for _, ok := range []string{"oss://bucket/models/", "https://example.com/repo.tar.gz", "file:///models", "models", "/models"} {
		if err := triton.New().Configure(processors.Spec{Service: "tri", Code: triton.Code, Params: []string{"--model-repository=" + ok}}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestRepositoryAsModelPath serves a repository named by model_path, which
// the loader fetches and hands to Load, and refuses it named twice.
func TestRepositoryAsModelPath(t *testing.T) {
	repo := tempRepo(t, `name: "m" max_batch_size: 8`)
	s := newStack(t, `{"name":"tri","processor":"triton","model_path":`+quote(repo)+`,"token":"`+token+`","metadata":{"instance":1}}`)
	c := loadCases(t, "mlp")[0]
	r := do(t, "POST", s.URL+"/v2/models/m/infer", c.req, map[string]string{"Authorization": token})
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	resp, err := kserve.DecodeResponse(r.body, r.hdr.Get(kserve.HeaderContentLength))
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, resp.Outputs, c.want)
	err = deployErr(t, `{"name":"tri","processor":"triton","model_path":`+quote(repo)+`,"processor_params":["--model-repository=`+repo+`"],"metadata":{"instance":1}}`)
	if err == nil || !strings.Contains(err.Error(), "both name a repository") {
		t.Fatalf("model_path and --model-repository: %v", err)
	}
}
