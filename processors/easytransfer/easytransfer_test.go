package easytransfer_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf/libtftest"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/all"
	"github.com/eas-server/eas-server/tensor"
)

// appRef is one app of testdata/gen_apps.py: its model_config.type, the
// requests and the answers EasyTransfer's pipeline gives.
type appRef struct {
	Type     string
	Requests []json.RawMessage
	Answers  []map[string]json.RawMessage
}

// apps is the order the test serves them in.
var apps = []string{"text_classify", "text_multi", "text_match", "labeling", "vectorization"}

// genApps has the tensorflow venv's TensorFlow write the EasyTransfer
// exports and their answers.
func genApps(t testing.TB, env libtftest.Env) (string, map[string]appRef) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "processors", "easytransfer", "testdata", "gen_apps.py")
	if out, err := exec.Command(env.Python, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_apps.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var refs map[string]appRef
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatal(err)
	}
	return dir, refs
}

// TestEasyTransferApps serves each app as EasyTransfer exports it, on both
// TensorFlow runtimes, and compares every answer to raw text with what
// EasyTransfer's preprocessor (tokenized by Hugging Face tokenizers),
// TensorFlow and its postprocessor give: labels exactly, numbers within
// the runtime's tolerance; one text a request, then all in one list
// request, then all at once concurrently (batched).
func TestEasyTransferApps(t *testing.T) {
	env := libtftest.Setup(t)
	dir, refs := genApps(t, env)
	var services []string
	for _, app := range apps {
		for _, rt := range []string{"onnx", "libtensorflow"} {
			services = append(services, fmt.Sprintf(`{"name":"%s_%s","processor":"easytransfer_cpu","model_path":%q,"token":"T",
				"model_config":{"type":%q,"runtime":%q},"metadata":{"instance":1,"cpu":2,"rpc":{"batching":true,"max_batch_size":16,"max_batch_timeout":20}}}`,
				app, rt, filepath.Join(dir, app), refs[app].Type, rt))
		}
	}
	st := teststack.New(t, teststack.Options{}, services...)
	for _, app := range apps {
		ref := refs[app]
		for _, rt := range []string{"onnx", "libtensorflow"} {
			tol := tensor.F32Reformulated
			if rt == "libtensorflow" {
				tol = tensor.F32Accumulated
			}
			url := st.URL + "/api/predict/" + app + "_" + rt
			t.Run(app+"/"+rt, func(t *testing.T) {
				for i, req := range ref.Requests {
					code, body, _ := teststack.Do(t, http.MethodPost, url, "T", req)
					if code != http.StatusOK {
						t.Fatalf("request %d %s: %d %s", i, req, code, body)
					}
					compareAnswer(t, fmt.Sprintf("request %d %s", i, req), body, ref.Answers[i], tol)
				}
				list, _ := json.Marshal(ref.Requests)
				code, body, _ := teststack.Do(t, http.MethodPost, url, "T", list)
				if code != http.StatusOK {
					t.Fatalf("list request: %d %s", code, body)
				}
				var answers []json.RawMessage
				if err := json.Unmarshal(body, &answers); err != nil || len(answers) != len(ref.Requests) {
					t.Fatalf("list answer: %v, %d answers for %d texts: %s", err, len(answers), len(ref.Requests), body)
				}
				for i, a := range answers {
					compareAnswer(t, fmt.Sprintf("list item %d", i), a, ref.Answers[i], tol)
				}
				var wg sync.WaitGroup
				for i, req := range ref.Requests {
					wg.Go(func() {
						code, body, _ := teststack.Do(t, http.MethodPost, url, "T", req)
						if code != http.StatusOK {
							t.Errorf("concurrent request %d: %d %s", i, code, body)
							return
						}
						compareAnswer(t, fmt.Sprintf("concurrent request %d", i), body, ref.Answers[i], tol)
					})
				}
				wg.Wait()
			})
		}
	}

	// Bad requests answer 400 saying what to send, and lose nothing.
	for _, tc := range []struct{ svc, body, want string }{
		{"text_classify_onnx", `{"text": "hi"}`, `send {"first_sequence": "..."}`},
		{"text_classify_onnx", `{"first_sequence": 3}`, `"first_sequence" must be a string`},
		{"text_classify_onnx", `[]`, "list is empty"},
		{"text_classify_onnx", `hello`, "JSON object"},
		{"text_match_onnx", `{"first_sequence": "a"}`, `send "second_sequence" too (or the training's column name "query")`},
		{"text_match_onnx", `[{"first_sequence": "a", "second_sequence": "b"}, {"first_sequence": "a"}]`, "text 1:"},
	} {
		code, body, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+tc.svc, "T", []byte(tc.body))
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s, want 400 with %q", tc.svc, tc.body, code, body, tc.want)
		}
	}
}

// compareAnswer compares one JSON answer with the reference: strings and
// integers exactly, float lists (nested or not) within tol.
func compareAnswer(t *testing.T, what string, got json.RawMessage, want map[string]json.RawMessage, tol tensor.Tolerance) {
	t.Helper()
	var g map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: answer %s: %v", what, got, err)
		return
	}
	keys := func(m map[string]json.RawMessage) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}
	if !slices.Equal(keys(g), keys(want)) {
		t.Errorf("%s: answer has %v, want %v", what, keys(g), keys(want))
		return
	}
	for k, w := range want {
		var ws string
		if json.Unmarshal(w, &ws) == nil {
			var gs string
			if err := json.Unmarshal(g[k], &gs); err != nil || gs != ws {
				t.Errorf("%s: %s = %s, want %s", what, k, g[k], w)
			}
			continue
		}
		gv, err1 := flatten(g[k])
		wv, err2 := flatten(w)
		if err1 != nil || err2 != nil {
			t.Errorf("%s: %s: %v %v", what, k, err1, err2)
			continue
		}
		if err := tensor.CloseValues(k, gv, wv, tol); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// flatten reads a number or nested lists of numbers.
func flatten(raw json.RawMessage) ([]float32, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var out []float32
	var walk func(any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case float64:
			out = append(out, float32(x))
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("not a number: %v", v)
		}
		return nil
	}
	return out, walk(v)
}

// BenchmarkRuntimes times the text_classify app (a 2-layer BERT-shaped
// encoder, sequence length 16) on both runtimes through the router: one
// text a request, and 32 texts in one list request.
func BenchmarkRuntimes(b *testing.B) {
	env := libtftest.Setup(b)
	dir, refs := genApps(b, env)
	one := refs["text_classify"].Requests[0]
	var texts []json.RawMessage
	for len(texts) < 32 {
		texts = append(texts, refs["text_classify"].Requests...)
	}
	list, _ := json.Marshal(texts[:32])
	for _, rt := range []string{"onnx", "libtensorflow"} {
		st := teststack.New(b, teststack.Options{}, fmt.Sprintf(
			`{"name":"m","processor":"easytransfer_cpu","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1},"model_config":{"type":"text_classify_bert","runtime":%q}}`,
			filepath.Join(dir, "text_classify"), rt))
		for _, tc := range []struct {
			name string
			body []byte
		}{{"one", one}, {"list32", list}} {
			b.Run(rt+"/"+tc.name, func(b *testing.B) {
				for b.Loop() {
					if code, resp, _ := teststack.Do(b, http.MethodPost, st.URL+"/api/predict/m", "T", tc.body); code != http.StatusOK {
						b.Fatalf("%d %s", code, resp)
					}
				}
			})
		}
	}
}
