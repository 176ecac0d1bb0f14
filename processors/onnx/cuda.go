package onnx

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// The CUDA execution provider. ONNX Runtime's core library holds only the
// provider bridge: for a CUDA session it loads libonnxruntime_providers_shared.so
// and libonnxruntime_providers_cuda.so from its own directory, and the latter
// loads the CUDA libraries (DT_NEEDED: libcudart, libcublas, libcublasLt,
// libcurand, and libcuda.so.1, the driver's) and, when first needed, cuDNN
// and cuFFT through dlopen. `make deps GPU=1` (scripts/fetch-onnxruntime.sh
// --gpu) installs the two provider libraries beside the core library; the
// CUDA libraries and the driver come from the machine.

// Provider files beside the core library.
const (
	providerShared = "libonnxruntime_providers_shared.so"
	providerCUDA   = "libonnxruntime_providers_cuda.so"
)

const (
	// driverLibrary is the NVIDIA driver's CUDA library; without it there
	// is no GPU to use.
	driverLibrary = "libcuda.so.1"
	// cudnnLibrary is loaded by the provider when an operator needs it
	// (convolutions, pooling, ...); a GPU deploy checks it is there rather
	// than failing the first request of a convolutional model.
	cudnnLibrary = "libcudnn.so.9"
)

// cudaRequirement says what the fetched provider was built for.
const cudaRequirement = "CUDA 13 and cuDNN 9, NVIDIA driver R580 or newer"

// providerLinks is what the fetched CUDA provider links against
// (readelf -d libonnxruntime_providers_cuda.so, less the C and C++ runtime),
// for when the provider file cannot be read.
var providerLinks = []string{"libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudart.so.13", driverLibrary}

// The values ONNX Runtime takes for the CUDA options.
var (
	arenaStrategies  = []string{"kNextPowerOfTwo", "kSameAsRequested"}
	convAlgoSearches = []string{"EXHAUSTIVE", "HEURISTIC", "DEFAULT"}
)

// checkCUDAConfig checks model_config's CUDA options and spells the
// enumerations as ONNX Runtime does (they are matched case-insensitively).
func checkCUDAConfig(cfg *Config) error {
	if cfg.GPUMemLimit < 0 {
		return fmt.Errorf("model_config.gpu_mem_limit: must be >= 0 bytes (0 = no limit), got %d", cfg.GPUMemLimit)
	}
	canon := func(key string, v *string, allowed []string) error {
		if *v == "" {
			return nil
		}
		i := slices.IndexFunc(allowed, func(a string) bool { return strings.EqualFold(a, *v) })
		if i < 0 {
			return fmt.Errorf("model_config.%s: must be one of %s, got %q", key, strings.Join(allowed, ", "), *v)
		}
		*v = allowed[i]
		return nil
	}
	if err := canon("arena_extend_strategy", &cfg.ArenaExtendStrategy, arenaStrategies); err != nil {
		return err
	}
	return canon("cudnn_conv_algo_search", &cfg.CudnnConvAlgoSearch, convAlgoSearches)
}

// cudaOptions are the CUDA provider options for cfg, keyed as ONNX
// Runtime's UpdateCUDAProviderOptions takes them; unset ones keep ONNX
// Runtime's defaults (no memory limit, kNextPowerOfTwo, EXHAUSTIVE).
func cudaOptions(cfg Config) map[string]string {
	o := map[string]string{"device_id": strconv.Itoa(cfg.DeviceID)}
	if cfg.GPUMemLimit > 0 {
		o["gpu_mem_limit"] = strconv.FormatInt(cfg.GPUMemLimit, 10)
	}
	if cfg.ArenaExtendStrategy != "" {
		o["arena_extend_strategy"] = cfg.ArenaExtendStrategy
	}
	if cfg.CudnnConvAlgoSearch != "" {
		o["cudnn_conv_algo_search"] = cfg.CudnnConvAlgoSearch
	}
	return o
}

