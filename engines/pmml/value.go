package pmml

import (
	"math"
	"strconv"
	"strings"
)

// Kind says which member of a Value is set.
type Kind uint8

// The kinds of Value. The zero Value is Missing.
const (
	Missing Kind = iota
	Float        // numbers of every PMML numeric type (integer, float, double)
	String
	Bool
	invalidKind // an input that failed validation; never leaves the package
)

// String implements fmt.Stringer.
func (k Kind) String() string {
	switch k {
	case Missing:
		return "missing"
	case Float:
		return "float"
	case String:
		return "string"
	case Bool:
		return "bool"
	}
	return "invalid"
}

// Value is one field value: missing, a number, a string or a boolean. It is
// a small value type so that records and results need no allocation.
type Value struct {
	K Kind
	F float64 // the number when K is Float; 1 or 0 when K is Bool
	S string  // the string when K is String
}

// MissingValue is the missing Value (same as the zero Value).
var MissingValue = Value{}

// FloatValue returns a numeric Value.
func FloatValue(f float64) Value { return Value{K: Float, F: f} }

// StringValue returns a string Value.
func StringValue(s string) Value { return Value{K: String, S: s} }

// BoolValue returns a boolean Value.
func BoolValue(b bool) Value {
	if b {
		return Value{K: Bool, F: 1}
	}
	return Value{K: Bool}
}

// IsMissing reports whether v is missing.
func (v Value) IsMissing() bool { return v.K == Missing }

// Any converts v to a plain Go value: nil, float64, string or bool.
func (v Value) Any() any {
	switch v.K {
	case Float:
		return v.F
	case String:
		return v.S
	case Bool:
		return v.F != 0
	}
	return nil
}

// String formats v the way PMML writes values.
func (v Value) String() string {
	switch v.K {
	case Float:
		return formatFloat(v.F)
	case String:
		return v.S
	case Bool:
		if v.F != 0 {
			return "true"
		}
		return "false"
	}
	return ""
}

// num returns the numeric view of v and whether it has one.
func (v Value) num() (float64, bool) {
	switch v.K {
	case Float, Bool:
		return v.F, true
	case String:
		f, err := parseFloat(v.S)
		return f, err == nil
	}
	return 0, false
}

// DataType is a PMML dataType.
type DataType uint8

// The PMML data types. Dates and times are not supported.
const (
	TypeUnknown DataType = iota
	TypeString
	TypeInteger
	TypeFloat
	TypeDouble
	TypeBoolean
)

// String returns the PMML spelling.
func (t DataType) String() string {
	switch t {
	case TypeString:
		return "string"
	case TypeInteger:
		return "integer"
	case TypeFloat:
		return "float"
	case TypeDouble:
		return "double"
	case TypeBoolean:
		return "boolean"
	}
	return ""
}

// MarshalText writes the PMML spelling, so a DataType encodes as a JSON string.
func (t DataType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

func (t DataType) numeric() bool { return t == TypeInteger || t == TypeFloat || t == TypeDouble }

func parseDataType(n *node, s string) (DataType, error) {
	switch s {
	case "":
		return TypeUnknown, nil
	case "string":
		return TypeString, nil
	case "integer":
		return TypeInteger, nil
	case "float":
		return TypeFloat, nil
	case "double", "real":
		return TypeDouble, nil
	case "boolean":
		return TypeBoolean, nil
	}
	return 0, n.unsupported("dataType " + strconv.Quote(s))
}

// OpType is a PMML optype.
type OpType uint8

// The PMML optypes.
const (
	OpUnknown OpType = iota
	Categorical
	Ordinal
	Continuous
)

// String returns the PMML spelling.
func (o OpType) String() string {
	switch o {
	case Categorical:
		return "categorical"
	case Ordinal:
		return "ordinal"
	case Continuous:
		return "continuous"
	}
	return ""
}

// MarshalText writes the PMML spelling, so an OpType encodes as a JSON string.
func (o OpType) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

func parseOpType(n *node, s string) (OpType, error) {
	switch s {
	case "":
		return OpUnknown, nil
	case "categorical":
		return Categorical, nil
	case "ordinal":
		return Ordinal, nil
	case "continuous":
		return Continuous, nil
	}
	return 0, n.errf("optype %q is not one of categorical, ordinal, continuous", s)
}

// parseFloat parses PMML numbers, which include INF, -INF and NaN spellings.
func parseFloat(s string) (float64, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "INF", "Infinity", "+INF", "inf":
		return math.Inf(1), nil
	case "-INF", "-Infinity", "-inf":
		return math.Inf(-1), nil
	case "NaN", "nan":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// formatFloat writes a number the shortest way, integers without a fraction.
func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// convert casts v to the data type, reporting false when it cannot (an
// invalid value). TypeUnknown keeps v as it is.
func convert(v Value, t DataType) (Value, bool) {
	if v.K == Missing {
		return v, true
	}
	switch t {
	case TypeString:
		if v.K == String {
			return v, true
		}
		return Value{K: String, S: v.String()}, true
	case TypeInteger:
		f, ok := v.num()
		if !ok || math.IsNaN(f) {
			return v, false
		}
		if f != math.Trunc(f) {
			return v, false
		}
		return Value{K: Float, F: f}, true
	case TypeFloat, TypeDouble:
		f, ok := v.num()
		if !ok {
			return v, false
		}
		return Value{K: Float, F: f}, true
	case TypeBoolean:
		switch v.K {
		case Bool:
			return v, true
		case Float:
			return BoolValue(v.F != 0), true
		case String:
			switch strings.ToLower(strings.TrimSpace(v.S)) {
			case "true", "1":
				return BoolValue(true), true
			case "false", "0":
				return BoolValue(false), true
			}
			return v, false
		}
	}
	return v, true
}

// parseConst turns an attribute or element text into a Value of the type.
func parseConst(s string, t DataType) (Value, bool) {
	switch t {
	case TypeString:
		return StringValue(s), true
	case TypeUnknown:
		if f, err := parseFloat(s); err == nil {
			return FloatValue(f), true
		}
		return StringValue(s), true
	}
	return convert(StringValue(s), t)
}

// equalValues compares two values the PMML way: numerically when both have a
// numeric view, otherwise as strings.
func equalValues(a, b Value) bool {
	if a.K == b.K {
		if a.K == String {
			return a.S == b.S
		}
		return a.F == b.F
	}
	af, aok := a.num()
	bf, bok := b.num()
	if aok && bok {
		return af == bf
	}
	return a.String() == b.String()
}

// compareValues orders two values: as strings when both are strings,
// numerically when both have a numeric view, otherwise by their text.
func compareValues(a, b Value) int {
	if a.K == String && b.K == String {
		return strings.Compare(a.S, b.S)
	}
	af, aok := a.num()
	bf, bok := b.num()
	if aok && bok {
		switch {
		case af < bf:
			return -1
		case af > bf:
			return 1
		}
		return 0
	}
	return strings.Compare(a.String(), b.String())
}
