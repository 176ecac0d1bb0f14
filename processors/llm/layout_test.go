package llm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

const (
	i64   = ort.TensorElementDataTypeInt64
	i32   = ort.TensorElementDataTypeInt32
	f32   = ort.TensorElementDataTypeFloat
	f16   = ort.TensorElementDataTypeFloat16
	bool_ = ort.TensorElementDataTypeBool
)

// optimumIO is the interface of optimum's export for layers layers of
// heads x dim, with the given id and cache types.
func optimumIO(layers, heads, dim int, ids, kv ort.TensorElementDataType, positions bool) (ins, outs []ioInfo) {
	ins = []ioInfo{{"input_ids", ids, []int64{-1, -1}}, {"attention_mask", ids, []int64{-1, -1}}}
	if positions {
		ins = append(ins, ioInfo{"position_ids", ids, []int64{-1, -1}})
	}
	outs = []ioInfo{{"logits", f32, []int64{-1, -1, 100}}}
	for l := 0; l < layers; l++ {
		for _, kvn := range []string{"key", "value"} {
			ins = append(ins, ioInfo{fmt.Sprintf("past_key_values.%d.%s", l, kvn), kv, []int64{-1, int64(heads), -1, int64(dim)}})
			outs = append(outs, ioInfo{fmt.Sprintf("present.%d.%s", l, kvn), kv, []int64{-1, int64(heads), -1, int64(dim)}})
		}
	}
	return ins, outs
}

