package tensorflow

import (
	"testing"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
)

// exportOf translates the serving_default signature of the SavedModel at dir.
func exportOf(t *testing.T, dir string) []byte {
	t.Helper()
	sm, err := savedmodel.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := tf2onnx.Convert(sm, "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	return sig.Model
}
