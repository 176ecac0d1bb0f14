package easytransfer_test

import (
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
)

// TestDocumentedForms checks EAS's documented easytransfer service.json
// forms (CPU, and GPU with a GPU instance type) validate as written, and
// that a mismatch of code and resources fails saying so.
func TestDocumentedForms(t *testing.T) {
	for _, tc := range []struct{ name, body, wantErr string }{
		{"cpu", `{"name": "et_app_demo", "model_path": "http://xxxxx/your_model.zip", "processor": "easytransfer_cpu",
			"model_config": {"type": "text_classify_bert"}, "metadata": {"instance": 1, "cpu": 1, "memory": 4000}}`, ""},
		{"gpu", `{"name": "et_app_demo", "model_path": "http://xxxxx/your_model.zip", "processor": "easytransfer_gpu",
			"model_config": {"type": "text_classify_bert"}, "metadata": {"instance": 1},
			"cloud": {"computing": {"instance_type": "ecs.gn6i-c4g1.xlarge"}}}`, ""},
		{"gpu code on a cpu", `{"name": "et_app_demo", "model_path": "http://xxxxx/your_model.zip", "processor": "easytransfer_gpu",
			"model_config": {"type": "text_classify_bert"}, "metadata": {"instance": 1, "cpu": 1}}`, "easytransfer_gpu"},
		{"no type", `{"name": "et_app_demo", "model_path": "http://xxxxx/your_model.zip", "processor": "easytransfer_cpu",
			"metadata": {"instance": 1}}`, "model_config.type is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := servicejson.Parse([]byte(tc.body))
			if err == nil {
				err = service.Precheck(spec, 0)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("the documented form fails: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
