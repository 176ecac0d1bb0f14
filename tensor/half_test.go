package tensor

import (
	"math"
	"testing"
)

func TestFloat16Known(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                  // largest finite half
		{65520, 0x7c00},                  // rounds up to Inf
		{float32(math.Inf(-1)), 0xfc00},  // -Inf
		{5.960464477539063e-08, 0x0001},  // smallest subnormal
		{6.097555160522461e-05, 0x03ff},  // largest subnormal
		{6.103515625e-05, 0x0400},        // smallest normal
		{2049, 0x6800},                   // tie rounds to even (2048)
		{2051, 0x6802},                   // tie rounds to even (2052)
		{1e-9, 0x0000},                   // underflow
		{2.9802322387695312e-08, 0x0000}, // exactly half the smallest subnormal: ties to even (0)
		{4.470348358154297e-08, 0x0001},  // 0.75 of the smallest subnormal rounds up
		{0.1, 0x2e66},
	}
	for _, tt := range tests {
		if got := Float32ToFloat16(tt.f); got != tt.h {
			t.Errorf("Float32ToFloat16(%v) = %#04x, want %#04x", tt.f, got, tt.h)
		}
	}
	if h := Float32ToFloat16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN encodes as %#04x, not a NaN", h)
	}
}

// TestFloat16Exhaustive checks that every half value decodes to a float32
// that encodes back to the same bits, and that decoding is monotonic.
func TestFloat16Exhaustive(t *testing.T) {
	prev := float32(math.Inf(-1))
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("%#04x decodes to NaN", h)
			}
			continue
		}
		if back := Float32ToFloat16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
		if h < 0x7c01 && h > 0 && f <= prev {
			t.Fatalf("%#04x -> %v is not above the previous %v", h, f, prev)
		}
		if h < 0x7c01 {
			prev = f
		}
	}
}

func TestBFloat16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := BFloat16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := Float32ToBFloat16(f); back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
	// 1 + 2^-8 is a tie between 1 and 1+2^-7: rounds to even (1).
	if got := Float32ToBFloat16(1 + 1.0/256); got != 0x3f80 {
		t.Errorf("tie rounds to %#04x, want 0x3f80", got)
	}
	if got := Float32ToBFloat16(1 + 3.0/256); got != 0x3f82 {
		t.Errorf("1+3/256 rounds to %#04x, want 0x3f82", got)
	}
	if h := Float32ToBFloat16(float32(math.NaN())); !math.IsNaN(float64(BFloat16ToFloat32(h))) {
		t.Errorf("NaN encodes as %#04x", h)
	}
}
