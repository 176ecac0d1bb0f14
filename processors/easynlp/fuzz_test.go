package easynlp

import (
	"context"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/encoder"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
)

// fuzzApp is an app with a tokenizer and no model: enough for Decode.
func fuzzApp(t testing.TB, app string) *App {
	vocab, err := tokenizer.ParseVocab([]byte(strings.Join([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##b", "我", ",", "."}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	a := &App{app: app, seqLen: 16, first: "first_sequence", second: "second_sequence", model: encoder.Config{ModelType: "bert", MaxPositionEmbeddings: 32}}
	if app == Vectorization {
		a.head = encoder.Vector
	}
	if a.tok, err = tokenizer.NewBert(vocab, tokenizer.BertOptions{LowerCase: true, MaxInputCharsPerWord: 100, PythonLower: true}); err != nil {
		t.Fatal(err)
	}
	a.special = specialTokens(vocab)
	return a
}

// FuzzDecode: any body decodes to rows within sequence_length and the
// model's positions, or a BadInput; never a panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"first_sequence": "a b"}`, `[{"first_sequence": "ab", "second_sequence": "我 [SEP]", "sequence_length": 5}, {"first_sequence": "x", "id": 3}]`,
		`{"first_sequence": "a", "sequence_length": 40}`, `[null]`, `[]`, `{"first_sequence": null}`, `{"first_sequence": "[CLS][SEP][MASK", "sequence_length": 2}`} {
		f.Add(s)
	}
	apps := map[string]*App{}
	for _, app := range []string{TextClassify, TextMatch, SequenceLabeling, Vectorization} {
		apps[app] = fuzzApp(f, app)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for name, a := range apps {
			p, err := a.Decode(context.Background(), &processors.Request{Body: []byte(body)})
			if err != nil {
				if _, ok := err.(*processors.BadInput); !ok {
					t.Fatalf("%s: %q: %T %v, want a BadInput", name, body, err, err)
				}
				continue
			}
			for _, r := range p.rows {
				if r.n > r.padTo && name == Vectorization || r.n > 32 || r.padTo > 32 || len(r.ids) != r.n || len(r.types) != r.n {
					t.Fatalf("%s: %q: row of %d ids, padTo %d, %d types", name, body, len(r.ids), r.padTo, len(r.types))
				}
				if name == SequenceLabeling && len(r.tokens) != r.n {
					t.Fatalf("%s: %q: %d tokens for %d ids", name, body, len(r.tokens), r.n)
				}
			}
		}
	})
}
