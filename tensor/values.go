package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// Element is the set of Go types that map one-to-one onto a fixed-size DType.
// Float16 and BFloat16 have no Go type: they use uint16 bit patterns through
// FromFloat16Bits / FromBFloat16Bits and the Float32s/Float64s converters.
type Element interface {
	bool | uint8 | uint16 | uint32 | uint64 | int8 | int16 | int32 | int64 | float32 | float64
}

// nativeLittleEndian is true on every platform we ship (amd64, arm64); it lets
// typed copies use memmove instead of a per-element encode.
var nativeLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// DTypeOf returns the DType of the Go element type T. uint16 maps to Uint16,
// never to Float16 or BFloat16.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case bool:
		return Bool
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64:
		return Uint64
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case float32:
		return Float32
	case float64:
		return Float64
	}
	return Invalid
}

// From builds a tensor of v's element type. It copies v, so the caller may
// reuse it. The length of v must match shape; Validate reports a mismatch.
func From[T Element](name string, shape []int64, v []T) Tensor {
	dt := DTypeOf[T]()
	return Tensor{Name: name, DType: dt, Shape: cloneShape(shape), Data: toBytes(v)}
}

// Own builds a tensor that takes v over instead of copying it, on a
// little-endian host: Data aliases v, so the caller must not use v again. A
// decoder that made v for this tensor alone (a protobuf's repeated float)
// saves a copy of the request; on a big-endian host it copies, as From does.
func Own[T Element](name string, shape []int64, v []T) Tensor {
	if !nativeLittleEndian || len(v) == 0 {
		return From(name, shape, v)
	}
	var z T
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(z)))
	return Tensor{Name: name, DType: DTypeOf[T](), Shape: cloneShape(shape), Data: b}
}

// FromFloat32 builds an FP32 tensor; it copies v.
func FromFloat32(name string, shape []int64, v []float32) Tensor { return From(name, shape, v) }

// FromFloat64 builds an FP64 tensor; it copies v.
func FromFloat64(name string, shape []int64, v []float64) Tensor { return From(name, shape, v) }

// FromInt8 builds an INT8 tensor; it copies v.
func FromInt8(name string, shape []int64, v []int8) Tensor { return From(name, shape, v) }

// FromInt16 builds an INT16 tensor; it copies v.
func FromInt16(name string, shape []int64, v []int16) Tensor { return From(name, shape, v) }

// FromInt32 builds an INT32 tensor; it copies v.
func FromInt32(name string, shape []int64, v []int32) Tensor { return From(name, shape, v) }

// FromInt64 builds an INT64 tensor; it copies v.
func FromInt64(name string, shape []int64, v []int64) Tensor { return From(name, shape, v) }

// FromUint8 builds a UINT8 tensor; it copies v.
func FromUint8(name string, shape []int64, v []uint8) Tensor { return From(name, shape, v) }

// FromUint16 builds a UINT16 tensor; it copies v.
func FromUint16(name string, shape []int64, v []uint16) Tensor { return From(name, shape, v) }

// FromUint32 builds a UINT32 tensor; it copies v.
func FromUint32(name string, shape []int64, v []uint32) Tensor { return From(name, shape, v) }

// FromUint64 builds a UINT64 tensor; it copies v.
func FromUint64(name string, shape []int64, v []uint64) Tensor { return From(name, shape, v) }

// FromBool builds a BOOL tensor (one byte per element, 0 or 1); it copies v.
func FromBool(name string, shape []int64, v []bool) Tensor { return From(name, shape, v) }

// FromFloat16Bits builds an FP16 tensor from IEEE 754 half-precision bit
// patterns; it copies v. Use Float32ToFloat16 to make them.
func FromFloat16Bits(name string, shape []int64, v []uint16) Tensor {
	t := From(name, shape, v)
	t.DType = Float16
	return t
}

// FromBFloat16Bits builds a BF16 tensor from bfloat16 bit patterns; it copies v.
func FromBFloat16Bits(name string, shape []int64, v []uint16) Tensor {
	t := From(name, shape, v)
	t.DType = BFloat16
	return t
}

// FromStrings builds a BYTES (String) tensor; it copies the strings.
func FromStrings(name string, shape []int64, v []string) Tensor {
	s := make([][]byte, len(v))
	for i, x := range v {
		s[i] = []byte(x)
	}
	return Tensor{Name: name, DType: String, Shape: cloneShape(shape), Strings: s}
}

