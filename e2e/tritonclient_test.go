package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/teststack"
)

// tritonToken is the services' token in TestTritonClient.
const tritonToken = "tritonclient-acceptance-token"

// TestTritonClient is the acceptance test of NVIDIA's Python tritonclient
// (HTTP and gRPC, pinned in scripts/requirements/tritonclient.txt) against
// the real stack: EAS services of the ONNX test models on the KServe v2
// doors, and a triton service of processors/triton's test repository on
// the same doors and under its EAS endpoint (/api/predict/<service>, the
// URL EAS gives Triton clients). e2e/testdata/tritonclient/triton_check.py
// makes the client's calls and checks every answer against the reference
// cases of processors/onnx/testdata; its docstring lists the groups.
func TestTritonClient(t *testing.T) {
	py := pyvenv.Python(t, "tritonclient")
	const script = "testdata/tritonclient/triton_check.py"
	onnxDir, err := filepath.Abs(onnxTestdata)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../processors/triton/testdata/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	// One EAS service per model: every datatype the models take (FP32,
	// FP64, FP16, INT64, BOOL, BYTES) and a convolution.
	models := []string{"mlp", "multi_io", "int_bool", "strings", "half", "conv"}
	var specs []string
	services := map[string]string{}
	refs := map[string]string{}
	for _, m := range models {
		name := "tc_" + m
		services[m] = name
		refs[m] = filepath.Join(onnxDir, m+".json")
		specs = append(specs, fmt.Sprintf(`{"name":%q,"processor":"onnx_cpu","model_path":%q,"token":%q,"metadata":{"instance":1,"cpu":1}}`,
			name, filepath.Join(onnxDir, m+".onnx"), tritonToken))
	}
	// The repository's slow model is left unloaded, for the index.
	specs = append(specs, fmt.Sprintf(`{"name":"tc_triton","processor":"triton","processor_params":[%q,"--model-control-mode=explicit","--load-model=mlp","--load-model=multi_io","--load-model=conv"],"token":%q,"metadata":{"instance":1,"cpu":1,"gpu":0}}`,
		"--model-repository="+repo, tritonToken))
	st := teststack.Start(t, specs...)
	drv := newClientScript(t, "tritonclient", py, script, map[string]any{
		"http":           strings.TrimPrefix(st.URL, "http://"),
		"grpc":           st.GRPCAddr(t),
		"token":          tritonToken,
		"services":       services,
		"triton_service": "tc_triton",
		"refs":           refs,
	})
	// triton-eas last: it unloads and loads a model.
	for _, group := range []string{"service", "service-grpc", "triton", "triton-grpc", "triton-eas"} {
		t.Run(group, func(t *testing.T) { drv.run(t, group) })
	}
}
