package tensor

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// Tolerance is how far a computed floating-point tensor may be from a
// reference: every element must satisfy
//
//	|got - want| <= Atol + Rtol * max|want|
//
// where max|want| is the largest finite magnitude in the whole reference
// tensor, not the magnitude of the element itself. Rounding errors of a
// convolution, a matrix product or a sum are proportional to the size of the
// terms summed, not to the size of the result: an output element that is
// small because its terms cancel carries the absolute error of the large
// ones. Which kernel the CPU gets (AVX2, AVX-512, AVX512-FP16, AMX) and which
// batches form change the summation order and so that error, which a bound
// relative to each element would call a failure.
//
// Pick one of the named tolerances below (by dtype and by the kind of
// computation) rather than writing numbers at a call site; docs/development.md,
// "Comparing floats", says how they were chosen and checked.
type Tolerance struct {
	Name string  // names the tolerance in error messages
	Rtol float64 // relative to the largest magnitude of the reference tensor
	Atol float64 // absolute floor, for a reference that is zero or nearly so
}

// The named tolerances. float32's machine epsilon is 2^-23 ≈ 1.19e-7 and
// float64's 2^-52 ≈ 2.2e-16; "ulp" below is one unit in the last place of
// the largest element.
var (
	// Exact is for values that are copied, not computed: a decoded request
	// against its source, defaults filled in, max pooling. Negative zero
	// equals zero.
	Exact = Tolerance{Name: "exact"}

	// F32Elementwise is for float32 ops where each output element is a
	// short chain of operations on its own inputs (Add, Relu, Sigmoid, Exp,
	// Tanh, casts), against a reference computed in float64 or by numpy.
	// Vectorised exp/tanh/erf approximations (MLAS, Eigen, SLEEF) are within
	// a few ulps, and the reference's rounding to float32 adds half an ulp:
	// 1e-6 is about 8 ulps. Atol 1e-6 is the absolute rounding of
	// intermediates of magnitude 1, for a reference that is zero throughout.
	F32Elementwise = Tolerance{Name: "float32 elementwise", Rtol: 1e-6, Atol: 1e-6}

	// F32Accumulated is for float32 ops that sum many products or terms
	// (MatMul, Gemm, Conv, reductions, Softmax, LayerNorm, and whole networks
	// of them) computed by the same library as the reference, or by any
	// library against a float64 reference: the sum's order depends on the
	// kernel the CPU gets, on threads and on the batch the request ran in,
	// and each order rounds differently, by about sqrt(K) ulps of the terms
	// for K terms. 1e-5 is about 84 ulps of the largest element; the test
	// suites stay under a tenth of the bound on every kernel path tried
	// (docs/development.md, "Comparing floats").
	F32Accumulated = Tolerance{Name: "float32 accumulated", Rtol: 1e-5, Atol: 1e-6}

	// F32Reformulated is for the same float32 network computed by a
	// different formulation: another runtime (ONNX Runtime against PyTorch,
	// OpenCV's DNN module against ours), BatchNorm folded into the
	// convolution's weights (freezing, graph optimisation), or Winograd
	// convolution, whose transforms scale the rounding error up by one to two
	// orders of magnitude over a direct sum.
	F32Reformulated = Tolerance{Name: "float32 reformulated", Rtol: 1e-4, Atol: 1e-5}

	// F64 is for float64 computations, elementwise or accumulated, against
	// a float64 reference: 1e-12 is about 4500 ulps of the largest element,
	// room for a reordered sum of a few thousand terms.
	F64 = Tolerance{Name: "float64", Rtol: 1e-12, Atol: 1e-14}

	// GPU is for float32 networks run on a GPU (CUDA) against a CPU
	// reference. cuBLAS and cuDNN may round the inputs of matrix products and
	// convolutions to TF32 (10 explicit mantissa bits, unit roundoff 2^-11 ≈
	// 4.9e-4) and pick among algorithms (implicit GEMM, Winograd, FFT) at
	// run time. scripts/bench-gpu.sh passes the same numbers to
	// scripts/gpu-models.py (its RTOL and ATOL defaults).
	GPU = Tolerance{Name: "gpu", Rtol: 1e-3, Atol: 1e-4}
)

// For returns the tolerance for a tensor of dtype d: F64 when d is Float64
// and tol is looser than F64 (float64 computations are held to float64's
// precision, whatever their family), tol otherwise. A model whose outputs
// mix float32 and float64 compares each with F32Accumulated.For(dtype).
func (tol Tolerance) For(d DType) Tolerance {
	if d == Float64 && tol.Rtol > F64.Rtol {
		return F64
	}
	return tol
}

// String returns the tolerance's name and numbers.
func (tol Tolerance) String() string {
	return fmt.Sprintf("%s: atol %g + rtol %g * max|want|", tol.Name, tol.Atol, tol.Rtol)
}

