package pmml

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
)

var update = flag.Bool("update", false, "rewrite golden files and ../CONFORMANCE.md")

// conformanceDir finds the shared PMML corpus (require.ConformanceDir):
// EAS_CONFORMANCE_DIR overrides the default location beside the
// repository. Without it t skips, or fails under EAS_REQUIRE_CONFORMANCE=1.
func conformanceDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(require.ConformanceDir(t, "pmml/INDEX.md"))
}

// knownFailures lists in-scope cases this evaluator does not match, with
// the reason. The test fails when a listed case starts passing, so the
// list stays true.
var knownFailures = map[string]string{
	"dmg-GeneralRegressionCox": "expected 0.9509 is PMML4S's value; the PMML formula (baseline cumulative hazard at childs=5, " +
		"0.78244, times exp(sum beta*(x-referencePoint)) = 2.98247) gives 2.33363, which is also what JPMML's rattle-CoxRegressionLung case expects and passes",
	"dmg-GeneralRegressionCoxStrata": "same as dmg-GeneralRegressionCox, for the stratum's baseline table",
	"dmg-NearestNeighborCategorical": "the nearest instances by the model's squaredEuclidean measure are IDs 2 (distance 1.003), 11 (2.040) and 200 (3.077); " +
		"PMML4S reports 1, 2, 11 (ID 1 is at 6.021); the predicted class (Low) matches",
	"dmg-MiningWeightedMajorityVote": "all three trees reach class 3 for this record (nodes 7, 4 and 3, VariableWeights 0.4, 1.0 and 0.5), so PROB_3 is 1; " +
		"PMML4S reports 0.5556; PREDICTION (3) matches",
}

type confCase struct {
	name, modelType, tol string
}

// readIndex reads the case table of INDEX.md.
func readIndex(t *testing.T, dir string) []confCase {
	f, err := os.Open(filepath.Join(dir, "INDEX.md"))
	if err != nil {
		t.Fatalf("read corpus index: %v", err)
	}
	defer f.Close()
	var out []confCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 10 {
			continue
		}
		name := strings.TrimSpace(cols[1])
		if name == "case" || strings.HasPrefix(name, "---") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name, "model.pmml")); err != nil {
			continue
		}
		out = append(out, confCase{name: name, modelType: strings.TrimSpace(cols[2]), tol: strings.TrimSpace(cols[8])})
	}
	return out
}

// inScope follows issue 5: everything except anomaly detection, association
// rules and the three sas-* files that are invalid as found.
func (c confCase) inScope() bool {
	return !c.bonus() && !strings.HasPrefix(c.modelType, "AssociationModel") && !strings.HasPrefix(c.name, "sas-")
}

// bonus cases are outside issue 5's scope but implemented; they are run and
// reported apart from the in-scope count.
func (c confCase) bonus() bool {
	return strings.HasPrefix(c.modelType, "AnomalyDetectionModel")
}

// topType is the top-level model element of the case.
func (c confCase) topType() string {
	if i := strings.IndexByte(c.modelType, ' '); i > 0 {
		return c.modelType[:i]
	}
	return c.modelType
}

// tolerance returns the relative tolerance; float32 cases use 1e-6 as the
// index recommends.
func (c confCase) tolerance() float64 {
	s := c.tol
	switch {
	case strings.HasPrefix(s, "rel "):
		f, err := strconv.ParseFloat(strings.TrimPrefix(s, "rel "), 64)
		if err == nil {
			return math.Max(f, 1e-13)
		}
	case strings.HasPrefix(s, "float32"):
		return 1e-6
	}
	return 1e-13
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	return r.ReadAll()
}