func TestDetectLayout(t *testing.T) {
	geo := geometry{layers: 2, heads: 4, kvHeads: 2, headDim: 16}
	t.Run("optimum", func(t *testing.T) {
		ins, outs := optimumIO(2, 2, 16, i64, f32, true)
		l, err := detectLayout(ins, outs, geo)
		if err != nil {
			t.Fatal(err)
		}
		if l.form != kvSplit || l.layers != 2 || l.kvHeads != 2 || l.headDim != 16 || l.positions != "position_ids" || l.kvElem != f32 {
			t.Fatalf("%+v", l)
		}
		want := "input_ids attention_mask position_ids past_key_values.0.key past_key_values.0.value past_key_values.1.key past_key_values.1.value"
		if got := strings.Join(l.inputNames(), " "); got != want {
			t.Errorf("inputs %s, want %s", got, want)
		}
		if got := strings.Join(l.outputNames(), " "); got != "logits present.0.key present.0.value present.1.key present.1.value" {
			t.Errorf("outputs %s", got)
		}
	})
	t.Run("alt names, int32, float16, symbolic heads from config", func(t *testing.T) {
		ins := []ioInfo{{"input_ids", i32, []int64{-1, -1}}, {"attention_mask", i32, []int64{-1, -1}}}
		outs := []ioInfo{{"logits", f16, []int64{-1, -1, -1}}}
		for l := 0; l < 2; l++ {
			for _, kv := range []string{"key", "value"} {
				ins = append(ins, ioInfo{fmt.Sprintf("past_%s_%d", kv, l), f16, []int64{-1, -1, -1, -1}})
				outs = append(outs, ioInfo{fmt.Sprintf("present_%s_%d", kv, l), f16, []int64{-1, -1, -1, -1}})
			}
		}
		l, err := detectLayout(ins, outs, geo)
		if err != nil {
			t.Fatal(err)
		}
		if l.kvHeads != 2 || l.headDim != 16 || l.elemSize() != 2 || l.positions != "" || l.present[3] != "present_value_1" {
			t.Fatalf("%+v", l)
		}
	})
	t.Run("stacked", func(t *testing.T) {
		ins := []ioInfo{{"input_ids", i32, []int64{-1, -1}}, {"position_ids", i32, []int64{-1, -1}}, {"attention_mask", i32, []int64{-1, -1}},
			{"past_0", f32, []int64{2, -1, 4, -1, 16}}, {"past_1", f32, []int64{2, -1, 4, -1, 16}}}
		outs := []ioInfo{{"logits", f32, []int64{-1, -1, 100}}, {"present_0", f32, []int64{2, -1, 4, -1, 16}}, {"present_1", f32, []int64{2, -1, 4, -1, 16}}}
		l, err := detectLayout(ins, outs, geometry{layers: 2, heads: 4, kvHeads: 4, headDim: 16})
		if err != nil {
			t.Fatal(err)
		}
		if l.form != kvStacked || l.kvTensors() != 2 || l.kvHeads != 4 {
			t.Fatalf("%+v", l)
		}
	})
	t.Run("merged", func(t *testing.T) {
		ins, outs := optimumIO(2, 2, 16, i64, f32, false)
		ins = append(ins, ioInfo{"use_cache_branch", bool_, []int64{1}})
		l, err := detectLayout(ins, outs, geo)
		if err != nil {
			t.Fatal(err)
		}
		if l.useCacheBranch != "use_cache_branch" {
			t.Fatalf("%+v", l)
		}
	})

	for _, c := range []struct {
		name string
		edit func(ins, outs []ioInfo) ([]ioInfo, []ioInfo)
		want string
	}{
		{"float ids", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { ins[0].Elem = f32; return ins, outs }, "input input_ids is float32, not int32 or int64"},
		{"unknown input", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) {
			return append(ins, ioInfo{"token_type_ids", i64, []int64{-1, -1}}), outs
		}, `unknown input "token_type_ids"`},
		{"no mask", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { return ins[:1:1], outs }, "no attention_mask"},
		{"no cache", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { return ins[:3], outs[:1] }, "no cache input"},
		{"int cache", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { ins[4].Elem = i64; return ins, outs }, "cache input past_key_values.0.value is int64"},
		{"mixed cache types", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { ins[4].Elem = f16; return ins, outs }, "is float16 but others are float32"},
		{"layer missing", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { return append(ins[:3:3], ins[5:]...), outs }, "config.json says 2"},
		{"heads disagree", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { ins[3].Shape[1] = 4; return ins, outs }, "has 4 heads, but config.json says 2"},
		{"fixed past", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { ins[3].Shape[2] = 8; return ins, outs }, "fixed length 8"},
		{"no logits", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { outs[0].Name = "scores"; return ins, outs }, "no output logits"},
		{"no present", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { return ins, outs[:2] }, "no output present.0.value"},
		{"present type", func(ins, outs []ioInfo) ([]ioInfo, []ioInfo) { outs[1].Elem = f16; return ins, outs }, "output present.0.key is float16 but its past is float32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ins, outs := optimumIO(2, 2, 16, i64, f32, true)
			ins, outs = c.edit(ins, outs)
			_, err := detectLayout(ins, outs, geo)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}

// FuzzDetectLayout feeds graph interfaces whose names, types and shapes
// come from the fuzzer: detectLayout must not panic, and what it accepts
// must be consistent.
func FuzzDetectLayout(f *testing.F) {
	f.Add("input_ids attention_mask position_ids past_key_values.0.key past_key_values.0.value", "logits present.0.key present.0.value", uint8(7), int64(2), int64(16))
	f.Add("input_ids attention_mask past_0", "logits present_0", uint8(3), int64(4), int64(8))
	f.Add("input_ids attention_mask past_key_1 past_value_1", "logits present_key_1 present_value_1", uint8(1), int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, inNames, outNames string, types uint8, heads, dim int64) {
		elems := []ort.TensorElementDataType{i64, i32, f32, f16, bool_}
		mk := func(names string, shift uint8) []ioInfo {
			var ios []ioInfo
			for i, n := range strings.Fields(names) {
				e := elems[(int(shift)+i)%len(elems)]
				if strings.Contains(n, "past") || strings.Contains(n, "present") {
					e = []ort.TensorElementDataType{f32, f16}[int(types)%2]
				} else if n == "input_ids" || n == "attention_mask" || n == "position_ids" {
					e = []ort.TensorElementDataType{i64, i32}[int(types>>1)%2]
				}
				shape := []int64{-1, heads, -1, dim}
				if strings.HasPrefix(n, "past_") && !strings.Contains(n, "key") && !strings.Contains(n, "value") || strings.HasPrefix(n, "present_") && !strings.Contains(n, "key") && !strings.Contains(n, "value") {
					shape = []int64{2, -1, heads, -1, dim}
				}
				if n == "input_ids" || n == "attention_mask" || n == "position_ids" {
					shape = []int64{-1, -1}
				}
				if n == "logits" {
					shape = []int64{-1, -1, 10}
				}
				ios = append(ios, ioInfo{Name: n, Elem: e, Shape: shape})
			}
			return ios
		}
		l, err := detectLayout(mk(inNames, types), mk(outNames, types>>2), geometry{layers: int(types%4) + 1, heads: 4, kvHeads: 2, headDim: 8})
		if err != nil {
			return
		}
		if l.layers < 1 || len(l.past) != len(l.present) || l.kvHeads < 1 || l.headDim < 1 || l.ids == "" || l.mask == "" || l.logits == "" {
			t.Fatalf("accepted an inconsistent layout: %+v", l)
		}
	})
}