// Bound is the largest difference tol allows in a tensor whose largest
// magnitude is scale.
func (tol Tolerance) Bound(scale float64) float64 {
	return tol.Atol + tol.Rtol*scale
}

// Close compares got against want under tol (see Tolerance) and returns nil
// or an error naming the worst element: its flat and per-dimension index,
// both values, the difference and the bound, and how many elements are out.
// Dtypes and shapes must match; names are not compared. Floating-point
// tensors (FP16, BF16, FP32, FP64) are compared under tol, with NaN equal to
// NaN and an infinity equal only to itself; integers, BOOL and BYTES are
// compared exactly, whatever tol says.
func Close(got, want Tensor, tol Tolerance) error {
	_, err := compare(got, want, tol)
	return err
}

// Ratio returns the largest |got - want| of two floating-point tensors over
// the bound tol allows (Close passes when it is at most 1; 0 when they are
// equal), or +Inf when Close fails for any other reason (dtype, shape, NaN,
// infinity, an integer element). It tells how close to its bound a
// comparison runs.
func Ratio(got, want Tensor, tol Tolerance) float64 {
	r, err := compare(got, want, tol)
	if err != nil && r <= 1 {
		return math.Inf(1)
	}
	return r
}

// CloseValues is Close for a flat list of values, for outputs that are not
// tensors (JSON arrays, a map's values in a fixed key order): the list is
// one tensor of that many elements, named name.
func CloseValues[F float32 | float64](name string, got, want []F, tol Tolerance) error {
	return Close(fromValues(name, got), fromValues(name, want), tol)
}

func fromValues[F float32 | float64](name string, v []F) Tensor {
	shape := []int64{int64(len(v))}
	switch v := any(v).(type) {
	case []float32:
		return FromFloat32(name, shape, v)
	case []float64:
		return FromFloat64(name, shape, v)
	}
	panic("unreachable")
}

// compare is Close, returning also the worst difference over the bound.
func compare(got, want Tensor, tol Tolerance) (float64, error) {
	if got.DType != want.DType {
		return 0, fmt.Errorf("tensor %q: dtype %s, want %s", got.Name, got.DType, want.DType)
	}
	if !slices.Equal(got.Shape, want.Shape) {
		return 0, fmt.Errorf("tensor %q: shape %s, want %s", got.Name, FormatShape(got.Shape), FormatShape(want.Shape))
	}
	if err := got.Validate(); err != nil {
		return 0, err
	}
	if err := want.Validate(); err != nil {
		return 0, err
	}
	if got.DType == String {
		for i := range got.Strings {
			if !bytes.Equal(got.Strings[i], want.Strings[i]) {
				return 0, fmt.Errorf("tensor %q: element %d (index %v) is %q, want %q", got.Name, i, unravel(i, got.Shape), got.Strings[i], want.Strings[i])
			}
		}
		return 0, nil
	}
	n, size := len(got.Data)/got.DType.Size(), got.DType.Size()
	if !isFloat(got.DType) {
		for i := range n {
			if !bytes.Equal(got.Data[i*size:(i+1)*size], want.Data[i*size:(i+1)*size]) {
				return 0, fmt.Errorf("tensor %q: element %d (index %v) is %v, want %v (%s compares exactly)",
					got.Name, i, unravel(i, got.Shape), got.float64At(i), want.float64At(i), got.DType)
			}
		}
		return 0, nil
	}
	scale := 0.0
	for i := range n {
		if w := math.Abs(want.float64At(i)); !math.IsInf(w, 0) && !math.IsNaN(w) {
			scale = max(scale, w)
		}
	}
	bound := tol.Bound(scale)
	worst, at, out := 0.0, -1, 0
	for i := range n {
		g, w := got.float64At(i), want.float64At(i)
		if math.IsNaN(g) || math.IsNaN(w) || math.IsInf(g, 0) || math.IsInf(w, 0) {
			if g == w || math.IsNaN(g) && math.IsNaN(w) {
				continue
			}
			return math.Inf(1), fmt.Errorf("tensor %q: element %d (index %v) is %v, want %v",
				got.Name, i, unravel(i, got.Shape), g, w)
		}
		d := math.Abs(g - w)
		if d > bound {
			out++
		}
		if d > worst || at < 0 {
			worst, at = d, i
		}
	}
	if at < 0 || worst == 0 {
		return 0, nil
	}
	ratio := math.Inf(1)
	if bound > 0 {
		ratio = worst / bound
	}
	if out == 0 {
		return ratio, nil
	}
	return ratio, fmt.Errorf("tensor %q: element %d (index %v) is %v, want %v: |difference| %.3g > bound %.3g (%d of %d elements out; %s, max|want| %.4g)",
		got.Name, at, unravel(at, got.Shape), got.float64At(at), want.float64At(at), worst, bound, out, n, tol, scale)
}

// isFloat reports whether d is a floating-point dtype.
func isFloat(d DType) bool {
	return d == Float16 || d == BFloat16 || d == Float32 || d == Float64
}
