package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/graphpipe"
	"github.com/eas-server/eas-server/wire/graphpipe/graphpipefb"
)

// gpToken is the token of the services of the GraphPipe tests.
const gpToken = "graphpipe-token"

// identityDTypes are the inputs of the identity model: one per GraphPipe
// type, and BOOL, which GraphPipe sends as Uint8.
var identityDTypes = []tensor.DType{
	tensor.Uint8, tensor.Int8, tensor.Uint16, tensor.Int16, tensor.Uint32, tensor.Int32,
	tensor.Uint64, tensor.Int64, tensor.Float16, tensor.Float32, tensor.Float64, tensor.String, tensor.Bool,
}

// identityModel writes an ONNX model that returns each input unchanged:
// input in_<dtype> [-1, 2] to output out_<dtype>, for identityDTypes; but
// FP16, which comes back as FP32 (the ONNX Runtime binding returns no FP16
// output).
func identityModel(t *testing.T) string {
	t.Helper()
	g := &onnxbuild.Graph{Prefix: "g_"}
	gp := &onnxpb.GraphProto{Name: "identity"}
	for _, d := range identityDTypes {
		in, out := "in_"+strings.ToLower(d.String()), "out_"+strings.ToLower(d.String())
		gp.Input = append(gp.Input, onnxbuild.ValueInfo(in, d, []int64{-1, 2}))
		if d == tensor.Float16 { // the binding returns no FP16: widened
			g.Emit("Cast", []string{in}, []string{out}, onnxbuild.AttrInt("to", onnxbuild.Type(tensor.Float32)))
			gp.Output = append(gp.Output, onnxbuild.ValueInfo(out, tensor.Float32, []int64{-1, 2}))
			continue
		}
		g.Emit("Identity", []string{in}, []string{out})
		gp.Output = append(gp.Output, onnxbuild.ValueInfo(out, d, []int64{-1, 2}))
	}
	gp.Node = g.Nodes
	b, err := onnxbuild.Model(gp, "eas-server test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "identity.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// identityInputs are values at the edges of each dtype, two rows of two.
func identityInputs() []tensor.Tensor {
	s := []int64{2, 2}
	return []tensor.Tensor{
		tensor.FromUint8("", s, []uint8{0, 1, 254, 255}),
		tensor.FromInt8("", s, []int8{-128, -1, 0, 127}),
		tensor.FromUint16("", s, []uint16{0, 1, 65534, 65535}),
		tensor.FromInt16("", s, []int16{-32768, -1, 0, 32767}),
		tensor.FromUint32("", s, []uint32{0, 1, 1<<32 - 2, 1<<32 - 1}),
		tensor.FromInt32("", s, []int32{-1 << 31, -1, 0, 1<<31 - 1}),
		tensor.FromUint64("", s, []uint64{0, 1, 1<<64 - 2, 1<<64 - 1}),
		tensor.FromInt64("", s, []int64{-1 << 63, -1, 0, 1<<63 - 1}),
		tensor.FromFloat16Bits("", s, []uint16{0x3c00, 0xc000, 0x7bff, 0x0001}),
		tensor.FromFloat32("", s, []float32{1.5, -3.4e38, 1e-45, 0}),
		tensor.FromFloat64("", s, []float64{1.5, -1.7e308, 5e-324, 0}),
		tensor.FromStrings("", s, []string{"", "héllo", "a\tb", strings.Repeat("z", 300)}), // no NUL: ONNX Runtime strings end at one
		tensor.FromUint8("", s, []uint8{1, 0, 0, 1}),                                       // BOOL, as GraphPipe sends it
	}
}

// identityOut is what the identity model answers for x: x, but FP16 widened
// to FP32.
func identityOut(t *testing.T, x tensor.Tensor) tensor.Tensor {
	if x.DType != tensor.Float16 {
		return x
	}
	h, err := tensor.Values[uint16](x)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, len(h))
	for i, v := range h {
		f[i] = tensor.Float16ToFloat32(v)
	}
	return tensor.FromFloat32(x.Name, x.Shape, f)
}

// gpDo POSTs a GraphPipe request to url with the Authorization header authz
// ("" for none).
func gpDo(t *testing.T, url, authz string, r *graphpipe.Request) (int, []byte) {
	t.Helper()
	body, err := graphpipe.EncodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	code, b, _ := teststack.Do(t, http.MethodPost, url, authz, body)
	return code, b
}

// gpInfer runs r and returns the outputs of a 200 answer.
func gpInfer(t *testing.T, url string, r *graphpipe.Request) []tensor.Tensor {
	t.Helper()
	code, b := gpDo(t, url, gpToken, r)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", url, code, b)
	}
	outs, errs, err := graphpipe.DecodeInferResponse(b)
	if err != nil || len(errs) != 0 {
		t.Fatalf("%s: decoding the answer: %v, errors %+v", url, err, errs)
	}
	return outs
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// asSent is a reference tensor as GraphPipe carries it: BOOL as Uint8.
func asSent(x tensor.Tensor) tensor.Tensor {
	if x.DType == tensor.Bool {
		x.DType = tensor.Uint8
	}
	return x
}

// TestGraphPipe drives the GraphPipe door (docs/protocol.md, "GraphPipe")
// of real ONNX services with the codec's requests: every GraphPipe type,
// the reference cases of the ONNX test models, metadata, the token's
// forms, the errors, the metrics, and a Triton repository's models.
func TestGraphPipe(t *testing.T) {
	onnxDir, err := filepath.Abs(onnxTestdata)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../processors/triton/testdata/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	svc := func(name, model string) string {
		return fmt.Sprintf(`{"name":%q,"processor":"onnx_cpu","model_path":%q,"token":%q,"metadata":{"instance":1,"cpu":1}}`, name, model, gpToken)
	}
	models := []string{"mlp", "multi_io", "int_bool", "strings", "half"}
	specs := []string{
		svc("gp_identity", identityModel(t)),
		fmt.Sprintf(`{"name":"gp_echo","processor":"echo","token":%q,"metadata":{"instance":1}}`, gpToken),
		fmt.Sprintf(`{"name":"gp_triton","processor":"triton","processor_params":[%q,"--model-control-mode=explicit","--load-model=mlp"],"token":%q,"metadata":{"instance":1,"cpu":1,"gpu":0}}`, "--model-repository="+repo, gpToken),
	}
	for _, m := range models {
		specs = append(specs, svc("gp_"+m, filepath.Join(onnxDir, m+".onnx")))
	}
	specs = append(specs, fmt.Sprintf(`{"name":"gp_limited","processor":"onnx_cpu","model_path":%q,"token":%q,"metadata":{"instance":1,"cpu":1,"rpc":{"rate_limit":1}}}`,
		filepath.Join(onnxDir, "mlp.onnx"), gpToken))
	st := teststack.Start(t, specs...)
	door := func(name string) string { return st.URL + "/api/predict/" + name + "/graphpipe" }

	t.Run("every type", func(t *testing.T) {
		in := identityInputs()
		// Outputs asked for in reverse order: the answer keeps that order.
		var want []string
		for i := len(identityDTypes) - 1; i >= 0; i-- {
			want = append(want, "out_"+strings.ToLower(identityDTypes[i].String()))
		}
		outs := gpInfer(t, door("gp_identity"), &graphpipe.Request{Inputs: in, OutputNames: want})
		if len(outs) != len(in) {
			t.Fatalf("%d outputs, want %d", len(outs), len(in))
		}
		for i := range in {
			j := len(in) - 1 - i
			if err := tensor.Close(outs[i], identityOut(t, in[j]), tensor.Exact); err != nil {
				t.Errorf("%s: %v", want[i], err)
			}
		}
		// No output names: every output, in the model's order; no input
		// names: the model's inputs by position.
		outs = gpInfer(t, door("gp_identity"), &graphpipe.Request{Inputs: in})
		for i := range in {
			if err := tensor.Close(outs[i], identityOut(t, in[i]), tensor.Exact); err != nil {
				t.Errorf("output %d (%s) with defaults: %v", i, identityDTypes[i], err)
			}
		}
	})

	t.Run("reference cases", func(t *testing.T) {
		for _, m := range models {
			var r refs
			b, err := os.ReadFile(filepath.Join(onnxDir, m+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cases {
				ins := tensorsOf(t, c.Inputs, "inputs")
				wants := tensorsOf(t, c.Outputs, "outputs")
				req := &graphpipe.Request{}
				for _, x := range ins {
					req.InputNames = append(req.InputNames, x.Name)
					req.Inputs = append(req.Inputs, asSent(x))
				}
				outs := gpInfer(t, door("gp_"+m), req)
				if len(outs) != len(wants) {
					t.Fatalf("%s %s: %d outputs, want %d", m, c.Name, len(outs), len(wants))
				}
				for i, w := range wants {
					if err := tensor.Close(outs[i], asSent(w), tensor.F32Accumulated.For(w.DType)); err != nil {
						t.Errorf("%s %s output %s: %v", m, c.Name, w.Name, err)
					}
				}
			}
		}
	})

	t.Run("metadata", func(t *testing.T) {
		code, b := gpDo(t, door("gp_multi_io"), gpToken, &graphpipe.Request{Metadata: true})
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, b)
		}
		md, err := graphpipe.DecodeMetadata(b)
		if err != nil {
			t.Fatal(err)
		}
		io := func(l []graphpipe.IOMetadata) string {
			var s []string
			for _, x := range l {
				s = append(s, fmt.Sprintf("%s:%s:%v", x.Name, graphpipefb.Type(x.Type), x.Shape))
			}
			return strings.Join(s, " ")
		}
		if md.Name != "gp_multi_io" || md.Server != "eas-server" || io(md.Inputs) != "a:Float32:[-1 4] b:Float32:[-1 4] w:Float64:[-1 1]" || io(md.Outputs) != "sum:Float32:[-1 4] prod:Float32:[-1 4] total:Float64:[-1 1]" {
			t.Errorf("metadata %+v: inputs %s, outputs %s", md, io(md.Inputs), io(md.Outputs))
		}
		// GET: the same, as JSON, as graphpipe-go's servers answer it.
		code, b, h := teststack.Do(t, http.MethodGet, door("gp_multi_io"), gpToken, nil)
		var js graphpipe.Metadata
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal(b, &js) != nil || io(js.Inputs) != io(md.Inputs) || js.Name != md.Name {
			t.Errorf("GET: %d %s %s", code, h.Get("Content-Type"), b)
		}
		// A BOOL output is announced as Uint8.
		code, b = gpDo(t, door("gp_int_bool"), gpToken, &graphpipe.Request{Metadata: true})
		md, err = graphpipe.DecodeMetadata(b)
		if code != http.StatusOK || err != nil || !strings.Contains(io(md.Outputs), "inverted:Uint8") {
			t.Errorf("int_bool metadata: %d %v %+v", code, err, md)
		}
	})

	mlpIn := &graphpipe.Request{Inputs: []tensor.Tensor{tensor.FromFloat32("", []int64{1, 16}, make([]float32, 16))}}
	t.Run("token forms", func(t *testing.T) {
		for _, c := range []struct {
			authz string
			code  int
		}{
			{gpToken, 200},
			{"Bearer " + gpToken, 200},
			{basic("anyone", gpToken), 200},
			{basic("", gpToken), 200},
			{basic(gpToken, "wrong"), 401},
			{"Basic !!!", 401},
			{"wrong", 401},
			{"", 401},
		} {
			code, b := gpDo(t, door("gp_mlp"), c.authz, mlpIn)
			if code != c.code {
				t.Errorf("Authorization %q: %d %s, want %d", c.authz, code, b, c.code)
			}
		}
		// Basic is this door's alone: the EAS door refuses it.
		code, b, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/gp_mlp", basic("u", gpToken), nil)
		if code != http.StatusUnauthorized {
			t.Errorf("Basic on the EAS door: %d %s, want 401", code, b)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			what, url, authz string
			body             []byte
			req              *graphpipe.Request
			code             int
			contains         string
		}{
			{what: "not a flatbuffer", url: door("gp_mlp"), body: []byte("hello world, not a request"), code: 400, contains: "GraphPipe"},
			{what: "JSON", url: door("gp_mlp"), body: []byte(`{"inputs":[]}`), code: 400, contains: "looks like JSON"},
			{what: "empty body", url: door("gp_mlp"), body: []byte{}, code: 400, contains: "empty"},
			{what: "wrong dtype", url: door("gp_mlp"), req: &graphpipe.Request{Inputs: []tensor.Tensor{tensor.FromInt32("", []int64{1, 16}, make([]int32, 16))}}, code: 400, contains: "input"},
			{what: "wrong shape", url: door("gp_mlp"), req: &graphpipe.Request{Inputs: []tensor.Tensor{tensor.FromFloat32("", []int64{1, 3}, make([]float32, 3))}}, code: 400, contains: "input"},
			{what: "unknown output", url: door("gp_mlp"), req: &graphpipe.Request{Inputs: mlpIn.Inputs, OutputNames: []string{"nope"}}, code: 400, contains: "nope"},
			{what: "unknown input", url: door("gp_mlp"), req: &graphpipe.Request{Inputs: mlpIn.Inputs, InputNames: []string{"nope"}}, code: 400, contains: "nope"},
			{what: "too many inputs", url: door("gp_mlp"), req: &graphpipe.Request{Inputs: append(mlpIn.Inputs, mlpIn.Inputs...)}, code: 400, contains: "input"},
			{what: "BOOL not 0 or 1", url: door("gp_int_bool"), req: &graphpipe.Request{Inputs: []tensor.Tensor{tensor.FromInt64("", []int64{1, 2}, []int64{1, 2}), tensor.FromUint8("", []int64{1, 2}, []uint8{1, 2})}}, code: 400, contains: "BOOL"},
			{what: "model fails on the values", url: door("gp_int_bool"), req: &graphpipe.Request{Inputs: []tensor.Tensor{tensor.FromInt64("", []int64{1, 2}, []int64{1, 1 << 40}), tensor.FromUint8("", []int64{1, 2}, []uint8{1, 0})}}, code: 400},
			{what: "unknown name, no token", url: door("nothing"), authz: "-", req: mlpIn, code: 401},
			{what: "unknown name, a good token", url: door("nothing"), req: mlpIn, code: 404, contains: "nothing"},
		} {
			body := c.body
			if c.req != nil {
				var err error
				if body, err = graphpipe.EncodeRequest(c.req); err != nil {
					t.Fatal(err)
				}
			}
			authz := c.authz
			switch authz {
			case "":
				authz = gpToken
			case "-":
				authz = ""
			}
			code, b, h := teststack.Do(t, http.MethodPost, c.url, authz, body)
			if code != c.code || !strings.Contains(string(b), c.contains) || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
				t.Errorf("%s: %d %q (%s), want %d with %q in plain text", c.what, code, b, h.Get("Content-Type"), c.code, c.contains)
			}
		}
		code, b, h := teststack.Do(t, http.MethodPut, door("gp_mlp"), gpToken, nil)
		if code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, POST" {
			t.Errorf("PUT: %d %s, Allow %q", code, b, h.Get("Allow"))
		}
	})

	t.Run("metrics", func(t *testing.T) {
		series := `eas_requests_total{code="200",service="gp_half",version="1"}`
		before := max(teststack.Metric(t, st.URL, series), 0)
		in := &graphpipe.Request{Inputs: []tensor.Tensor{tensor.FromFloat16Bits("", []int64{1, 4}, []uint16{0x3c00, 0x3c00, 0x3c00, 0x3c00})}}
		out := gpInfer(t, door("gp_half"), in)
		if err := tensor.Close(out[0], tensor.FromFloat32("doubled", []int64{1, 4}, []float32{2, 2, 2, 2}), tensor.Exact); err != nil {
			t.Error(err)
		}
		if after := teststack.Metric(t, st.URL, series); after != before+1 {
			t.Errorf("%s: %v after one request, was %v", series, after, before)
		}
		bad := `eas_requests_total{code="400",service="gp_half",version="1"}`
		b0 := max(teststack.Metric(t, st.URL, bad), 0)
		gpDo(t, door("gp_half"), gpToken, &graphpipe.Request{Inputs: mlpIn.Inputs})
		if after := teststack.Metric(t, st.URL, bad); after != b0+1 {
			t.Errorf("%s: %v after one bad request, was %v", bad, after, b0)
		}
	})

	t.Run("rate limit", func(t *testing.T) {
		// The service's scheduler refuses over rpc.rate_limit, as on
		// every door: 429 with its reason.
		limited := 0
		for range 5 {
			code, b := gpDo(t, door("gp_limited"), gpToken, mlpIn)
			switch {
			case code == http.StatusTooManyRequests && strings.Contains(string(b), "rate_limit"):
				limited++
			case code != http.StatusOK:
				t.Errorf("%d %s", code, b)
			}
		}
		if limited < 3 {
			t.Errorf("rate_limit 1: %d of 5 back-to-back requests got 429, want at least 3", limited)
		}
	})

	t.Run("no tensors: the processor's path", func(t *testing.T) {
		// echo serves no tensors: /graphpipe is its extra path, as before.
		code, b, _ := teststack.Do(t, http.MethodPost, door("gp_echo"), gpToken, []byte("ping"))
		if code != http.StatusOK || string(b) != "ping" {
			t.Errorf("echo: %d %q", code, b)
		}
	})

	t.Run("triton models", func(t *testing.T) {
		var r refs
		b, err := os.ReadFile(filepath.Join(onnxDir, "mlp.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		ins := tensorsOf(t, r.Cases[1].Inputs, "inputs")
		want := tensorsOf(t, r.Cases[1].Outputs, "outputs")
		for _, url := range []string{door("mlp"), st.URL + "/api/predict/gp_triton/mlp/graphpipe", st.URL + "/api/predict/gp_triton/mlp/versions/1/graphpipe"} {
			outs := gpInfer(t, url, &graphpipe.Request{Inputs: ins})
			if len(outs) != 1 {
				t.Fatalf("%s: %d outputs", url, len(outs))
			}
			if err := tensor.Close(outs[0], want[0], tensor.F32Accumulated); err != nil {
				t.Errorf("%s: %v", url, err)
			}
		}
		code, b := gpDo(t, st.URL+"/api/predict/gp_triton/nope/graphpipe", gpToken, mlpIn)
		if code != http.StatusNotFound {
			t.Errorf("a model the repository lacks: %d %s", code, b)
		}
		code, b = gpDo(t, door("mlp"), "wrong", mlpIn)
		if code != http.StatusUnauthorized {
			t.Errorf("a routed model with a wrong token: %d %s", code, b)
		}
	})
}

// TestGraphPipePythonClient is the acceptance test of Oracle's GraphPipe
// Python client (pinned in scripts/requirements/graphpipe.txt), unchanged,
// against ONNX services: e2e/testdata/graphpipe/gp_check.py calls it with
// the token as the URL's userinfo (and from ~/.netrc) and records what it
// returns; the numbers are compared here with tensor.Close. The token has
// characters a URL reserves, as generated ones (standard base64) may.
func TestGraphPipePythonClient(t *testing.T) {
	const gpToken = "gp/python+token="
	py := pyvenv.Python(t, "graphpipe")
	onnxDir, err := filepath.Abs(onnxTestdata)
	if err != nil {
		t.Fatal(err)
	}
	models := []string{"mlp", "multi_io", "int_bool", "strings", "half"}
	var specs []string
	refFiles := map[string]string{}
	for _, m := range models {
		refFiles[m] = filepath.Join(onnxDir, m+".json")
		specs = append(specs, fmt.Sprintf(`{"name":"gpy_%s","processor":"onnx_cpu","model_path":%q,"token":%q,"metadata":{"instance":1,"cpu":1}}`,
			m, filepath.Join(onnxDir, m+".onnx"), gpToken))
	}
	st := teststack.Start(t, specs...)
	u, err := url.Parse(st.URL)
	if err != nil {
		t.Fatal(err)
	}
	door := func(m string, user *url.Userinfo) string {
		v := *u
		v.User = user
		v.Path = "/api/predict/gpy_" + m + "/graphpipe"
		return v.String()
	}
	urls := map[string]string{}
	for _, m := range models {
		urls[m] = door(m, url.UserPassword("graphpipe", gpToken))
	}
	outFile := filepath.Join(t.TempDir(), "answers.json")
	home := t.TempDir() // ~/.netrc for the netrc group
	if err := os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine "+u.Hostname()+" login graphpipe password "+gpToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	drv := newClientScript(t, "graphpipe", py, "testdata/graphpipe/gp_check.py", map[string]any{
		"urls":      urls,
		"url":       urls["mlp"],
		"url_plain": door("mlp", nil),
		"url_wrong": door("mlp", url.UserPassword("graphpipe", "wrong-token")),
		"refs":      refFiles,
		"out":       outFile,
	})
	answers := func(t *testing.T) map[string]json.RawMessage {
		t.Helper()
		b, err := os.ReadFile(outFile)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	t.Run("infer", func(t *testing.T) {
		drv.run(t, "infer", "NETRC="+filepath.Join(t.TempDir(), "none"))
		got := answers(t)
		n := 0
		for _, m := range models {
			var r refs
			b, err := os.ReadFile(refFiles[m])
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Cases {
				key := m + "/" + c.Name
				outs := pyTensors(t, key, got[key])
				wants := tensorsOf(t, c.Outputs, "outputs")
				if len(outs) != len(wants) {
					t.Errorf("%s: %d outputs, want %d", key, len(outs), len(wants))
					continue
				}
				for i, w := range wants {
					if err := tensor.Close(outs[i], asSent(w), tensor.F32Accumulated.For(w.DType)); err != nil {
						t.Errorf("%s output %s: %v", key, w.Name, err)
					}
					n++
				}
			}
		}
		if n == 0 {
			t.Fatal("no output compared")
		}
	})

	t.Run("metadata", func(t *testing.T) {
		drv.run(t, "metadata")
		var md struct {
			Name         string   `json:"name"`
			Server       string   `json:"server"`
			InputNames   []string `json:"input_names"`
			OutputNames  []string `json:"output_names"`
			InputShapes  [][]any  `json:"input_shapes"`
			OutputShapes [][]any  `json:"output_shapes"`
			InputTypes   []string `json:"input_types"`
			OutputTypes  []string `json:"output_types"`
		}
		if err := json.Unmarshal(answers(t)["metadata"], &md); err != nil {
			t.Fatal(err)
		}
		if md.Name != "gpy_mlp" || md.Server != "eas-server" || fmt.Sprint(md.InputNames) != "[input]" || fmt.Sprint(md.OutputNames) != "[output]" || fmt.Sprint(md.OutputShapes) != "[[<nil> 8]]" ||
			fmt.Sprint(md.InputShapes) != "[[<nil> 16]]" || fmt.Sprint(md.InputTypes) != "[float32]" || fmt.Sprint(md.OutputTypes) != "[float32]" {
			t.Errorf("metadata as the client reads it: %+v", md)
		}
	})

	t.Run("netrc", func(t *testing.T) {
		drv.run(t, "netrc", "HOME="+home)
		outs := pyTensors(t, "netrc", answers(t)["netrc"])
		if len(outs) != 1 || fmt.Sprint(outs[0].Shape) != "[2 8]" || outs[0].DType != tensor.Float32 {
			t.Errorf("netrc: %+v", outs)
		}
	})

	t.Run("errors", func(t *testing.T) {
		drv.run(t, "errors", "NETRC="+filepath.Join(t.TempDir(), "none"))
	})
}

