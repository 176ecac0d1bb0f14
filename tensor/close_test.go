package tensor

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestClose(t *testing.T) {
	inf := float32(math.Inf(1))
	// max|want| is 100 (the infinity does not count): the bound under
	// F32Accumulated is 1e-6 + 1e-5*100 = 1.001e-3 for every element.
	want := FromFloat32("y", []int64{2, 3}, []float32{1, 100, float32(nan()), -0.0135, 0, inf})
	tests := []struct {
		name    string
		got     Tensor
		wantErr string
	}{
		{"exact", FromFloat32("y", []int64{2, 3}, []float32{1, 100, float32(nan()), -0.0135, 0, inf}), ""},
		{"large element within", FromFloat32("y", []int64{2, 3}, []float32{1, 100.0009, float32(nan()), -0.0135, 0, inf}), ""},
		// 7% off for itself, but 1e-4 of the tensor's scale: the batching case.
		{"small element within the tensor's scale", FromFloat32("y", []int64{2, 3}, []float32{1, 100, float32(nan()), -0.0145, 0.0009, inf}), ""},
		{"beyond", FromFloat32("y", []int64{2, 3}, []float32{1.002, 100.01, float32(nan()), -0.0135, 0, inf}),
			"element 1 (index [0 1]) is 100.01000213623047, want 100: |difference| 0.01 > bound 0.001 (2 of 6 elements out; float32 accumulated"},
		{"nan vs number", FromFloat32("y", []int64{2, 3}, []float32{1, 100, 0, -0.0135, 0, inf}), "element 2 (index [0 2]) is 0, want NaN"},
		{"inf vs number", FromFloat32("y", []int64{2, 3}, []float32{1, 100, float32(nan()), -0.0135, 0, 1e30}), "element 5 (index [1 2]) is 1.0000000150474662e+30, want +Inf"},
		{"shape", FromFloat32("y", []int64{6}, []float32{1, 100, 0, 0, 0, 0}), "shape [6], want [2,3]"},
		{"dtype", FromFloat64("y", []int64{2, 3}, []float64{1, 100, 0, 0, 0, 0}), "dtype FP64, want FP32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Close(tt.got, want, F32Accumulated)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestCloseBatchedResNet is the comparison that failed under the old
// per-element rule on a CPU with AVX512-FP16: a small logit of a batched
// ResNet-18 off by 1.5e-6 (1.1e-4 of itself) in a tensor whose largest
// magnitude is about 1.
func TestCloseBatchedResNet(t *testing.T) {
	want := FromFloat32("logits", []int64{1, 3}, []float32{-0.01354152150452137, 0.9, -1.2})
	got := FromFloat32("logits", []int64{1, 3}, []float32{-0.013543009757995605, 0.9, -1.2})
	if err := Close(got, want, F32Accumulated); err != nil {
		t.Fatal(err)
	}
	if r := Ratio(got, want, F32Accumulated); r < 0.1 || r > 0.15 {
		t.Errorf("Ratio = %v, want 1.49e-6/1.3e-5 = 0.11", r)
	}
}

func TestCloseExactAndNonFloat(t *testing.T) {
	x := FromFloat32("x", []int64{2}, []float32{1, float32(math.Copysign(0, -1))})
	if err := Close(x, FromFloat32("x", []int64{2}, []float32{1, 0}), Exact); err != nil {
		t.Errorf("-0 vs 0 under Exact: %v", err)
	}
	if err := Close(x, FromFloat32("x", []int64{2}, []float32{math.Nextafter32(1, 2), 0}), Exact); err == nil {
		t.Error("one ulp apart compared equal under Exact")
	}
	// Integers compare exactly whatever the tolerance, even past 2^53.
	a := FromInt64("i", []int64{1}, []int64{1<<60 + 1})
	b := FromInt64("i", []int64{1}, []int64{1 << 60})
	if err := Close(a, b, GPU); err == nil || !strings.Contains(err.Error(), "INT64 compares exactly") {
		t.Errorf("int64 differing in the last bit: %v", err)
	}
	if r := Ratio(a, b, GPU); !math.IsInf(r, 1) {
		t.Errorf("Ratio of differing integers = %v, want +Inf", r)
	}
	if err := Close(FromStrings("s", []int64{1}, []string{"a"}), FromStrings("s", []int64{1}, []string{"b"}), GPU); err == nil {
		t.Error("different strings compared close")
	}
	// An all-zero reference leaves only Atol.
	z := FromFloat32("z", []int64{2}, []float32{0, 0})
	if err := Close(FromFloat32("z", []int64{2}, []float32{5e-7, 0}), z, F32Elementwise); err != nil {
		t.Error(err)
	}
	if err := Close(FromFloat32("z", []int64{2}, []float32{2e-6, 0}), z, F32Elementwise); err == nil {
		t.Error("2e-6 off an all-zero reference passed atol 1e-6")
	}
}

func TestFor(t *testing.T) {
	if got := F32Accumulated.For(Float64); got != F64 {
		t.Errorf("F32Accumulated.For(Float64) = %v", got)
	}
	if got := F32Accumulated.For(Float32); got != F32Accumulated {
		t.Errorf("F32Accumulated.For(Float32) = %v", got)
	}
	if got := Exact.For(Float64); got != Exact {
		t.Errorf("Exact.For(Float64) = %v", got)
	}
}

func TestCloseValues(t *testing.T) {
	want := []float64{0.7, 0.2, 0.1}
	if err := CloseValues("probs", []float64{0.7000001, 0.2, 0.1}, want, F32Accumulated); err != nil {
		t.Error(err)
	}
	err := CloseValues("probs", []float64{0.7, 0.2, 0.11}, want, F32Accumulated)
	if err == nil || !strings.Contains(err.Error(), `tensor "probs": element 2 (index [2]) is 0.11, want 0.1`) {
		t.Errorf("err = %v", err)
	}
	if err := CloseValues("v", []float32{1}, []float32{1, 2}, Exact); err == nil || !strings.Contains(err.Error(), "shape [1], want [2]") {
		t.Errorf("lengths differ: %v", err)
	}
	if r := Ratio(FromFloat32("r", []int64{1}, []float32{2}), FromFloat32("r", []int64{1}, []float32{1}), Tolerance{Rtol: 0.5}); r != 2 {
		t.Errorf("Ratio = %v, want 2", r)
	}
}

// TestScriptsUseNamedTolerances keeps the scripts that compare answers on
// the numbers of a named tolerance: they are shell and python and cannot
// import them.
func TestScriptsUseNamedTolerances(t *testing.T) {
	for _, c := range []struct {
		file       string
		rtol, atol string // regexps with one group: the number
		tol        Tolerance
	}{
		{"scripts/bench-gpu.sh", `(?m)^RTOL=\$\{RTOL:-([0-9.e+-]+)\}$`, `(?m)^ATOL=\$\{ATOL:-([0-9.e+-]+)\}$`, GPU},
		{"scripts/bench-torchscript.py", `(?m)^RTOL, ATOL = ([0-9.e+-]+), [0-9.e+-]+$`, `(?m)^RTOL, ATOL = [0-9.e+-]+, ([0-9.e+-]+)$`, F32Reformulated},
		{"e2e/testdata/tritonclient/triton_check.py", `(?m)^RTOL = ([0-9.e+-]+)$`, `(?m)^ATOL = ([0-9.e+-]+)$`, F32Accumulated},
		{"e2e/testdata/eassdk/sdk_check.py", `(?m)^RTOL = ([0-9.e+-]+)$`, `(?m)^ATOL = ([0-9.e+-]+)$`, F32Accumulated},
	} {
		b, err := os.ReadFile("../" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []struct {
			re   string
			want float64
		}{{c.rtol, c.tol.Rtol}, {c.atol, c.tol.Atol}} {
			m := regexp.MustCompile(n.re).FindSubmatch(b)
			if m == nil {
				t.Errorf("%s: no line matches %s", c.file, n.re)
				continue
			}
			if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v != n.want {
				t.Errorf("%s: %s, tensor's %s has %g", c.file, m[0], c.tol.Name, n.want)
			}
		}
	}
}
