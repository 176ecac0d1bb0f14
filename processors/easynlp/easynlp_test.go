package easynlp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/all"
	"github.com/eas-server/eas-server/processors/easynlp"
	"github.com/eas-server/eas-server/tensor"
)

// appRef is one app of testdata/gen_apps.py: its model_config, the
// requests and the answers EasyNLP's pipeline gives each alone.
type appRef struct {
	ModelConfig json.RawMessage `json:"model_config"`
	Requests    []json.RawMessage
	Answers     []json.RawMessage
}

var (
	genOnce sync.Once
	genDir  string
	genRefs map[string]appRef
	genErr  error
	genOut  []byte
)

// genApps has PyTorch (Debian's python3-torch on /usr/bin/python3) write
// the EasyNLP directories and their answers, once per test binary.
func genApps(t testing.TB) (string, map[string]appRef) {
	t.Helper()
	genOnce.Do(func() {
		if genDir, genErr = os.MkdirTemp("", "easynlp-test-"); genErr != nil {
			return
		}
		if genOut, genErr = exec.Command("/usr/bin/python3", "testdata/gen_apps.py", genDir).CombinedOutput(); genErr != nil {
			return
		}
		var b []byte
		if b, genErr = os.ReadFile(filepath.Join(genDir, "ref.json")); genErr == nil {
			genErr = json.Unmarshal(b, &genRefs)
		}
	})
	if genErr != nil {
		require.Missing(t, require.Python, "testdata/gen_apps.py needs Debian's python3-torch and python3-numpy on /usr/bin/python3 (scripts/install-test-deps.sh): %v\n%s", genErr, genOut)
	}
	return genDir, genRefs
}

func TestMain(m *testing.M) {
	code := m.Run()
	if genDir != "" {
		os.RemoveAll(genDir)
	}
	os.Exit(code)
}

// apps is the order the tests serve them in.
var apps = []string{"text_classify", "text_classify_multi", "text_match", "text_match_two_tower", "sequence_labeling", "vectorization_roberta", "text_classify_roberta"}

func serviceJSON(name, dir string, mc json.RawMessage, batching bool) string {
	rpc := ""
	if batching {
		rpc = `,"rpc":{"batching":true,"max_batch_size":16,"max_batch_timeout":30}`
	}
	return fmt.Sprintf(`{"name":%q,"processor":"easynlp","model_path":%q,"token":"T","model_config":%s,"metadata":{"instance":1,"cpu":2%s}}`,
		name, dir, mc, rpc)
}

