// Package caffetest holds what the Caffe tests share: a writer of random
// trained weights for any network definition, the published definitions of
// the conformance folder, and the independent reference, OpenCV's DNN
// module reading the same two files (testdata/opencv_ref.py of package
// caffe, run on Debian's python3-opencv).
//
// The weights are written with this project's caffe.proto, and OpenCV
// reads them with Caffe's own: a field number wrong in ours fails there.
package caffetest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/caffe"
	"github.com/eas-server/eas-server/engines/caffe/netpb"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

// ConformanceDir is the folder of published Caffe definitions, outside the
// repository (require.ConformanceDir); when it is absent t ends, a skip or
// a failure under EAS_REQUIRE_CONFORMANCE=1.
func ConformanceDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(require.ConformanceDir(t, "caffe/SOURCE.md"))
}

// NetsDir is the folder of the project's own small test networks.
func NetsDir() string {
	return filepath.Join(require.RepoRoot(), "engines", "caffe", "testdata", "nets")
}

// Weights writes a .caffemodel for definition with random blobs of the
// shapes its layers need. Values are scaled by fan-in so activations stay
// in range through deep networks; BatchNorm gets positive variances and
// factors. With legacy, the file is in the V1 format (NetParameter.layers)
// with 4-D num/channels/height/width shapes, as old Caffe wrote them.
// Results are kept for the life of the process: the large published
// networks are written once however many tests serve them.
func Weights(definition []byte, seed uint64, legacy bool) ([]byte, error) {
	key := fmt.Sprintf("%x/%d/%v", sha256.Sum256(definition), seed, legacy)
	if b, ok := written.Load(key); ok {
		return b.([]byte), nil
	}
	b, err := weights(definition, seed, legacy)
	if err == nil {
		written.Store(key, b)
	}
	return b, err
}

var written sync.Map // Weights' results by definition, seed and format

func weights(definition []byte, seed uint64, legacy bool) ([]byte, error) {
	net, err := caffe.Load(definition, nil)
	if err != nil {
		return nil, err
	}
	shapes, err := caffe.WeightShapes(net)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := &netpb.NetParameter{Name: proto.String(net.Name)}
	for _, l := range net.Layers {
		ss, ok := shapes[l.Name]
		if !ok {
			continue
		}
		var bps []*netpb.BlobProto
		for i, s := range ss {
			bps = append(bps, blob(rng, l.Type, i, s, legacy))
		}
		if legacy {
			out.Layers = append(out.Layers, &netpb.V1LayerParameter{Name: proto.String(l.Name), Blobs: bps})
		} else {
			out.Layer = append(out.Layer, &netpb.LayerParameter{Name: proto.String(l.Name), Type: proto.String(l.Type), Blobs: bps})
		}
	}
	return proto.Marshal(out)
}

func blob(rng *rand.Rand, typ string, i int, shape []int64, legacy bool) *netpb.BlobProto {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	data := make([]float32, n)
	uniform := func(lo, hi float64) {
		for j := range data {
			data[j] = float32(lo + (hi-lo)*rng.Float64())
		}
	}
	switch {
	case typ == "BatchNorm" && i == 0: // mean
		uniform(-0.5, 0.5)
	case typ == "BatchNorm" && i == 1: // variance
		uniform(0.5, 1.5)
	case typ == "BatchNorm" && i == 2: // moving-average factor
		uniform(0.5, 2)
	case typ == "Scale" && i == 0:
		uniform(0.5, 1.5)
	case typ == "PReLU":
		uniform(0.05, 0.5)
	case len(shape) >= 2: // weights: He-style scale by fan-in
		fan := n / shape[0]
		if typ == "Deconvolution" {
			fan = n / shape[1]
		}
		s := math.Sqrt(6 / float64(max(fan, 1)))
		uniform(-s, s)
	default: // biases
		uniform(-0.1, 0.1)
	}
	bp := &netpb.BlobProto{Data: data}
	if legacy && len(shape) <= 4 {
		d := append([]int64{1, 1, 1, 1}[:4-len(shape)], shape...)
		bp.Num, bp.Channels, bp.Height, bp.Width = proto.Int32(int32(d[0])), proto.Int32(int32(d[1])), proto.Int32(int32(d[2])), proto.Int32(int32(d[3]))
	} else {
		if len(shape) == 0 {
			// Caffe writes a scalar (a shared PReLU slope) with no dims,
			// which OpenCV 4.6 cannot read; [1] holds the same value.
			shape = []int64{1}
		}
		bp.Shape = &netpb.BlobShape{Dim: shape}
	}
	return bp
}

