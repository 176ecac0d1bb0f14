package easynlp

import (
	"math"
	"testing"
)

// TestPythonFloatForms checks str(numpy.float32(x)) and json.dumps(float(
// numpy.float32(x))) as numpy 1.24 and Python 3 write them (the wants are
// their output).
func TestPythonFloatForms(t *testing.T) {
	for _, tc := range []struct {
		x         float32
		numpy, py string
	}{
		{1e-5, "1e-05", "9.999999747378752e-06"},
		{1.5e-5, "1.5e-05", "1.4999999621068127e-05"},
		{0.0001, "1e-04", "9.999999747378752e-05"},
		{0.5, "0.5", "0.5"},
		{1, "1.0", "1.0"},
		{123456789, "123456790.0", "123456792.0"},
		{1e8, "100000000.0", "100000000.0"},
		{1e15, "1000000000000000.0", "999999986991104.0"},
		{1e16, "1e+16", "1.0000000272564224e+16"},
		{float32(math.Copysign(0, -1)), "-0.0", "-0.0"},
		{3.4e38, "3.4e+38", "3.3999999521443642e+38"},
		{1e-40, "1e-40", "9.99994610111476e-41"},
		{-1.25e-7, "-1.25e-07", "-1.2499999968440534e-07"},
		{float32(math.NaN()), "nan", "null"},
		{float32(math.Inf(1)), "inf", "null"},
	} {
		if got := string(appendNumpy32(nil, tc.x)); got != tc.numpy {
			t.Errorf("str(numpy.float32(%v)) = %s, want %s", tc.x, got, tc.numpy)
		}
		if got := string(jsonFloat(float64(tc.x))); got != tc.py {
			t.Errorf("float(numpy.float32(%v)) = %s, want %s", tc.x, got, tc.py)
		}
	}
}
