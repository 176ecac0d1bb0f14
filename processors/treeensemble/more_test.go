package treeensemble_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
)

// TestLightGBMThroughHTTP serves a shared LightGBM multiclass model and
// checks the PS answer against LightGBM's probabilities (1e-9 relative).
func TestLightGBMThroughHTTP(t *testing.T) {
	model := require.ConformanceDir(t, "lightgbm/lgmulticlass.model")
	lgbDir := filepath.Dir(model)
	base := serve(t, service_("lgb", "parameter_sever", model, ""))
	url := base + "/api/predict/lgb"
	names := features(t, url)
	in, _ := os.ReadFile(filepath.Join(lgbDir, "multiclass_test.tsv"))
	want, _ := os.ReadFile(filepath.Join(lgbDir, "lgmulticlass_true_predictions.txt"))
	inLines := strings.Split(strings.TrimSpace(string(in)), "\n")[:50]
	wantLines := strings.Split(strings.TrimSpace(string(want)), "\n")
	// The dense form, columns in reverse order to check they are mapped.
	cols := make([]string, len(names))
	for j := range names {
		cols[j] = strconv.Quote(names[len(names)-1-j])
	}
	var rows []string
	for _, l := range inLines {
		f := strings.Fields(l)[1:]
		for a, b := 0, len(f)-1; a < b; a, b = a+1, b-1 {
			f[a], f[b] = f[b], f[a]
		}
		rows = append(rows, "["+strings.Join(f, ",")+"]")
	}
	body := `{"columns":[` + strings.Join(cols, ",") + `],"data":[` + strings.Join(rows, ",") + `]}`
	code, out := call(t, "POST", url, body)
	if code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	var as []answer
	if err := json.Unmarshal([]byte(out), &as); err != nil || len(as) != len(inLines) {
		t.Fatalf("answer %.300s: %v", out, err)
	}
	for i, a := range as {
		for k, s := range strings.Fields(wantLines[i]) {
			w, _ := strconv.ParseFloat(s, 64)
			got := a.Details[k][strconv.Itoa(k)]
			if math.Abs(got-w) > 1e-9*math.Abs(w) {
				t.Fatalf("record %d class %d: %v, lightgbm %v", i, k, got, w)
			}
		}
	}
}

// TestKServeV2 scores an FP32 tensor through /v2/models/<name>/infer.
func TestKServeV2(t *testing.T) {
	exp := readExpected(t, "binary")
	base := serve(t, service_("kbin", "parameter_server", filepath.Join(xgbDir, "binary.json"), ""))
	var data []string
	for _, r := range exp.Rows {
		for _, v := range r {
			data = append(data, strconv.FormatFloat(*v, 'g', -1, 32))
		}
	}
	body := fmt.Sprintf(`{"inputs":[{"name":"input","shape":[%d,%d],"datatype":"FP32","data":[%s]}]}`,
		len(exp.Rows), len(exp.Rows[0]), strings.Join(data, ","))
	code, out := call(t, "POST", base+"/v2/models/kbin/infer", body)
	if code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	var resp struct {
		Outputs []struct {
			Name     string    `json:"name"`
			Datatype string    `json:"datatype"`
			Shape    []int     `json:"shape"`
			Data     []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Outputs) != 1 {
		t.Fatalf("%s: %v", out, err)
	}
	o := resp.Outputs[0]
	if o.Name != "scores" || o.Datatype != "FP32" || len(o.Data) != len(exp.Predict) {
		t.Fatalf("output %+v", o)
	}
	for i, w := range exp.Predict {
		if !same32(o.Data[i], w) {
			t.Fatalf("record %d: %v, xgboost %v", i, o.Data[i], w)
		}
	}
	code, out = call(t, "GET", base+"/v2/models/kbin", "")
	if code != 200 || !strings.Contains(out, `"platform":"xgboost"`) || !strings.Contains(out, `"shape":[-1,30]`) {
		t.Fatalf("model metadata: %d %s", code, out)
	}
	code, out = call(t, "POST", base+"/v2/models/kbin/infer", `{"inputs":[{"name":"input","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}`)
	if code != 400 || !strings.Contains(out, `shape [1,3], the model takes [-1, 30]`) {
		t.Fatalf("wrong width: %d %s", code, out)
	}
}

// TestBadRequests checks each malformed body answers 400 with a message
// that names the problem.
func TestBadRequests(t *testing.T) {
	base := serve(t, service_("bad", "xgboost", filepath.Join(xgbDir, "multiclass.json"), ""))
	url := base + "/api/predict/bad"
	for _, c := range []struct{ body, want string }{
		{``, "empty body"},
		{`nope`, "expected a JSON array"},
		{`[{"sepal_length": "abc"}]`, `"abc" is not a number`},
		{`[{"sepal_length": [1]}]`, "objects and arrays are not feature values"},
		{`[{"sepal_length": 1}`, "expected ',' or ']'"},
		{`[1]`, "record 0: expected a JSON object"},
		{`{"columns":["sepal_length"],"data":[[1,2]]}`, "more than 1 values"},
		{`{"data":[[1,2]]}`, "row 0 has 2 values, want 4"},
		{`[{"sepal_length": 1}] x`, "the end of the body"},
	} {
		code, out := call(t, "POST", url, c.body)
		if code != 400 || !strings.Contains(out, c.want) {
			t.Errorf("%q: %d %s; want 400 with %q", c.body, code, out, c.want)
		}
	}
	// A record with unknown keys only, and an empty array, are fine.
	if code, out := call(t, "POST", url, `[{"other": 1}]`); code != 200 || !strings.HasPrefix(out, `[{"label":`) {
		t.Errorf("unknown keys: %d %s", code, out)
	}
	if code, out := call(t, "POST", url, `[]`); code != 200 || out != "[]" {
		t.Errorf("empty: %d %s", code, out)
	}
}

// TestBatchedEqualsUnbatched sends concurrent requests to a batching
// service and checks each answer equals the one-at-a-time answer.
func TestBatchedEqualsUnbatched(t *testing.T) {
	path := filepath.Join(xgbDir, "multiclass.ubj")
	base := serve(t, service_("one", "parameter_server", path, ""),
		fmt.Sprintf(`{"name":"many","processor":"parameter_server","model_path":%q,"token":"T",
		  "metadata":{"instance":1,"rpc":{"batching":true,"worker_threads":1,"max_batch_size":16,"max_queue_size":256}}}`, path))
	exp := readExpected(t, "multiclass")
	names := features(t, base+"/api/predict/one")
	single := make([]string, len(exp.Rows))
	for i, r := range exp.Rows {
		_, single[i] = call(t, "POST", base+"/api/predict/one", records([][]*float64{r}, names))
	}
	for round := range 10 {
		var wg sync.WaitGroup
		for i, r := range exp.Rows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, out := call(t, "POST", base+"/api/predict/many", records([][]*float64{r}, names))
				if code != 200 || out != single[i] {
					t.Errorf("round %d record %d batched: %d %s, want %s", round, i, code, out, single[i])
				}
			}()
		}
		wg.Wait()
	}
}

