package easynlp_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/servicejson"
)

// documented is EAS's documented easynlp service.json
// (../shared/docs/eas-framework-examples.md).
const documented = `{
  "name": "easynlp_app_demo",
  "metadata": {"instance": 1},
  "cloud": {"computing": {"instance_type": "ecs.gn6i-c4g1.xlarge"}},
  "model_config": {"app_name": "text_classify", "type": "text_classify"},
  "model_path": "http://xxxxx/your_model.tar.gz",
  "processor": "easynlp"
}`

// TestDocumentedForms checks the documented form validates as written, and
// that what is not served fails validation saying why.
func TestDocumentedForms(t *testing.T) {
	for _, tc := range []struct{ name, body, wantErr string }{
		{"documented", documented, ""},
		{"each app", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"type": "sequence_labeling"}}`, ""},
		{"no type", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m"}`, "model_config.type (or app_name) is required"},
		{"generation", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"app_name": "sequence_generation", "type": "sequence_generation_zh"}}`, "generates text token by token"},
		{"clip", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"type": "wukong_clip"}}`, "takes images"},
		{"mrc", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"type": "machine_reading_comprehension_en"}}`, "spans of a passage"},
		{"unknown", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"type": "text_clasify"}}`, "not an EasyNLP app served here"},
		{"threshold", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"type": "text_classify", "threshold": 0.3}}`, "threshold is for type text_classify_multi"},
		{"runtime keys", `{"name": "a", "metadata": {"instance": 1}, "processor": "easynlp", "model_path": "/m", "model_config": {"type": "text_classify", "intra_op_threads": -1}}`, "intra_op_threads"},
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

// TestDocumentedDeploys deploys the documented form (model_path pointed at
// an EasyNLP directory; the instance type alone asks for no GPU here, see
// README.md) and sends the documented request.
func TestDocumentedDeploys(t *testing.T) {
	dir, refs := genApps(t)
	body := strings.Replace(documented, "http://xxxxx/your_model.tar.gz", filepath.Join(dir, "text_classify"), 1)
	body = strings.Replace(body, `"name": "easynlp_app_demo",`, `"name": "easynlp_app_demo", "token": "T",`, 1)
	st := teststack.New(t, teststack.Options{}, body)
	code, got, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/easynlp_app_demo", "T", []byte(`{"first_sequence": "hello"}`))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, got)
	}
	compare(t, "documented request", got, refs["text_classify"].Answers[0])
}
