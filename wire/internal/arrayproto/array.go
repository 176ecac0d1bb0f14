// Package arrayproto converts between tensor.Tensor and the ArrayProto message
// that the EAS TensorFlow and PyTorch protocols share (same field numbers and
// dtype enum; the PyTorch copy lacks bool_val). Both generated types are
// mapped onto Array so the rules live in one place.
package arrayproto

import (
	"fmt"
	"math"
	"strings"

	"github.com/eas-server/eas-server/tensor"
)

// The ArrayDataType numbers, shared by both protocols.
const (
	DTInvalid    = 0
	DTFloat      = 1
	DTDouble     = 2
	DTInt32      = 3
	DTUint8      = 4
	DTInt16      = 5
	DTInt8       = 6
	DTString     = 7
	DTComplex64  = 8
	DTInt64      = 9
	DTBool       = 10
	DTQint8      = 11
	DTQuint8     = 12
	DTQint32     = 13
	DTBfloat16   = 14
	DTQint16     = 15
	DTQuint16    = 16
	DTUint16     = 17
	DTComplex128 = 18
	DTHalf       = 19
	DTResource   = 20
	DTVariant    = 21
	DTUint32     = 22
	DTUint64     = 23
)

var dtNames = map[int32]string{
	0: "DT_INVALID", 1: "DT_FLOAT", 2: "DT_DOUBLE", 3: "DT_INT32", 4: "DT_UINT8", 5: "DT_INT16",
	6: "DT_INT8", 7: "DT_STRING", 8: "DT_COMPLEX64", 9: "DT_INT64", 10: "DT_BOOL", 11: "DT_QINT8",
	12: "DT_QUINT8", 13: "DT_QINT32", 14: "DT_BFLOAT16", 15: "DT_QINT16", 16: "DT_QUINT16",
	17: "DT_UINT16", 18: "DT_COMPLEX128", 19: "DT_HALF", 20: "DT_RESOURCE", 21: "DT_VARIANT",
	22: "DT_UINT32", 23: "DT_UINT64",
}

// DTName is the enum name of dt, or the number for an unknown value.
func DTName(dt int32) string {
	if n, ok := dtNames[dt]; ok {
		return n
	}
	return fmt.Sprintf("ArrayDataType(%d)", dt)
}

// field names the value field an element type travels in.
type field int

const (
	fFloat field = iota
	fDouble
	fInt
	fString
	fInt64
	fBool
)

var fieldNames = [...]string{"float_val", "double_val", "int_val", "string_val", "int64_val", "bool_val"}

// mapping is one supported dtype: its tensor type and its value field.
type mapping struct {
	dtype tensor.DType
	field field
}

var byDT = map[int32]mapping{
	DTFloat:    {tensor.Float32, fFloat},
	DTDouble:   {tensor.Float64, fDouble},
	DTInt32:    {tensor.Int32, fInt},
	DTUint8:    {tensor.Uint8, fInt},
	DTInt16:    {tensor.Int16, fInt},
	DTInt8:     {tensor.Int8, fInt},
	DTString:   {tensor.String, fString},
	DTInt64:    {tensor.Int64, fInt64},
	DTBool:     {tensor.Bool, fBool},
	DTBfloat16: {tensor.BFloat16, fFloat},
	DTUint16:   {tensor.Uint16, fInt},
	DTHalf:     {tensor.Float16, fFloat},
	DTUint32:   {tensor.Uint32, fInt64},
	DTUint64:   {tensor.Uint64, fInt64},
}

var byDType = func() map[tensor.DType]int32 {
	m := make(map[tensor.DType]int32, len(byDT))
	for dt, mp := range byDT {
		m[mp.dtype] = dt
	}
	return m
}()

const supported = "DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16, DT_INT8, DT_INT16, DT_INT32, DT_INT64, DT_UINT8, DT_UINT16, DT_UINT32, DT_UINT64, DT_BOOL, DT_STRING"