// TestConfig checks model_config: class names, feature names, and errors.
func TestConfig(t *testing.T) {
	path := filepath.Join(xgbDir, "multiclass_softmax.json")
	base := serve(t, service_("named", "parameter_server", path,
		`{"classes":["setosa","versicolor","virginica"],"features":["a","b","c","d"]}`))
	code, out := call(t, "POST", base+"/api/predict/named", `{"a":5.1,"b":3.5,"c":1.4,"d":0.2}`)
	if code != 200 || !strings.HasPrefix(out, `[{"label":"setosa","score":`) || !strings.Contains(out, `{"virginica":`) {
		t.Fatalf("%d %s", code, out)
	}
}

// TestMissingValue checks model_config "missing": a sentinel value scores
// as a missing one, both in records and in KServe tensors.
func TestMissingValue(t *testing.T) {
	path := filepath.Join(xgbDir, "missing.json")
	base := serve(t, service_("plain", "xgboost", path, `{"output":"margin"}`),
		service_("sentinel", "xgboost", path, `{"output":"margin","missing":-999}`))
	exp := readExpected(t, "missing")
	names := features(t, base+"/api/predict/plain")
	var withNull, withSentinel []string
	for _, r := range exp.Rows {
		var a, b []string
		for j, v := range r {
			s := "null"
			if v != nil {
				s = strconv.FormatFloat(*v, 'g', -1, 64)
			}
			a = append(a, fmt.Sprintf("%q:%s", names[j], s))
			if v == nil {
				s = "-999"
			}
			b = append(b, fmt.Sprintf("%q:%s", names[j], s))
		}
		withNull = append(withNull, "{"+strings.Join(a, ",")+"}")
		withSentinel = append(withSentinel, "{"+strings.Join(b, ",")+"}")
	}
	_, want := call(t, "POST", base+"/api/predict/plain", "["+strings.Join(withNull, ",")+"]")
	code, got := call(t, "POST", base+"/api/predict/sentinel", "["+strings.Join(withSentinel, ",")+"]")
	if code != 200 || got != want {
		t.Fatalf("with -999 as missing: %d %s\nwith null: %s", code, got, want)
	}
	_, differs := call(t, "POST", base+"/api/predict/plain", "["+strings.Join(withSentinel, ",")+"]")
	if differs == want {
		t.Fatal("-999 scored like a missing value without model_config.missing; the test cannot tell them apart")
	}
}
