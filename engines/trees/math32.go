package trees

import "math"

// expf is glibc's expf (the algorithm of sysdeps/ieee754/flt-32/e_expf.c:
// a 32-entry table of 2^(i/32) and a cubic in double, rounded once to
// float32). XGBoost's sigmoid and softmax call expf; float32(math.Exp(x))
// is the correctly rounded value and differs from glibc's in about one
// input in 2000, which would break bit-exactness.
func expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 0x1.62e42ep6:
		return float32(math.Inf(1))
	case x < -0x1.9fe368p6:
		return 0
	}
	const (
		n       = 32
		invLn2N = 0x1.71547652b82fep+0 * n
		shift   = 0x1.8p+52
		c0      = 0x1.c6af84b912394p-5 / n / n / n
		c1      = 0x1.ebfce50fac4f3p-3 / n / n
		c2      = 0x1.62e42ff0c52d6p-1 / n
	)
	z := invLn2N * float64(x)
	kd := z + shift
	ki := math.Float64bits(kd)
	kd -= shift
	r := z - kd
	s := math.Float64frombits(exp2Tab[ki%n] + ki<<(52-5))
	p := c0*r + c1
	y := c2*r + 1
	y = p*(r*r) + y
	return float32(y * s)
}

// exp2Tab holds bits(2^(i/32)) - i<<52/32, so that adding k<<47 scales by 2^(k/32).
var exp2Tab = func() (t [32]uint64) {
	for i := range t {
		t[i] = math.Float64bits(math.Exp2(float64(i)/32)) - uint64(i)<<52/32
	}
	return t
}()

// logf is float32(log(x)). glibc's logf is not reproduced: it only enters
// through base_score, once per model, and agrees with this to the last bit
// for all but about one value in 1600.
func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// sigmoid32 is XGBoost's common::Sigmoid: 1 / (1 + expf(-x)) in float32.
func sigmoid32(x float32) float32 { return 1 / (1 + expf(-x)) }

// softmax32 is XGBoost's common::Softmax: float32 exponentials of x - max,
// summed in double, each divided by the float32 sum.
func softmax32(x []float32) {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	var sum float64
	for i, v := range x {
		e := expf(v - m)
		x[i] = e
		sum += float64(e)
	}
	s := float32(sum)
	for i := range x {
		x[i] /= s
	}
}

// softmax64 is LightGBM's softmax in double.
func softmax64(x []float64) {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(v - m)
		x[i] = e
		sum += e
	}
	for i := range x {
		x[i] /= sum
	}
}
