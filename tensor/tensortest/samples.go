// Package tensortest holds tensors for codec and model tests: one per dtype,
// with edge values (extremes, negative zero, subnormals, empty strings) that
// a careless encoding would damage.
package tensortest

import (
	"math"

	"github.com/eas-server/eas-server/tensor"
)

// Samples returns one valid tensor of every dtype (all but Invalid), named
// after its dtype in lower case ("fp32", "int64", ...), with shape [2,3] and
// values that exercise each type's range. Each call returns fresh copies.
func Samples() []tensor.Tensor {
	shape := []int64{2, 3}
	negZero := math.Copysign(0, -1)
	return []tensor.Tensor{
		tensor.FromBool("bool", shape, []bool{true, false, true, true, false, false}),
		tensor.FromUint8("uint8", shape, []uint8{0, 1, 127, 128, 254, 255}),
		tensor.FromUint16("uint16", shape, []uint16{0, 1, 255, 256, 65534, 65535}),
		tensor.FromUint32("uint32", shape, []uint32{0, 1, 1 << 16, 1<<31 - 1, 1 << 31, math.MaxUint32}),
		tensor.FromUint64("uint64", shape, []uint64{0, 1, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64}),
		tensor.FromInt8("int8", shape, []int8{math.MinInt8, -1, 0, 1, 100, math.MaxInt8}),
		tensor.FromInt16("int16", shape, []int16{math.MinInt16, -1, 0, 1, 1000, math.MaxInt16}),
		tensor.FromInt32("int32", shape, []int32{math.MinInt32, -1, 0, 1, 1 << 24, math.MaxInt32}),
		tensor.FromInt64("int64", shape, []int64{math.MinInt64, -1, 0, 1, 1 << 53, math.MaxInt64}),
		// 1, -2, 65504 (max), 2^-24 (smallest subnormal), 0.099975586 (0.1 rounded), -0
		tensor.FromFloat16Bits("fp16", shape, []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x2e66, 0x8000}),
		// 1, -2, max finite, smallest subnormal, 0.10009766, -0
		tensor.FromBFloat16Bits("bf16", shape, []uint16{0x3f80, 0xc000, 0x7f7f, 0x0001, 0x3dcd, 0x8000}),
		tensor.FromFloat32("fp32", shape, []float32{1.5, -2.25, math.MaxFloat32, math.SmallestNonzeroFloat32, 0.1, float32(negZero)}),
		tensor.FromFloat64("fp64", shape, []float64{1.5, -2.25, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, negZero}),
		tensor.FromStrings("bytes", shape, []string{"", "a", "héllo", "quote\"back\\slash", "nul\x00byte", "tab\tnew\nline"}),
	}
}

// Sample returns the sample of dtype d.
func Sample(d tensor.DType) tensor.Tensor {
	for _, t := range Samples() {
		if t.DType == d {
			return t
		}
	}
	panic("tensortest: no sample for " + d.String())
}