// FromBytes builds a tensor of a fixed-size dtype from little-endian bytes. It
// does NOT copy data: the tensor aliases it, so the caller must not change it
// afterwards. Codecs use it to avoid a copy of a decoded buffer.
func FromBytes(name string, dt DType, shape []int64, data []byte) Tensor {
	return Tensor{Name: name, DType: dt, Shape: cloneShape(shape), Data: data}
}

func cloneShape(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return append(make([]int64, 0, len(s)), s...)
}

func toBytes[T Element](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	var z T
	size := int(unsafe.Sizeof(z))
	out := make([]byte, len(v)*size)
	if nativeLittleEndian {
		copy(out, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*size))
		return out
	}
	for i, x := range v {
		putLE(out[i*size:], x)
	}
	return out
}

func putLE[T Element](b []byte, x T) {
	switch v := any(x).(type) {
	case bool:
		if v {
			b[0] = 1
		} else {
			b[0] = 0
		}
	case uint8:
		b[0] = v
	case int8:
		b[0] = byte(v)
	case uint16:
		binary.LittleEndian.PutUint16(b, v)
	case int16:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case uint32:
		binary.LittleEndian.PutUint32(b, v)
	case int32:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(v))
	case uint64:
		binary.LittleEndian.PutUint64(b, v)
	case int64:
		binary.LittleEndian.PutUint64(b, uint64(v))
	case float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	}
}

func getLE[T Element](b []byte) T {
	var z T
	var r any
	switch any(z).(type) {
	case bool:
		r = b[0] != 0
	case uint8:
		r = b[0]
	case int8:
		r = int8(b[0])
	case uint16:
		r = binary.LittleEndian.Uint16(b)
	case int16:
		r = int16(binary.LittleEndian.Uint16(b))
	case uint32:
		r = binary.LittleEndian.Uint32(b)
	case int32:
		r = int32(binary.LittleEndian.Uint32(b))
	case float32:
		r = math.Float32frombits(binary.LittleEndian.Uint32(b))
	case uint64:
		r = binary.LittleEndian.Uint64(b)
	case int64:
		r = int64(binary.LittleEndian.Uint64(b))
	case float64:
		r = math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return r.(T)
}

// ErrDType is wrapped by the typed accessors when the tensor's dtype is not
// the one asked for.
var ErrDType = errors.New("dtype mismatch")

// Values returns a copy of t's elements as []T. T must be the Go type of
// t.DType (uint16 also reads FP16 and BF16 bit patterns). The copy is safe to
// modify; see View for a zero-copy read.
func Values[T Element](t Tensor) ([]T, error) {
	if err := checkElem[T](t); err != nil {
		return nil, err
	}
	var z T
	size := int(unsafe.Sizeof(z))
	n := len(t.Data) / size
	out := make([]T, n)
	if n == 0 {
		return out, nil
	}
	if nativeLittleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n*size), t.Data)
		return out, nil
	}
	for i := range out {
		out[i] = getLE[T](t.Data[i*size:])
	}
	return out, nil
}

// View returns t's elements as []T without copying when it can: on a
// little-endian host with Data aligned for T. The result then aliases t.Data,
// so it must be treated as read-only (tensors are values; see Tensor). When a
// zero-copy view is not possible it returns a copy, as Values does. Bool data
// must hold only 0 or 1 bytes (Validate checks this) for the view to be sound.
func View[T Element](t Tensor) ([]T, error) {
	if err := checkElem[T](t); err != nil {
		return nil, err
	}
	var z T
	size := int(unsafe.Sizeof(z))
	n := len(t.Data) / size
	if n == 0 {
		return []T{}, nil
	}
	p := unsafe.Pointer(&t.Data[0])
	if nativeLittleEndian && uintptr(p)%unsafe.Alignof(z) == 0 {
		return unsafe.Slice((*T)(p), n), nil
	}
	return Values[T](t)
}

func checkElem[T Element](t Tensor) error {
	want := DTypeOf[T]()
	ok := t.DType == want || (want == Uint16 && (t.DType == Float16 || t.DType == BFloat16))
	if !ok {
		return fmt.Errorf("tensor %q is %s, not %s: %w", t.Name, t.DType, want, ErrDType)
	}
	var z T
	if len(t.Data)%int(unsafe.Sizeof(z)) != 0 {
		return fmt.Errorf("tensor %q: %d data bytes is not a multiple of the %s element size %d", t.Name, len(t.Data), t.DType, unsafe.Sizeof(z))
	}
	return nil
}

