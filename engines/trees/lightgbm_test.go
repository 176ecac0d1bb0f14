package trees

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
)

// lgbDir is the shared folder of LightGBM-written models with LightGBM's
// own predictions (see its SOURCE.md); tests skip without it, or fail
// under EAS_REQUIRE_CONFORMANCE=1.
func lgbDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(require.ConformanceDir(t, "lightgbm/SOURCE.md"))
}

// readTable reads whitespace-separated numbers, one row per line; skip
// drops leading columns (a label).
func readTable(t testing.TB, path string, skip int) [][]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]float64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		row := make([]float64, 0, len(fields))
		for _, s := range fields[skip:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	return rows
}

// readLibSVM reads "label idx:value ..." rows of nf features (NaN = absent).
func readLibSVM(t testing.TB, path string, nf int) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		row := make([]float64, nf)
		for j := range row {
			row[j] = math.NaN()
		}
		for _, kv := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(kv, ":")
			j, _ := strconv.Atoi(k)
			row[j], _ = strconv.ParseFloat(v, 64)
		}
		rows = append(rows, row)
	}
	return rows
}

func flatten(rows [][]float64) []float64 {
	var out []float64
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func closeRel(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Abs(want)+1e-15
}

// TestLightGBMConformance scores every model of the shared folder and
// compares with LightGBM's own predictions within 1e-9 relative.
func TestLightGBMConformance(t *testing.T) {
	dir := lgbDir(t)
	cases := []struct {
		model, input, want string
		skip               int  // leading label columns of input
		libsvm             bool // input is libsvm
		margin             bool // want holds raw scores
		sigmoid            bool // want is sigmoid(margin) (a dump without its objective)
	}{
		{model: "lgmulticlass.model", input: "multiclass_test.tsv", want: "lgmulticlass_true_predictions.txt", skip: 1},
		{model: "lgmulticlass.model", input: "multiclass_test.tsv", want: "lgmulticlass_true_raw_predictions.txt", skip: 1, margin: true},
		// The rf file holds the averaged raw scores (each ~0.88 or ~0.12:
		// the leaves), not their sigmoid.
		{model: "lg_rf_iris.model", input: "iris_test.libsvm", want: "lg_rf_iris_true_predictions.txt", libsvm: true, margin: true},
		{model: "lg_kddcup99.model", input: "kddcup99_test.tsv", want: "lg_kddcup99_true_predictions.txt", margin: true},
		{model: "lg_dart_breast_cancer.model", input: "breast_cancer_test.tsv", want: "lg_dart_breast_cancer_true_predictions.txt"},
		{model: "lg_dart_breast_cancer.json", input: "breast_cancer_test.tsv", want: "lg_dart_breast_cancer_true_predictions.txt", sigmoid: true},
		{model: "genlin_fmtp_poisson_Frequency.model", input: "genlin_fmtp_poisson_Frequency_features.tsv", want: "genlin_fmtp_poisson_Frequency_true_predictions.txt"},
		{model: "genlin_fmtp_gamma_AvgClaimAmount.model", input: "genlin_fmtp_gamma_AvgClaimAmount_features.tsv", want: "genlin_fmtp_gamma_AvgClaimAmount_true_predictions.txt"},
		{model: "genlin_fmtp_tweedie_PurePremium.model", input: "genlin_fmtp_tweedie_PurePremium_features.tsv", want: "genlin_fmtp_tweedie_PurePremium_true_predictions.txt"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			m, err := Load(filepath.Join(dir, c.model))
			if err != nil {
				t.Fatal(err)
			}
			var rows [][]float64
			if c.libsvm {
				rows = readLibSVM(t, filepath.Join(dir, c.input), m.NumFeatures)
			} else {
				rows = readTable(t, filepath.Join(dir, c.input), c.skip)
			}
			want := flatten(readTable(t, filepath.Join(dir, c.want), 0))
			x := flatten(rows)
			got := make([]float64, len(rows)*m.NumGroups())
			if len(got) != len(want) {
				t.Fatalf("%d rows x %d groups, but %d expected values", len(rows), m.NumGroups(), len(want))
			}
			if c.margin || c.sigmoid {
				err = m.Margins(got, x)
			} else {
				err = m.Scores(got, x)
			}
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range want {
				g := got[i]
				if c.sigmoid {
					g = 1 / (1 + math.Exp(-g))
				}
				if !closeRel(g, want[i]) {
					if bad++; bad <= 5 {
						t.Errorf("value %d = %.17g, lightgbm %.17g", i, g, want[i])
					}
				}
			}
		})
	}
}

// TestLightGBMBreastCancerLoads loads the model that has no expected
// predictions and checks its scores are probabilities.
func TestLightGBMBreastCancerLoads(t *testing.T) {
	dir := lgbDir(t)
	m, err := Load(filepath.Join(dir, "lg_breast_cancer.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rows := readTable(t, filepath.Join(dir, "lg_breast_cancer_data.txt"), 0)
	got := make([]float64, len(rows))
	if err := m.Scores(got, flatten(rows)); err != nil {
		t.Fatal(err)
	}
	if m.Kind != Binary || !m.Probabilities() {
		t.Fatalf("kind %v", m.Kind)
	}
	for i, p := range got {
		if !(p > 0 && p < 1) {
			t.Fatalf("record %d: p = %v", i, p)
		}
	}
}
