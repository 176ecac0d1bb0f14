package textencoder_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/servicejson"
)

// documented is README.md's service.json.
const documented = `{
  "name": "minilm_embeddings",
  "processor": "text_encoder",
  "model_path": "oss://examples/all-MiniLM-L6-v2/",
  "model_config": {"task": "embedding", "pooling": "mean", "normalize": true, "max_length": 256},
  "metadata": {"instance": 1, "cpu": 2, "rpc": {"batching": true, "max_batch_size": 32, "max_batch_timeout": 20}}
}`

// TestDocumentedForms checks README.md's forms validate, and that bad
// model_config fails validation saying why.
func TestDocumentedForms(t *testing.T) {
	for _, tc := range []struct{ name, body, wantErr string }{
		{"documented", documented, ""},
		{"classifier on a gpu", `{"name": "a", "metadata": {"instance": 1, "gpu": 1}, "processor": "text_encoder", "model_path": "/m", "model_config": {"task": "classification", "top_k": 2}}`, ""},
		{"onnx keys", `{"name": "a", "metadata": {"instance": 1}, "processor": "text_encoder", "model_path": "/m/model.onnx", "model_config": {"input_ids": "ids", "output": "sentence_embedding", "pooling": "none", "intra_op_threads": 2}}`, ""},
		{"pooling", `{"name": "a", "metadata": {"instance": 1}, "processor": "text_encoder", "model_path": "/m", "model_config": {"pooling": "avg"}}`, "pooling \"avg\" is not one of cls, mean, max, none"},
		{"task", `{"name": "a", "metadata": {"instance": 1}, "processor": "text_encoder", "model_path": "/m", "model_config": {"task": "ner"}}`, "model_config.task"},
		{"top_k for embeddings", `{"name": "a", "metadata": {"instance": 1}, "processor": "text_encoder", "model_path": "/m", "model_config": {"task": "embedding", "top_k": 2}}`, "top_k and function_to_apply are for task classification"},
		{"runtime keys", `{"name": "a", "metadata": {"instance": 1}, "processor": "text_encoder", "model_path": "/m", "model_config": {"intra_op_threads": -1}}`, "intra_op_threads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := servicejson.Parse([]byte(tc.body))
			if err == nil {
				err = service.Precheck(spec, 0)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("the form fails: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestBadRequests: 400s that say what to send.
func TestBadRequests(t *testing.T) {
	dir, _, _ := models(t)
	st := teststack.New(t, teststack.Options{},
		svc("bert", filepath.Join(dir, "bert"), `{}`),
		svc("strict", filepath.Join(dir, "bert"), `{"truncation": false, "max_length": 8}`))
	for _, tc := range []struct{ svc, body, want string }{
		{"bert", `{"first_sequence": "hi"}`, `unknown key "first_sequence": send {"text": "..."}`},
		{"bert", `"hi"`, "must be a JSON object"},
		{"bert", `{"text": ["a"]}`, `a list goes in "texts"`},
		{"bert", `{"texts": "a"}`, `one string goes in "text"`},
		{"bert", `{"texts": []}`, "empty list"},
		{"bert", `{"input": [[1, 2]]}`, "token id lists are not read"},
		{"bert", `{"text": "a", "input": "b"}`, "exactly one of"},
		{"bert", `{"input": "a", "encoding_format": "base64"}`, `only "float"`},
		{"strict", `{"text": "the movie was great the movie was great"}`, "over max_length 8"},
		{"strict", `{"texts": ["a", "the movie was great the movie was great"]}`, "text 1: the text is"},
	} {
		code, body, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+tc.svc, "T", []byte(tc.body))
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s, want 400 with %q", tc.svc, tc.body, code, body, tc.want)
		}
	}
	code, body, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/bert", "T", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"pooling":"mean"`) && !strings.Contains(string(body), `"pooling": "mean"`) {
		t.Errorf("GET: %d %s, want the pooling", code, body)
	}
}
