package torchscript

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

// The models are generated once per test binary by testdata/gen_models.py
// (Debian's python3-torch, random weights) into a temporary directory.
var (
	genOnce sync.Once
	genDir  string
	genErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if genDir != "" {
		os.RemoveAll(genDir)
	}
	os.Exit(code)
}

func models(t *testing.T) string {
	t.Helper()
	genOnce.Do(func() {
		genDir, genErr = os.MkdirTemp("", "torchscript-test-")
		if genErr != nil {
			return
		}
		out, err := exec.Command("/usr/bin/python3", "testdata/gen_models.py", genDir).CombinedOutput()
		if err != nil {
			genErr = fmt.Errorf("testdata/gen_models.py: %v\n%s\n(it needs Debian's python3-torch: run scripts/install-test-deps.sh)", err, out)
		}
	})
	if genErr != nil {
		t.Fatal(genErr)
	}
	return genDir
}

type refTensor struct {
	Name  string    `json:"name"`
	DType string    `json:"dtype"`
	Shape []int64   `json:"shape"`
	Data  []float64 `json:"data"`
}

type refModel struct {
	Args  [][2]string `json:"args"`
	Cases []struct {
		Inputs  []refTensor `json:"inputs"`
		Outputs []refTensor `json:"outputs"`
	} `json:"cases"`
}

