package trees

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
)

// xgbExpected is a case's <name>.expected.json, written by
// scripts/gen-tree-models.py from XGBoost's own predictions.
type xgbExpected struct {
	Rows         [][]*float64 `json:"rows"`
	MarginWidth  int          `json:"margin_width"`
	PredictWidth int          `json:"predict_width"`
	Margin       []float64    `json:"margin"`
	Predict      []float64    `json:"predict"`
	Formats      []string     `json:"formats"`
}

func readExpected(t testing.TB, path string) *xgbExpected {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e xgbExpected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// flatRows returns the rows as one row-major slice, NaN for missing.
func (e *xgbExpected) flatRows() []float64 {
	var out []float64
	for _, r := range e.Rows {
		for _, v := range r {
			if v == nil {
				out = append(out, math.NaN())
			} else {
				out = append(out, *v)
			}
		}
	}
	return out
}

// xgbCases lists the generated cases.
func xgbCases(t testing.TB) []string {
	t.Helper()
	files, _ := filepath.Glob("testdata/xgboost/*.expected.json")
	if len(files) == 0 {
		t.Fatal("no testdata/xgboost/*.expected.json; run /usr/bin/python3 scripts/gen-tree-models.py")
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".expected.json"))
	}
	return names
}

// TestXGBoostBitExact checks every generated case, in every format it was
// saved in, against XGBoost's own margins and predictions bit for bit.
func TestXGBoostBitExact(t *testing.T) {
	for _, name := range xgbCases(t) {
		exp := readExpected(t, filepath.Join("testdata/xgboost", name+".expected.json"))
		rows := exp.flatRows()
		for _, format := range exp.Formats {
			t.Run(name+"."+format, func(t *testing.T) {
				m, err := Load(filepath.Join("testdata/xgboost", name+"."+format))
				if err != nil {
					t.Fatal(err)
				}
				if m.NumGroups() != exp.MarginWidth || m.PredictWidth() != exp.PredictWidth {
					t.Fatalf("widths %d/%d, want %d/%d", m.NumGroups(), m.PredictWidth(), exp.MarginWidth, exp.PredictWidth)
				}
				check := func(what string, got, want []float64) {
					t.Helper()
					bad := 0
					for i := range want {
						if float32(got[i]) != float32(want[i]) || got[i] != float64(float32(got[i])) {
							if bad++; bad <= 5 {
								t.Errorf("%s[%d] = %.9g (%#x), xgboost %.9g (%#x)", what, i, got[i], math.Float32bits(float32(got[i])), want[i], math.Float32bits(float32(want[i])))
							}
						}
					}
				}
				got := make([]float64, len(exp.Margin))
				if err := m.Margins(got, rows); err != nil {
					t.Fatal(err)
				}
				check("margin", got, exp.Margin)
				got = make([]float64, len(exp.Predict))
				if err := m.Predict(got, rows); err != nil {
					t.Fatal(err)
				}
				check("predict", got, exp.Predict)
			})
		}
	}
}

// TestExpfMatchesGlibc checks expf against glibc's expf on the inputs of
// testdata/xgboost/expf.tsv (written by the generator through ctypes).
func TestExpfMatchesGlibc(t *testing.T) {
	b, err := os.ReadFile("testdata/xgboost/expf.tsv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 1000 {
		t.Fatalf("only %d lines", len(lines))
	}
	for _, l := range lines {
		var xb, yb uint32
		if _, err := fmt.Sscanf(l, "%x\t%x", &xb, &yb); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		x, want := math.Float32frombits(xb), math.Float32frombits(yb)
		if got := expf(x); math.Float32bits(got) != yb {
			t.Errorf("expf(%g) = %g (%#x), glibc %g (%#x)", x, got, math.Float32bits(got), want, yb)
		}
	}
}

// TestGeneratorReproduces reruns scripts/gen-tree-models.py into a
// temporary folder and checks it writes exactly the committed test data:
// the expectations come from XGBoost, not from hand edits. It skips where
// Debian's python3-xgboost is not installed (scripts/install-test-deps.sh).
func TestGeneratorReproduces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import xgboost, sklearn").Run(); err != nil {
		require.Missing(t, require.Python, "/usr/bin/python3 cannot import xgboost and sklearn (%v): install python3-xgboost and python3-sklearn (scripts/install-test-deps.sh)", err)
	}
	out := t.TempDir()
	cmd := exec.Command("/usr/bin/python3", "../../scripts/gen-tree-models.py", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, b)
	}
	committed, _ := filepath.Glob("testdata/xgboost/*")
	made, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(made) != len(committed) {
		t.Fatalf("generator wrote %d files, %d are committed", len(made), len(committed))
	}
	for _, c := range committed {
		want, _ := os.ReadFile(c)
		got, err := os.ReadFile(filepath.Join(out, filepath.Base(c)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes now (%v); rerun /usr/bin/python3 scripts/gen-tree-models.py", c, err)
		}
	}
}
