package easytransfer

import (
	"context"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
)

func TestConfigure(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{``, "model_config.type is required"},
		{`{"type": "text_classify"}`, `"text_classify" is not an EasyTransfer app served here; use one of text_classify_bert`},
		{`{"type": "text_classify_bert", "sequence_lenght": 3}`, `easytransfer_cpu runs the SavedModel as tensorflow_cpu_1.15, which says: model_config: json: unknown field "sequence_lenght"`},
		{`{"type": "text_classify_bert", "sequence_length": -1}`, "sequence_length -1 is out of range"},
		{`{"type": "text_classify_bert", "runtime": "tf"}`, "runtime must be one of"},
		{`[1]`, "it must be a JSON object"},
	} {
		a := New("easytransfer_cpu")
		err := a.Configure(processors.Spec{Code: "easytransfer_cpu", ModelSource: "/models/app", ModelConfig: []byte(tc.cfg)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("model_config %s: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	a := New("easytransfer_cpu")
	if err := a.Configure(processors.Spec{Code: "easytransfer_cpu", ModelSource: "/models/app", ModelConfig: []byte(`{"type": "vectorization_bert", "runtime": "auto", "intra_op_threads": 2}`)}); err != nil {
		t.Errorf("a good model_config: %v", err)
	}
}

func TestParseTrainConfig(t *testing.T) {
	// As EasyTransfer's app config writes it: attributes at the top,
	// the config it came from under _config_json.
	ts, err := parseTrainConfig([]byte(`{"sequence_length": 64, "first_sequence": "content", "second_sequence": null,
		"label_enumerate_values": "a,b", "_config_json": {"preprocess_config": {"sequence_length": 128, "second_sequence": "q"},
		"model_config": {"model_name": "text_match_bert"}}}`))
	if err != nil || ts.seqLen != 64 || ts.first != "content" || ts.second != "q" || ts.labels != "a,b" || ts.modelName != "text_match_bert" {
		t.Errorf("%+v %v", ts, err)
	}
	// A user-written config: preprocess_config at the top.
	ts, err = parseTrainConfig([]byte(`{"preprocess_config": {"sequence_length": "32", "first_sequence": "text"}}`))
	if err != nil || ts.seqLen != 32 || ts.first != "text" {
		t.Errorf("%+v %v", ts, err)
	}
	for _, bad := range []string{`[]`, `{"sequence_length": 1.5}`, `{"sequence_length": "x"}`, `{"sequence_length": true}`} {
		if _, err := parseTrainConfig([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	labels, err := labelsFromMapping([]byte(`{"neg": 1, "pos": 0}`))
	if err != nil || strings.Join(labels, ",") != "pos,neg" {
		t.Errorf("%v %v", labels, err)
	}
	if _, err := labelsFromMapping([]byte(`{"a": 0, "b": 0}`)); err == nil {
		t.Error("two labels of one index were accepted")
	}
}

// TestWordTags checks LabelingPostprocessor's rules: a word's tag is its
// first piece's, [CLS]/[SEP]/out-of-range tags become the last label, and
// words past the sequence get it too.
func TestWordTags(t *testing.T) {
	a := &App{labels: []string{"B", "I", "[CLS]", "O"}}
	origin := []int{-1, 0, 0, 1, 2, -1} // word 0 has two pieces
	if got := a.wordTags([]float64{3, 0, 1, 2, 7, 0}, origin); got != "B O O" {
		t.Errorf("tags %q", got)
	}
	// Truncated: 4 words, 3 predictions after [CLS].
	if got := a.wordTags([]float64{0, 1, 1, 0}, []int{-1, 0, 1, 2, 3, -1}); got != "I I B O" {
		t.Errorf("truncated tags %q", got)
	}
}

// fuzzApp is an app with a tokenizer and no model: enough for Decode.
func fuzzApp(f *testing.F, typ, second string) *App {
	v, err := tokenizer.ParseVocab([]byte("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n##s\n"))
	if err != nil {
		f.Fatal(err)
	}
	tok, err := tokenizer.NewBert(v, tokenizer.BertOptions{LowerCase: true, MaxInputCharsPerWord: 200, PythonLower: true})
	if err != nil {
		f.Fatal(err)
	}
	return &App{tok: tok, seqLen: 8, first: "content", second: second, cfg: Config{Type: typ}}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"first_sequence": "hello worlds"}`, `[{"content": "a"}, {"first_sequence": "b", "second_sequence": "c"}]`,
		`{"first_sequence": "  two  spaces "}`, `[]`, `{"first_sequence": 1}`, `null`, `"x"`} {
		f.Add([]byte(s))
	}
	apps := []*App{fuzzApp(f, TextClassify, ""), fuzzApp(f, TextMatch, "q"), fuzzApp(f, SequenceLabeling, "")}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, a := range apps {
			p, err := a.Decode(context.Background(), &processors.Request{Body: body})
			if err != nil {
				if !processors.IsBadInput(err) {
					t.Fatalf("%s: %v is not a bad input", a.cfg.Type, err)
				}
				continue
			}
			if len(p.ids) != p.n*a.seqLen || len(p.mask) != len(p.ids) || len(p.segs) != len(p.ids) {
				t.Fatalf("%s: %d texts, %d ids", a.cfg.Type, p.n, len(p.ids))
			}
			if a.cfg.Type == SequenceLabeling && len(p.origin) != p.n {
				t.Fatalf("%d origins for %d texts", len(p.origin), p.n)
			}
			for i := 0; i < p.n; i++ {
				if p.ids[i*a.seqLen] != 2 || p.mask[i*a.seqLen] != 1 {
					t.Fatalf("%s: row %d does not start with [CLS]: %v", a.cfg.Type, i, p.ids)
				}
			}
		}
	})
}

func FuzzParseTrainConfig(f *testing.F) {
	f.Add([]byte(`{"sequence_length": 64, "_config_json": {"preprocess_config": {"first_sequence": "a"}}}`))
	f.Add([]byte(`{"preprocess_config": {"sequence_length": "12"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseTrainConfig(b)
		labelsFromMapping(b)
	})
}