// TestApps serves each app as EasyNLP saves it through the router and
// compares every answer with what EasyNLP's predictor gives (tokenized by
// the generator's own BertTokenizer, run by PyTorch, post-processed as the
// predictor does): labels, tags and entity spans exactly, numbers (EasyNLP's
// comma-joined strings read back) within tensor.F32Reformulated. Each
// request alone, then all at once concurrently (batched by the scheduler:
// texts of different lengths share runs), then the list requests.
func TestApps(t *testing.T) {
	dir, refs := genApps(t)
	var services []string
	for _, app := range apps {
		services = append(services, serviceJSON(app, filepath.Join(dir, app), refs[app].ModelConfig, true))
	}
	st := teststack.New(t, teststack.Options{}, services...)
	for _, app := range apps {
		ref := refs[app]
		url := st.URL + "/api/predict/" + app
		t.Run(app, func(t *testing.T) {
			for i, req := range ref.Requests {
				code, body, _ := teststack.Do(t, http.MethodPost, url, "T", req)
				if code != http.StatusOK {
					t.Fatalf("request %d %s: %d %s", i, req, code, body)
				}
				compare(t, fmt.Sprintf("request %d %s", i, req), body, ref.Answers[i])
			}
			var wg sync.WaitGroup
			for round := 0; round < 2; round++ {
				for i, req := range ref.Requests {
					wg.Go(func() {
						code, body, _ := teststack.Do(t, http.MethodPost, url, "T", req)
						if code != http.StatusOK {
							t.Errorf("concurrent request %d: %d %s", i, code, body)
							return
						}
						compare(t, fmt.Sprintf("concurrent request %d", i), body, ref.Answers[i])
					})
				}
			}
			wg.Wait()
		})
	}

	// A list of one record answers its dict, as EasyNLP's postprocess does.
	code, body, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/text_classify", "T", []byte(`[`+string(refs["text_classify"].Requests[0])+`]`))
	if code != http.StatusOK {
		t.Fatalf("list of one: %d %s", code, body)
	}
	compare(t, "list of one", body, refs["text_classify"].Answers[0])
	code, body, _ = teststack.Do(t, http.MethodGet, st.URL+"/api/predict/sequence_labeling", "T", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"B-LOC"`) || !strings.Contains(string(body), `"first_sequence"`) {
		t.Errorf("GET: %d %s, want the request keys and the labels", code, body)
	}

	// Bad requests answer 400 saying what to send.
	for _, tc := range []struct{ svc, body, want string }{
		{"text_classify", `{"text": "hi"}`, `send {"first_sequence": "..."}`},
		{"text_classify", `{"first_sequence": 3}`, `"first_sequence" must be a string`},
		{"text_classify", `[]`, "no records"},
		{"text_classify", `{}`, "no records"},
		{"text_classify", `hello`, "JSON object"},
		{"text_classify", `[{"first_sequence": "a"}, {"first_sequence": null}]`, "record 1: no text"},
		{"text_classify", `{"first_sequence": "a", "sequence_length": 129}`, "over the 128 positions"},
		{"text_classify", `{"first_sequence": "a", "sequence_length": "x"}`, "sequence_length must be an integer"},
		{"vectorization_roberta", `{"first_sequence": "a", "sequence_length": 65}`, "over the 64 positions"},
	} {
		code, body, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+tc.svc, "T", []byte(tc.body))
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s, want 400 with %q", tc.svc, tc.body, code, body, tc.want)
		}
	}
}

// TestBatchingByLength sends texts of very different lengths concurrently,
// many times over, to a service with rpc.batching (one worker, so requests
// queue and share runs, padded to the longest of the run) and to one with
// the bucket batcher, and checks each answer equals that request's answer
// alone.
func TestBatchingByLength(t *testing.T) {
	dir, refs := genApps(t)
	mc := func(app string) json.RawMessage { return refs[app].ModelConfig }
	st := teststack.New(t, teststack.Options{},
		fmt.Sprintf(`{"name":"pad","processor":"easynlp","model_path":%q,"token":"T","model_config":%s,
			"metadata":{"instance":1,"cpu":2,"rpc":{"batching":true,"max_batch_size":32,"max_batch_timeout":50,"worker_threads":1}}}`,
			filepath.Join(dir, "text_classify"), mc("text_classify")),
		fmt.Sprintf(`{"name":"bucket","processor":"easynlp","model_path":%q,"token":"T","model_config":%s,
			"metadata":{"instance":1,"cpu":2,"rpc":{"batching":true,"batcher":"bucket","buckets":[8,16,32],"max_batch_size":32,"max_batch_timeout":50}}}`,
			filepath.Join(dir, "text_classify"), mc("text_classify")),
		fmt.Sprintf(`{"name":"vec","processor":"easynlp","model_path":%q,"token":"T","model_config":%s,
			"metadata":{"instance":1,"cpu":2,"rpc":{"batching":true,"max_batch_size":32,"max_batch_timeout":50,"worker_threads":1}}}`,
			filepath.Join(dir, "vectorization_roberta"), mc("vectorization_roberta")))
	for _, svc := range []struct{ name, app string }{{"pad", "text_classify"}, {"bucket", "text_classify"}, {"vec", "vectorization_roberta"}} {
		ref := refs[svc.app]
		var wg sync.WaitGroup
		for round := 0; round < 4; round++ {
			for i, req := range ref.Requests {
				wg.Go(func() {
					code, body, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/"+svc.name, "T", req)
					if code != http.StatusOK {
						t.Errorf("%s request %d: %d %s", svc.name, i, code, body)
						return
					}
					compare(t, fmt.Sprintf("%s request %d", svc.name, i), body, ref.Answers[i])
				})
			}
		}
		wg.Wait()
	}
}

// vectorKeys are EasyNLP's string forms of float vectors.
var vectorKeys = []string{"probabilities", "logits", "emb_output", "pooler_output", "first_token_output", "all_hidden_outputs"}

var uuidRE = regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`)

// compare checks one answer (a dict, or a list of them) against the
// reference.
func compare(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: answer %s: %v", what, got, err)
		return
	}
	json.Unmarshal(want, &w)
	gl, gok := g.([]any)
	wl, wok := w.([]any)
	if gok != wok {
		t.Errorf("%s: answer %s, want %s", what, got, want)
		return
	}
	if !gok {
		gl, wl = []any{g}, []any{w}
	}
	if len(gl) != len(wl) {
		t.Errorf("%s: %d answers, want %d", what, len(gl), len(wl))
		return
	}
	for i := range wl {
		compareRecord(t, fmt.Sprintf("%s [%d]", what, i), gl[i], wl[i])
	}
}

