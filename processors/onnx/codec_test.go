package onnx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// roundTrip sends body through Decode, Run and Encode as the server does.
func roundTrip(t testing.TB, m *Model, body []byte) ([]byte, error) {
	t.Helper()
	p, err := m.Decode(t.Context(), &processors.Request{Body: body})
	if err != nil {
		return nil, err
	}
	res, err := m.Run(t.Context(), []*Payload{p})
	if err != nil {
		return nil, err
	}
	resp, err := m.Encode(t.Context(), p, res[0])
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return resp.Body, nil
}

// TestCodecsMatchReferences runs every reference case through the Torch
// protobuf (positional and map_inputs) and the HIE DataProto.
func TestCodecsMatchReferences(t *testing.T) {
	for _, name := range refModels {
		refs := loadRefs(t, name)
		torch := load(t, "pytorch_cpu_1.7", filepath.Join("testdata", refs.Model))
		hie := load(t, "onnx_cpu", filepath.Join("testdata", refs.Model))
		for _, c := range refs.Cases {
			ins := c.payload(t).Inputs
			outNames := make([]string, len(c.Outputs))
			for i, o := range c.Outputs {
				outNames[i] = o.Name
			}
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				for _, named := range []bool{false, true} {
					body, err := torchpb.EncodeRequest(ins, named, nil)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := roundTrip(t, torch, body)
					if err != nil {
						t.Fatalf("torch (named=%v): %v", named, err)
					}
					outs, err := torchpb.DecodeResponse(resp, outNames)
					if err != nil {
						t.Fatal(err)
					}
					c.check(t, &processors.TensorResult{Outputs: outs})
				}

				body, err := hiepb.EncodeDataProto(ins)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := roundTrip(t, hie, body)
				if err != nil {
					t.Fatalf("hie: %v", err)
				}
				outs, err := hiepb.DecodeResponse(resp)
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, &processors.TensorResult{Outputs: outs})
			})
		}
	}
}