// FuzzParseConfig: config.json is untrusted; whatever is accepted is within
// the bounds Step sizes buffers by.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"model_type":"llama","vocab_size":128256,"max_position_embeddings":512,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"hidden_size":64,"eos_token_id":[128001,128009]}`,
		`{"n_positions":1024,"n_layer":12,"n_head":12,"n_embd":768,"vocab_size":50257,"eos_token_id":50256,"bos_token_id":50256}`,
		`{"vocab_size":1e30}`, `{"num_attention_heads":3,"num_key_value_heads":2}`, `[]`, `{"eos_token_id":[1.5]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if c.Vocab < 1 || c.Vocab > maxVocab || c.ContextLength < 1 || c.ContextLength > maxContext || c.Layers < 1 || c.Layers > maxLayers ||
			c.Heads < 1 || c.Heads > maxHeads || c.KVHeads < 1 || c.Heads%c.KVHeads != 0 || c.HeadDim < 0 || c.HeadDim > maxHeadDim {
			t.Fatalf("accepted out of bounds: %+v", c)
		}
		for _, id := range append(c.EOS, c.BOS...) {
			if id < 0 || int(id) >= c.Vocab {
				t.Fatalf("token id %d outside the vocabulary of %d", id, c.Vocab)
			}
		}
	})
}

// FuzzParseGenerationConfig: generation_config.json is untrusted.
func FuzzParseGenerationConfig(f *testing.F) {
	for _, s := range []string{
		`{"bos_token_id":1,"eos_token_id":[151645,151643],"do_sample":true,"temperature":0.7,"top_k":20,"top_p":0.8,"repetition_penalty":1.05}`,
		`{"eos_token_id":2}`, `{"top_k":-1}`, `{"top_p":0}`, `{"eos_token_id":"x"}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGenerationConfig(b)
		if err != nil {
			return
		}
		if g.Temperature != nil && (*g.Temperature < 0 || *g.Temperature > 100) ||
			g.TopP != nil && (*g.TopP <= 0 || *g.TopP > 1) ||
			g.TopK != nil && *g.TopK < 0 ||
			g.RepetitionPenalty != nil && *g.RepetitionPenalty <= 0 || len(g.EOS) > maxEOS {
			t.Fatalf("accepted out of bounds: %+v", g)
		}
	})
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{}`, "vocab_size: required"},
		{`{"vocab_size":100,"n_positions":64,"n_layer":2}`, "num_attention_heads (or n_head): required"},
		{`{"vocab_size":-1,"n_positions":64,"n_layer":2,"n_head":2}`, "vocab_size: must be an integer between 1 and 16777216, got -1"},
		{`{"vocab_size":100,"n_positions":64,"n_layer":2,"n_head":4,"num_key_value_heads":3}`, "does not divide"},
		{`{"vocab_size":100,"n_positions":64,"n_layer":2,"n_head":2,"eos_token_id":100}`, "eos_token_id: 100 is not a token id of a vocabulary of 100"},
		{`{"vocab_size":100,"n_positions":64,"n_layer":2,"n_head":2,"hidden_size":63}`, "not a multiple"},
		{`nope`, "invalid character"},
	} {
		_, err := ParseConfig([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one saying %q", c.json, err, c.want)
		}
	}
}

// TestOpenRefuses opens broken model directories: each error names the
// file and what is wrong.
func TestOpenRefuses(t *testing.T) {
	root := testModels(t)
	good := filepath.Join(root, "gpt2", "optimum")
	// dir makes a model directory of good's files, less skip, with
	// replace's contents.
	dir := func(t *testing.T, skip string, replace map[string][]byte) string {
		d := t.TempDir()
		for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.onnx"} {
			if f == skip {
				continue
			}
			if err := os.Symlink(filepath.Join(good, f), filepath.Join(d, f)); err != nil {
				t.Fatal(err)
			}
		}
		for f, b := range replace {
			os.Remove(filepath.Join(d, f))
			if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name    string
		skip    string
		replace map[string][]byte
		want    []string
	}{
		{"no config", "config.json", nil, []string{"config.json", "no such file"}},
		{"bad config", "", map[string][]byte{"config.json": []byte(`{"vocab_size":"many"}`)}, []string{"config.json: vocab_size: must be an integer"}},
		{"no tokenizer", "tokenizer.json", nil, []string{"tokenizer.json", "no such file"}},
		{"small vocab", "", map[string][]byte{"config.json": []byte(`{"vocab_size":1000,"n_positions":512,"n_layer":2,"n_head":4,"n_embd":64}`)},
			[]string{"tokenizer.json has 50257 tokens but config.json's vocab_size is 1000"}},
		{"bad generation config", "", map[string][]byte{"generation_config.json": []byte(`{"top_p":2}`)}, []string{"generation_config.json: top_p: must be in (0, 1], got 2"}},
		{"tokenizer_config not an object", "", map[string][]byte{"tokenizer_config.json": []byte(`[1]`)}, []string{"tokenizer_config.json: not a JSON object"}},
		{"no onnx", "model.onnx", nil, []string{"has no model.onnx or decoder_model_merged.onnx", ".onnx files there: none"}},
		{"decoder without cache", "model.onnx", map[string][]byte{"decoder_model.onnx": []byte("x")}, []string{".onnx files there: decoder_model.onnx", "text-generation-with-past"}},
		{"genai_config outside", "", map[string][]byte{"genai_config.json": []byte(`{"model":{"decoder":{"filename":"../x.onnx"}}}`)}, []string{"genai_config.json: model.decoder.filename must name a file inside"}},
		{"unknown layout", "model.onnx", map[string][]byte{"model.onnx": read(filepath.Join("..", "onnx", "testdata", "mlp.onnx"))},
			[]string{"model.onnx: unknown input", "the graph's inputs are", "expected input_ids, attention_mask"}},
		{"wrong dtype", "model.onnx", map[string][]byte{"model.onnx": read(filepath.Join(root, "bad_dtype.onnx"))},
			[]string{"model.onnx: input input_ids is float32, not int32 or int64", "the graph's inputs are input_ids float32 [?,?], attention_mask int64"}},
		{"not onnx", "model.onnx", map[string][]byte{"model.onnx": []byte("not a model")}, []string{"load model.onnx", "valid ONNX model"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(t.Context(), dir(t, c.skip, c.replace), Options{Threads: 1})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant one saying %q", err, w)
				}
			}
		})
	}
}

// TestAccessors checks what the lead's Generator is filled from.
func TestAccessors(t *testing.T) {
	root := testModels(t)
	m := shared(t, filepath.Join(root, "qwen2", "optimum"))
	if m.Vocab() != 151936 || m.ContextLength() != 512 {
		t.Errorf("Vocab %d, ContextLength %d", m.Vocab(), m.ContextLength())
	}
	if eos := m.EOS(); len(eos) != 2 || eos[0] != 151645 || eos[1] != 151643 {
		t.Errorf("EOS %v, want generation_config.json's [151645 151643]", eos)
	}
	d := m.Defaults()
	if d.Temperature != 0.7 || d.TopK != 20 || d.TopP != 0.8 || d.RepetitionPenalty != 1.05 {
		t.Errorf("Defaults %+v", d)
	}
	if !isJSONObject(m.TokenizerConfig()) || m.Tokenizer() == nil || m.Provider() != "CPUExecutionProvider" {
		t.Errorf("tokenizer config %q, tokenizer %v, provider %s", m.TokenizerConfig(), m.Tokenizer(), m.Provider())
	}
	small, err := Open(t.Context(), filepath.Join(root, "gpt2", "optimum"), Options{Threads: 1, MaxContext: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if small.ContextLength() != 100 {
		t.Errorf("MaxContext 100: ContextLength %d", small.ContextLength())
	}
}
