package tokenizer_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
)

func vocab(t testing.TB, lines ...string) *tokenizer.Vocab {
	t.Helper()
	v, err := tokenizer.ParseVocab([]byte(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func bert(t testing.TB, v *tokenizer.Vocab, opts tokenizer.BertOptions) *tokenizer.Bert {
	t.Helper()
	b, err := tokenizer.NewBert(v, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBertBasics pins the rules with small hand-checked cases (the venv
// test below compares a whole corpus with Hugging Face tokenizers).
func TestBertBasics(t *testing.T) {
	v := vocab(t, "[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", ",", "!", "北", "京", "cafe", "ς", "σ", "οδος", "a", "##a")
	b := bert(t, v, tokenizer.BertOptions{LowerCase: true, MaxInputCharsPerWord: 5})
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"unaffable", []string{"[UNK]"}}, // 9 runes > 5
		{"Hello, HELLO!", []string{"hello", ",", "hello", "!"}},
		{"北京x", []string{"北", "京", "[UNK]"}},
		{"Café\u00a0\u0000cafe\u200b", []string{"cafe", "cafe"}},
		{"ΟΔΟΣ", []string{"[UNK]"}}, // οδοσ: Σ lower-cased alone
		{"aaaaa aaaaaa", []string{"a", "##a", "##a", "##a", "##a", "[UNK]"}},
	} {
		if got := b.Tokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	py := bert(t, v, tokenizer.BertOptions{LowerCase: true, PythonLower: true})
	if got := py.Tokenize("ΟΔΟΣ Σ"); !slices.Equal(got, []string{"οδος", "σ"}) {
		t.Errorf("Python's lower-casing of ΟΔΟΣ Σ: %q", got)
	}
	long := bert(t, v, tokenizer.BertOptions{LowerCase: true, MaxInputCharsPerWord: 200})
	if got := long.Tokenize("unaffable"); !slices.Equal(got, []string{"un", "##aff", "##able"}) {
		t.Errorf("wordpieces of unaffable: %q", got)
	}
	if got := long.TokenizeIDs("unaffable zzz"); !slices.Equal(got, []int32{4, 5, 6, 1}) {
		t.Errorf("ids: %v", got)
	}
	if _, err := tokenizer.NewBert(vocab(t, "a"), tokenizer.BertOptions{}); err == nil {
		t.Error("a vocabulary without [UNK] was accepted")
	}
	if _, err := tokenizer.ParseVocab(nil); err == nil {
		t.Error("an empty vocabulary was accepted")
	}
}

// TestBertAgainstHuggingFace tokenizes testdata/ref_bert.py's corpus
// (accents, CJK, emoji, control and format characters, runs of whitespace,
// special tokens in the text, words over the length limit, a long input)
// and compares every token with tokenizers' BERT pipeline, lower-cased and
// cased, at both word-length limits, and with Python's lower-casing.
func TestBertAgainstHuggingFace(t *testing.T) {
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tokenizer", "testdata", "ref_bert.py")
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("ref_bert.py: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Corpus []string
		Cases  []struct {
			Lower       bool
			PythonLower bool `json:"python_lower"`
			MaxChars    int  `json:"max_chars"`
			Tokens      [][]string
		}
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	vb, err := os.ReadFile(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.ParseVocab(vb)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) != 5 {
		t.Fatalf("%d cases in ref.json", len(ref.Cases))
	}
	for _, c := range ref.Cases {
		b := bert(t, v, tokenizer.BertOptions{LowerCase: c.Lower, MaxInputCharsPerWord: c.MaxChars, PythonLower: c.PythonLower})
		for i, text := range ref.Corpus {
			want := c.Tokens[i]
			if want == nil {
				want = []string{}
			}
			got := b.Tokenize(text)
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, want) {
				t.Errorf("lower=%v python_lower=%v max=%d text %d %q:\n got %q\nwant %q", c.Lower, c.PythonLower, c.MaxChars, i, trim(text), got, want)
			}
		}
	}
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func FuzzParseVocab(f *testing.F) {
	f.Add([]byte("[PAD]\n[UNK]\nhello\n##lo\n"))
	f.Add([]byte("a\r\nb\n\n  c  \n"))
	f.Add([]byte{0xff, '\n'})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := tokenizer.ParseVocab(b)
		if err != nil {
			return
		}
		for i := 0; i < v.Len(); i++ {
			id, ok := v.ID(v.Token(int32(i)))
			if !ok || v.Token(id) != v.Token(int32(i)) {
				t.Fatalf("token %d %q maps to %d", i, v.Token(int32(i)), id)
			}
		}
		if bt, err := tokenizer.NewBert(v, tokenizer.BertOptions{Unknown: v.Token(0)}); err == nil {
			bt.Tokenize(string(b))
		}
	})
}

func FuzzBertTokenize(f *testing.F) {
	f.Add("Hello, World! 北京 😀 ΟΔΟΣ İ e\u0301")
	f.Add("\x00\xff\xfe ##")
	v := vocab(f, "[UNK]", "hello", "##lo", "he", "##l", ",", "北")
	lower := bert(f, v, tokenizer.BertOptions{LowerCase: true})
	cased := bert(f, v, tokenizer.BertOptions{})
	f.Fuzz(func(t *testing.T, s string) {
		for _, b := range []*tokenizer.Bert{lower, cased} {
			for _, tok := range b.Tokenize(s) {
				if _, ok := v.ID(tok); !ok {
					t.Fatalf("token %q of %q is not in the vocabulary", tok, s)
				}
			}
		}
	})
}

func TestEncodePair(t *testing.T) {
	v := vocab(t, "[PAD]", "[UNK]", "[CLS]", "[SEP]")
	b := bert(t, v, tokenizer.BertOptions{})
	e, err := b.EncodePair([]int32{10, 11, 12, 13}, []int32{20, 21}, true, 7, true)
	if err != nil {
		t.Fatal(err)
	}
	// 6 pieces for 4 places: a, the longer, loses two.
	if !slices.Equal(e.IDs, []int32{2, 10, 11, 3, 20, 21, 3}) || !slices.Equal(e.TypeIDs, []int32{0, 0, 0, 0, 1, 1, 1}) || !slices.Equal(e.Mask, []int32{1, 1, 1, 1, 1, 1, 1}) {
		t.Errorf("pair: %+v", e)
	}
	e, _ = b.EncodePair([]int32{10, 11, 12}, []int32{20, 21, 22}, true, 7, false)
	if !slices.Equal(e.IDs, []int32{2, 10, 11, 3, 20, 21, 3}) { // b first on a tie, then a
		t.Errorf("tie: %v", e.IDs)
	}
	e, _ = b.EncodePair([]int32{10, 11, 12}, nil, false, 4, true)
	if !slices.Equal(e.IDs, []int32{2, 10, 11, 3}) || !slices.Equal(e.Mask, []int32{1, 1, 1, 1}) {
		t.Errorf("single: %+v", e)
	}
	e, _ = b.EncodePair([]int32{10}, nil, false, 5, true)
	if !slices.Equal(e.IDs, []int32{2, 10, 3, 0, 0}) || !slices.Equal(e.Mask, []int32{1, 1, 1, 0, 0}) {
		t.Errorf("single: %+v", e)
	}
	if _, err := b.EncodePair(nil, nil, true, 2, true); err == nil {
		t.Error("a pair in 2 places was accepted")
	}
	if _, err := bert(t, vocab(t, "[UNK]"), tokenizer.BertOptions{}).EncodePair(nil, nil, false, 8, true); err == nil {
		t.Error("a vocabulary without [CLS] encoded")
	}
}

func TestReadBertDir(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := tokenizer.ReadBertDir(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no vocab.txt: %v, want fs.ErrNotExist", err)
	}
	os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte("[UNK]\nhello\n"), 0o644)
	v, lower, err := tokenizer.ReadBertDir(dir)
	if err != nil || !lower || v.Len() != 2 {
		t.Errorf("vocab.txt alone: %v %v %v, want 2 tokens, lower-cased", v, lower, err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"do_lower_case": false}`), 0o644)
	if _, lower, err := tokenizer.ReadBertDir(dir); err != nil || lower {
		t.Errorf("do_lower_case false: %v %v", lower, err)
	}
}
