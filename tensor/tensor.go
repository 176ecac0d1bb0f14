// Package tensor is the one in-memory tensor every codec decodes into and every
// tensor model runs on: a dtype, a shape and contiguous row-major little-endian
// bytes (or a slice of byte strings for the String dtype).
//
// Tests compare computed outputs with Close (and CloseValues for plain
// lists) under one of the named Tolerances: every element within
// Atol + Rtol times the largest magnitude of the reference tensor, a rule
// that holds whatever kernel the CPU runs and whatever batch a request
// joins.
package tensor

import "fmt"

// DType is an element type. The zero value is Invalid.
type DType uint8

// The element types. The set is ONNX's numeric types plus bool and string.
const (
	Invalid DType = iota
	Bool
	Uint8
	Uint16
	Uint32
	Uint64
	Int8
	Int16
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	String
)

var dtypeInfo = [...]struct {
	name string // KServe v2 datatype name
	size int    // bytes per element; 0 for String
}{
	Invalid:  {"INVALID", 0},
	Bool:     {"BOOL", 1},
	Uint8:    {"UINT8", 1},
	Uint16:   {"UINT16", 2},
	Uint32:   {"UINT32", 4},
	Uint64:   {"UINT64", 8},
	Int8:     {"INT8", 1},
	Int16:    {"INT16", 2},
	Int32:    {"INT32", 4},
	Int64:    {"INT64", 8},
	Float16:  {"FP16", 2},
	BFloat16: {"BF16", 2},
	Float32:  {"FP32", 4},
	Float64:  {"FP64", 8},
	String:   {"BYTES", 0},
}

// String returns the KServe v2 name of d (FP32, INT64, BYTES, ...).
func (d DType) String() string {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("DType(%d)", d)
}

// Size is the number of bytes of one element; 0 for String and Invalid.
func (d DType) Size() int {
	if int(d) < len(dtypeInfo) {
		return dtypeInfo[d].size
	}
	return 0
}

// ParseDType maps a KServe v2 datatype name to a DType.
func ParseDType(name string) (DType, error) {
	for i, info := range dtypeInfo {
		if i != int(Invalid) && info.name == name {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown datatype %q", name)
}

// Tensor is a named n-dimensional array. Data holds NumElements()*DType.Size()
// bytes in row-major little-endian order; String tensors use Strings instead.
// A Tensor is a value: codecs and models must not mutate one they did not make.
type Tensor struct {
	Name    string
	DType   DType
	Shape   []int64
	Data    []byte
	Strings [][]byte
}

// NumElements is the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}
