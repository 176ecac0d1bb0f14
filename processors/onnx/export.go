package onnx

// NewRuntime returns an unconfigured model that serves under code, a code of
// another processor family whose models are translated to ONNX (the
// tensorflow_* codes). It shares this package's session options, library
// lookup and GPU rules: gpu selects the CUDA execution provider with no CPU
// fallback, and cpuCode is the code a failed GPU deploy suggests. Load it
// with the .onnx file; Decode and Encode speak this package's wire formats,
// so such callers make payloads with FromTensors, Run them and do their own
// codec.
func NewRuntime(code string, gpu bool, cpuCode string) *Model {
	return &Model{code: code, info: codeInfo{proto: protoHIE, gpu: gpu, cpu: cpuCode}}
}
