package servicejson

import (
	"fmt"
	"slices"
	"strings"
)

// Code is a parsed processor code such as "tensorflow_gpu_1.15".
type Code struct {
	Raw     string // the code as written in service.json
	Family  string // pmml, tensorflow, pytorch, caffe, parameter_server, xgboost, onnx, triton, echo
	Device  string // "cpu", "gpu", or "" when the code runs on either
	Version string // framework version, e.g. "1.15"; "" when the code carries none
}

// IsGPU reports whether the code needs a GPU.
func (c Code) IsGPU() bool { return c.Device == "gpu" }

// IsCPU reports whether the code is the CPU build of its family.
func (c Code) IsCPU() bool { return c.Device == "cpu" }

// codeInfo is one row of the table of known codes. other is the same model
// family and version on the other device, "" when EAS has none.
type codeInfo struct {
	Code
	other string
}

// knownCodes is the table of docs/protocol.md "Processor codes" plus our own echo
// (a test and demo processor) and onnx_cpu (the CPU twin of EAS's
// onnx_cu100). parameter_sever is the misspelling older EAS pages use; it is
// kept so that old files still deploy.
var knownCodes = func() map[string]codeInfo {
	m := map[string]codeInfo{}
	add := func(raw, family, device, version, other string) {
		m[raw] = codeInfo{Code{Raw: raw, Family: family, Device: device, Version: version}, other}
	}
	pair := func(family, version string, hasCPU, hasGPU bool) {
		cpu := family + "_cpu_" + version
		gpu := family + "_gpu_" + version
		if hasCPU {
			other := ""
			if hasGPU {
				other = gpu
			}
			add(cpu, family, "cpu", version, other)
		}
		if hasGPU {
			other := ""
			if hasCPU {
				other = cpu
			}
			add(gpu, family, "gpu", version, other)
		}
	}
	for _, v := range []string{"1.12", "1.14", "1.15", "2.3", "2.4", "2.7"} {
		pair("tensorflow", v, true, v != "2.3")
	}
	for _, v := range []string{"1.6", "1.7", "1.9", "1.10"} {
		pair("pytorch", v, true, true)
	}
	add("pmml", "pmml", "cpu", "", "")
	add("caffe_cpu", "caffe", "cpu", "", "caffe_gpu")
	add("caffe_gpu", "caffe", "gpu", "", "caffe_cpu")
	add("parameter_server", "parameter_server", "cpu", "", "")
	add("parameter_sever", "parameter_server", "cpu", "", "")
	add("xgboost", "xgboost", "cpu", "", "")
	add("onnx_cpu", "onnx", "cpu", "", "onnx_cu100")
	add("onnx_cu100", "onnx", "gpu", "", "onnx_cpu")
	add("triton", "triton", "", "", "")
	add("echo", "echo", "", "", "")
	add("easycv", "easycv", "", "", "")
	add("easynlp", "easynlp", "", "", "")
	add("text_encoder", "text_encoder", "", "", "") // ours: EAS has no such code
	add("llm_cpu", "llm", "cpu", "", "llm_gpu")     // ours: EAS deploys LLMs through its own images
	add("llm_gpu", "llm", "gpu", "", "llm_cpu")
	add("easytransfer_cpu", "easytransfer", "cpu", "", "easytransfer_gpu")
	add("easytransfer_gpu", "easytransfer", "gpu", "", "easytransfer_cpu")
	return m
}()

// KnownCodes lists every processor code Parse accepts, sorted. It is the
// table of EAS built-in codes, not the set of processors this binary
// registered: a known code may still fail at deploy time when no processor
// implements it (processors.New says so).
func KnownCodes() []string {
	codes := make([]string, 0, len(knownCodes))
	for c := range knownCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// ParseCode looks code up in the table of known codes. An unknown code is
// an error that lists them all and suggests, first by family (lightgbm,
// torch, tensorflow_cpu_2.12: familyHint), else the closest known code.
func ParseCode(code string) (Code, error) {
	if info, ok := knownCodes[code]; ok {
		return info.Code, nil
	}
	known := KnownCodes()
	hint := ""
	if h := familyHint(code); h != "" {
		hint = h + "; "
	} else if s, ok := closest(code, known); ok {
		hint = fmt.Sprintf("did you mean %s? ", s)
	}
	if code == "" {
		return Code{}, fmt.Errorf("empty processor code; %sknown codes: %s", hint, strings.Join(known, ", "))
	}
	return Code{}, fmt.Errorf("unknown processor code %q; %sknown codes: %s", code, hint, strings.Join(known, ", "))
}

// otherDevice returns the code of the same family and version on the other
// device, or "" when there is none.
func otherDevice(code string) string { return knownCodes[code].other }

// gpuCodesOf lists the GPU codes of a family, for the message that tells a
// user whose CPU-only version has no GPU build what to pick instead.
func gpuCodesOf(family string) []string {
	var out []string
	for _, c := range KnownCodes() {
		if info := knownCodes[c]; info.Family == family && info.Device == "gpu" {
			out = append(out, c)
		}
	}
	return out
}

// gpuFamilyPrefixes are the starts of Alibaba Cloud instance families that
// carry a GPU. The rule: an instance type is "<prefix>.<family>[-...].<size>";
// for prefix "ecs" the family is a GPU family when it starts with gn (gn6i,
// gn7, ...), vgn (virtualised GPU), sgn (shared GPU), gi, ebmgn or ebmgi
// (bare metal), or sccgn (super-computing cluster); for prefix "ml" (PAI's
// own types) when it starts with gu (gu7i, gu8xf, ...). Everything else
// (ecs.c6, ecs.g6, ecs.r7, ml.c6 ...) counts as CPU only.
var gpuFamilyPrefixes = map[string][]string{
	"ecs": {"gn", "vgn", "sgn", "gi", "ebmgn", "ebmgi", "sccgn"},
	"ml":  {"gu"},
}

// IsGPUInstanceType reports whether an instance type such as
// "ecs.gn6i-c4g1.xlarge" carries a GPU, by the rule of gpuFamilyPrefixes.
func IsGPUInstanceType(t string) bool {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(t)), ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range gpuFamilyPrefixes[parts[0]] {
		if strings.HasPrefix(parts[1], p) {
			return true
		}
	}
	return false
}