// Array is the protocol-neutral content of an ArrayProto. Slices alias the
// decoded message.
type Array struct {
	DType  int32
	Shape  []int64
	Float  []float32
	Double []float64
	Int    []int32
	String [][]byte
	Int64  []int64
	Bool   []bool
}

// count returns how many values each field holds, for error messages.
func (a *Array) counts() [6]int {
	return [6]int{len(a.Float), len(a.Double), len(a.Int), len(a.String), len(a.Int64), len(a.Bool)}
}

// Options say how a protocol differs.
type Options struct {
	// BoolInInt carries DT_BOOL as 0/1 in int_val: the PyTorch ArrayProto has
	// no bool_val.
	BoolInInt bool
}

func (o Options) fieldFor(m mapping) field {
	if m.field == fBool && o.BoolInInt {
		return fInt
	}
	return m.field
}

// ToTensor converts a decoded ArrayProto into a tensor named name. It checks
// that the dtype is supported, the shape is valid, the dtype's value field
// holds exactly one value per element, no other value field is set, and that
// integers fit the dtype. Errors describe the problem for the API caller.
func ToTensor(name string, a *Array, o Options) (tensor.Tensor, error) {
	m, ok := byDT[a.DType]
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("dtype %s is not supported; use one of %s", DTName(a.DType), supported)
	}
	n, err := tensor.Elements(a.Shape)
	if err != nil {
		return tensor.Tensor{}, fmt.Errorf("array_shape: %w", err)
	}
	f := o.fieldFor(m)
	counts := a.counts()
	for i, c := range counts {
		if field(i) != f && c > 0 {
			return tensor.Tensor{}, fmt.Errorf("dtype %s carries its values in %s, but the array has %d values in %s",
				DTName(a.DType), fieldNames[f], c, fieldNames[i])
		}
	}
	if int64(counts[f]) != n {
		return tensor.Tensor{}, fmt.Errorf("array_shape %s needs %d values in %s, got %d",
			tensor.FormatShape(a.Shape), n, fieldNames[f], counts[f])
	}
	shape := a.Shape
	switch m.dtype {
	// The value slices were decoded for this array alone: the tensor takes
	// them over instead of copying the request a second time.
	case tensor.Float32:
		return tensor.Own(name, shape, a.Float), nil
	case tensor.Float64:
		return tensor.Own(name, shape, a.Double), nil
	case tensor.Int32:
		return tensor.Own(name, shape, a.Int), nil
	case tensor.Int64:
		return tensor.Own(name, shape, a.Int64), nil
	case tensor.Uint32:
		v := make([]uint32, n)
		for i, x := range a.Int64 {
			if x < 0 || x > math.MaxUint32 {
				return tensor.Tensor{}, fmt.Errorf("int64_val[%d] = %d is outside the DT_UINT32 range 0..%d", i, x, uint32(math.MaxUint32))
			}
			v[i] = uint32(x)
		}
		return tensor.FromUint32(name, shape, v), nil
	case tensor.Uint64:
		// Values above 2^63-1 travel as their two's-complement int64.
		v := make([]uint64, n)
		for i, x := range a.Int64 {
			v[i] = uint64(x)
		}
		return tensor.FromUint64(name, shape, v), nil
	case tensor.String:
		return tensor.Tensor{Name: name, DType: tensor.String, Shape: append([]int64{}, shape...), Strings: a.String}, nil
	case tensor.Float16, tensor.BFloat16:
		v := make([]uint16, n)
		for i, x := range a.Float {
			var h uint16
			var isInf bool
			if m.dtype == tensor.Float16 {
				h = tensor.Float32ToFloat16(x)
				isInf = h&0x7fff == 0x7c00
			} else {
				h = tensor.Float32ToBFloat16(x)
				isInf = h&0x7fff == 0x7f80
			}
			if isInf && !math.IsInf(float64(x), 0) {
				return tensor.Tensor{}, fmt.Errorf("float_val[%d] = %g does not fit %s", i, x, DTName(a.DType))
			}
			v[i] = h
		}
		if m.dtype == tensor.Float16 {
			return tensor.FromFloat16Bits(name, shape, v), nil
		}
		return tensor.FromBFloat16Bits(name, shape, v), nil
	case tensor.Bool:
		v := make([]bool, n)
		if f == fBool {
			copy(v, a.Bool)
		} else {
			for i, x := range a.Int {
				if x != 0 && x != 1 {
					return tensor.Tensor{}, fmt.Errorf("int_val[%d] = %d: DT_BOOL values in int_val must be 0 or 1", i, x)
				}
				v[i] = x == 1
			}
		}
		return tensor.FromBool(name, shape, v), nil
	}
	// The small integer types travel in int_val and are range-checked.
	lo, hi := intRange(m.dtype)
	data := make([]byte, n*int64(m.dtype.Size()))
	for i, x := range a.Int {
		if int64(x) < lo || int64(x) > hi {
			return tensor.Tensor{}, fmt.Errorf("int_val[%d] = %d is outside the %s range %d..%d", i, x, DTName(a.DType), lo, hi)
		}
		tensor.PutFloat64(m.dtype, data[i*m.dtype.Size():], float64(x))
	}
	return tensor.FromBytes(name, m.dtype, shape, data), nil
}