// AsFloat32 returns a copy of an FP32 tensor's values.
func (t Tensor) AsFloat32() ([]float32, error) { return Values[float32](t) }

// AsFloat64 returns a copy of an FP64 tensor's values.
func (t Tensor) AsFloat64() ([]float64, error) { return Values[float64](t) }

// AsInt8 returns a copy of an INT8 tensor's values.
func (t Tensor) AsInt8() ([]int8, error) { return Values[int8](t) }

// AsInt16 returns a copy of an INT16 tensor's values.
func (t Tensor) AsInt16() ([]int16, error) { return Values[int16](t) }

// AsInt32 returns a copy of an INT32 tensor's values.
func (t Tensor) AsInt32() ([]int32, error) { return Values[int32](t) }

// AsInt64 returns a copy of an INT64 tensor's values.
func (t Tensor) AsInt64() ([]int64, error) { return Values[int64](t) }

// AsUint8 returns a copy of a UINT8 tensor's values.
func (t Tensor) AsUint8() ([]uint8, error) { return Values[uint8](t) }

// AsUint16 returns a copy of a UINT16 tensor's values, or the bit patterns of
// an FP16 or BF16 tensor.
func (t Tensor) AsUint16() ([]uint16, error) { return Values[uint16](t) }

// AsUint32 returns a copy of a UINT32 tensor's values.
func (t Tensor) AsUint32() ([]uint32, error) { return Values[uint32](t) }

// AsUint64 returns a copy of a UINT64 tensor's values.
func (t Tensor) AsUint64() ([]uint64, error) { return Values[uint64](t) }

// AsBool returns a copy of a BOOL tensor's values; any non-zero byte is true.
func (t Tensor) AsBool() ([]bool, error) {
	if t.DType != Bool {
		return nil, fmt.Errorf("tensor %q is %s, not BOOL: %w", t.Name, t.DType, ErrDType)
	}
	out := make([]bool, len(t.Data))
	for i, b := range t.Data {
		out[i] = b != 0
	}
	return out, nil
}

// AsStrings returns a copy of a BYTES tensor's elements as strings.
func (t Tensor) AsStrings() ([]string, error) {
	if t.DType != String {
		return nil, fmt.Errorf("tensor %q is %s, not BYTES: %w", t.Name, t.DType, ErrDType)
	}
	out := make([]string, len(t.Strings))
	for i, s := range t.Strings {
		out[i] = string(s)
	}
	return out, nil
}

// Float64s converts the elements of any numeric or bool tensor to float64
// (bool as 0/1, FP16/BF16 decoded). Int64 and Uint64 values beyond 2^53 lose
// precision. It is meant for comparisons and text encodings, not hot paths.
func (t Tensor) Float64s() ([]float64, error) {
	if t.DType == String || t.DType.Size() == 0 {
		return nil, fmt.Errorf("tensor %q is %s, which has no numeric value: %w", t.Name, t.DType, ErrDType)
	}
	size := t.DType.Size()
	if len(t.Data)%size != 0 {
		return nil, fmt.Errorf("tensor %q: %d data bytes is not a multiple of the %s element size %d", t.Name, len(t.Data), t.DType, size)
	}
	out := make([]float64, len(t.Data)/size)
	for i := range out {
		out[i] = t.float64At(i)
	}
	return out, nil
}