// Python is Debian's interpreter, which sees Debian's python3-opencv
// (another python3 on PATH may not).
const Python = "/usr/bin/python3"

// HaveOpenCV says whether the reference can run; why says what is missing.
func HaveOpenCV() (ok bool, why string) {
	if err := exec.Command(Python, "-c", "import cv2, numpy").Run(); err != nil {
		return false, fmt.Sprintf("%s cannot import cv2 and numpy (%v); install python3-opencv (make test-deps does)", Python, err)
	}
	return true, ""
}

// RequireOpenCV skips t when OpenCV is missing, unless EAS_REQUIRE_OPENCV=1
// (make test sets it), which fails instead (package require).
func RequireOpenCV(t testing.TB) {
	t.Helper()
	if ok, why := HaveOpenCV(); !ok {
		require.Missing(t, require.OpenCV, "%s", why)
	}
}

type ioFile struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
	File  string  `json:"file"`
}

// OpenCV runs the network in OpenCV's DNN module on the same two files and
// returns the named blobs.
func OpenCV(t testing.TB, definition, weights string, inputs []tensor.Tensor, outputs []string) []tensor.Tensor {
	t.Helper()
	dir := t.TempDir()
	var req struct {
		Inputs  []ioFile `json:"inputs"`
		Outputs []string `json:"outputs"`
	}
	req.Outputs = outputs
	for i, in := range inputs {
		f := fmt.Sprintf("in%d.f32", i)
		if err := os.WriteFile(filepath.Join(dir, f), in.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		req.Inputs = append(req.Inputs, ioFile{Name: in.Name, Shape: in.Shape, File: f})
	}
	b, _ := json.Marshal(req)
	if err := os.WriteFile(filepath.Join(dir, "request.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(require.RepoRoot(), "engines", "caffe", "testdata", "opencv_ref.py")
	if out, err := exec.Command(Python, script, "run", definition, weights, dir).CombinedOutput(); err != nil {
		t.Fatalf("opencv reference: %v\n%s", err, out)
	}
	var resp struct {
		Outputs []ioFile `json:"outputs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	var outs []tensor.Tensor
	for _, o := range resp.Outputs {
		data, err := os.ReadFile(filepath.Join(dir, o.File))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, tensor.Tensor{Name: o.Name, DType: tensor.Float32, Shape: o.Shape, Data: data})
	}
	return outs
}

// Random makes a float32 input in [-1, 1).
func Random(name string, shape []int64, seed uint64) tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(2*rng.Float64() - 1)
	}
	return tensor.FromFloat32(name, shape, v)
}

// Compare checks got against want, OpenCV's answer or another run's, by
// tensor.Close under tol. Both are read as float32, OpenCV's dtype, and
// need only hold the same number of values: the shape compared is want's.
func Compare(got, want tensor.Tensor, tol tensor.Tolerance) error {
	g, err := got.AsFloat32()
	if err != nil {
		return err
	}
	w, err := want.AsFloat32()
	if err != nil {
		return err
	}
	if len(g) != len(w) {
		return fmt.Errorf("%s: %d values (shape %v), OpenCV has %d (shape %v)", want.Name, len(g), got.Shape, len(w), want.Shape)
	}
	return tensor.Close(tensor.FromFloat32(want.Name, want.Shape, g), tensor.FromFloat32(want.Name, want.Shape, w), tol)
}
