package pmml_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors"
	pmmlproc "github.com/eas-server/eas-server/processors/pmml"
)

// serve runs the real router, with /metrics, over a real manager with the
// services.
func serve(t *testing.T, services ...string) string {
	t.Helper()
	return teststack.Start(t, services...).URL
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	code, b, _ := teststack.Do(t, "POST", url, "T", []byte(body))
	return code, string(b)
}

const lrService = `{"name":"lr","processor":"pmml","model_path":"../../engines/pmml/testdata/lr.pmml","token":"T","metadata":{"instance":1}}`

// lrCases reads the hand-computed expectations of the logistic regression.
func lrCases(t *testing.T) (records []map[string]any, p1 []float64) {
	t.Helper()
	f, err := os.Open("../../engines/pmml/testdata/lr_expected.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head := rows[0]
	for _, row := range rows[1:] {
		rec := map[string]any{}
		for i, name := range head {
			if name == "p_0" || name == "p_1" || row[i] == "" {
				continue
			}
			if n, err := strconv.ParseFloat(row[i], 64); err == nil {
				rec[name] = n
			} else {
				rec[name] = row[i]
			}
		}
		want, _ := strconv.ParseFloat(row[len(row)-1], 64)
		records = append(records, rec)
		p1 = append(p1, want)
	}
	return records, p1
}

func TestLogisticRegressionThroughHTTP(t *testing.T) {
	url := serve(t, lrService) + "/api/predict/lr"
	records, want := lrCases(t)
	body, _ := json.Marshal(records)
	code, out := post(t, url, string(body))
	if code != 200 {
		t.Fatalf("POST: %d %s", code, out)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results for %d records", len(got), len(want))
	}
	for i, g := range got {
		p1, _ := g["p_1"].(float64)
		if math.Abs(p1-want[i]) > 1e-9*math.Max(1, math.Abs(want[i])) {
			t.Errorf("record %d: p_1 = %v, want %v (%v)", i, g["p_1"], want[i], g)
		}
	}

	// One object (not an array) is one record; numeric strings are numbers.
	one := map[string]any{}
	for k, v := range records[0] {
		if f, ok := v.(float64); ok {
			one[k] = strconv.FormatFloat(f, 'g', -1, 64)
		} else {
			one[k] = v
		}
	}
	b, _ := json.Marshal(one)
	code, out = post(t, url, string(b))
	if code != 200 || !strings.Contains(out, fmt.Sprint(want[0])[:8]) {
		t.Fatalf("single object with numeric strings: %d %s, want p_1 %v", code, out, want[0])
	}
}

func TestBadRecords(t *testing.T) {
	base := serve(t, lrService,
		`{"name":"lr_entries","processor":"pmml","model_path":"../../engines/pmml/testdata/lr.pmml","token":"T",
		  "model_config":{"on_bad_record":"error_entry"},"metadata":{"instance":1}}`)
	for _, body := range []string{``, `nonsense`, `[1,2]`, `[{"age":"old"}]`, `{"age":[1]}`, `[{"age":1}`} {
		code, out := post(t, base+"/api/predict/lr", body)
		if code != 400 || out == "" {
			t.Errorf("body %q: %d %q, want 400 with a message", body, code, out)
		}
	}
	code, out := post(t, base+"/api/predict/lr", `[{"age":"old"}]`)
	if !strings.Contains(out, `record 0, field "age"`) {
		t.Errorf("bad value message %q does not name the record and field (%d)", out, code)
	}
	code, out = post(t, base+"/api/predict/lr_entries", `[{"age":"old"},{"age":50,"sex":1}]`)
	var got []map[string]any
	if code != 200 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 2 || got[0]["error"] == nil || got[1]["p_1"] == nil {
		t.Fatalf("error_entry mode: %d %s, want an error entry then a score", code, out)
	}
}

func TestMetadata(t *testing.T) {
	url := serve(t, lrService) + "/api/predict/lr"
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "T")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Inputs  []struct{ Name, Datatype string }
		Outputs []struct{ Name string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	names := fmt.Sprint(md.Outputs)
	if len(md.Inputs) == 0 || !strings.Contains(names, "p_0") || !strings.Contains(names, "p_1") {
		t.Fatalf("metadata = %+v", md)
	}
}

// TestBatchedEqualsUnbatched sends concurrent requests to a batching
// service and checks each answer equals the one-at-a-time answer.
func TestBatchedEqualsUnbatched(t *testing.T) {
	base := serve(t, lrService,
		`{"name":"lr_b","processor":"pmml","model_path":"../../engines/pmml/testdata/lr.pmml","token":"T",
		  "metadata":{"instance":1,"rpc":{"batching":true,"worker_threads":1,"max_batch_size":32,"max_queue_size":10000}}}`)
	records, _ := lrCases(t)
	single := make([]string, len(records))
	for i, r := range records {
		b, _ := json.Marshal([]any{r})
		_, single[i] = post(t, base+"/api/predict/lr", string(b))
	}
	var wg sync.WaitGroup
	for round := range 20 {
		for i, r := range records {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := json.Marshal([]any{r})
				code, out := post(t, base+"/api/predict/lr_b", string(b))
				if code != 200 || out != single[i] {
					t.Errorf("round %d record %d batched: %d %s, want %s", round, i, code, out, single[i])
				}
			}()
		}
	}
	wg.Wait()
}

// TestConfigure checks model_config and model_path without any I/O: the
// model source is never read (it need not exist), and a bad config names
// what pmml accepts.
func TestConfigure(t *testing.T) {
	for _, c := range []struct{ source, config, err string }{
		{"oss://bucket/models/lr.pmml", `{"on_bad_record":"error_entry","missing_value_defaults":false}`, ""},
		{"oss://bucket/models/", ``, ""},
		{"m.pmml", `null`, ""},
		{"m.pmml", `{"on_bad_record":"skip"}`, `model_config.on_bad_record: must be "fail" or "error_entry", got "skip"`},
		{"m.pmml", `{"on_bad_records":"fail"}`, `model_config: json: unknown field "on_bad_records"; pmml accepts {"missing_value_defaults": true|false, "on_bad_record": "fail"|"error_entry", "unknown_fields": "ignore"|"warn"|"reject"}`},
		{"m.pmml", `{"unknown_fields":"strict"}`, `model_config.unknown_fields: must be "ignore", "warn" or "reject", got "strict"`},
		{"m.pmml", `{"missing_value_defaults":"yes"}`, "cannot unmarshal"},
		{"", ``, "model_path: the pmml processor needs a model"},
	} {
		err := (&pmmlproc.Processor{}).Configure(processors.Spec{Code: "pmml", ModelSource: c.source, ModelConfig: []byte(c.config)})
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q %s: %v, want %q", c.source, c.config, err, c.err)
		}
	}
}

// TestLoadFindsTheModelFile loads a model_path directory (the fetched
// copy) and checks the PMML file in it is found.
func TestLoadFindsTheModelFile(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../engines/pmml/testdata/lr.pmml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/lr.pmml", b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := &pmmlproc.Processor{}
	if err := p.Configure(processors.Spec{Code: "pmml", ModelSource: "oss://bucket/lr/"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Load(t.Context(), processors.Files{ModelPath: dir}); err != nil {
		t.Fatal(err)
	}
	if md := p.Metadata(); md.Extra["model_file"] != "lr.pmml" {
		t.Fatalf("metadata %+v", md)
	}
	if err := (&pmmlproc.Processor{}).Load(t.Context(), processors.Files{ModelPath: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no PMML file") {
		t.Fatalf("empty model_path: %v", err)
	}
}
