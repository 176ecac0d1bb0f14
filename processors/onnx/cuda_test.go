package onnx

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

func TestCUDAConfig(t *testing.T) {
	for _, tt := range []struct {
		cfg     string
		want    map[string]string // cudaOptions; nil when Configure must fail
		wantErr string
	}{
		{cfg: `{}`, want: map[string]string{"device_id": "0"}},
		{cfg: `{"device_id": 1, "gpu_mem_limit": 2147483648, "arena_extend_strategy": "kSameAsRequested", "cudnn_conv_algo_search": "HEURISTIC"}`,
			want: map[string]string{"device_id": "1", "gpu_mem_limit": "2147483648", "arena_extend_strategy": "kSameAsRequested", "cudnn_conv_algo_search": "HEURISTIC"}},
		// Case-insensitive, spelled as ONNX Runtime wants; 0 = no limit.
		{cfg: `{"gpu_mem_limit": 0, "arena_extend_strategy": "knextpoweroftwo", "cudnn_conv_algo_search": "default"}`,
			want: map[string]string{"device_id": "0", "arena_extend_strategy": "kNextPowerOfTwo", "cudnn_conv_algo_search": "DEFAULT"}},
		{cfg: `{"gpu_mem_limit": -1}`, wantErr: "model_config.gpu_mem_limit: must be >= 0 bytes"},
		{cfg: `{"gpu_mem_limit": "2GB"}`, wantErr: "gpu_mem_limit"},
		{cfg: `{"arena_extend_strategy": "grow"}`, wantErr: "model_config.arena_extend_strategy: must be one of kNextPowerOfTwo, kSameAsRequested"},
		{cfg: `{"cudnn_conv_algo_search": "fastest"}`, wantErr: "model_config.cudnn_conv_algo_search: must be one of EXHAUSTIVE, HEURISTIC, DEFAULT"},
		{cfg: `{"cuda_mem_limit": 1}`, wantErr: "gpu_mem_limit, arena_extend_strategy, cudnn_conv_algo_search"},
	} {
		t.Run(tt.cfg, func(t *testing.T) {
			m := New("onnx_cu100")
			err := m.Configure(processors.Spec{Code: "onnx_cu100", ModelSource: "model.onnx", GPU: 1, ModelConfig: []byte(tt.cfg)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cudaOptions(m.cfg); !maps.Equal(got, tt.want) {
				t.Errorf("cudaOptions = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGPUErrorText checks what a failed CUDA setup says, with the library
// loads faked: the driver and the CUDA libraries missing, only some of
// them, or present with ONNX Runtime failing for another reason.
func TestGPUErrorText(t *testing.T) {
	notFound := func(lib string) string { return lib + ": cannot open shared object file: No such file or directory" }
	for _, tt := range []struct {
		name    string
		missing []string // libraries the fake loader does not find
		ortErr  string
		want    []string
		notWant []string
	}{
		{
			name:    "no driver, no CUDA",
			missing: []string{"libcuda.so.1", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcurand.so.10", "libcudnn.so.9"},
			ortErr:  "Failed to load library /x/libonnxruntime_providers_cuda.so with error: " + notFound("libcublasLt.so.13"),
			want: []string{"no NVIDIA driver", "libcuda.so.1", "R580", "libcublasLt.so.13 (cuBLASLt)", "libcudart.so.13 (CUDA runtime)",
				"libcudnn.so.9 (cuDNN)", "LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib:$SITE/nvidia/cudnn/lib", `processor "onnx_cpu"`, "ONNX Runtime: Failed to load library"},
		},
		{
			name:    "cuBLAS missing",
			missing: []string{"libcublasLt.so.13", "libcublas.so.13"},
			ortErr:  notFound("libcublasLt.so.13"),
			want:    []string{"libcublasLt.so.13 (cuBLASLt), libcublas.so.13 (cuBLAS), which the loader does not find", "LD_LIBRARY_PATH", "restart the server"},
			notWant: []string{"no NVIDIA driver", "libcudart", "libcudnn"},
		},
		{
			name:    "named by ONNX Runtime only",
			ortErr:  notFound("libnvrtc.so.13"),
			want:    []string{"libnvrtc.so.13 (NVRTC)", "LD_LIBRARY_PATH"},
			notWant: []string{"no NVIDIA driver"},
		},
		{
			name:   "bad device",
			ortErr: "Invalid device ID: 3, must be between 0 (inclusive) and 1 (exclusive).",
			want:   []string{"model_config.device_id 3 is not a CUDA device", "Invalid device ID"},
		},
		{
			name:   "no device",
			ortErr: "CUDA failure 100: no CUDA-capable device is detected ; GPU=0 ; hostname=x ; expr=cudaGetDeviceCount(&num_devices);",
			want:   []string{"the driver sees no CUDA device", "/dev/nvidia"},
		},
		{
			name:   "old driver",
			ortErr: "CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version",
			want:   []string{"older than CUDA 13 needs", "R580"},
		},
		{
			name:   "unknown",
			ortErr: "something else",
			want:   []string{"could not set up the session on its CUDA provider", "ONNX Runtime: something else"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			saved := loadLibrary
			t.Cleanup(func() { loadLibrary = saved })
			loadLibrary = func(lib string) string {
				for _, m := range tt.missing {
					if m == lib {
						return notFound(lib)
					}
				}
				// cuBLAS's own dependency on cuBLASLt names the latter.
				if lib == "libcublas.so.13" && strings.Contains(strings.Join(tt.missing, " "), "libcublasLt.so.13") {
					return notFound("libcublasLt.so.13")
				}
				return ""
			}
			m := New("onnx_cu100")
			if err := m.Configure(processors.Spec{Code: "onnx_cu100", ModelSource: "model.onnx", GPU: 1, ModelConfig: []byte(`{"device_id": 3}`)}); err != nil {
				t.Fatal(err)
			}
			msg := m.gpuError(fmt.Errorf("/onnxruntime_src/x.cc:1 f() [ONNXRuntimeError] : 1 : FAIL : %s", tt.ortErr)).Error()
			for _, w := range append(tt.want, "CUDA execution provider", `"onnx_cu100"`) {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not contain %q:\n%s", w, msg)
				}
			}
			for _, w := range append(tt.notWant, "/onnxruntime_src/") {
				if strings.Contains(msg, w) {
					t.Errorf("message contains %q:\n%s", w, msg)
				}
			}
		})
	}
}

// installedProviderDir is the project-local ONNX Runtime folder when
// `make deps GPU=1` has put the CUDA provider in it, else "".
func installedProviderDir(t *testing.T) string {
	t.Helper()
	path, _, _ := librarySearch().Find()
	if path == "" {
		t.Fatalf("no ONNX Runtime library; run scripts/fetch-onnxruntime.sh")
	}
	dir := filepath.Dir(path)
	for _, f := range []string{providerShared, providerCUDA} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return ""
		}
	}
	return dir
}

// hasNVIDIAGPU says whether the machine shows an NVIDIA device.
func hasNVIDIAGPU() bool {
	_, err := os.Stat("/dev/nvidia0")
	return err == nil
}

// TestGPUDeployErrors deploys GPU codes in a fresh process (the ONNX
// Runtime environment is process-wide) whose library folder has, or has
// not, the CUDA provider, and checks the deploy either gets CUDA or fails
// saying precisely what is missing and what to do.
func TestGPUDeployErrors(t *testing.T) {
	if code := os.Getenv("EAS_ONNX_GPU_CHILD"); code != "" {
		m := New(code)
		if err := m.Configure(processors.Spec{Code: code, ModelSource: "testdata/conv.onnx", GPU: 1}); err != nil {
			fmt.Println("configure:", err)
			os.Exit(3)
		}
		if err := m.Load(context.Background(), processors.Files{ModelPath: "testdata/conv.onnx"}); err != nil {
			fmt.Println("DEPLOY ERROR:", err)
			os.Exit(0)
		}
		fmt.Println("DEPLOYED:", m.Metadata().Extra["execution_provider"])
		os.Exit(0)
	}
	path, _, _ := librarySearch().Find()
	if path == "" {
		t.Fatalf("no ONNX Runtime library; run scripts/fetch-onnxruntime.sh")
	}
	deploy := func(t *testing.T, dir, code string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPUDeployErrors$")
		cmd.Env = append(os.Environ(), "EAS_ONNX_GPU_CHILD="+code, EnvLibraryPath+"="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return string(out)
	}
	link := func(t *testing.T, dir, target string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, filepath.Base(target))); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("without the provider", func(t *testing.T) {
		dir := t.TempDir()
		link(t, dir, path)
		for _, code := range []string{"pytorch_gpu_1.6", "onnx_cu100"} {
			out := deploy(t, dir, code)
			for _, w := range []string{"DEPLOY ERROR", code, "CUDA execution provider", providerCUDA, "make deps GPU=1", codes[code].cpu, EnvLibraryPath} {
				if !strings.Contains(out, w) {
					t.Errorf("%s: output does not contain %q:\n%s", code, w, out)
				}
			}
		}
	})

	t.Run("with the provider", func(t *testing.T) {
		pdir := installedProviderDir(t)
		if pdir == "" {
			t.Skip("the CUDA provider is not installed (make deps GPU=1), so its deploy errors cannot be checked here")
		}
		dir := t.TempDir()
		for _, f := range []string{filepath.Base(path), providerShared, providerCUDA} {
			link(t, dir, filepath.Join(pdir, f))
		}
		for _, code := range []string{"pytorch_gpu_1.6", "onnx_cu100"} {
			out := deploy(t, dir, code)
			if strings.Contains(out, "DEPLOYED:") {
				if !strings.Contains(out, "CUDAExecutionProvider") {
					t.Fatalf("%s deployed on another provider:\n%s", code, out)
				}
				continue
			}
			// Named: a concrete library or the driver, and what to do.
			if !regexp.MustCompile(`lib[A-Za-z0-9_]+\.so\.[0-9]+`).MatchString(out) {
				t.Errorf("%s: the error names no library:\n%s", code, out)
			}
			if !strings.Contains(out, "LD_LIBRARY_PATH") && !strings.Contains(out, "NVIDIA driver") && !strings.Contains(out, "device") {
				t.Errorf("%s: the error does not say what to do:\n%s", code, out)
			}
			if !hasNVIDIAGPU() {
				// This machine: no driver, and (unless installed) no CUDA 13.
				for _, w := range []string{"no NVIDIA driver (libcuda.so.1 cannot be loaded)", "R580"} {
					if !strings.Contains(out, w) {
						t.Errorf("%s: output does not contain %q:\n%s", code, w, out)
					}
				}
			}
		}
	})
}

// TestCUDAProvider runs the reference models on the GPU and compares their
// answers with numpy's within tensor.GPU (TF32, cuDNN's algorithms). It
// needs an NVIDIA GPU with its driver, the provider (make deps GPU=1) and
// CUDA 13 / cuDNN 9 on the library path.
func TestCUDAProvider(t *testing.T) {
	if !hasNVIDIAGPU() {
		t.Skip("no NVIDIA GPU on this machine (/dev/nvidia0 missing)")
	}
	if installedProviderDir(t) == "" {
		t.Skip("the CUDA provider is not installed: run make deps GPU=1")
	}
	for _, cfg := range []string{
		`{}`,
		`{"gpu_mem_limit": 1073741824, "arena_extend_strategy": "kSameAsRequested", "cudnn_conv_algo_search": "HEURISTIC"}`,
	} {
		for _, name := range []string{"mlp", "multi_io", "conv", "seq"} {
			t.Run(name+"/"+cfg, func(t *testing.T) {
				refs := loadRefs(t, name)
				m := load(t, "onnx_cu100", filepath.Join("testdata", refs.Model), func(s *processors.Spec) {
					s.GPU, s.ModelConfig = 1, []byte(cfg)
				})
				if p := m.Metadata().Extra["execution_provider"]; p != "CUDAExecutionProvider" {
					t.Fatalf("provider %v", p)
				}
				for _, c := range refs.Cases {
					res, err := m.Run(t.Context(), checked(t, m, c.payload(t)))
					if err != nil {
						t.Fatalf("%s: %v", c.Name, err)
					}
					r := res[0]
					for i, want := range c.Outputs {
						if err := tensor.Close(r.Outputs[i], want.tensor(t), tensor.GPU); err != nil {
							t.Errorf("%s: %v", c.Name, err)
						}
					}
				}
			})
		}
	}
}

// TestGPUCodesSayWhatTheyRun: `eas-server processors` describes the
// pytorch_gpu_* codes as the loader runs them, TorchScript included (issue
// 34: it said ONNX only, while TorchScript files run on CUDA).
func TestGPUCodesSayWhatTheyRun(t *testing.T) {
	for _, code := range []string{"pytorch_gpu_1.6", "pytorch_gpu_1.10"} {
		info, ok := processors.Lookup(code)
		if !ok || !strings.Contains(info.Description, "TorchScript") || !strings.Contains(info.Description, "ONNX") {
			t.Errorf("%s: %q, want it to name TorchScript and ONNX", code, info.Description)
		}
	}
}
