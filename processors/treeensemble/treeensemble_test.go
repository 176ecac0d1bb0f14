package treeensemble_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/treeensemble"
)

const xgbDir = "../../engines/trees/testdata/xgboost"

// serve runs the real router over a real manager with the services.
func serve(t *testing.T, services ...string) string {
	t.Helper()
	return teststack.Start(t, services...).URL
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	code, b, _ := teststack.Do(t, method, url, "T", []byte(body))
	return code, string(b)
}

func service_(name, code, path, config string) string {
	if config == "" {
		config = "{}"
	}
	return fmt.Sprintf(`{"name":%q,"processor":%q,"model_path":%q,"token":"T","model_config":%s,"metadata":{"instance":1}}`,
		name, code, path, config)
}

// expected is scripts/gen-tree-models.py's <case>.expected.json.
type expected struct {
	Rows         [][]*float64 `json:"rows"`
	MarginWidth  int          `json:"margin_width"`
	PredictWidth int          `json:"predict_width"`
	Margin       []float64    `json:"margin"`
	Predict      []float64    `json:"predict"`
	Formats      []string     `json:"formats"`
}

func readExpected(t *testing.T, name string) *expected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(xgbDir, name+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// features asks the service for its feature names (GET metadata).
func features(t *testing.T, url string) []string {
	t.Helper()
	code, body := call(t, "GET", url, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	var md struct {
		Extra struct {
			Features []string `json:"features"`
		} `json:"extra"`
	}
	if err := json.Unmarshal([]byte(body), &md); err != nil {
		t.Fatal(err)
	}
	return md.Extra.Features
}

// records renders rows as EAS JSON records; a missing value is left out
// or sent as null, alternately.
func records(rows [][]*float64, names []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		first := true
		for j, v := range r {
			if v == nil && (i+j)%2 == 0 {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			fmt.Fprintf(&b, "%q:", names[j])
			if v == nil {
				b.WriteString("null")
			} else {
				b.WriteString(strconv.FormatFloat(*v, 'g', -1, 64))
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

// answer is one record of the PS-shaped response.
type answer struct {
	Label   json.Number          `json:"label"`
	Score   json.Number          `json:"score"`
	Details []map[string]float64 `json:"details"`
	Margin  json.RawMessage      `json:"margin"`
}

// same32 reports whether a number read from the JSON answer is want's
// float32: the server prints float32 results in their shortest form.
func same32(got float64, want float64) bool {
	return float32(got) == float32(want)
}

// TestXGBoostThroughHTTP deploys every generated XGBoost case, in every
// format it was saved in, under parameter_server (and xgboost), and
// checks the answers are XGBoost's own numbers bit for bit.
func TestXGBoostThroughHTTP(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(xgbDir, "*.expected.json"))
	if len(files) == 0 {
		t.Fatal("no generated cases; run /usr/bin/python3 scripts/gen-tree-models.py")
	}
	type svc struct{ name, caseName, format string }
	var specs []string
	var svcs []svc
	for _, f := range files {
		c := strings.TrimSuffix(filepath.Base(f), ".expected.json")
		for _, format := range readExpected(t, c).Formats {
			name := c + "_" + format
			code := "parameter_server"
			if format == "ubj" {
				code = "xgboost"
			}
			path := filepath.Join(xgbDir, c+"."+format)
			specs = append(specs, service_(name, code, path, ""), service_(name+"_margin", code, path, `{"output":"margin"}`))
			svcs = append(svcs, svc{name, c, format})
		}
	}
	base := serve(t, specs...)
	for _, s := range svcs {
		t.Run(s.name, func(t *testing.T) {
			exp := readExpected(t, s.caseName)
			url := base + "/api/predict/" + s.name
			body := records(exp.Rows, features(t, url))

			code, out := call(t, "POST", url+"_margin", body)
			if code != 200 {
				t.Fatalf("margin: %d %s", code, out)
			}
			var ms []answer
			if err := json.Unmarshal([]byte(out), &ms); err != nil || len(ms) != len(exp.Rows) {
				t.Fatalf("margin answer %s: %v", out, err)
			}
			for i, a := range ms {
				var got []float64
				if exp.MarginWidth == 1 {
					var v float64
					json.Unmarshal(a.Margin, &v)
					got = []float64{v}
				} else {
					json.Unmarshal(a.Margin, &got)
				}
				for k := range exp.MarginWidth {
					if k >= len(got) || !same32(got[k], exp.Margin[i*exp.MarginWidth+k]) {
						t.Fatalf("record %d margin %s, xgboost %v", i, a.Margin, exp.Margin[i*exp.MarginWidth:(i+1)*exp.MarginWidth])
					}
				}
			}

			code, out = call(t, "POST", url, body)
			if code != 200 {
				t.Fatalf("predict: %d %s", code, out)
			}
			var as []answer
			if err := json.Unmarshal([]byte(out), &as); err != nil || len(as) != len(exp.Rows) {
				t.Fatalf("answer %s: %v", out, err)
			}
			for i, a := range as {
				score, _ := a.Score.Float64()
				label, _ := a.Label.Float64()
				switch {
				case exp.PredictWidth > 1: // multi:softprob
					best := 0
					for k := range exp.PredictWidth {
						want := exp.Predict[i*exp.PredictWidth+k]
						if got := a.Details[k][strconv.Itoa(k)]; !same32(got, want) {
							t.Fatalf("record %d class %d: %v, xgboost %v", i, k, got, want)
						}
						if want > exp.Predict[i*exp.PredictWidth+best] {
							best = k
						}
					}
					if int(label) != best || !same32(score, exp.Predict[i*exp.PredictWidth+best]) {
						t.Fatalf("record %d: label %v score %v, want %d %v", i, label, score, best, exp.Predict[i*exp.PredictWidth+best])
					}
				case exp.MarginWidth > 1: // multi:softmax predicts the class
					if label != exp.Predict[i] {
						t.Fatalf("record %d: label %v, xgboost %v", i, label, exp.Predict[i])
					}
				case len(a.Details) == 2: // binary probabilities
					p := exp.Predict[i]
					if got := a.Details[1]["1"]; !same32(got, p) {
						t.Fatalf("record %d: p(1) %v, xgboost %v", i, got, p)
					}
					if want := float64(1 - float32(p)); !same32(a.Details[0]["0"], want) {
						t.Fatalf("record %d: p(0) %v, want %v", i, a.Details[0]["0"], want)
					}
					if (label == 1) != (p > 0.5) {
						t.Fatalf("record %d: label %v for p %v", i, label, p)
					}
				default:
					if !same32(score, exp.Predict[i]) {
						t.Fatalf("record %d: score %v, xgboost %v (%s)", i, score, exp.Predict[i], out)
					}
				}
			}
		})
	}
	_ = math.NaN
}