// appendCUDA adds the CUDA execution provider to opts, or says why it
// cannot be had. There is no CPU fallback.
func (m *Model) appendCUDA(opts *ort.SessionOptions) error {
	dir := filepath.Dir(LoadedLibrary())
	var absent []string
	for _, f := range []string{providerShared, providerCUDA} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			absent = append(absent, f)
		}
	}
	if len(absent) > 0 {
		return m.gpuFailure(fmt.Sprintf("ONNX Runtime's CUDA execution provider is not installed: %s has no %s beside it; "+
			"run `make deps GPU=1` (scripts/fetch-onnxruntime.sh --gpu), which puts the provider built for ONNX Runtime %s (%s) there "+
			"(with %s or --onnxruntime-lib, put %s and %s in that library's directory)",
			LoadedLibrary(), strings.Join(absent, " and "), LibraryVersion, cudaRequirement, EnvLibraryPath, providerShared, providerCUDA), nil)
	}
	cuda, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return m.gpuError(err)
	}
	defer cuda.Destroy()
	if err := cuda.Update(cudaOptions(m.cfg)); err != nil {
		return m.gpuError(err)
	}
	if err := opts.AppendExecutionProviderCUDA(cuda); err != nil {
		return m.gpuError(err)
	}
	// cuDNN is loaded lazily, on the first operator that needs it: check
	// now so that the deploy, not the first request, fails.
	if missing, other := probeLibraries([]string{cudnnLibrary}); len(missing)+len(other) > 0 {
		return m.gpuFailure(missingHelp(missing, other), nil)
	}
	return nil
}

// gpuError explains why ONNX Runtime could not set up CUDA: the provider's
// libraries or the driver this machine lacks (checked by loading them), or
// what ONNX Runtime's message points at.
func (m *Model) gpuError(err error) error {
	text := ortMessage(err)
	var why []string
	driverMissing := slices.Contains(notFoundIn(text), driverLibrary)
	if missing, other := probeLibraries([]string{driverLibrary}); len(missing)+len(other) > 0 {
		driverMissing = true
	}
	if driverMissing {
		why = append(why, fmt.Sprintf("this machine has no NVIDIA driver (%s cannot be loaded): deploy on a machine with an NVIDIA GPU and its driver (R580 or newer for CUDA 13)", driverLibrary))
	}
	needed := append(providerNeeds(filepath.Join(filepath.Dir(LoadedLibrary()), providerCUDA)), cudnnLibrary)
	needed = slices.DeleteFunc(needed, func(l string) bool { return l == driverLibrary })
	missing, other := probeLibraries(needed)
	for _, l := range notFoundIn(text) {
		if l != driverLibrary && !slices.Contains(missing, l) {
			missing = append(missing, l)
		}
	}
	if len(missing)+len(other) > 0 {
		help := missingHelp(missing, other)
		if driverMissing {
			help = "there, " + help
		}
		why = append(why, help)
	}
	if len(why) == 0 {
		switch {
		case strings.Contains(text, "Invalid device ID"):
			why = append(why, fmt.Sprintf("model_config.device_id %d is not a CUDA device of this machine (devices are numbered from 0; CUDA_VISIBLE_DEVICES renumbers them)", m.cfg.DeviceID))
		case strings.Contains(text, "cudaErrorNoDevice") || strings.Contains(text, "no CUDA-capable device"):
			why = append(why, "the driver sees no CUDA device: check nvidia-smi, that the container was given the GPU (/dev/nvidia*), and CUDA_VISIBLE_DEVICES")
		case strings.Contains(text, "cudaErrorInsufficientDriver") || strings.Contains(text, "driver version is insufficient"):
			why = append(why, "the NVIDIA driver is older than CUDA 13 needs: install driver R580 or newer")
		case strings.Contains(text, "out of memory") || strings.Contains(text, "cudaErrorMemoryAllocation"):
			why = append(why, "the GPU ran out of memory: free it (other processes on the device), lower model_config.gpu_mem_limit, or pick another model_config.device_id")
		default:
			why = append(why, fmt.Sprintf("ONNX Runtime could not set up the session on its CUDA provider (built for %s); README.md, \"ONNX models on a GPU\", lists what it needs", cudaRequirement))
		}
	}
	return m.gpuFailure(strings.Join(why, "; "), errors.New(text))
}

