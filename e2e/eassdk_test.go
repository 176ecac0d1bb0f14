package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/teststack"
)

// sdkToken is the services' token: the SDK signs with it.
const sdkToken = "ZWFzLXNkay1hY2NlcHRhbmNlLXRva2Vu"

// TestEASPythonSDK is the acceptance test of the official EAS Python SDK
// (eas-prediction, pinned in scripts/requirements/eas-sdk.txt) against the
// real stack: e2e/testdata/eassdk/sdk_check.py makes every call the SDK
// offers and checks each answer's content (the script says which cases).
// Signed requests are made from clients in several time zones, because the
// SDK stamps its local wall-clock time labelled GMT.
func TestEASPythonSDK(t *testing.T) {
	py := pyvenv.Python(t, "eas-sdk")
	const script = "testdata/eassdk/sdk_check.py"
	onnxDir, err := filepath.Abs(onnxTestdata)
	if err != nil {
		t.Fatal(err)
	}
	// The TensorFlow codes serve a tf2onnx export found in the model
	// directory as serving_default.
	tfDir := func(model string) string {
		dir := t.TempDir()
		b, err := os.ReadFile(filepath.Join(onnxDir, model))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, model), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	torchscript, err := filepath.Abs("../examples/models/torchscript_mlp.pt")
	if err != nil {
		t.Fatal(err)
	}
	svc := func(name, processor, modelPath, rpc string) string {
		return fmt.Sprintf(`{"name":%q,"processor":%q,"model_path":%q,"token":%q,"metadata":{"instance":1,"cpu":1,"rpc":{%s}}}`,
			name, processor, modelPath, sdkToken, rpc)
	}
	st := teststack.Start(t,
		fmt.Sprintf(`{"name":"sdk_echo","processor":"echo","token":%q,"metadata":{"instance":1}}`, sdkToken),
		svc("sdk_tf", "tensorflow_cpu_1.15", tfDir("multi_io.onnx"), ""),
		svc("sdk_tf_int_bool", "tensorflow_cpu_2.7", tfDir("int_bool.onnx"), ""),
		svc("sdk_torch", "pytorch_cpu_1.10", filepath.Join(onnxDir, "multi_io.onnx"), ""),
		svc("sdk_torch_snappy", "pytorch_cpu_1.10", filepath.Join(onnxDir, "multi_io.onnx"), `"decompressor":"snappy"`),
		svc("sdk_torchscript", "pytorch_cpu_1.6", torchscript, ""),
		svc("sdk_onnx", "onnx_cpu", filepath.Join(onnxDir, "multi_io.onnx"), ""),
		svc("sdk_onnx_mlp", "onnx_cpu", filepath.Join(onnxDir, "mlp.onnx"), ""),
		fmt.Sprintf(`{"name":"sdk_async","processor":"echo","token":%q,
			"metadata":{"instance":1,"type":"Async","rpc":{"worker_threads":2,"keepalive":30000}},
			"queue":{"sink":{"max_length":1000}}}`, sdkToken),
	)
	ref := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	drv := newClientScript(t, "the EAS Python SDK", py, script, map[string]string{
		"url": st.URL, "token": sdkToken,
		"echo": "sdk_echo", "tf_multi": "sdk_tf", "tf_int_bool": "sdk_tf_int_bool",
		"torch_multi": "sdk_torch", "torch_snappy": "sdk_torch_snappy", "torchscript": "sdk_torchscript",
		"onnx_multi": "sdk_onnx", "onnx_mlp": "sdk_onnx_mlp", "async": "sdk_async",
		"multi_io_ref":    filepath.Join(onnxDir, "multi_io.json"),
		"int_bool_ref":    filepath.Join(onnxDir, "int_bool.json"),
		"mlp_ref":         filepath.Join(onnxDir, "mlp.json"),
		"torchscript_ref": ref("../examples/requests/torchscript_mlp_expected.json"),
	})

	for _, run := range []struct{ group, tz string }{
		// Every request kind, from a client in UTC+8 (EAS's home zone).
		{"predict", "Asia/Shanghai"},
		// A signed request from the ends of the zone range and between.
		{"signed", "America/New_York"},
		{"signed", "Pacific/Kiritimati"}, // +14:00
		{"signed", "Etc/GMT+12"},         // -12:00
		{"signed", "Asia/Kathmandu"},     // +05:45
		{"signed", "UTC"},
		{"queue", "Asia/Shanghai"},
	} {
		t.Run(run.group+"/"+run.tz, func(t *testing.T) {
			loc, err := time.LoadLocation(run.tz)
			if err != nil {
				t.Fatal(err)
			}
			_, off := time.Now().In(loc).Zone()
			drv.run(t, run.group, "TZ="+run.tz, "EAS_SDK_UTC_OFFSET="+strconv.Itoa(off))
		})
	}
}
