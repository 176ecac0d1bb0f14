package pmml

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func mustParse(t testing.TB, path string, opts ...Options) *Model {
	t.Helper()
	m, err := ParseFile(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func record(t testing.TB, m *Model, kv map[string]Value) Record {
	t.Helper()
	r := m.NewRecord()
	for k, v := range kv {
		i := m.InputIndex(k)
		if i < 0 {
			t.Fatalf("no input %q", k)
		}
		r.Values[i] = v
	}
	return r
}

func scoreOne(t testing.TB, m *Model, r Record) Result {
	t.Helper()
	out := []Result{m.NewResult()}
	if err := m.Score([]Record{r}, out); err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func outVal(t testing.TB, m *Model, res Result, name string) Value {
	t.Helper()
	i := m.OutputIndex(name)
	if i < 0 {
		t.Fatalf("no output %q in %v", name, outputNames(m))
	}
	return res.Values[i]
}

// TestLogisticRegression checks lr.pmml against lr_expected.csv, which
// lr_expected.py computes with plain arithmetic.
func TestLogisticRegression(t *testing.T) {
	m := mustParse(t, "testdata/lr.pmml")
	f, err := os.Open("testdata/lr_expected.csv")
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
		r := m.NewRecord()
		for i := 0; i < 6; i++ {
			if row[i] != "" {
				r.Values[m.InputIndex(head[i])] = StringValue(row[i])
			}
		}
		res := scoreOne(t, m, r)
		if res.Err != nil {
			t.Fatalf("row %v: %v", row, res.Err)
		}
		for i := 6; i < len(head); i++ {
			got := outVal(t, m, res, head[i])
			want, _ := strconv.ParseFloat(row[i], 64)
			if g, ok := got.num(); !ok || math.Abs(g-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("row %v: %s = %v, want %v", row, head[i], got, want)
			}
		}
	}
}

// TestRandomForest works through rf.pmml by hand: each case lists the
// vote of every tree.
func TestRandomForest(t *testing.T) {
	m := mustParse(t, "testdata/rf.pmml")
	cases := []struct {
		name        string
		temp, hum   Value
		outlook     Value
		want        string
		pYes, pNo   float64
		wantMissing bool
	}{
		// T1 yes (20<25), T2 no (sunny), T3 yes (60<=70 and 20<30).
		{"two yes", FloatValue(20), FloatValue(60), StringValue("sunny"), "yes", 2.0 / 3, 1.0 / 3, false},
		// T1 no, T2 yes (rain), T3 no (90>85).
		{"two no", FloatValue(30), FloatValue(90), StringValue("rain"), "no", 1.0 / 3, 2.0 / 3, false},
		// T3: no child true, returnLastPrediction gives the root's "yes".
		{"last prediction", FloatValue(28), FloatValue(80), StringValue("overcast"), "yes", 2.0 / 3, 1.0 / 3, false},
		// T3: humidity missing makes node 2 unknown, defaultChild picks node 2.
		{"default child", FloatValue(20), MissingValue, StringValue("rain"), "yes", 1, 0, false},
		// T1 has no true child (null prediction) and is skipped; T2, T3 say no.
		{"null prediction skipped", MissingValue, FloatValue(90), StringValue("sunny"), "no", 0, 1, false},
		// Numbers may arrive as strings.
		{"numeric strings", StringValue("20"), StringValue(" 60"), StringValue("sunny"), "yes", 2.0 / 3, 1.0 / 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := record(t, m, map[string]Value{"temperature": tc.temp, "humidity": tc.hum, "outlook": tc.outlook})
			res := scoreOne(t, m, r)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := outVal(t, m, res, "play"); got.String() != tc.want {
				t.Errorf("play = %v, want %v", got, tc.want)
			}
			if got := outVal(t, m, res, "predicted_play"); got.String() != tc.want {
				t.Errorf("predicted_play = %v, want %v", got, tc.want)
			}
			if got := outVal(t, m, res, "p_yes"); math.Abs(got.F-tc.pYes) > 1e-15 {
				t.Errorf("p_yes = %v, want %v", got, tc.pYes)
			}
			if got := outVal(t, m, res, "p_no"); math.Abs(got.F-tc.pNo) > 1e-15 {
				t.Errorf("p_no = %v, want %v", got, tc.pNo)
			}
		})
	}
}

func TestInvalidValues(t *testing.T) {
	rf := mustParse(t, "testdata/rf.pmml")
	res := scoreOne(t, rf, record(t, rf, map[string]Value{"temperature": FloatValue(20), "humidity": FloatValue(60), "outlook": StringValue("cloudy")}))
	var re *RecordError
	if !errors.As(res.Err, &re) || re.Field != "outlook" {
		t.Fatalf("err = %v, want a RecordError for outlook (returnInvalid is the default)", res.Err)
	}
	for _, v := range res.Values {
		if !v.IsMissing() {
			t.Errorf("failed record has value %v, want all missing", v)
		}
	}
	// A number for a double field that does not parse is invalid too.
	res = scoreOne(t, rf, record(t, rf, map[string]Value{"temperature": StringValue("warm"), "humidity": FloatValue(60), "outlook": StringValue("rain")}))
	if res.Err == nil {
		t.Fatal("temperature \"warm\" was accepted")
	}
	// The next record on the same context scores cleanly.
	res = scoreOne(t, rf, record(t, rf, map[string]Value{"temperature": FloatValue(20), "humidity": FloatValue(60), "outlook": StringValue("rain")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
}

func TestMissingValueDefaults(t *testing.T) {
	in := map[string]Value{"cp": FloatValue(1), "fbs": FloatValue(0), "age": FloatValue(50), "trestbps": FloatValue(120), "thal": StringValue("fix")}
	pure := mustParse(t, "testdata/lr.pmml")
	res := scoreOne(t, pure, record(t, pure, in))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if v := outVal(t, pure, res, "p_1"); !v.IsMissing() {
		t.Errorf("pure PMML: p_1 = %v with sex missing, want missing", v)
	}
	eas := mustParse(t, "testdata/lr.pmml", Options{MissingValueDefaults: true})
	res = scoreOne(t, eas, record(t, eas, in))
	in["sex"] = FloatValue(0)
	want := scoreOne(t, pure, record(t, pure, in))
	if g, w := outVal(t, eas, res, "p_1"), outVal(t, pure, want, "p_1"); g != w || g.IsMissing() {
		t.Errorf("defaults: p_1 = %v, want %v (sex filled with 0)", g, w)
	}
	// A categorical field with listed values is not filled with "": rf.pmml's
	// outlook stays missing, so the trees' own missing handling applies.
	rf := mustParse(t, "testdata/rf.pmml", Options{MissingValueDefaults: true})
	r := scoreOne(t, rf, record(t, rf, map[string]Value{"humidity": FloatValue(60)}))
	if r.Err != nil {
		t.Fatalf("rf with defaults: %v", r.Err)
	}
	// temperature filled with 0: T1 yes; T2 outlook missing, no true child: null;
	// T3: 60<=70 and 0<30: yes.
	if got := outVal(t, rf, r, "play"); got.S != "yes" {
		t.Errorf("rf with defaults: play = %v, want yes", got)
	}
	// age has a missingValueReplacement (54): the model's own treatment wins.
	delete(in, "age")
	a := scoreOne(t, eas, record(t, eas, in))
	in["age"] = FloatValue(54)
	b := scoreOne(t, pure, record(t, pure, in))
	if g, w := outVal(t, eas, a, "p_1"), outVal(t, pure, b, "p_1"); g != w {
		t.Errorf("replacement: p_1 = %v, want %v", g, w)
	}
}

func TestInputsOutputs(t *testing.T) {
	m := mustParse(t, "testdata/lr.pmml")
	var in []string
	for _, f := range m.Inputs() {
		in = append(in, f.Name+":"+f.DataType.String()+":"+f.OpType.String())
	}
	if got, want := strings.Join(in, ","), "sex:double:continuous,cp:double:continuous,fbs:double:continuous,age:double:continuous,trestbps:double:continuous,thal:string:categorical"; got != want {
		t.Errorf("inputs = %s, want %s", got, want)
	}
	if v := m.Inputs()[5].Values; strings.Join(v, ",") != "norm,fix,rev" {
		t.Errorf("thal values = %v", v)
	}
	var out []string
	for _, f := range m.Outputs() {
		out = append(out, f.Name+":"+f.Feature)
	}
	if got, want := strings.Join(out, ","), "ifhealth:target,p_0:probability,p_1:probability"; got != want {
		t.Errorf("outputs = %s, want %s", got, want)
	}
	js, err := json.Marshal(m.Inputs()[5])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(js), `{"name":"thal","dataType":"string","opType":"categorical","values":["norm","fix","rev"]}`; got != want {
		t.Errorf("json = %s, want %s", got, want)
	}
	if m.ModelType() != "RegressionModel" || m.FunctionName() != "classification" || m.Version() != "4.2" {
		t.Errorf("model type %s %s %s", m.ModelType(), m.FunctionName(), m.Version())
	}
}

func TestScoreMap(t *testing.T) {
	m := mustParse(t, "testdata/rf.pmml")
	out, err := m.ScoreMap(map[string]any{"temperature": 30, "humidity": "90", "outlook": "rain", "extra": true})
	if err != nil {
		t.Fatal(err)
	}
	if out["play"] != "no" || out["p_no"] != 2.0/3 {
		t.Errorf("ScoreMap = %v", out)
	}
	if _, err := m.ScoreMap(map[string]any{"temperature": []int{1}}); err == nil {
		t.Error("a slice input was accepted")
	}
	if _, err := m.ScoreMap(map[string]any{"outlook": "cloudy"}); err == nil {
		t.Error("an invalid outlook was accepted")
	}
}

func TestScoreShapes(t *testing.T) {
	m := mustParse(t, "testdata/rf.pmml")
	if err := m.Score([]Record{m.NewRecord()}, nil); err == nil {
		t.Error("no room for results was accepted")
	}
	if err := m.Score([]Record{{Values: []Value{MissingValue}}}, []Result{m.NewResult()}); err == nil {
		t.Error("a short record was accepted")
	}
	// Results without room grow.
	out := []Result{{}}
	if err := m.Score([]Record{m.NewRecord()}, out); err != nil || len(out[0].Values) != len(m.Outputs()) {
		t.Errorf("err %v, %d values", err, len(out[0].Values))
	}
}

func TestConcurrentScoring(t *testing.T) {
	m := mustParse(t, "testdata/rf.pmml")
	recs := []Record{
		record(t, m, map[string]Value{"temperature": FloatValue(20), "humidity": FloatValue(60), "outlook": StringValue("sunny")}),
		record(t, m, map[string]Value{"temperature": FloatValue(30), "humidity": FloatValue(90), "outlook": StringValue("rain")}),
	}
	want := []string{"yes", "no"}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := []Result{m.NewResult(), m.NewResult()}
			for i := 0; i < 200; i++ {
				if err := m.Score(recs, out); err != nil {
					errs <- err.Error()
					return
				}
				for j := range recs {
					if got := out[j].Values[0].String(); got != want[j] {
						errs <- "got " + got + " want " + want[j]
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestZeroAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts are skipped in -short and under the race detector")
	}
	for _, path := range []string{"testdata/rf.pmml", "testdata/lr.pmml"} {
		m := mustParse(t, path)
		r := m.NewRecord()
		for i, f := range m.Inputs() {
			switch {
			case len(f.Values) > 0:
				r.Values[i] = StringValue(f.Values[0])
			default:
				r.Values[i] = FloatValue(float64(10 * (i + 1)))
			}
		}
		in := []Record{r}
		out := []Result{m.NewResult()}
		_ = m.Score(in, out)
		if n := testing.AllocsPerRun(200, func() { _ = m.Score(in, out) }); n != 0 {
			t.Errorf("%s: %v allocations per record, want 0", path, n)
		}
	}
}

// TestRecursiveFunction: a DefineFunction calling itself must fail the
// record, not overflow the stack.
func TestRecursiveFunction(t *testing.T) {
	doc := `<PMML version="4.4"><DataDictionary><DataField name="x" optype="continuous" dataType="double"/></DataDictionary>
<TransformationDictionary><DefineFunction name="f" optype="continuous" dataType="double"><Apply function="f"/></DefineFunction>
<DerivedField name="d" optype="continuous" dataType="double"><Apply function="f"/></DerivedField></TransformationDictionary>
<RegressionModel functionName="regression"><MiningSchema><MiningField name="x"/></MiningSchema>
<RegressionTable intercept="1"><NumericPredictor name="d" coefficient="1"/></RegressionTable></RegressionModel></PMML>`
	m, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	res := scoreOne(t, m, m.NewRecord())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "nests deeper") {
		t.Errorf("err = %v, want a nesting error", res.Err)
	}
}

func TestLoadErrors(t *testing.T) {
	const dd = `<DataDictionary><DataField name="y" optype="continuous" dataType="double"/><DataField name="x" optype="continuous" dataType="double"/></DataDictionary>`
	cases := []struct {
		name, doc   string
		want        string
		unsupported bool
	}{
		{"malformed", `<PMML><DataDictionary>`, "malformed xml", false},
		{"not pmml", `<html/>`, "root element is <html>", false},
		{"empty", ``, "empty document", false},
		{"no data dictionary", `<PMML version="4.4"><RegressionModel functionName="regression"/></PMML>`, "no DataDictionary", false},
		{"association", `<PMML version="4.4">` + dd + "\n" + `<AssociationModel functionName="associationRules"/></PMML>`, "<AssociationModel> at line 2: model type AssociationModel is not supported", true},
		{"unknown element in a node", `<PMML version="4.4">` + dd + `<TreeModel functionName="regression"><MiningSchema><MiningField name="x"/></MiningSchema>
<Node score="1"><True/>
<Fancy/></Node></TreeModel></PMML>`, "<Fancy> at line 3: element is not supported", true},
		{"undefined field", `<PMML version="4.4">` + dd + `<RegressionModel functionName="regression"><MiningSchema><MiningField name="x"/></MiningSchema>
<RegressionTable intercept="1"><NumericPredictor name="z" coefficient="2"/></RegressionTable></RegressionModel></PMML>`, `field "z" is not defined`, false},
		{"unknown function", `<PMML version="4.4">` + dd + `<TransformationDictionary><DerivedField name="d" optype="continuous" dataType="double"><Apply function="frobnicate"><FieldRef field="x"/></Apply></DerivedField></TransformationDictionary><RegressionModel functionName="regression"><MiningSchema><MiningField name="x"/></MiningSchema><RegressionTable intercept="1"/></RegressionModel></PMML>`, `function "frobnicate" is not supported`, true},
		{"bad number", `<PMML version="4.4">` + dd + `<RegressionModel functionName="regression"><MiningSchema><MiningField name="x"/></MiningSchema><RegressionTable intercept="one"/></RegressionModel></PMML>`, `intercept="one" is not a number`, false},
		{"bad normalization", `<PMML version="4.4">` + dd + `<RegressionModel functionName="regression" normalizationMethod="magic"><MiningSchema><MiningField name="x"/></MiningSchema><RegressionTable intercept="1"/></RegressionModel></PMML>`, `normalizationMethod "magic" is not supported`, true},
		{"too deep", "<PMML>" + strings.Repeat("<a>", maxDepth+1), "nested deeper", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.doc))
			if err == nil {
				t.Fatal("parsed without error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v", !tc.unsupported, tc.unsupported)
			}
		})
	}
}

type panicScorer struct{}

func (panicScorer) score(*ctx, *model, *prediction) { panic("boom") }

// TestScorePanicIsAnError: an evaluator bug must not take the server down.
func TestScorePanicIsAnError(t *testing.T) {
	m := mustParse(t, "testdata/lr.pmml")
	m.top.impl = panicScorer{}
	err := m.Score([]Record{m.NewRecord()}, []Result{m.NewResult()})
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want an internal error mentioning the panic", err)
	}
}
