package treeensemble

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

var (
	testNames = []string{"a", "b", "c\"q"}
	testIndex = map[string]int{"a": 0, "b": 1, "c\"q": 2}
)

func TestDecodeRecords(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name, body string
		want       []float64
		err        string
	}{
		{"array", `[{"a":1,"b":2,"c\"q":3},{"b":-4.5e1}]`, []float64{1, 2, 3, nan, -45, nan}, ""},
		{"key order changes", `[{"a":1,"zz":0,"b":2},{"b":3,"a":4,"zz":0},{"zz":1,"a":5,"b":6}]`, []float64{1, 2, nan, 4, 3, nan, 5, 6, nan}, ""},
		{"one object", ` {"a": "7", "b": null, "zz": {"ignored": false}} `, nil, "objects and arrays"},
		{"one object ok", ` {"a": "7", "b": null, "zz": 1} `, []float64{7, nan, nan}, ""},
		{"bools and empty string", `[{"a":true,"b":false,"c\"q":""}]`, []float64{1, 0, nan}, ""},
		{"escaped key", `[{"c\u0022q":5, "\u0061":6}]`, []float64{6, nan, 5}, ""},
		{"dense", `{"columns":["b","x","a"],"data":[[1,2,3],[null,5,"6"]]}`, []float64{3, 1, nan, 6, nan, nan}, ""},
		{"dense model order", `{"data":[[1,2,3]]}`, []float64{1, 2, 3}, ""},
		{"dense empty", `{"columns":["a"],"data":[]}`, []float64{}, ""},
		{"empty array", `[]`, []float64{}, ""},
		{"bad number", `[{"a":1e}]`, nil, `bad number "1e"`},
		{"text", `[{"a":"x"}]`, nil, `"x" is not a number`},
		{"trailing", `[{"a":1}],`, nil, "the end of the body"},
		{"unterminated", `[{"a":1`, nil, "expected ',' or '}'"},
		{"not records", `[[1,2,3]]`, nil, "record 0: expected a JSON object"},
		{"columns after data", `{"data":[[1,2,3]],"columns":["a"]}`, nil, "before"},
		{"short row", `{"data":[[1,2]]}`, nil, "row 0 has 2 values, want 3"},
		{"control char", "[{\"a\x01\":1}]", nil, "control character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows, n, err := decodeRecords([]byte(c.body), testNames, testIndex)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n*3 != len(rows) || len(rows) != len(c.want) {
				t.Fatalf("rows %v (n=%d), want %v", rows, n, c.want)
			}
			for i := range rows {
				if rows[i] != c.want[i] && !(math.IsNaN(rows[i]) && math.IsNaN(c.want[i])) {
					t.Fatalf("rows %v, want %v", rows, c.want)
				}
			}
		})
	}
}

func FuzzDecodeRecords(f *testing.F) {
	for _, s := range []string{`[{"a":1,"b":2}]`, `{"columns":["a","c\"q"],"data":[[1,null]]}`, `{"a":"1"}`, `[{"\u00e9":1e5}]`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rows, n, err := decodeRecords(body, testNames, testIndex)
		if err != nil {
			return
		}
		if len(rows) != 3*n {
			t.Fatalf("%d values for %d records", len(rows), n)
		}
		// Where encoding/json reads the body as records too, the values
		// must be the same.
		want, ok := referenceRecords(body)
		if !ok {
			return
		}
		if len(want) != len(rows) {
			t.Fatalf("%d values, encoding/json reads %d", len(rows), len(want))
		}
		for i := range want {
			if rows[i] != want[i] && !(math.IsNaN(rows[i]) && math.IsNaN(want[i])) {
				t.Fatalf("value %d = %v, encoding/json reads %v", i, rows[i], want[i])
			}
		}
	})
}

// referenceRecords decodes EAS records with encoding/json; ok is false for
// anything but an array of flat record objects (or one) that it accepts.
func referenceRecords(body []byte) ([]float64, bool) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, false
	}
	var recs []any
	switch x := v.(type) {
	case []any:
		recs = x
	case map[string]any:
		if _, dense := x["data"]; dense {
			return nil, false
		}
		if _, dense := x["columns"]; dense {
			return nil, false
		}
		recs = []any{x}
	default:
		return nil, false
	}
	var out []float64
	for _, r := range recs {
		obj, ok := r.(map[string]any)
		if !ok {
			return nil, false
		}
		for _, name := range testNames {
			f := math.NaN()
			switch val := obj[name].(type) {
			case nil:
			case float64:
				f = val
			case bool:
				f = 0
				if val {
					f = 1
				}
			case string:
				if val != "" {
					var err error
					if f, err = strconv.ParseFloat(val, 64); err != nil {
						return nil, false
					}
				}
			default:
				return nil, false
			}
			out = append(out, f)
		}
		for _, val := range obj {
			switch val.(type) {
			case map[string]any, []any:
				return nil, false
			}
		}
	}
	return out, true
}

