package triton

import (
	"slices"
	"strings"
	"testing"
)

func TestParseParams(t *testing.T) {
	p, err := ParseParams([]string{"--model-repository=oss://b/models", "--strict-model-config=false", "--allow-http=true",
		"--log-verbose", "2", "--exit-on-error", "--http-thread-count=8", "--backend-config=onnxruntime,enable-global-threadpool=1",
		"--model-control-mode=explicit", "--load-model=a", "--load-model", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Repository != "oss://b/models" || p.StrictConfig || p.LogVerbose != 2 || !p.ExitOnError || p.ControlMode != "explicit" ||
		!slices.Equal(p.LoadModels, []string{"a", "b"}) || len(p.BackendConfig) != 1 {
		t.Errorf("parsed %+v", p)
	}
	if !slices.Contains(p.Ignored, "--allow-http") || !slices.Contains(p.Ignored, "--http-thread-count") {
		t.Errorf("ignored flags not listed: %v", p.Ignored)
	}
	if p, err := ParseParams([]string{"--url=grpc://127.0.0.1:8001"}); err != nil || p.URL != "grpc://127.0.0.1:8001" {
		t.Errorf("url: %+v %v", p, err)
	}
}

func TestParseParamsErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--model-repository=/m", "--gpus=2", "--foo"}, []string{"unknown or unsupported flags --gpus, --foo; supported: --allow-cpu-metrics"}},
		{[]string{"--url=ftp://x"}, []string{"--url: \"ftp://x\" must be http://host:port"}},
		{[]string{"--url=http://"}, []string{"must be http://host:port"}},
		{[]string{"--strict-model-config=maybe"}, []string{"is not a boolean"}},
		{[]string{"--model-repository"}, []string{"--model-repository needs a value"}},
		{[]string{"--model-repository=/a", "--model-repository=/b"}, []string{"given twice"}},
		{[]string{"--model-control-mode=poll"}, []string{"poll is not supported"}},
		{[]string{"--backend-config=python,x=1"}, []string{`backend "python" is not served here`}},
		{[]string{"--log-verbose=-1"}, []string{"not a level"}},
		{[]string{"model-repository=/m"}, []string{"is not a flag"}},
		// Every problem at once.
		{[]string{"--nope", "--url=x", "--log-verbose=z"}, []string{"--nope", "--url", "--log-verbose"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := ParseParams(c.args)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseRoute(t *testing.T) {
	cases := map[string]route{
		"":                                     {op: "infer"},
		"/mlp":                                 {op: "infer", model: "mlp"},
		"/mlp/versions/2":                      {op: "infer", model: "mlp", version: "2"},
		"/v2/models/mlp/infer":                 {op: "infer", model: "mlp"},
		"/v2/models/mlp/versions/3/infer":      {op: "infer", model: "mlp", version: "3"},
		"/v2/repository/index":                 {op: "repo_index"},
		"/v2/repository/models/mlp/load":       {op: "repo_load", model: "mlp"},
		"/v2/repository/models/mlp/unload":     {op: "repo_unload", model: "mlp"},
		"/v2/health/ready":                     {op: "passthrough"},
		"/api/predict/other":                   {op: "passthrough"},
		"/v2/models/mlp/versions/3/infer/more": {op: "passthrough"},
	}
	for in, want := range cases {
		if got := parseRoute(in); got != want {
			t.Errorf("parseRoute(%q) = %+v, want %+v", in, got, want)
		}
	}
}
