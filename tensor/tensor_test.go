package tensor

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestFromValuesRoundTrip(t *testing.T) {
	shape := []int64{2, 2}
	check := func(t *testing.T, tn Tensor, want DType, wantBytes int) {
		t.Helper()
		if tn.DType != want {
			t.Fatalf("dtype %s, want %s", tn.DType, want)
		}
		if err := tn.Validate(); err != nil {
			t.Fatal(err)
		}
		if len(tn.Data) != wantBytes {
			t.Fatalf("%d data bytes, want %d", len(tn.Data), wantBytes)
		}
	}
	t.Run("float32", func(t *testing.T) {
		v := []float32{1.5, -2, float32(math.Inf(1)), 3e-38}
		tn := FromFloat32("x", shape, v)
		check(t, tn, Float32, 16)
		// Little-endian layout, checked by hand for the first element (1.5 = 0x3fc00000).
		if !slices.Equal(tn.Data[:4], []byte{0x00, 0x00, 0xc0, 0x3f}) {
			t.Fatalf("first element bytes % x, want 00 00 c0 3f", tn.Data[:4])
		}
		got, err := tn.AsFloat32()
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("AsFloat32 = %v, %v; want %v", got, err, v)
		}
		v[0] = 99 // From copied
		if got2, _ := tn.AsFloat32(); got2[0] != 1.5 {
			t.Fatal("From did not copy its input")
		}
	})
	t.Run("int64", func(t *testing.T) {
		v := []int64{math.MinInt64, -1, 0, math.MaxInt64}
		tn := FromInt64("x", shape, v)
		check(t, tn, Int64, 32)
		if !slices.Equal(tn.Data[8:16], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) {
			t.Fatalf("-1 encodes as % x", tn.Data[8:16])
		}
		got, err := tn.AsInt64()
		if err != nil || !slices.Equal(got, v) {
			t.Fatalf("AsInt64 = %v, %v", got, err)
		}
		view, err := View[int64](tn)
		if err != nil || !slices.Equal(view, v) {
			t.Fatalf("View = %v, %v", view, err)
		}
	})
	t.Run("every fixed dtype", func(t *testing.T) {
		cases := []struct {
			tn   Tensor
			want DType
		}{
			{FromBool("b", []int64{4}, []bool{true, false, true, true}), Bool},
			{FromUint8("b", []int64{4}, []uint8{0, 1, 254, 255}), Uint8},
			{FromUint16("b", []int64{4}, []uint16{0, 1, 2, 65535}), Uint16},
			{FromUint32("b", []int64{4}, []uint32{0, 1, 2, math.MaxUint32}), Uint32},
			{FromUint64("b", []int64{4}, []uint64{0, 1, 2, math.MaxUint64}), Uint64},
			{FromInt8("b", []int64{4}, []int8{-128, -1, 0, 127}), Int8},
			{FromInt16("b", []int64{4}, []int16{-32768, -1, 0, 32767}), Int16},
			{FromInt32("b", []int64{4}, []int32{math.MinInt32, -1, 0, math.MaxInt32}), Int32},
			{FromFloat64("b", []int64{4}, []float64{-1e300, 0, 1, math.Pi}), Float64},
			{FromFloat16Bits("b", []int64{4}, []uint16{0x3c00, 0, 0xc000, 0x7bff}), Float16},
			{FromBFloat16Bits("b", []int64{4}, []uint16{0x3f80, 0, 0xc000, 0x7f7f}), BFloat16},
		}
		for _, c := range cases {
			check(t, c.tn, c.want, 4*c.want.Size())
			f, err := c.tn.Float64s()
			if err != nil || len(f) != 4 {
				t.Fatalf("%s Float64s = %v, %v", c.want, f, err)
			}
		}
		f, _ := cases[7].tn.Float64s()
		if !slices.Equal(f, []float64{math.MinInt32, -1, 0, math.MaxInt32}) {
			t.Fatalf("int32 Float64s = %v", f)
		}
		h, _ := cases[9].tn.Float64s()
		if !slices.Equal(h, []float64{1, 0, -2, 65504}) {
			t.Fatalf("fp16 Float64s = %v", h)
		}
		bf, _ := cases[10].tn.Float64s()
		if bf[0] != 1 || bf[2] != -2 {
			t.Fatalf("bf16 Float64s = %v", bf)
		}
	})
	t.Run("strings", func(t *testing.T) {
		tn := FromStrings("s", []int64{3}, []string{"a", "", "héllo"})
		if err := tn.Validate(); err != nil {
			t.Fatal(err)
		}
		got, err := tn.AsStrings()
		if err != nil || !slices.Equal(got, []string{"a", "", "héllo"}) {
			t.Fatalf("AsStrings = %v, %v", got, err)
		}
		if _, err := tn.AsFloat32(); !errors.Is(err, ErrDType) {
			t.Fatalf("AsFloat32 on BYTES: %v, want ErrDType", err)
		}
	})
	t.Run("dtype mismatch", func(t *testing.T) {
		tn := FromInt32("i", []int64{1}, []int32{7})
		if _, err := tn.AsFloat32(); !errors.Is(err, ErrDType) || !strings.Contains(err.Error(), `"i" is INT32, not FP32`) {
			t.Fatalf("err = %v", err)
		}
		if _, err := tn.AsBool(); !errors.Is(err, ErrDType) {
			t.Fatalf("AsBool err = %v", err)
		}
	})
}

