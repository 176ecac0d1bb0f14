package pmml

import (
	"strings"
	"testing"
)

// TestCompoundPredicates checks PMML's three-valued logic through a tree
// whose root children test a, b (either may be missing) with and, or, xor
// and surrogate; the first true child names the operator that fired.
func TestCompoundPredicates(t *testing.T) {
	doc := `<PMML version="4.4"><DataDictionary>
<DataField name="y" optype="categorical" dataType="string"/>
<DataField name="a" optype="continuous" dataType="double"/><DataField name="b" optype="continuous" dataType="double"/></DataDictionary>
<TreeModel functionName="classification" noTrueChildStrategy="returnNullPrediction">
<MiningSchema><MiningField name="y" usageType="target"/><MiningField name="a"/><MiningField name="b"/></MiningSchema>
<Node score="root"><True/>
 <Node score="and"><CompoundPredicate booleanOperator="and"><SimplePredicate field="a" operator="greaterThan" value="0"/><SimplePredicate field="b" operator="greaterThan" value="0"/></CompoundPredicate></Node>
 <Node score="xor"><CompoundPredicate booleanOperator="xor"><SimplePredicate field="a" operator="greaterThan" value="0"/><SimplePredicate field="b" operator="greaterThan" value="0"/></CompoundPredicate></Node>
 <Node score="surrogate"><CompoundPredicate booleanOperator="surrogate"><SimplePredicate field="a" operator="lessThan" value="0"/><SimplePredicate field="b" operator="lessThan" value="0"/><False/></CompoundPredicate></Node>
 <Node score="or"><CompoundPredicate booleanOperator="or"><SimplePredicate field="a" operator="isMissing"/><SimpleSetPredicate field="b" booleanOperator="isNotIn"><Array type="real" n="2">-1 -2</Array></SimpleSetPredicate></CompoundPredicate></Node>
</Node></TreeModel></PMML>`
	m, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		a, b Value
		want string
	}{
		{FloatValue(1), FloatValue(1), "and"},         // and true
		{FloatValue(1), FloatValue(-1), "xor"},        // and false, xor true
		{FloatValue(-1), FloatValue(-1), "surrogate"}, // and, xor false; a<0 true
		{MissingValue, FloatValue(-1), "surrogate"},   // and false (b), xor unknown, surrogate falls to b<0
		{MissingValue, FloatValue(5), "or"},           // and/xor unknown (false under "none"), surrogate: unknown, false -> false; or: a missing
		{FloatValue(-1), FloatValue(-2), "surrogate"},
		{FloatValue(0), FloatValue(-2), ""}, // nothing true: null prediction
	}
	for _, tc := range cases {
		res := scoreOne(t, m, record(t, m, map[string]Value{"a": tc.a, "b": tc.b}))
		if got := outVal(t, m, res, "y"); got.String() != tc.want {
			t.Errorf("a=%v b=%v: y = %q, want %q", tc.a, tc.b, got.String(), tc.want)
		}
	}
}

// TestTreeMissingStrategies: x missing stops the walk at the root, whose
// children A (recordCount 6; yes 4 with confidence 0.9, no 2 with 0.1) and
// B (recordCount 4; no 4) both stay possible.
func TestTreeMissingStrategies(t *testing.T) {
	doc := `<PMML version="4.4"><DataDictionary>
<DataField name="y" optype="categorical" dataType="string"><Value value="yes"/><Value value="no"/></DataField>
<DataField name="x" optype="continuous" dataType="double"/></DataDictionary>
<TreeModel functionName="classification" missingValueStrategy="STRATEGY">
<MiningSchema><MiningField name="y" usageType="target"/><MiningField name="x"/></MiningSchema>
<Output><OutputField name="conf" feature="confidence"/></Output>
<Node id="root" score="yes" recordCount="10" defaultChild="B"><True/>
 <Node id="A" score="yes" recordCount="6"><SimplePredicate field="x" operator="lessThan" value="5"/>
  <ScoreDistribution value="yes" recordCount="4" confidence="0.9"/><ScoreDistribution value="no" recordCount="2" confidence="0.1"/></Node>
 <Node id="B" score="no" recordCount="4"><SimplePredicate field="x" operator="greaterOrEqual" value="5"/>
  <ScoreDistribution value="yes" recordCount="0" confidence="0"/><ScoreDistribution value="no" recordCount="4" confidence="1"/></Node>
</Node></TreeModel></PMML>`
	cases := []struct {
		strategy string
		want     string
		conf     float64
	}{
		{"weightedConfidence", "yes", 0.6*0.9 + 0.4*0}, // no: 0.6*0.1 + 0.4*1 = 0.46
		{"aggregateNodes", "no", 6.0 / 10},             // counts yes 4, no 6
		{"defaultChild", "no", 1},                      // B
		{"lastPrediction", "yes", 1},                   // the root's score; without a distribution it is certain
		{"nullPrediction", "", -1},
		{"none", "", -1}, // both children false, returnNullPrediction
	}
	for _, tc := range cases {
		t.Run(tc.strategy, func(t *testing.T) {
			m, err := Parse(strings.NewReader(strings.Replace(doc, "STRATEGY", tc.strategy, 1)))
			if err != nil {
				t.Fatal(err)
			}
			res := scoreOne(t, m, m.NewRecord())
			if got := outVal(t, m, res, "y"); got.String() != tc.want {
				t.Errorf("y = %q, want %q", got.String(), tc.want)
			}
			got := outVal(t, m, res, "conf")
			if tc.conf < 0 {
				if !got.IsMissing() {
					t.Errorf("conf = %v, want missing", got)
				}
			} else if got.K != Float || got.F < tc.conf-1e-12 || got.F > tc.conf+1e-12 {
				t.Errorf("conf = %v, want %v", got, tc.conf)
			}
			// With x present the strategies do not matter.
			res = scoreOne(t, m, record(t, m, map[string]Value{"x": FloatValue(7)}))
			if got := outVal(t, m, res, "y"); got.String() != "no" {
				t.Errorf("x=7: y = %q, want no", got.String())
			}
		})
	}
}
