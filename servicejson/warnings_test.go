package servicejson

import (
	"strings"
	"testing"
)

// TestWarningsForNoEffectKeys: every accepted key this server ignores is
// named, with the reason, and the file still parses.
func TestWarningsForNoEffectKeys(t *testing.T) {
	s := mustParse(t, `{"name":"m","processor":"pmml","model_path":"m.pmml",
		"autoscaler":{"min":1,"max":3,"strategies":{"qps":10}},
		"cloud":{"computing":{"instance_type":"ecs.c6.xlarge","future_key":1}},
		"labels":{"team":"a"},
		"metadata":{"instance":1,"cpu":2,"memory":4000,"rpc":{"io_threads":4,"keepalive":3000},
			"rolling_strategy":{"max_surge":1,"max_unavailable":"25%"}}}`)
	got := map[string]string{}
	for _, w := range s.Warnings() {
		if _, dup := got[w.Path]; dup {
			t.Errorf("%s warned twice", w.Path)
		}
		got[w.Path] = w.Msg
	}
	for _, want := range []string{"autoscaler", "cloud", "labels", "metadata.memory", "metadata.rpc.io_threads", "metadata.rolling_strategy"} {
		if !strings.Contains(got[want], "accepted for EAS compatibility") {
			t.Errorf("no warning for %s: %v", want, s.Warnings())
		}
	}
	if !strings.Contains(got["autoscaler"], "does not autoscale") || !strings.Contains(got["autoscaler"], "metadata.instance") {
		t.Errorf("autoscaler warning does not say what to do: %q", got["autoscaler"])
	}
	for _, used := range []string{"metadata.cpu", "metadata.rpc.keepalive", "metadata.instance", "model_path", "name", "processor"} {
		if _, ok := got[used]; ok {
			t.Errorf("%s has an effect but was warned about", used)
		}
	}
	if w := mustParse(t, `{"name":"m","processor":"pmml","metadata":{"instance":1}}`).Warnings(); len(w) != 0 {
		t.Errorf("a plain file has warnings: %v", w)
	}
	// Only unknown cloud keys (kept in Cloud.Extra) still warn.
	if w := mustParse(t, `{"name":"m","processor":"pmml","metadata":{"instance":1},"cloud":{"computing":{"spot":true}}}`).Warnings(); len(w) != 1 || w[0].Path != "cloud" {
		t.Errorf("cloud extra: %v", w)
	}
}

// TestNoEffectTableNamesKnownKeys keeps the table honest: every entry is a
// key or section the parser reads, so a renamed key cannot leave a dead
// warning behind.
func TestNoEffectTableNamesKnownKeys(t *testing.T) {
	for _, n := range noEffect {
		if fieldIndex[n.path] == nil && !namespaces[n.path] {
			t.Errorf("noEffect names %q, which is no key or section", n.path)
		}
		if !strings.HasPrefix(n.why, compat) {
			t.Errorf("%s: message does not start with %q", n.path, compat)
		}
	}
}

// TestFamilySuggestions: an unknown code that names a family gets the
// codes that serve it, not an edit-distance neighbour.
func TestFamilySuggestions(t *testing.T) {
	for code, wants := range map[string][]string{
		"tensorflow_cpu_2.12": {"did you mean tensorflow_cpu_2.7?", "tensorflow 2.12 is no EAS code"},
		"tensorflow_gpu_2.10": {"did you mean tensorflow_gpu_2.7?"},
		"tf":                  {"did you mean tensorflow_cpu_2.7?", "tensorflow_cpu_1.12", "tensorflow_gpu_2.7"},
		"tensorflow":          {"did you mean tensorflow_cpu_2.7?"},
		"pytorch":             {"did you mean pytorch_cpu_1.10?", "pytorch_cpu_1.6"},
		"torch":               {"did you mean pytorch_cpu_1.10?"},
		"torch_cpu_2.1":       {"did you mean pytorch_cpu_1.10?"},
		"pytorch_gpu_1.8":     {"pytorch_gpu_1.7 or pytorch_gpu_1.9"},
		"lightgbm":            {"parameter_server", "LightGBM"},
		"lgbm":                {"parameter_server"},
		"sklearn":             {"pmml", "sklearn2pmml", "onnx_cpu", "skl2onnx"},
		"scikit-learn":        {"sklearn2pmml", "skl2onnx"},
		"onnx":                {"use processor onnx_cpu"},
		"caffe":               {"use processor caffe_cpu", "caffe_gpu"},
	} {
		_, err := ParseCode(code)
		if err == nil {
			t.Fatalf("ParseCode(%q) accepted", code)
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseCode(%q) = %q, want it to contain %q", code, err, w)
			}
		}
		if strings.Contains(err.Error(), "did you mean tensorflow_cpu_1.12") {
			t.Errorf("ParseCode(%q) suggests 1.12: %v", code, err)
		}
	}
}
