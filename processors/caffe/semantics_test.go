package caffe

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/caffe/caffetest"
	"github.com/eas-server/eas-server/engines/caffe/netpb"
	"github.com/eas-server/eas-server/tensor"
)

// TestLayersOpenCVCannotCheck covers what OpenCV 4.6 does not run as Caffe
// does (caffe/testdata/OPENCV_NOTES.md): Bias, ArgMax, InnerProduct with
// transpose, Log with base/scale/shift, LRN with k != 1, pooling with
// round_mode FLOOR and the legacy concat_dim. The reference is computed
// here, loop by loop, from Caffe's definition of each layer.
func TestLayersOpenCVCannotCheck(t *testing.T) {
	const def = `name: "semantics"
input: "data" input_shape { dim: 1 dim: 3 dim: 4 dim: 5 }
layer { name: "bias" type: "Bias" bottom: "data" top: "bias" }
layer { name: "argmax" type: "ArgMax" bottom: "data" top: "argmax" argmax_param { axis: 1 top_k: 2 } }
layer { name: "argmax_flat" type: "ArgMax" bottom: "data" top: "argmax_flat" argmax_param { top_k: 3 out_max_val: true } }
layer { name: "ipt" type: "InnerProduct" bottom: "data" top: "ipt" inner_product_param { num_output: 4 transpose: true } }
layer { name: "log" type: "Log" bottom: "data" top: "log" log_param { base: 2 scale: 0.5 shift: 3 } }
layer { name: "lrn" type: "LRN" bottom: "data" top: "lrn" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 2 } }
layer { name: "floor" type: "Pooling" bottom: "data" top: "floor" pooling_param { pool: MAX kernel_size: 2 stride: 2 round_mode: FLOOR } }
layer { name: "cat" type: "Concat" bottom: "data" bottom: "data" top: "cat" concat_param { concat_dim: 2 } }
`
	dir := modelDir(t, []byte(def), false)
	m := load(t, dir, nil)
	const n, C, H, W = 2, 3, 4, 5
	in := caffetest.Random("data", []int64{n, C, H, W}, 11)
	x, _ := in.AsFloat32()
	at := func(b, c, h, w int) float32 { return x[((b*C+c)*H+h)*W+w] }
	blobs := trainedBlobs(t, filepath.Join(dir, "weights.caffemodel"))

	names := []string{"bias", "argmax", "argmax_flat", "ipt", "log", "lrn", "floor", "cat"}
	got := map[string]tensor.Tensor{}
	for _, o := range predict(t, m, []tensor.Tensor{in}, names) {
		got[o.Name] = o
	}
	check := func(name string, shape []int64, want []float32) {
		t.Helper()
		g := got[name]
		if !slices.Equal(g.Shape, shape) {
			t.Errorf("%s: shape %v, want %v", name, g.Shape, shape)
			return
		}
		if err := caffetest.Compare(g, tensor.FromFloat32(name, shape, want), tensor.F32Accumulated); err != nil {
			t.Error(err)
		}
	}

	var want []float32
	b := blobs["bias"][0]
	for i := range n * C * H * W {
		want = append(want, x[i]+b[(i/(H*W))%C])
	}
	check("bias", []int64{n, C, H, W}, want)

	// ArgMax along channels, top 2: indexes as floats.
	want = nil
	for bi := range n {
		for k := range 2 {
			for h := range H {
				for w := range W {
					order := []int{0, 1, 2}
					slices.SortStableFunc(order, func(a, c int) int {
						return -cmpF(at(bi, a, h, w), at(bi, c, h, w))
					})
					want = append(want, float32(order[k]))
				}
			}
		}
	}
	check("argmax", []int64{n, 2, H, W}, want)

	// ArgMax over each sample, top 3 with values: N x 2 x 3 x 1, the
	// indexes first, then the values.
	want = nil
	per := C * H * W
	for bi := range n {
		idx := make([]int, per)
		for i := range idx {
			idx[i] = i
		}
		s := x[bi*per : (bi+1)*per]
		slices.SortStableFunc(idx, func(a, c int) int { return -cmpF(s[a], s[c]) })
		for _, i := range idx[:3] {
			want = append(want, float32(i))
		}
		for _, i := range idx[:3] {
			want = append(want, s[i])
		}
	}
	check("argmax_flat", []int64{n, 2, 3, 1}, want)

	// InnerProduct with transpose: the weights are stored K x N.
	want = nil
	wt, bias := blobs["ipt"][0], blobs["ipt"][1]
	for bi := range n {
		for o := range 4 {
			sum := float64(bias[o])
			for k := range per {
				sum += float64(x[bi*per+k]) * float64(wt[k*4+o])
			}
			want = append(want, float32(sum))
		}
	}
	check("ipt", []int64{n, 4}, want)

	want = nil
	for _, v := range x {
		want = append(want, float32(math.Log2(3+0.5*float64(v))))
	}
	check("log", []int64{n, C, H, W}, want)

	// LRN across channels: x / (k + alpha/size * sum of x^2 over the
	// channel window)^beta.
	want = nil
	for bi := range n {
		for c := range C {
			for h := range H {
				for w := range W {
					sq := 0.0
					for cc := c - 1; cc <= c+1; cc++ {
						if cc >= 0 && cc < C {
							v := float64(at(bi, cc, h, w))
							sq += v * v
						}
					}
					want = append(want, float32(float64(at(bi, c, h, w))/math.Pow(2+0.5/3*sq, 0.75)))
				}
			}
		}
	}
	check("lrn", []int64{n, C, H, W}, want)

	// FLOOR rounding: 5 wide with kernel 2, stride 2 gives 2, not 3.
	want = nil
	for bi := range n {
		for c := range C {
			for h := range 2 {
				for w := range 2 {
					want = append(want, max(at(bi, c, 2*h, 2*w), at(bi, c, 2*h, 2*w+1), at(bi, c, 2*h+1, 2*w), at(bi, c, 2*h+1, 2*w+1)))
				}
			}
		}
	}
	check("floor", []int64{n, C, 2, 2}, want)

	// concat_dim 2 joins along the height.
	want = nil
	for bi := range n {
		for c := range C {
			for range 2 {
				for h := range H {
					for w := range W {
						want = append(want, at(bi, c, h, w))
					}
				}
			}
		}
	}
	check("cat", []int64{n, C, 2 * H, W}, want)
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// trainedBlobs reads a .caffemodel's blobs by layer name.
func trainedBlobs(t *testing.T, path string) map[string][][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var np netpb.NetParameter
	if err := proto.Unmarshal(b, &np); err != nil {
		t.Fatal(err)
	}
	out := map[string][][]float32{}
	for _, l := range np.Layer {
		for _, bp := range l.Blobs {
			out[l.GetName()] = append(out[l.GetName()], bp.Data)
		}
	}
	return out
}