func TestTorchOutputFilter(t *testing.T) {
	refs := loadRefs(t, "multi_io")
	m := load(t, "pytorch_cpu_1.10", "testdata/multi_io.onnx")
	c := refs.Cases[0]
	body, err := torchpb.EncodeRequest(c.payload(t).Inputs, false, []int32{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := roundTrip(t, m, body)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := torchpb.DecodeResponse(resp, []string{"total", "prod"})
	if err != nil {
		t.Fatal(err)
	}
	refCase{Name: c.Name, Outputs: []jsonTensor{c.Outputs[2], c.Outputs[1]}}.check(t, &processors.TensorResult{Outputs: outs})

	body, _ = torchpb.EncodeRequest(c.payload(t).Inputs, false, []int32{3})
	if _, err := roundTrip(t, m, body); !badinput.Is(err) || !strings.Contains(err.Error(), "output_filter") {
		t.Errorf("output_filter out of range: %v", err)
	}
}

// TestExampleRequest checks the committed curl example against the model and
// the reference it was written from.
func TestExampleRequest(t *testing.T) {
	body, err := os.ReadFile("../../examples/requests/pytorch_mlp.pb")
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, "pytorch_cpu_1.10", "../../examples/models/mlp.onnx")
	resp, err := roundTrip(t, m, body)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := torchpb.DecodeResponse(resp, []string{"output"})
	if err != nil {
		t.Fatal(err)
	}
	loadRefs(t, "mlp").Cases[0].check(t, &processors.TensorResult{Outputs: outs})
}

func TestBadBodies(t *testing.T) {
	torch := load(t, "pytorch_cpu_1.10", "testdata/mlp.onnx")
	hie := load(t, "onnx_cpu", "testdata/mlp.onnx")
	good, err := torchpb.EncodeRequest([]tensor.Tensor{f32("input", []int64{2, 16})}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	goodHIE, err := hiepb.EncodeDataProto([]tensor.Tensor{f32("input", []int64{2, 16})})
	if err != nil {
		t.Fatal(err)
	}
	wrongShape, _ := torchpb.EncodeRequest([]tensor.Tensor{f32("input", []int64{2, 15})}, false, nil)
	unknownHIE, _ := hiepb.EncodeDataProto([]tensor.Tensor{f32("x", []int64{2, 16})})
	tests := []struct {
		name string
		m    *Model
		body []byte
		want string
	}{
		{"torch garbage", torch, []byte("{\"not\": \"protobuf\"}"), "PredictRequest"},
		{"torch truncated", torch, good[:len(good)-7], ""},
		{"torch empty", torch, nil, "no inputs"},
		{"torch wrong shape", torch, wrongShape, "[2,15]"},
		{"hie garbage", hie, []byte("\xff\xff\xff\xff"), "DataProto"},
		{"hie truncated", hie, goodHIE[:len(goodHIE)-3], ""},
		{"hie unknown input", hie, unknownHIE, `unknown input "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := roundTrip(t, tt.m, tt.body)
			if !badinput.Is(err) {
				t.Fatalf("err = %v, want an input error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	for _, m := range []*Model{torch, hie} {
		body := good
		if m == hie {
			body = goodHIE
		}
		if _, err := roundTrip(t, m, body); err != nil {
			t.Errorf("%s: good request after bad ones: %v", m.code, err)
		}
	}
}

func TestWarmup(t *testing.T) {
	example, err := os.ReadFile("../../examples/requests/pytorch_mlp.pb")
	if err != nil {
		t.Fatal(err)
	}
	big, _ := torchpb.EncodeRequest([]tensor.Tensor{f32("input", []int64{64, 16})}, false, nil)
	bad, _ := torchpb.EncodeRequest([]tensor.Tensor{f32("input", []int64{1, 3})}, false, nil)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	multi := processors.EncodeWarmup([][]byte{example, big})
	tests := []struct {
		name, path, wantErr string
	}{
		{"single EAS request", write("single.bin", example), ""},
		{"several requests", write("multi.bin", multi), ""},
		{"bad second request", write("bad.bin", processors.EncodeWarmup([][]byte{example, bad})), "request 2 of 2"},
		{"truncated record", write("trunc.bin", multi[:len(multi)-5]), "truncated"},
		{"empty", write("empty.bin", nil), "empty warm-up file"},
		{"missing", filepath.Join(dir, "nope.bin"), "no such file"},
	}
	m := load(t, "pytorch_cpu_1.10", "testdata/mlp.onnx")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Warmup(t.Context(), tt.path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "warm_up_data_path") {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzDecode feeds arbitrary bodies to both wire formats of a loaded model:
// every rejection must be a 400, and whatever is accepted must run.
func FuzzDecode(f *testing.F) {
	ins := []tensor.Tensor{f32("input", []int64{1, 16})}
	tb, _ := torchpb.EncodeRequest(ins, false, nil)
	tn, _ := torchpb.EncodeRequest(ins, true, []int32{0})
	hb, _ := hiepb.EncodeDataProto(ins)
	for _, b := range [][]byte{tb, tn, hb, nil, []byte("garbage")} {
		f.Add(b)
	}
	torch := load(f, "pytorch_cpu_1.10", "testdata/mlp.onnx")
	hie := load(f, "onnx_cpu", "testdata/mlp.onnx")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, m := range []*Model{torch, hie} {
			p, err := m.Decode(t.Context(), &processors.Request{Body: body})
			if err != nil {
				if !badinput.Is(err) {
					t.Fatalf("%s: decode error is not a 400: %v", m.code, err)
				}
				continue
			}
			if len(p.Inputs[0].Data) > 1<<20 {
				continue // a valid but huge request; not what this fuzzes
			}
			if _, err := m.Run(t.Context(), []*Payload{p}); err != nil {
				t.Fatalf("%s: accepted body failed to run: %v", m.code, err)
			}
		}
	})
}