// pyTensors reads the tensors gp_check.py recorded under key.
func pyTensors(t *testing.T, key string, raw json.RawMessage) []tensor.Tensor {
	t.Helper()
	var recs []struct {
		DType string            `json:"dtype"`
		Shape []int64           `json:"shape"`
		Data  []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatalf("%s: the client's answer: %v (%s)", key, err, raw)
	}
	var out []tensor.Tensor
	for _, r := range recs {
		var x tensor.Tensor
		var err error
		switch r.DType {
		case "float32":
			x = tensor.FromFloat32("", r.Shape, numbers[float32](t, r.Data))
		case "float64":
			x = tensor.FromFloat64("", r.Shape, numbers[float64](t, r.Data))
		case "int64":
			x = tensor.FromInt64("", r.Shape, numbers[int64](t, r.Data))
		case "uint8":
			x = tensor.FromUint8("", r.Shape, numbers[uint8](t, r.Data))
		case "bytes":
			s := make([]string, len(r.Data))
			for i, d := range r.Data {
				err = json.Unmarshal(d, &s[i])
			}
			x = tensor.FromStrings("", r.Shape, s)
		default:
			t.Fatalf("%s: dtype %s", key, r.DType)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

func numbers[T float32 | float64 | int64 | uint8](t *testing.T, data []json.RawMessage) []T {
	t.Helper()
	out := make([]T, len(data))
	for i, d := range data {
		var v T
		if err := json.Unmarshal(d, &v); err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// TestGraphPipeChexNet is the flow of the GraphPipe article this project
// started from, with the official Python client: ChexNet's architecture
// (torchvision's DenseNet-121, 14 sigmoid outputs, random weights; made by
// testdata/graphpipe/chexnet.py with Debian's python3-torch and exported to
// ONNX) served by eas-server, called with TenCrop batches of ten crops.
// ONNX Runtime's probabilities are compared with PyTorch's, crop by crop and
// averaged over the crops as ChexNet does.
func TestGraphPipeChexNet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: DenseNet-121 takes seconds per batch on a small machine")
	}
	py := pyvenv.Python(t, "graphpipe")
	dir := t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "testdata/graphpipe/chexnet.py", dir).CombinedOutput(); err != nil {
		require.Missing(t, require.Python, "testdata/graphpipe/chexnet.py: %v\n%s\n(it needs Debian's python3-torch and python3-torchvision: run scripts/install-test-deps.sh)", err, out)
	}
	st := teststack.Start(t, fmt.Sprintf(`{"name":"chexnet","processor":"onnx_cpu","model_path":%q,"token":%q,"metadata":{"instance":1,"cpu":2,"rpc":{"keepalive":120000}}}`,
		filepath.Join(dir, "chexnet.onnx"), gpToken))
	u, err := url.Parse(st.URL + "/api/predict/chexnet/graphpipe")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("chexnet", gpToken)
	outFile := filepath.Join(dir, "answers.json")
	refFile := filepath.Join(dir, "chexnet.json")
	drv := newClientScript(t, "graphpipe", py, "testdata/graphpipe/gp_check.py", map[string]any{
		"chexnet_url": u.String(), "chexnet_refs": refFile, "out": outFile,
	})
	drv.run(t, "chexnet", "NETRC="+filepath.Join(dir, "none"))
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(refFile)
	if err != nil {
		t.Fatal(err)
	}
	var r refs
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.Cases {
		key := "chexnet/" + c.Name
		outs := pyTensors(t, key, got[key])
		want := tensorsOf(t, c.Outputs, "outputs")[0]
		if len(outs) != 2 || fmt.Sprint(outs[0].Shape) != "[10 14]" {
			t.Fatalf("%s: %d tensors, shape %v; want the [10 14] probabilities and their mean", key, len(outs), outs[0].Shape)
		}
		// ONNX Runtime against PyTorch: another formulation of the same
		// float32 network.
		if err := tensor.Close(outs[0], want, tensor.F32Reformulated); err != nil {
			t.Errorf("%s, per crop: %v", key, err)
		}
		probs, err := want.AsFloat32()
		if err != nil {
			t.Fatal(err)
		}
		mean := make([]float32, 14)
		for i, p := range probs {
			mean[i%14] += p / 10
		}
		if err := tensor.Close(outs[1], tensor.FromFloat32("", []int64{14}, mean), tensor.F32Reformulated); err != nil {
			t.Errorf("%s, averaged over the crops: %v", key, err)
		}
	}
}
