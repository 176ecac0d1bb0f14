package tensorflow_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf"
	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/tensorflow"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// TestOpLibraries serves a SavedModel that needs TensorFlow Text's custom
// ops (testdata/gen_text_ops.py: NormalizeUTF8, the whitespace tokenizer)
// on libtensorflow: without op_libraries the deploy fails naming the op and
// the fix; with them the answers equal TensorFlow's; auto falls back to
// libtensorflow and loads them; a library outside the allowed folders is
// refused.
func TestOpLibraries(t *testing.T) {
	env := libtftest.Setup(t)
	dir, refs := libtftest.Generate(t, env, filepath.Join(require.RepoRoot(), "processors", "tensorflow", "testdata", "gen_text_ops.py"))
	model := filepath.Join(dir, "text_ops")
	svc := func(name, cfg string) string {
		return fmt.Sprintf(`{"name":%q,"processor":"tensorflow_cpu_2.7","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1},"model_config":%s}`, name, model, cfg)
	}

	// Op libraries stay loaded for the process's life: the refusal is
	// only observable before this process loaded TensorFlow Text's.
	if loaded := libtf.LoadedOpLibraries(); len(loaded) == 0 {
		st := teststack.New(t, teststack.Options{AllowFailedDeploys: true}, svc("bare", `{"runtime":"libtensorflow"}`))
		err := st.DeployErrors["bare"]
		if err == nil || !strings.Contains(err.Error(), "Op type not registered") || !strings.Contains(err.Error(), "model_config.op_libraries") {
			t.Errorf("deploy without op_libraries: %v, want the missing op and model_config.op_libraries named", err)
		}
	} else {
		t.Logf("op libraries already loaded in this process (%v): the refusal without them is not checked", loaded)
	}

	libs := `["tensorflow_text/python/ops/_*.so"]`
	st := teststack.New(t, teststack.Options{AllowFailedDeploys: true},
		svc("text", `{"runtime":"libtensorflow","op_libraries":`+libs+`}`),
		svc("text_auto", `{"runtime":"auto","op_libraries":`+libs+`}`),
		svc("outside", `{"runtime":"libtensorflow","op_libraries":["`+filepath.Join(dir, "*.so")+`"]}`),
		svc("nomatch", `{"runtime":"libtensorflow","op_libraries":["tensorflow_text/no_such_lib.so"]}`),
	)
	for _, name := range []string{"text", "text_auto"} {
		if err := st.DeployErrors[name]; err != nil {
			t.Fatalf("deploy %s: %v", name, err)
		}
		c := refs["text_ops"]["serving_default"]
		body, err := tfpb.EncodeRequest("", c.Sorted(), nil)
		if err != nil {
			t.Fatal(err)
		}
		code, resp, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+name, "T", body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", name, code, resp)
		}
		outs, err := tfpb.DecodeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, name, outs, c.Outputs)
	}
	for name, want := range map[string]string{
		"outside": "--tensorflow-op-library-dir",
		"nomatch": "matches no file",
	} {
		if err := st.DeployErrors[name]; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("deploy %s: %v, want an error with %q", name, err, want)
		}
	}
	if loaded := libtf.LoadedOpLibraries(); len(loaded) == 0 || !strings.Contains(loaded[0], "tensorflow_text") {
		t.Errorf("loaded op libraries: %v", loaded)
	}
}

// TestOpLibrariesConfig: op_libraries needs a runtime that loads
// libtensorflow, and a list of paths.
func TestOpLibrariesConfig(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"op_libraries": ["a.so"]}`:                       `they need runtime "libtensorflow" or "auto"`,
		`{"runtime": "onnx", "op_libraries": ["a.so"]}`:    `they need runtime "libtensorflow" or "auto"`,
		`{"runtime": "auto", "op_libraries": "a.so"}`:      "must be a list of paths",
		`{"runtime": "auto", "op_libraries": [""]}`:        "empty entry",
		`{"runtime": "libtensorflow", "op_libraries": []}`: "",
	} {
		err := tensorflow.New("tensorflow_cpu_2.7").Configure(processors.Spec{Code: "tensorflow_cpu_2.7", ModelSource: "/m", ModelConfig: []byte(cfg)})
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}