func compareRecord(t *testing.T, what string, got, want any) {
	t.Helper()
	g, ok1 := got.(map[string]any)
	w, ok2 := want.(map[string]any)
	if !ok1 || !ok2 {
		t.Errorf("%s: %v, want %v", what, got, want)
		return
	}
	keys := func(m map[string]any) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}
	if !slices.Equal(keys(g), keys(w)) {
		t.Errorf("%s: keys %v, want %v", what, keys(g), keys(w))
		return
	}
	for k, wv := range w {
		gv := g[k]
		switch {
		case k == "id":
			gb, _ := json.Marshal(gv)
			if wv == nil {
				if !uuidRE.Match(gb) {
					t.Errorf("%s: id %s, want a new uuid", what, gb)
				}
			} else if wb, _ := json.Marshal(wv); string(gb) != string(wb) {
				t.Errorf("%s: id %s, want %s", what, gb, wb)
			}
		case slices.Contains(vectorKeys, k):
			gs, _ := gv.(string)
			ws, _ := wv.(string)
			gf, err1 := parseVector(gs)
			wf, err2 := parseVector(ws)
			if err1 != nil || err2 != nil || len(gf) != len(wf) {
				t.Errorf("%s: %s = %.200q, want %.200q (%v %v)", what, k, gs, ws, err1, err2)
				continue
			}
			if err := tensor.CloseValues(k, gf, wf, tensor.F32Reformulated); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case k == "output":
			gl, _ := gv.([]any)
			wl, _ := wv.([]any)
			if len(gl) != len(wl) {
				t.Errorf("%s: output %v, want %v", what, gv, wv)
				continue
			}
			nums := map[string][2][]float64{}
			for i := range wl {
				ge, _ := gl[i].(map[string]any)
				we, _ := wl[i].(map[string]any)
				if !slices.Equal(keys(ge), keys(we)) {
					t.Errorf("%s: output[%d] %v, want %v", what, i, ge, we)
					continue
				}
				for f, x := range we {
					switch x := x.(type) {
					case float64:
						if f == "start" || f == "end" {
							if ge[f] != x {
								t.Errorf("%s: output[%d].%s = %v, want %v", what, i, f, ge[f], x)
							}
							continue
						}
						gx, _ := ge[f].(float64)
						p := nums[f]
						nums[f] = [2][]float64{append(p[0], gx), append(p[1], x)}
					default:
						if ge[f] != x {
							t.Errorf("%s: output[%d].%s = %v, want %v", what, i, f, ge[f], x)
						}
					}
				}
			}
			for f, p := range nums {
				if err := tensor.CloseValues("output."+f, p[0], p[1], tensor.F32Reformulated); err != nil {
					t.Errorf("%s: %v", what, err)
				}
			}
		default:
			if gv != wv {
				t.Errorf("%s: %s = %v, want %v", what, k, gv, wv)
			}
		}
	}
}

// parseVector reads EasyNLP's "a,b,c" (rows joined by ";").
func parseVector(s string) ([]float32, error) {
	var out []float32
	for _, row := range strings.Split(s, ";") {
		for _, f := range strings.Split(row, ",") {
			v, err := strconv.ParseFloat(f, 32)
			if err != nil {
				return nil, err
			}
			out = append(out, float32(v))
		}
	}
	return out, nil
}

// TestBatchEqualsAlone is the proof that sharing a run changes no answer:
// requests of very different lengths run as one batch padded to the
// longest, and each alone; every output of every record agrees.
func TestBatchEqualsAlone(t *testing.T) {
	dir, refs := genApps(t)
	for _, app := range []string{"text_classify", "text_match", "text_match_two_tower", "sequence_labeling", "vectorization_roberta", "text_classify_roberta"} {
		var bodies [][]byte
		for _, r := range refs[app].Requests {
			bodies = append(bodies, r)
		}
		shared, alone, err := easynlp.BatchedEqualsAlone(filepath.Join(dir, app), refs[app].ModelConfig, bodies)
		if err != nil {
			t.Errorf("%s: %v", app, err)
			continue
		}
		if slices.Min(alone) == shared {
			t.Errorf("%s: every request ran at the shared length %d: the test shows nothing", app, shared)
		}
		t.Logf("%s: %d requests of %v positions alone, %d together", app, len(alone), alone, shared)
	}
}

// TestGPU loads the vectorization app with metadata.gpu 1: on a host
// without CUDA the deploy fails saying so (no CPU fallback); on a GPU host
// the answer equals the CPU's within tensor.GPU.
func TestGPU(t *testing.T) {
	dir, refs := genApps(t)
	app := "vectorization_roberta"
	body := []byte(`{"first_sequence": "Café déjà vu 我爱北京", "id": 1}`)
	cpu, err := easynlp.Answer(filepath.Join(dir, app), refs[app].ModelConfig, 0, body)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := easynlp.Answer(filepath.Join(dir, app), refs[app].ModelConfig, 1, body)
	if err != nil {
		if !strings.Contains(err.Error(), "CUDA") {
			t.Fatalf("a GPU deploy on a host without CUDA failed without naming CUDA: %v", err)
		}
		t.Logf("no CUDA here, and the deploy says so: %v", err)
		return
	}
	var g, c map[string]any
	json.Unmarshal(gpu, &g)
	json.Unmarshal(cpu, &c)
	for _, k := range []string{"pooler_output", "first_token_output", "all_hidden_outputs"} {
		gv, _ := parseVector(g[k].(string))
		cv, _ := parseVector(c[k].(string))
		if err := tensor.CloseValues(k, gv, cv, tensor.GPU); err != nil {
			t.Error(err)
		}
	}
}