func intRange(d tensor.DType) (int64, int64) {
	switch d {
	case tensor.Uint8:
		return 0, math.MaxUint8
	case tensor.Int8:
		return math.MinInt8, math.MaxInt8
	case tensor.Int16:
		return math.MinInt16, math.MaxInt16
	case tensor.Uint16:
		return 0, math.MaxUint16
	}
	return math.MinInt32, math.MaxInt32
}

// FromTensor converts a tensor into an Array for encoding. The tensor must be
// valid; a dtype without an ArrayProto mapping is an error.
func FromTensor(t tensor.Tensor, o Options) (Array, error) {
	if err := t.Validate(); err != nil {
		return Array{}, err
	}
	dt, ok := byDType[t.DType]
	if !ok {
		return Array{}, fmt.Errorf("tensor %q: dtype %s has no ArrayProto mapping", t.Name, t.DType)
	}
	a := Array{DType: dt, Shape: t.Shape}
	if a.Shape == nil {
		a.Shape = []int64{}
	}
	var err error
	// The array is only marshalled, never written: views of the tensor's
	// bytes spare a copy of every response.
	switch t.DType {
	case tensor.Float32:
		a.Float, err = tensor.View[float32](t)
	case tensor.Float64:
		a.Double, err = tensor.View[float64](t)
	case tensor.Int32:
		a.Int, err = tensor.View[int32](t)
	case tensor.Int64:
		a.Int64, err = tensor.View[int64](t)
	case tensor.Uint32:
		var v []uint32
		v, err = t.AsUint32()
		a.Int64 = make([]int64, len(v))
		for i, x := range v {
			a.Int64[i] = int64(x)
		}
	case tensor.Uint64:
		var v []uint64
		v, err = t.AsUint64()
		a.Int64 = make([]int64, len(v))
		for i, x := range v {
			a.Int64[i] = int64(x)
		}
	case tensor.String:
		a.String = t.Strings
	case tensor.Float16, tensor.BFloat16:
		var v []uint16
		v, err = t.AsUint16()
		a.Float = make([]float32, len(v))
		for i, x := range v {
			if t.DType == tensor.Float16 {
				a.Float[i] = tensor.Float16ToFloat32(x)
			} else {
				a.Float[i] = tensor.BFloat16ToFloat32(x)
			}
		}
	case tensor.Bool:
		if o.BoolInInt {
			a.Int = make([]int32, len(t.Data))
			for i, b := range t.Data {
				a.Int[i] = int32(b)
			}
		} else {
			a.Bool, err = t.AsBool()
		}
	default: // Uint8, Int8, Int16, Uint16 in int_val
		var f []float64
		f, err = t.Float64s()
		a.Int = make([]int32, len(f))
		for i, x := range f {
			a.Int[i] = int32(x)
		}
	}
	return a, err
}

// Join renders names for messages: "a", "b", "c".
func Join(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