func TestViewAliases(t *testing.T) {
	x := FromFloat32("x", []int64{3}, []float32{1, 2, 3})
	v, err := View[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	x.Data[0], x.Data[1], x.Data[2], x.Data[3] = 0, 0, 0x80, 0x40 // 4.0
	if v[0] != 4 {
		t.Fatalf("view of aligned data is a copy: v[0] = %v after writing 4 into the tensor", v[0])
	}
	if _, err := View[int32](x); !errors.Is(err, ErrDType) {
		t.Fatalf("View[int32] of FP32: %v", err)
	}
}

func TestViewUnaligned(t *testing.T) {
	buf := make([]byte, 17)
	src := FromFloat32("x", []int64{4}, []float32{1, 2, 3, 4})
	copy(buf[1:], src.Data)
	un := FromBytes("x", Float32, []int64{4}, buf[1:])
	got, err := View[float32](un)
	if err != nil || !slices.Equal(got, []float32{1, 2, 3, 4}) {
		t.Fatalf("View of unaligned data = %v, %v", got, err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		tn      Tensor
		wantErr string
	}{
		{"ok scalar", FromFloat32("x", nil, []float32{1}), ""},
		{"ok empty", FromFloat32("x", []int64{0, 3}, nil), ""},
		{"invalid dtype", Tensor{Name: "x", Shape: []int64{1}, Data: []byte{1}}, "invalid datatype"},
		{"unknown dtype", Tensor{Name: "x", DType: 200, Shape: []int64{1}, Data: []byte{1}}, "invalid datatype"},
		{"negative dim", FromFloat32("x", []int64{2, -1}, []float32{1, 2}), "dim 1 is -1"},
		{"short data", FromFloat32("x", []int64{2, 3}, []float32{1, 2}), "needs 24 bytes (6 elements of 4 bytes), got 8 bytes"},
		{"long data", FromFloat32("x", []int64{1}, []float32{1, 2}), "needs 4 bytes"},
		{"bool byte", FromBytes("x", Bool, []int64{2}, []byte{1, 2}), "BOOL element 1 is byte 2"},
		{"string count", FromStrings("x", []int64{3}, []string{"a"}), "needs 3 elements, got 1"},
		{"string with data", Tensor{Name: "x", DType: String, Shape: []int64{0}, Data: []byte{1}}, "carries its elements in Strings"},
		{"numeric with strings", Tensor{Name: "x", DType: Int8, Shape: []int64{1}, Data: []byte{1}, Strings: [][]byte{{1}}}, "carries its elements in Data"},
		{"overflow", FromFloat32("x", []int64{1 << 30, 1 << 30, 1 << 30}, nil), "more than"},
		{"overflow with zero", FromFloat32("x", []int64{1 << 40, 1 << 40, 0}, nil), ""},
		{"negative after overflow", FromFloat32("x", []int64{1 << 40, 1 << 40, -1}, nil), "dim 2 is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tn.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseDTypeAndString(t *testing.T) {
	for d := Bool; d <= String; d++ {
		got, err := ParseDType(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", d.String(), got, err, d)
		}
	}
	if _, err := ParseDType("FLOAT"); err == nil {
		t.Error("ParseDType(FLOAT) succeeded; KServe calls it FP32")
	}
	if DType(99).String() != "DType(99)" || DType(99).Size() != 0 {
		t.Error("out-of-range DType")
	}
}

func TestPutFloat64(t *testing.T) {
	tests := []struct {
		d    DType
		v    float64
		want float64
	}{
		{Uint8, -5, 0}, {Uint8, 300, 255}, {Uint8, 7.9, 7},
		{Int8, -300, -128}, {Int8, -7.9, -7},
		{Int16, 1e9, 32767}, {Uint16, 70000, 65535},
		{Int32, -1e12, math.MinInt32}, {Uint32, math.NaN(), 0},
		{Int64, 1e30, math.MaxInt64}, {Uint64, -1, 0},
		{Bool, 0.5, 1}, {Bool, 0, 0}, {Bool, math.NaN(), 0},
		{Float16, 1.5, 1.5}, {BFloat16, -2, -2}, {Float32, 0.25, 0.25}, {Float64, math.Pi, math.Pi},
	}
	for _, tt := range tests {
		b := make([]byte, 8)
		PutFloat64(tt.d, b, tt.v)
		tn := FromBytes("x", tt.d, []int64{1}, b[:tt.d.Size()])
		got, err := tn.Float64s()
		if err != nil || got[0] != tt.want {
			t.Errorf("PutFloat64(%s, %v) reads back %v, %v; want %v", tt.d, tt.v, got, err, tt.want)
		}
	}
}
