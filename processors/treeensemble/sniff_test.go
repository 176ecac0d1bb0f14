package treeensemble_test

import (
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	_ "github.com/eas-server/eas-server/processors/pmml" // registers the code the message names
	"github.com/eas-server/eas-server/servicejson"
)

// TestWrongModelFormat: a PMML file given to a trees code fails to deploy
// with what it is and the code that serves it, not the JSON parser's error.
func TestWrongModelFormat(t *testing.T) {
	spec, err := servicejson.Parse([]byte(`{"name":"wrong","processor":"parameter_server","model_path":"../../examples/models/rf.pmml","metadata":{"instance":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	mgr := service.NewManager(service.Options{StateDir: t.TempDir()})
	defer mgr.Shutdown(t.Context())
	_, err = mgr.Deploy(t.Context(), spec)
	want := "model_path: rf.pmml is a PMML model, not an XGBoost or LightGBM model: deploy it with processor pmml"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("deploy: %v, want %q", err, want)
	}
}
