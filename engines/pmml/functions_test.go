package pmml

import (
	"math"
	"testing"
)

// TestTransformations scores functions.pmml for x=4, y=-2.5, s=" Ab c".
// Each expected value is the arithmetic in the comment beside it.
func TestTransformations(t *testing.T) {
	m := mustParse(t, "testdata/functions.pmml")
	res := scoreOne(t, m, record(t, m, map[string]Value{"x": FloatValue(4), "y": FloatValue(-2.5), "s": StringValue(" Ab c")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	cases := []struct {
		out  string
		want Value
	}{
		{"t", FloatValue(9)},              // 7 + 0.5*4
		{"sum", FloatValue(1.5)},          // 4 + -2.5
		{"div", FloatValue(-1.6)},         // 4 / -2.5
		{"min", FloatValue(-2.5)},         // min(4, -2.5, 1)
		{"max", FloatValue(4)},            // max(4, -2.5)
		{"avg", FloatValue(0.75)},         // (4 - 2.5) / 2
		{"log10", FloatValue(3)},          // log10(1000)
		{"ln", FloatValue(math.Log(4))},   // ln 4
		{"exp", FloatValue(1)},            // e^0
		{"pow", FloatValue(8)},            // 4^1.5
		{"abs", FloatValue(2.5)},          // |-2.5|
		{"floor", FloatValue(-3)},         // floor(-2.5)
		{"ceil", FloatValue(-2)},          // ceil(-2.5)
		{"round", FloatValue(-2)},         // half up: floor(-2.5 + 0.5)
		{"missing", BoolValue(true)},      // t is a target, never an input
		{"notmissing", BoolValue(true)},   // x is set
		{"lt", BoolValue(true)},           // -2.5 < 4
		{"eq", BoolValue(true)},           // 4 == 4
		{"and", BoolValue(true)},          // 4 > 3 and -2.5 != 0
		{"not", BoolValue(true)},          // not (4 <= 3)
		{"isin", BoolValue(true)},         // 4 in {1, 4}
		{"if", StringValue("x")},          // 4 > -2.5
		{"upper", StringValue(" AB C")},   // uppercase
		{"trim", StringValue("Ab c")},     // trimBlanks
		{"sub", StringValue("Ab")},        // substring from 2, length 2
		{"concat", StringValue(" ab c!")}, // lowercase + "!"
		{"hyp", FloatValue(5)},            // DefineFunction: sqrt(3*3 + 4*4)
		{"xnorm", FloatValue(0.4)},        // NormContinuous 0..10 -> 0..1
		{"xword", StringValue("some")},    // Discretize 4 -> mid, MapValues mid -> some
		{"nested", FloatValue(3)},         // output field of an output field: 1.5*2
		{"replace", StringValue(" A_ _")}, // regexp [bc] -> _
		{"matches", BoolValue(true)},      // " Ab c" starts with " A"
		{"mapmissing", FloatValue(-1)},    // t missing -> mapMissingTo
	}
	for _, tc := range cases {
		got := outVal(t, m, res, tc.out)
		if got.K != tc.want.K || got.S != tc.want.S || math.Abs(got.F-tc.want.F) > 1e-12 {
			t.Errorf("%s = %#v, want %#v", tc.out, got, tc.want)
		}
	}
	// With x missing: Discretize maps nothing, MapValues gives mapMissingTo.
	res = scoreOne(t, m, record(t, m, map[string]Value{"y": FloatValue(1), "s": StringValue("q")}))
	if got := outVal(t, m, res, "xword"); got.S != "none" {
		t.Errorf("xword with x missing = %#v, want none", got)
	}
	if got := outVal(t, m, res, "t"); !got.IsMissing() {
		t.Errorf("t with x missing = %#v, want missing", got)
	}
}