func TestConfigure(t *testing.T) {
	for _, c := range []struct{ config, err string }{
		{`{"output":"margin"}`, ""},
		{`{"output":"prediction","features":["a","b"],"classes":["x","y"],"missing":-999}`, ""},
		{`null`, ""},
		{``, ""},
		{`{"output":"probability"}`, `model_config.output: must be "prediction" or "margin", got "probability"`},
		{`{"outputs":"margin"}`, `model_config: json: unknown field "outputs"; xgboost accepts {"output": "prediction"|"margin", "features": [names...], "classes": [names...], "missing": number, "unknown_fields": "ignore"|"warn"|"reject"}`},
		{`{"unknown_fields":"strict"}`, `model_config.unknown_fields: must be "ignore", "warn" or "reject", got "strict"`},
		{`{"missing":"NaN"}`, "cannot unmarshal"},
		{`{"output":"margin"} {}`, "trailing data"},
		{`{"features":["a","b","a"]}`, `model_config.features: "a" appears twice`},
	} {
		p := &Processor{}
		// The source is never read: Configure runs before the download.
		err := p.Configure(processors.Spec{Code: "xgboost", ModelSource: "oss://bucket/m.json", ModelConfig: []byte(c.config)})
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.config, err, c.err)
		}
	}
	if err := (&Processor{}).Configure(processors.Spec{Code: "xgboost"}); err == nil || !strings.Contains(err.Error(), "model_path: the xgboost processor needs a model") {
		t.Errorf("no model_path: %v", err)
	}
	// model_config written as a JSON string in service.json reaches
	// Configure as the object it holds.
	spec, err := servicejson.Parse([]byte(`{"name":"s","processor":"xgboost","model_path":"m.json","model_config":"{\"output\":\"margin\"}","metadata":{"instance":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	ps, _, err := service.ProcessorSpec(spec, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Processor{}
	if err := p.Configure(ps); err != nil || !p.margin {
		t.Errorf("string model_config: %v, margin %v", err, p.margin)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := "../../engines/trees/testdata/xgboost"
	for _, c := range []struct{ path, entry, config, err string }{
		{dir, "", "", "model files in"},
		{dir, "nope.json", "", `model_entry: "nope.json" not found`},
		{dir + "/binary.json", "", `{"features":["a"]}`, "model_config.features: 1 names, but the model has 30 features"},
		{dir + "/regression.json", "", `{"classes":["x","y"]}`, "not a classifier"},
		{dir + "/multiclass.json", "", `{"classes":["x","y"]}`, "2 names, but the model has 3 classes"},
		{dir + "/binary.expected.json", "", "", "xgboost json"},
		{"", "", "", "model_path: the xgboost processor needs a model"},
	} {
		p := &Processor{}
		if err := p.Configure(processors.Spec{Code: "xgboost", ModelSource: "oss://bucket/models/", ModelEntry: c.entry, ModelConfig: []byte(c.config)}); err != nil {
			t.Fatal(err)
		}
		err := p.Load(t.Context(), processors.Files{ModelPath: c.path})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s %s %s: %v, want %q", c.path, c.entry, c.config, err, c.err)
		}
	}
}

// TestRecordLimit checks a body of many empty records is refused before it
// asks for gigabytes: the limit is on values, not bytes of body.
func TestRecordLimit(t *testing.T) {
	names := make([]string, 4096)
	index := map[string]int{}
	for i := range names {
		names[i] = "f" + strconv.Itoa(i)
		index[names[i]] = i
	}
	body := "[" + strings.Repeat("{},", recordLimit(len(names))) + "{}]"
	_, _, err := decodeRecords([]byte(body), names, index)
	if err == nil || !strings.Contains(err.Error(), "more than 8192 records of 4096 features in one request; split it") {
		t.Fatalf("error %v", err)
	}
}