func refs(t *testing.T) map[string]refModel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(models(t), "refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]refModel
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

var torchDTypes = map[string]tensor.DType{
	"float32": tensor.Float32, "float64": tensor.Float64, "int64": tensor.Int64,
	"int32": tensor.Int32, "bool": tensor.Bool,
}

// encode builds a tensor.Tensor from a reference's flat values.
func (r refTensor) encode(t *testing.T) tensor.Tensor {
	t.Helper()
	dt, ok := torchDTypes[r.DType]
	if !ok {
		t.Fatalf("reference dtype %q", r.DType)
	}
	out := tensor.Tensor{Name: r.Name, DType: dt, Shape: r.Shape, Data: make([]byte, len(r.Data)*dt.Size())}
	for i, v := range r.Data {
		switch dt {
		case tensor.Float32:
			binary.LittleEndian.PutUint32(out.Data[4*i:], math.Float32bits(float32(v)))
		case tensor.Float64:
			binary.LittleEndian.PutUint64(out.Data[8*i:], math.Float64bits(v))
		case tensor.Int64:
			binary.LittleEndian.PutUint64(out.Data[8*i:], uint64(int64(v)))
		case tensor.Int32:
			binary.LittleEndian.PutUint32(out.Data[4*i:], uint32(int32(v)))
		case tensor.Bool:
			if v != 0 {
				out.Data[i] = 1
			}
		}
	}
	return out
}

func check(t *testing.T, got tensor.Tensor, want refTensor) {
	t.Helper()
	if got.Name != want.Name || got.DType != torchDTypes[want.DType] || !reflect.DeepEqual(got.Shape, want.Shape) {
		t.Fatalf("output %s %s %v, want %s %s %v", got.Name, got.DType, got.Shape, want.Name, want.DType, want.Shape)
	}
	if err := tensor.Close(got, want.encode(t), tensor.F32Accumulated.For(got.DType)); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, name string) *Module {
	t.Helper()
	m, err := Load(filepath.Join(models(t), name+".pt"), Options{})
	if err != nil {
		t.Fatalf("%v\n(build the shim with scripts/build-torchshim.sh)", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestModels runs every generated model on its recorded inputs and compares
// with PyTorch's outputs: a traced MLP, a scripted if and runtime-length
// loop (float64), two inputs with a tuple output, a Dict[str, Tensor] output
// and an int64 input.
func TestModels(t *testing.T) {
	for name, ref := range refs(t) {
		t.Run(name, func(t *testing.T) {
			m := load(t, name)
			var args [][2]string
			for _, a := range m.Inputs() {
				args = append(args, [2]string{a.Name, a.Type})
			}
			if !reflect.DeepEqual(args, ref.Args) {
				t.Errorf("Inputs() = %v, want %v", args, ref.Args)
			}
			for _, c := range ref.Cases {
				var in []tensor.Tensor
				for _, r := range c.Inputs {
					in = append(in, r.encode(t))
				}
				out, err := m.Forward(in)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != len(c.Outputs) {
					t.Fatalf("%d outputs, want %d", len(out), len(c.Outputs))
				}
				for i := range out {
					check(t, out[i], c.Outputs[i])
				}
			}
		})
	}
}

// TestDTypes round-trips every supported dtype through a scripted copy that
// returns a list of two tensors; a scalar (0-d) and an empty tensor too.
func TestDTypes(t *testing.T) {
	m := load(t, "ident")
	for _, dt := range []tensor.DType{tensor.Bool, tensor.Uint8, tensor.Int8, tensor.Int16, tensor.Int32,
		tensor.Int64, tensor.Float16, tensor.BFloat16, tensor.Float32, tensor.Float64} {
		for _, shape := range [][]int64{{2, 3}, {}, {0, 4}} {
			in := tensor.Tensor{Name: "x", DType: dt, Shape: shape}
			n := int(in.NumElements()) * dt.Size()
			in.Data = make([]byte, n)
			for i := range in.Data {
				in.Data[i] = byte(i*7 + 1)
				if dt == tensor.Bool {
					in.Data[i] = byte(i % 2)
				}
			}
			out, err := m.Forward([]tensor.Tensor{in})
			if err != nil {
				t.Fatalf("%s %v: %v", dt, shape, err)
			}
			if len(out) != 2 {
				t.Fatalf("%s: %d outputs", dt, len(out))
			}
			for i, o := range out {
				if o.Name != fmt.Sprintf("output__%d", i) || o.DType != dt || !reflect.DeepEqual(o.Shape, shape) ||
					len(o.Data) != n || (n > 0 && !reflect.DeepEqual(o.Data, in.Data)) {
					t.Errorf("%s %v: output %d = %s %s %v %x, want the input back", dt, shape, i, o.Name, o.DType, o.Shape, o.Data)
				}
			}
		}
	}
}

func TestForwardErrors(t *testing.T) {
	m := load(t, "two")
	x := refTensor{DType: "float32", Shape: []int64{2, 4}, Data: make([]float64, 8)}.encode(t)
	y := refTensor{DType: "float32", Shape: []int64{3, 5}, Data: make([]float64, 15)}.encode(t)
	for name, in := range map[string][]tensor.Tensor{
		"too few":        {x},
		"too many":       {x, x, x},
		"shape mismatch": {x, y},
	} {
		if _, err := m.Forward(in); err == nil {
			t.Errorf("%s: no error", name)
		} else if strings.Contains(err.Error(), "Exception raised from") {
			t.Errorf("%s: the message carries a C++ backtrace: %v", name, err)
		}
	}
	// A model raising inside forward: the answer has the exception, not
	// the TorchScript tracebacks (the model's code, the exporter's paths),
	// which stay in Detail for the log.
	_, err := m.Forward([]tensor.Tensor{x, y})
	var fe *ForwardError
	if !errors.As(err, &fe) {
		t.Fatalf("shape mismatch: %T %v, want a *ForwardError", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "RuntimeError: ") || !strings.Contains(msg, "size of tensor a (4) must match the size of tensor b (5)") ||
		strings.Contains(msg, "Traceback") || strings.Contains(msg, "code/__torch__") || strings.Contains(msg, "gen_models.py") {
		t.Errorf("the brief message: %q", msg)
	}
	if !strings.Contains(fe.Detail(), "Traceback of TorchScript") {
		t.Errorf("Detail lost the traceback: %q", fe.Detail())
	}
	bad := x
	bad.Data = bad.Data[:5]
	if _, err := m.Forward([]tensor.Tensor{bad, x}); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("short data: %v", err)
	}
	str := tensor.Tensor{Name: "s", DType: tensor.String, Shape: []int64{1}, Strings: [][]byte{[]byte("a")}}
	if _, err := m.Forward([]tensor.Tensor{str, x}); err == nil || !strings.Contains(err.Error(), "BYTES") {
		t.Errorf("string input: %v", err)
	}
	// The module still works after the errors.
	if _, err := m.Forward([]tensor.Tensor{x, x}); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	models(t)
	for _, p := range []string{"../../processors/onnx/testdata/mlp.onnx", filepath.Join(genDir, "state_dict.pt"), "/nonexistent.pt"} {
		_, err := Load(p, Options{})
		if err == nil {
			t.Fatalf("%s: loaded", p)
		}
		_, torchVersion := LoadedLibrary()
		for _, w := range []string{p, "libtorch " + torchVersion} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not mention %q: %v", p, w, err)
			}
		}
		if strings.Contains(err.Error(), "Exception raised from") {
			t.Errorf("%s: the message carries a C++ backtrace: %v", p, err)
		}
	}
}

// TestConcurrentForward runs one module from many goroutines and checks the
// answers, then closes it while other goroutines call it: those calls end
// with ErrClosed, and closing twice is harmless.
func TestConcurrentForward(t *testing.T) {
	ref := refs(t)["mlp"]
	m, err := Load(filepath.Join(models(t), "mlp.pt"), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	var inputs, wants []tensor.Tensor
	for _, c := range ref.Cases {
		inputs = append(inputs, c.Inputs[0].encode(t))
		wants = append(wants, c.Outputs[0].encode(t))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				k := (g + i) % len(ref.Cases)
				out, err := m.Forward([]tensor.Tensor{inputs[k]})
				if err != nil {
					errs <- err
					return
				}
				if len(out) != 1 {
					errs <- fmt.Errorf("goroutine %d: outputs %v", g, out)
					return
				}
				if err := tensor.Close(out[0], wants[k], tensor.F32Accumulated); err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Close while calls are running: each running call finishes, later
	// ones fail with ErrClosed.
	started := make(chan struct{}, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 1 {
					started <- struct{}{}
				}
				if _, err := m.Forward(inputs[:1]); err != nil {
					if !errors.Is(err, ErrClosed) {
						errs <- err
					}
					return
				}
			}
		}()
	}
	for range 4 {
		<-started
	}
	m.Close()
	wg.Wait()
	m.Close()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := m.Forward(inputs[:1]); !errors.Is(err, ErrClosed) {
		t.Errorf("Forward after Close: %v", err)
	}
}

func TestIsTorchScript(t *testing.T) {
	dir := models(t)
	randomZip := filepath.Join(t.TempDir(), "random.zip")
	f, err := os.Create(randomZip)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, name := range []string{"a/data.pkl", "a/readme.txt", "b/code/x.py"} {
		w, _ := zw.Create(name)
		w.Write([]byte("not torch"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]bool{
		filepath.Join(dir, "mlp.pt"):              true,
		filepath.Join(dir, "control.pt"):          true,
		filepath.Join(dir, "state_dict.pt"):       false, // torch.save, not TorchScript
		"../../processors/onnx/testdata/mlp.onnx": false,
		randomZip:                false,
		"testdata/gen_models.py": false,
		t.TempDir():              false, // a directory
	} {
		got, err := IsTorchScript(path)
		if err != nil || got != want {
			t.Errorf("IsTorchScript(%s) = %v, %v; want %v", path, got, err, want)
		}
	}
	if _, err := IsTorchScript("/nonexistent.pt"); err == nil {
		t.Error("a missing file: no error")
	}
}

// TestMissingLibrary runs this test binary again with EAS_TORCHSHIM_LIB
// pointing at a missing file and at a file that is not a shared library:
// the shim is opened once per process, so the failure needs a fresh one.
func TestMissingLibrary(t *testing.T) {
	if os.Getenv("EAS_TORCHSHIM_MISSING_LIB_CHILD") == "1" {
		_, err := Load("testdata/gen_models.py", Options{})
		fmt.Println(err)
		if errors.Is(err, ErrLibrary) {
			os.Exit(0)
		}
		os.Exit(4)
	}
	for _, lib := range []string{"/nonexistent/libeas_torchshim.so", "testdata/gen_models.py"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$")
		cmd.Env = append(os.Environ(), "EAS_TORCHSHIM_MISSING_LIB_CHILD=1", EnvLibraryPath+"="+lib)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with %s: %v\n%s", lib, err, out)
		}
		for _, w := range []string{lib, "TorchScript needs libtorch", "scripts/build-torchshim.sh", EnvLibraryPath} {
			if !strings.Contains(string(out), w) {
				t.Errorf("message for %s does not mention %q:\n%s", lib, w, out)
			}
		}
	}
}

// TestOutputNames reads the names from forward's declared return type, and
// they match what a run returns.
func TestOutputNames(t *testing.T) {
	for name, want := range map[string][]string{
		"mlp":   {"output__0"},
		"two":   {"output__0", "output__1"},
		"named": nil, // a Dict: known from a run only
		"ident": nil, // a List: known from a run only
	} {
		m := load(t, name)
		got, ok := m.OutputNames()
		if ok != (want != nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s (returns %s): OutputNames = %v, %v; want %v", name, m.Returns(), got, ok, want)
		}
	}
}

// rewriteZip copies the zip at src to dst, replacing the content of the
// entries edit names.
func rewriteZip(t *testing.T, src, dst string, edit func(name string, b []byte) []byte) {
	t.Helper()
	zr, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range zr.File {
		rc, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		if _, err := io.Copy(&buf, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(edit(e.Name, []byte(buf.String()))); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNewerFileFormat: a file from a newer PyTorch (a format version past
// this libtorch's) fails naming both versions and what to do.
func TestNewerFileFormat(t *testing.T) {
	src := filepath.Join(models(t), "mlp.pt")
	v, ok := FileFormatVersion(src)
	if !ok || v <= 0 {
		t.Fatalf("FileFormatVersion(mlp.pt) = %d, %v", v, ok)
	}
	dst := filepath.Join(t.TempDir(), "newer.pt")
	rewriteZip(t, src, dst, func(name string, b []byte) []byte {
		if strings.HasSuffix(name, "/version") {
			return []byte("99\n")
		}
		return b
	})
	if v, ok := FileFormatVersion(dst); !ok || v != 99 {
		t.Fatalf("FileFormatVersion(newer.pt) = %d, %v", v, ok)
	}
	_, err := Load(dst, Options{})
	if err == nil {
		t.Fatal("a format-99 file loaded")
	}
	rt, rerr := OpenRuntime()
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, w := range []string{"format version 99", fmt.Sprintf("reads up to %d", rt.MaxFileVersion), "libtorch " + rt.TorchVersion, "re-save"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// TestDevices: an unknown device is refused, and a CUDA device on a
// libtorch without CUDA fails the load saying so.
func TestDevices(t *testing.T) {
	p := filepath.Join(models(t), "mlp.pt")
	if _, err := Load(p, Options{Device: "tpu:0"}); err == nil {
		t.Error("device tpu:0 loaded")
	}
	rt, err := OpenRuntime()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(p, Options{Device: "cuda:0"})
	switch {
	case rt.CUDADevices < 0:
		if err == nil || !strings.Contains(err.Error(), "built without CUDA") {
			t.Errorf("cuda:0 on a CPU-only libtorch: %v", err)
		}
	case rt.CUDADevices == 0:
		if err == nil || !strings.Contains(err.Error(), "0 CUDA device") {
			t.Errorf("cuda:0 with no GPU visible: %v", err)
		}
	default:
		if err != nil {
			t.Errorf("cuda:0 with %d GPUs: %v", rt.CUDADevices, err)
		}
	}
}

// TestOptimize loads models frozen and optimised for inference: the
// answers stay PyTorch's within tensor.F32Reformulated (BatchNorm folded
// into the convolutions' weights), an unknown optimisation is refused, and the control-flow model,
// whose loop freezing keeps, still runs.
func TestOptimize(t *testing.T) {
	rs := refs(t)
	for _, name := range []string{"mlp", "control", "resnet18"} {
		for _, opt := range []string{"freeze", "inference"} {
			m, err := Load(filepath.Join(models(t), name+".pt"), Options{Optimize: opt})
			if err != nil {
				t.Fatalf("%s, %s: %v", name, opt, err)
			}
			for ci, c := range rs[name].Cases {
				var ins []tensor.Tensor
				for _, in := range c.Inputs {
					ins = append(ins, in.encode(t))
				}
				out, err := m.Forward(ins)
				if err != nil {
					t.Fatalf("%s, %s, case %d: %v", name, opt, ci, err)
				}
				for i, w := range c.Outputs {
					if err := tensor.Close(out[i], w.encode(t), tensor.F32Reformulated.For(out[i].DType)); err != nil {
						t.Fatalf("%s, %s, case %d: output %d: %v", name, opt, ci, i, err)
					}
				}
			}
			m.Close()
		}
	}
	if _, err := Load(filepath.Join(models(t), "mlp.pt"), Options{Optimize: "fast"}); err == nil || !strings.Contains(err.Error(), "none, freeze, inference") {
		t.Errorf("optimize fast: %v", err)
	}
}