// runCase scores every input row of a case and returns the problems found.
func runCase(dir string, cc confCase) (rows int, problems []string, err error) {
	m, err := ParseFile(filepath.Join(dir, cc.name, "model.pmml"))
	if err != nil {
		return 0, nil, err
	}
	in, err := readCSV(filepath.Join(dir, cc.name, "input.csv"))
	if err != nil {
		return 0, nil, err
	}
	exp, err := readCSV(filepath.Join(dir, cc.name, "expected.csv"))
	if err != nil {
		return 0, nil, err
	}
	tol := cc.tolerance()
	idx := make([]int, len(in[0]))
	for i, h := range in[0] {
		idx[i] = m.InputIndex(h)
	}
	c := m.getCtx()
	res := m.NewResult()
	for r := 1; r < len(in) && r < len(exp); r++ {
		rec := m.NewRecord()
		for i, cell := range in[r] {
			if idx[i] < 0 || cell == "" {
				continue
			}
			rec.Values[idx[i]] = StringValue(cell)
		}
		c.scoreOne(rec.Values, &res)
		if res.Err != nil {
			problems = append(problems, fmt.Sprintf("row %d: %v", r, res.Err))
			continue
		}
		for j, col := range exp[0] {
			want := ""
			if j < len(exp[r]) {
				want = exp[r][j]
			}
			var got Value
			if strings.HasPrefix(col, "feature:") {
				got = topFeature(c, m, strings.TrimPrefix(col, "feature:"))
			} else {
				k := m.OutputIndex(col)
				if k < 0 {
					problems = append(problems, fmt.Sprintf("no output %q (outputs: %v)", col, outputNames(m)))
					return len(exp) - 1, problems, nil
				}
				got = res.Values[k]
			}
			if !matches(got, want, tol) {
				problems = append(problems, fmt.Sprintf("row %d column %q: got %q want %q", r, col, got.String(), want))
			}
		}
	}
	return len(exp) - 1, problems, nil
}

func outputNames(m *Model) []string {
	var out []string
	for _, f := range m.Outputs() {
		out = append(out, f.Name)
	}
	return out
}

// topFeature evaluates a default result feature of the top model the way
// the corpus's feature:* columns describe them.
func topFeature(c *ctx, m *Model, feat string) Value {
	tm := m.top
	o := &outExpr{m: tm, cat: -1, tgt: -1}
	if i := strings.IndexByte(feat, '('); i > 0 && strings.HasSuffix(feat, ")") {
		val := feat[i+1 : len(feat)-1]
		feat = feat[:i]
		o.cat = tm.findCat(tm.catValue(val))
		if o.cat < 0 {
			return FloatValue(0)
		}
	}
	o.feature = feat
	if tm.fn == "clustering" {
		switch feat {
		case "predictedValue":
			o.feature = "predictedValue"
		case "affinity":
			o.feature = "affinity"
		}
	}
	return o.eval(c)
}

// matches applies the corpus's comparison rule.
func matches(got Value, want string, tol float64) bool {
	if want == "" {
		return got.K == Missing
	}
	if got.K == Missing {
		return false
	}
	if got.K == Bool {
		w := strings.ToLower(want)
		return (w == "true" || w == "1") == (got.F != 0) && (w == "true" || w == "false" || w == "1" || w == "0")
	}
	wf, werr := strconv.ParseFloat(want, 64)
	gf, gok := got.num()
	if werr == nil && gok {
		if math.Abs(gf) <= tol && math.Abs(wf) <= tol {
			return true
		}
		return math.Abs(gf-wf) <= tol*math.Abs(wf)
	}
	return got.String() == want
}

