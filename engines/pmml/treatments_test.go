package pmml

import (
	"strings"
	"testing"
)

const treatmentsDoc = `<PMML version="4.4">
<DataDictionary>
  <DataField name="y" optype="continuous" dataType="double"/>
  <DataField name="x" optype="continuous" dataType="double"><Interval closure="closedClosed" leftMargin="-50" rightMargin="100"/></DataField>
  <DataField name="c" optype="categorical" dataType="string"><Value value="a"/><Value value="b"/><Value value="zz" property="invalid"/><Value value="?" property="missing"/></DataField>
</DataDictionary>
<RegressionModel functionName="regression">
  <MiningSchema>
    <MiningField name="y" usageType="target"/>
    <MiningField name="x" outliers="asExtremeValues" lowValue="0" highValue="10" invalidValueTreatment="asValue" invalidValueReplacement="1"/>
    <MiningField name="c" missingValueReplacement="b" invalidValueTreatment="asMissing"/>
  </MiningSchema>
  <Targets><Target field="y" rescaleFactor="2" rescaleConstant="1" castInteger="round" max="9"><TargetValue defaultValue="-7"/></Target></Targets>
  <RegressionTable intercept="0">
    <NumericPredictor name="x" coefficient="1"/>
    <CategoricalPredictor name="c" value="a" coefficient="0"/>
    <CategoricalPredictor name="c" value="b" coefficient="0.3"/>
  </RegressionTable>
</RegressionModel>
</PMML>`

// TestTreatments: y = round(2*min(x' + c', 9) + 1), where x' is x clamped to
// [0, 10] (invalid -> 1) and c' is 0 for a, 0.3 for b (missing, "?" and the
// invalid "zz" become b).
func TestTreatments(t *testing.T) {
	m, err := Parse(strings.NewReader(treatmentsDoc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		x, c Value
		want Value
	}{
		{"plain", FloatValue(3), StringValue("a"), FloatValue(7)},                   // 2*3+1
		{"high outlier", FloatValue(50), StringValue("a"), FloatValue(19)},          // x'=10 -> min(10, 9)=9 -> 19
		{"low outlier", FloatValue(-3), StringValue("a"), FloatValue(1)},            // x'=0
		{"invalid interval", FloatValue(200), StringValue("a"), FloatValue(3)},      // outside the Interval -> 1
		{"unparsable", StringValue("abc"), StringValue("a"), FloatValue(3)},         // invalid -> 1
		{"missing category", FloatValue(2), MissingValue, FloatValue(6)},            // 2*(2.3)+1 = 5.6 -> 6
		{"missing value spelled ?", FloatValue(2), StringValue("?"), FloatValue(6)}, // property="missing"
		{"invalid category", FloatValue(2), StringValue("zz"), FloatValue(6)},       // asMissing -> b
		{"unknown category", FloatValue(2), StringValue("q"), FloatValue(6)},        // not valid -> asMissing -> b
		{"no prediction", MissingValue, StringValue("a"), FloatValue(-7)},           // TargetValue defaultValue
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := scoreOne(t, m, record(t, m, map[string]Value{"x": tc.x, "c": tc.c}))
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := outVal(t, m, res, "y"); got != tc.want {
				t.Errorf("y = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPriors: a classification model that cannot predict falls back to the
// Target's prior probabilities.
func TestPriors(t *testing.T) {
	doc := `<PMML version="4.4"><DataDictionary>
<DataField name="y" optype="categorical" dataType="string"><Value value="n"/><Value value="p"/></DataField>
<DataField name="x" optype="continuous" dataType="double"/></DataDictionary>
<RegressionModel functionName="classification" normalizationMethod="softmax">
<MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x"/></MiningSchema>
<Output><OutputField name="pp" feature="probability" value="p"/></Output>
<Targets><Target field="y"><TargetValue value="n" priorProbability="0.25"/><TargetValue value="p" priorProbability="0.75"/></Target></Targets>
<RegressionTable intercept="0" targetCategory="p"><NumericPredictor name="x" coefficient="1"/></RegressionTable>
<RegressionTable intercept="0" targetCategory="n"/>
</RegressionModel></PMML>`
	m, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	res := scoreOne(t, m, m.NewRecord())
	if got := outVal(t, m, res, "y"); got.S != "p" {
		t.Errorf("y = %v, want p", got)
	}
	if got := outVal(t, m, res, "pp"); got.F != 0.75 {
		t.Errorf("pp = %v, want 0.75", got)
	}
	res = scoreOne(t, m, record(t, m, map[string]Value{"x": FloatValue(0)}))
	if got := outVal(t, m, res, "pp"); got.F != 0.5 {
		t.Errorf("pp at x=0 = %v, want 0.5 (softmax of 0 and 0)", got)
	}
}
