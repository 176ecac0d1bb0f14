package treeensemble_test

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/answers.golden from the server's answers")

// TestAnswersGolden pins the exact response bodies (shape, key order, number
// formatting) of each kind of model and output; -update rewrites them.
func TestAnswersGolden(t *testing.T) {
	cases := []struct {
		name, model, config, body string
	}{
		{"binary", "binary.json", "", `[{"mean_radius": 12, "worst_radius": 13, "worst_concave_points": 0.05}]`},
		{"binary_classes", "binary.ubj", `{"classes":["malignant","benign"],"features":` + featureList(30) + `}`, `{"c20": 25.38, "c27": 0.2654}`},
		{"binary_margin", "binary.bin", `{"output":"margin"}`, `[{"mean_radius": 12}]`},
		{"multiclass", "multiclass.json", "", `[{"sepal_length":5.1,"sepal_width":3.5,"petal_length":1.4,"petal_width":0.2},{"petal_length":5.0,"petal_width":1.9}]`},
		{"multiclass_margin", "multiclass.json", `{"output":"margin"}`, `{"columns":["petal_length","petal_width"],"data":[[5.0,1.9],[null,0.1]]}`},
		{"regression", "regression.json", "", `[{"f2": 0.05, "f8": -0.02}, {}]`},
		{"poisson", "poisson.ubj", "", `[{"f2": 0.05}]`},
		{"logitraw", "logitraw.json", "", `[{"f20": 25}]`},
		{"rank", "rank.json", "", `[{"f20": 25}]`},
	}
	var specs []string
	for _, c := range cases {
		specs = append(specs, service_(c.name, "parameter_server", filepath.Join(xgbDir, c.model), c.config))
	}
	base := serve(t, specs...)
	var got strings.Builder
	for _, c := range cases {
		code, out := call(t, "POST", base+"/api/predict/"+c.name, c.body)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.name, code, out)
		}
		got.WriteString(c.name + "\t" + out + "\n")
	}
	const golden = "testdata/answers.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v; run go test -run TestAnswersGolden -update", err)
	}
	if got.String() != string(want) {
		t.Errorf("answers differ from %s (go test -run TestAnswersGolden -update rewrites it):\n got:\n%s\nwant:\n%s", golden, got.String(), want)
	}
}

// featureList is ["c0", "c1", ...] as JSON.
func featureList(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = `"c` + strconv.Itoa(i) + `"`
	}
	return "[" + strings.Join(names, ",") + "]"
}