// gpuFailure is the deploy error of a GPU code: why CUDA cannot be used,
// the CPU code to use instead, and ONNX Runtime's own message when there is
// one.
func (m *Model) gpuFailure(why string, ortErr error) error {
	msg := fmt.Sprintf("processor %q needs the CUDA execution provider of ONNX Runtime, which cannot run here: %s; or deploy with processor %q on the CPU",
		m.code, why, m.info.cpu)
	if ortErr != nil {
		msg += " (ONNX Runtime: " + ortErr.Error() + ")"
	}
	return errors.New(msg)
}

// missingHelp says which libraries are missing and how to provide them.
func missingHelp(missing, other []string) string {
	var b strings.Builder
	if len(missing) > 0 {
		named := make([]string, len(missing))
		for i, l := range missing {
			named[i] = l
			if what := libraryRole(l); what != "" {
				named[i] += " (" + what + ")"
			}
		}
		fmt.Fprintf(&b, "the CUDA provider needs %s, which the loader does not find; install them (CUDA 13's libraries and cuDNN 9 for CUDA 13), or restart the server with LD_LIBRARY_PATH naming the folders that hold them, "+
			"e.g. those of a pip-installed PyTorch built for CUDA 13: LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib:$SITE/nvidia/cudnn/lib "+
			"($SITE: python3 -c 'import site; print(site.getsitepackages()[0])'); see README.md, \"ONNX models on a GPU\"",
			strings.Join(named, ", "))
	}
	if len(other) > 0 {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "libraries that load but do not fit (another CUDA or cuDNN version?): %s", strings.Join(other, "; "))
	}
	return b.String()
}

// libraryRole names what a CUDA library is, by its file name.
func libraryRole(lib string) string {
	for _, r := range []struct{ prefix, role string }{
		{"libcudart.so", "CUDA runtime"},
		{"libcublasLt.so", "cuBLASLt"},
		{"libcublas.so", "cuBLAS"},
		{"libcurand.so", "cuRAND"},
		{"libcufft.so", "cuFFT"},
		{"libcudnn", "cuDNN"},
		{"libnvrtc", "NVRTC"},
		{"libcuda.so", "NVIDIA driver"},
	} {
		if strings.HasPrefix(lib, r.prefix) {
			return r.role
		}
	}
	return ""
}

// providerNeeds lists the libraries the CUDA provider library links
// against (its DT_NEEDED entries), providerLinks when it cannot be read.
func providerNeeds(path string) []string {
	f, err := elf.Open(path)
	if err != nil {
		return slices.Clone(providerLinks)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return slices.Clone(providerLinks)
	}
	return libs
}

// notFoundRE finds the libraries a dlopen error says are missing.
var notFoundRE = regexp.MustCompile(`([A-Za-z0-9_.+-]+\.so(?:\.[0-9]+)*): cannot open shared object file`)

// notFoundIn lists the libraries msg reports as missing.
func notFoundIn(msg string) []string {
	var libs []string
	for _, m := range notFoundRE.FindAllStringSubmatch(msg, -1) {
		if !slices.Contains(libs, m[1]) {
			libs = append(libs, m[1])
		}
	}
	return libs
}

// probeLibraries loads each library as the provider would (dlopen by
// name, so LD_LIBRARY_PATH, the loader's cache and the system folders
// apply) and unloads it again: missing are the libraries that are not
// found (a dependency of one counts, by its own name), other the load
// errors of libraries found but unusable.
func probeLibraries(libs []string) (missing, other []string) {
	for _, l := range libs {
		msg := loadLibrary(l)
		if msg == "" {
			continue
		}
		nf := notFoundIn(msg)
		if len(nf) == 0 {
			other = append(other, msg)
		}
		for _, n := range nf {
			if !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
	}
	return missing, other
}

// loadLibrary tries to dlopen lib and closes it; it returns dlerror's
// message, or "" when the library loads. Tests replace it.
var loadLibrary = dlopenProbe

// ortMessage is err's text without ONNX Runtime's source location prefix.
func ortMessage(err error) string {
	s := err.Error()
	if i := strings.Index(s, "[ONNXRuntimeError]"); i >= 0 {
		rest := s[i:]
		// [ONNXRuntimeError] : 1 : FAIL : message
		if parts := strings.SplitN(rest, " : ", 4); len(parts) == 4 {
			return parts[3]
		}
		return rest
	}
	return s
}