// float64At reads element i of a fixed-size tensor as float64. The caller
// checks bounds and dtype.
func (t *Tensor) float64At(i int) float64 {
	b := t.Data[i*t.DType.Size():]
	switch t.DType {
	case Bool:
		if b[0] != 0 {
			return 1
		}
		return 0
	case Uint8:
		return float64(b[0])
	case Int8:
		return float64(int8(b[0]))
	case Uint16:
		return float64(binary.LittleEndian.Uint16(b))
	case Int16:
		return float64(int16(binary.LittleEndian.Uint16(b)))
	case Uint32:
		return float64(binary.LittleEndian.Uint32(b))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case Uint64:
		return float64(binary.LittleEndian.Uint64(b))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case Float16:
		return float64(Float16ToFloat32(binary.LittleEndian.Uint16(b)))
	case BFloat16:
		return float64(BFloat16ToFloat32(binary.LittleEndian.Uint16(b)))
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return math.NaN()
}

// PutFloat64 encodes v as one element of dtype d into b (len(b) >= d.Size()),
// converting with Go's conversion rules (truncation toward zero for integers;
// out-of-range values are clamped to the type's limits; NaN becomes 0 for
// integers; bool is v != 0). It is how pad values reach every dtype.
func PutFloat64(d DType, b []byte, v float64) {
	switch d {
	case Bool:
		if v != 0 && !math.IsNaN(v) {
			b[0] = 1
		} else {
			b[0] = 0
		}
	case Uint8:
		b[0] = uint8(clampU(v, math.MaxUint8))
	case Int8:
		b[0] = byte(int8(clampI(v, math.MinInt8, math.MaxInt8)))
	case Uint16:
		binary.LittleEndian.PutUint16(b, uint16(clampU(v, math.MaxUint16)))
	case Int16:
		binary.LittleEndian.PutUint16(b, uint16(int16(clampI(v, math.MinInt16, math.MaxInt16))))
	case Uint32:
		binary.LittleEndian.PutUint32(b, uint32(clampU(v, math.MaxUint32)))
	case Int32:
		binary.LittleEndian.PutUint32(b, uint32(int32(clampI(v, math.MinInt32, math.MaxInt32))))
	case Uint64:
		binary.LittleEndian.PutUint64(b, clampU(v, math.MaxUint64))
	case Int64:
		binary.LittleEndian.PutUint64(b, uint64(clampI(v, math.MinInt64, math.MaxInt64)))
	case Float16:
		binary.LittleEndian.PutUint16(b, Float32ToFloat16(float32(v)))
	case BFloat16:
		binary.LittleEndian.PutUint16(b, Float32ToBFloat16(float32(v)))
	case Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	}
}

func clampU(v float64, max uint64) uint64 {
	switch {
	case math.IsNaN(v) || v <= 0:
		return 0
	case v >= float64(max):
		return max
	}
	return uint64(v)
}

func clampI(v float64, min, max int64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v <= float64(min):
		return min
	case v >= float64(max):
		return max
	}
	return int64(v)
}

// Validate checks that t is internally consistent: a known dtype, no negative
// dimension, an element count that fits in memory, and Data (or Strings for
// BYTES) holding exactly that many elements; BOOL bytes must be 0 or 1. Codecs
// call it on every decoded tensor, so its messages are written for API users.
func (t *Tensor) Validate() error {
	if t.DType == Invalid || int(t.DType) >= len(dtypeInfo) {
		return fmt.Errorf("tensor %q: invalid datatype %s", t.Name, t.DType)
	}
	n, err := Elements(t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if t.DType == String {
		if len(t.Data) != 0 {
			return fmt.Errorf("tensor %q: a BYTES tensor carries its elements in Strings, but Data holds %d bytes", t.Name, len(t.Data))
		}
		if int64(len(t.Strings)) != n {
			return fmt.Errorf("tensor %q: shape %s needs %d elements, got %d", t.Name, FormatShape(t.Shape), n, len(t.Strings))
		}
		return nil
	}
	if len(t.Strings) != 0 {
		return fmt.Errorf("tensor %q: a %s tensor carries its elements in Data, but Strings holds %d elements", t.Name, t.DType, len(t.Strings))
	}
	size := int64(t.DType.Size())
	if int64(len(t.Data)) != n*size {
		return fmt.Errorf("tensor %q: shape %s of %s needs %d bytes (%d elements of %d bytes), got %d bytes",
			t.Name, FormatShape(t.Shape), t.DType, n*size, n, size, len(t.Data))
	}
	if t.DType == Bool {
		for i, b := range t.Data {
			if b > 1 {
				return fmt.Errorf("tensor %q: BOOL element %d is byte %d; only 0 and 1 are allowed", t.Name, i, b)
			}
		}
	}
	return nil
}

// MaxElements bounds the element count of one tensor (2^40). It keeps the
// products of attacker-chosen dims from overflowing int64 long before any
// allocation is attempted.
const MaxElements = int64(1) << 40

// Elements returns the product of shape's dims (1 for a scalar), or an error
// for a negative dim or a product over MaxElements.
func Elements(shape []int64) (int64, error) {
	zero := false
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %s: dim %d is %d; dims must be >= 0", FormatShape(shape), i, d)
		}
		zero = zero || d == 0
	}
	if zero {
		return 0, nil
	}
	n := int64(1)
	for _, d := range shape {
		if n > MaxElements/d {
			return 0, fmt.Errorf("shape %s has more than %d elements", FormatShape(shape), MaxElements)
		}
		n *= d
	}
	return n, nil
}

// FormatShape renders a shape as [2,3,4].
func FormatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}