func TestConformance(t *testing.T) {
	dir := conformanceDir(t)
	cases := readIndex(t, dir)
	type tally struct{ pass, total int }
	byType := map[string]*tally{}
	var failures []string
	skipped, bonusPass, bonusTotal := 0, 0, 0
	var bonusNotes []string
	for _, cc := range cases {
		if cc.bonus() {
			// Outside the scope but implemented: the expected values
			// come from PMML4S, which keeps dataType="float" outputs in double
			// precision where this evaluator rounds them to 32 bits, so they
			// are compared at 1e-6.
			bonusTotal++
			cc.tol = "rel 1e-6"
			_, probs, err := runCase(dir, cc)
			switch {
			case err != nil:
				t.Errorf("%s: %v", cc.name, err)
				bonusNotes = append(bonusNotes, fmt.Sprintf("%s: %v", cc.name, err))
			case len(probs) > 0:
				t.Errorf("%s: %s", cc.name, strings.Join(probs, "; "))
				bonusNotes = append(bonusNotes, fmt.Sprintf("%s: %s", cc.name, probs[0]))
			default:
				bonusPass++
			}
			continue
		}
		if !cc.inScope() {
			skipped++
			continue
		}
		ty := cc.topType()
		if byType[ty] == nil {
			byType[ty] = &tally{}
		}
		byType[ty].total++
		rows, probs, err := runCase(dir, cc)
		if reason, known := knownFailures[cc.name]; known {
			if err == nil && len(probs) == 0 {
				t.Errorf("%s passes now: remove it from knownFailures", cc.name)
				byType[ty].pass++
				continue
			}
			failures = append(failures, fmt.Sprintf("%s: %s", cc.name, reason))
			continue
		}
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s: %v", cc.name, err))
			t.Errorf("%s: %v", cc.name, err)
		case len(probs) > 0:
			n := len(probs)
			if len(probs) > 3 {
				probs = probs[:3]
			}
			failures = append(failures, fmt.Sprintf("%s: %d mismatches, first: %s", cc.name, n, strings.Join(probs, "; ")))
			t.Errorf("%s: %d mismatches in %d rows; first: %s", cc.name, n, rows, strings.Join(probs, "; "))
		default:
			byType[ty].pass++
		}
	}
	var types []string
	for k := range byType {
		types = append(types, k)
	}
	sort.Strings(types)
	var b strings.Builder
	b.WriteString("# PMML conformance\n\n")
	b.WriteString("Generated by `go test ./engines/pmml/ -run TestConformance -update` from the shared corpus\n")
	b.WriteString("(`../shared/conformance/pmml`, see its INDEX.md; not part of this repository). In scope: every case\n")
	b.WriteString("except AnomalyDetectionModel, AssociationModel and the three `sas-*` files that are invalid as found.\n")
	b.WriteString("Numbers pass within the case's relative tolerance from INDEX.md (float32 cases: 1e-6), labels exactly;\n")
	b.WriteString("`feature:*` columns are checked too.\n\n")
	b.WriteString("| model type | passed | cases |\n|---|---|---|\n")
	pass, total := 0, 0
	for _, k := range types {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", k, byType[k].pass, byType[k].total)
		pass += byType[k].pass
		total += byType[k].total
	}
	fmt.Fprintf(&b, "| **all** | **%d** | **%d** |\n\n", pass, total)
	fmt.Fprintf(&b, "Beyond the scope, AnomalyDetectionModel is implemented too: %d of %d cases pass (compared at 1e-6:\n", bonusPass, bonusTotal)
	b.WriteString("their expected values come from PMML4S, which keeps `dataType=\"float\"` outputs in double precision\n")
	b.WriteString("where this evaluator rounds them to 32 bits as the dataType says).\n")
	for _, n := range bonusNotes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	fmt.Fprintf(&b, "\nNot run: %d cases (AssociationModel, and the sas-* files that are invalid as found). AssociationModel\n", skipped)
	b.WriteString("fails to load with a LoadError naming the element and its line.\n\n")
	if len(failures) == 0 {
		b.WriteString("No failures.\n")
	} else {
		b.WriteString("## Failures\n\n")
		for _, f := range failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	t.Logf("conformance: %d of %d cases pass", pass, total)
	golden := filepath.Join("..", "..", "CONFORMANCE.md")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	// CONFORMANCE.md is this test's golden file: it must say what the test
	// finds.
	if old, err := os.ReadFile(golden); err != nil || string(old) != b.String() {
		t.Errorf("%s is stale (%v): run go test ./engines/pmml/ -run TestConformance -update", golden, err)
	}
}
