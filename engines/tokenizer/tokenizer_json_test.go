package tokenizer_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
)

// realTokenizer is one real tokenizer of the cache: how the Go side loads
// it and how ref_hf.py does.
type realTokenizer struct {
	name  string
	files []string
	spec  func(dir string) string
	load  func(t testing.TB, dir string) *tokenizer.Tokenizer
}

func loadJSON(name string) func(t testing.TB, dir string) *tokenizer.Tokenizer {
	return func(t testing.TB, dir string) *tokenizer.Tokenizer {
		tk, err := tokenizer.LoadTokenizerFile(filepath.Join(dir, name, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
}

func jsonSpec(name string) func(string) string {
	return func(dir string) string { return filepath.Join(dir, name, "tokenizer.json") }
}

var realTokenizers = []realTokenizer{
	{"bert", []string{"bert/tokenizer.json"}, jsonSpec("bert"), loadJSON("bert")},
	{"bertvocab", []string{"bert/vocab.txt"}, func(dir string) string { return "bert-vocab:" + filepath.Join(dir, "bert", "vocab.txt") },
		func(t testing.TB, dir string) *tokenizer.Tokenizer {
			b, err := os.ReadFile(filepath.Join(dir, "bert", "vocab.txt"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := tokenizer.ParseVocab(b)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := tokenizer.NewBertTokenizer(v, true)
			if err != nil {
				t.Fatal(err)
			}
			return tk
		}},
	{"gpt2", []string{"gpt2/encoder.json", "gpt2/vocab.bpe"}, func(dir string) string {
		return "gpt2:" + filepath.Join(dir, "gpt2", "encoder.json") + "," + filepath.Join(dir, "gpt2", "vocab.bpe")
	}, func(t testing.TB, dir string) *tokenizer.Tokenizer {
		v, err := os.ReadFile(filepath.Join(dir, "gpt2", "encoder.json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := os.ReadFile(filepath.Join(dir, "gpt2", "vocab.bpe"))
		if err != nil {
			t.Fatal(err)
		}
		tk, err := tokenizer.NewGPT2Tokenizer(v, m)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}},
	{"llama2", []string{"llama2/tokenizer.json"}, jsonSpec("llama2"), loadJSON("llama2")},
	{"llama3", []string{"llama3/tokenizer.json"}, jsonSpec("llama3"), loadJSON("llama3")},
	{"qwen3", []string{"qwen3/tokenizer.json"}, jsonSpec("qwen3"), loadJSON("qwen3")},
	{"gemma3", []string{"gemma3/tokenizer.json"}, jsonSpec("gemma3"), loadJSON("gemma3")},
}

// needCache skips (or fails, under EAS_REQUIRE_PYTHON=1) when a tokenizer's
// files are not in the cache.
func needCache(t testing.TB, rt realTokenizer) string {
	t.Helper()
	dir := require.TokenizerCache()
	for _, f := range rt.files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			require.Missing(t, require.Python, "no %s in %s: run bash scripts/fetch-tokenizers.sh (make test-deps does)", f, dir)
		}
	}
	return dir
}

type refCase struct {
	Text     int             `json:"text"`
	Pair     int             `json:"pair"`
	Special  bool            `json:"special"`
	Trunc    *map[string]any `json:"trunc"`
	Error    string          `json:"error"`
	IDs      []int32         `json:"ids"`
	Tokens   []string        `json:"tokens"`
	Offsets  [][2]int        `json:"offsets"`
	TypeIDs  []int32         `json:"type_ids"`
	Special_ []int32         `json:"special_tokens_mask"`
	WordIDs  []int32         `json:"word_ids"`
	Decoded  string          `json:"decoded"`
	DecSkip  string          `json:"decoded_skip"`
}

type refOwn struct {
	Text          int     `json:"text"`
	IDs           []int32 `json:"ids"`
	AttentionMask []int32 `json:"attention_mask"`
}

type refStream struct {
	IDs    []int32  `json:"ids"`
	Skip   bool     `json:"skip"`
	Chunks []string `json:"chunks"`
}

type refFile struct {
	Corpus     []string
	Tokenizers map[string]struct {
		Cases  []refCase
		Own    []refOwn
		Stream []refStream
	}
}

// charOffsets converts byte offsets to the character (code point) offsets
// tokenizers' Python binding reports, as its BytesToCharOffsetConverter
// does: the start is the character holding the start byte, the end the
// character at the end byte, or one past the character holding the byte
// before when the end is the text's end; a start past the text leaves the
// offsets in bytes.
func charOffsets(text string, off [2]int) [2]int {
	idx := make(map[int]int, len(text))
	c := 0
	for i, r := range text {
		for k := 0; k < utf8.RuneLen(r); k++ {
			idx[i+k] = c
		}
		c++
	}
	if off[0] == len(text) {
		// Only where ByteLevel's trimming moved a start to the end: tokenizers
		// trims character offsets, which stay characters.
		return [2]int{c, c}
	}
	s, ok := idx[off[0]]
	if !ok {
		return off
	}
	if e, ok := idx[off[1]]; ok {
		return [2]int{s, e}
	}
	last, ok := idx[off[1]-1]
	if !ok {
		last = s
	}
	return [2]int{s, last + 1}
}

func runRef(t *testing.T, specs []string) refFile {
	t.Helper()
	py := pyvenv.Python(t, "tensorflow")
	out := filepath.Join(t.TempDir(), "ref.json")
	script := filepath.Join(require.RepoRoot(), "engines", "tokenizer", "testdata", "ref_hf.py")
	if b, err := exec.Command(py, append([]string{script, out}, specs...)...).CombinedOutput(); err != nil {
		t.Fatalf("ref_hf.py: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var ref refFile
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

func truncFromRef(m map[string]any) *tokenizer.Truncation {
	strategy := map[string]string{"longest_first": "LongestFirst", "only_first": "OnlyFirst", "only_second": "OnlySecond"}[m["strategy"].(string)]
	dir := map[string]string{"right": "Right", "left": "Left"}[m["direction"].(string)]
	return &tokenizer.Truncation{MaxLength: int(m["max_length"].(float64)), Strategy: strategy, Direction: dir}
}

// TestRealTokenizersAgainstHuggingFace encodes ref_hf.py's corpus (singles
// with and without special tokens, pairs, three truncations) with each
// real tokenizer and compares ids, tokens, offsets, type ids, the special
// tokens mask, word ids and both decodings with tokenizers'.
func TestRealTokenizersAgainstHuggingFace(t *testing.T) {
	var specs []string
	var avail []realTokenizer
	dir := require.TokenizerCache()
	for _, rt := range realTokenizers {
		ok := true
		for _, f := range rt.files {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				ok = false
			}
		}
		if ok {
			specs = append(specs, rt.name+"="+rt.spec(dir))
			avail = append(avail, rt)
		}
	}
	if len(avail) < len(realTokenizers) {
		needCache(t, realTokenizers[0])
		for _, rt := range realTokenizers {
			needCache(t, rt)
		}
	}
	ref := runRef(t, specs)
	for _, rt := range avail {
		t.Run(rt.name, func(t *testing.T) {
			checkAgainstRef(t, ref, rt.name, func(t testing.TB) *tokenizer.Tokenizer { return rt.load(t, dir) })
		})
	}
}

// checkAgainstRef compares a tokenizer's encodings and decodings with
// ref_hf.py's cases for name.
func checkAgainstRef(t *testing.T, ref refFile, name string, load func(t testing.TB) *tokenizer.Tokenizer) {
	tk := load(t).WithPadding(nil)
	base, _ := tk.WithTruncation(nil)
	cases := ref.Tokenizers[name].Cases
	if len(cases) == 0 {
		t.Fatal("no reference cases")
	}
	fails := 0
	for _, c := range cases {
		tt := base
		if c.Trunc != nil {
			var err error
			if tt, err = base.WithTruncation(truncFromRef(*c.Trunc)); err != nil {
				t.Fatal(err)
			}
		}
		var e *tokenizer.Encoded
		var err error
		if c.Pair >= 0 {
			e, err = tt.EncodePair(ref.Corpus[c.Text], ref.Corpus[c.Pair], c.Special)
		} else {
			e, err = tt.Encode(ref.Corpus[c.Text], c.Special)
		}
		what := func() string {
			s := trim(ref.Corpus[c.Text])
			if c.Pair >= 0 {
				s += " | " + trim(ref.Corpus[c.Pair])
			}
			return s
		}
		if c.Error != "" {
			if err == nil {
				t.Errorf("%q trunc %v: tokenizers refused (%s), we did not", what(), *c.Trunc, c.Error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", what(), err)
			continue
		}
		offs := make([][2]int, len(e.Offsets))
		for i, o := range e.Offsets {
			if e.WordIDs[i] < 0 {
				offs[i] = o
				continue
			}
			text := ref.Corpus[c.Text]
			if e.SequenceIDs[i] == 1 {
				text = ref.Corpus[c.Pair]
			}
			offs[i] = charOffsets(text, o)
		}
		bad := ""
		switch {
		case !slices.Equal(e.IDs, c.IDs):
			bad = "ids"
		case !slices.Equal(e.Tokens, c.Tokens):
			bad = "tokens"
		case !slices.Equal(e.TypeIDs, c.TypeIDs):
			bad = "type ids"
		case !slices.Equal(e.SpecialTokensMask, c.Special_):
			bad = "special tokens mask"
		case !slices.Equal(e.WordIDs, c.WordIDs):
			bad = "word ids"
		case !slices.Equal(offs, c.Offsets):
			bad = "offsets"
		}
		if bad != "" {
			fails++
			if fails <= 8 {
				t.Errorf("%q pair=%d special=%v trunc=%v: %s differ\n got ids %v\nwant ids %v\n got %q\nwant %q\n got offsets %v\nwant offsets %v\n got types %v words %v\nwant types %v words %v",
					what(), c.Pair, c.Special, c.Trunc, bad, e.IDs, c.IDs, e.Tokens, c.Tokens, offs, c.Offsets, e.TypeIDs, e.WordIDs, c.TypeIDs, c.WordIDs)
			}
			continue
		}
		for _, skip := range []bool{false, true} {
			want := c.Decoded
			if skip {
				want = c.DecSkip
			}
			got, err := tk.Decode(e.IDs, skip)
			if err != nil || got != want {
				fails++
				if fails <= 8 {
					t.Errorf("%q: decode(skip=%v) = %q, %v; want %q", what(), skip, got, err, want)
				}
			}
		}
	}
	if fails > 8 {
		t.Errorf("%d disagreements in all", fails)
	}
	for _, st := range ref.Tokenizers[name].Stream {
		ds := tk.NewDecodeStream(st.Skip)
		for i, id := range st.IDs {
			got, err := ds.Step(id)
			if err != nil || got != st.Chunks[i] {
				t.Errorf("decode stream (skip=%v) of %v, step %d: %q, %v; want %q", st.Skip, st.IDs, i, got, err, st.Chunks[i])
				break
			}
		}
	}
	for _, o := range ref.Tokenizers[name].Own {
		own := load(t)
		e, err := own.Encode(ref.Corpus[o.Text], true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(e.IDs, o.IDs) || !slices.Equal(e.AttentionMask, o.AttentionMask) {
			t.Errorf("the file's own truncation/padding on %q:\n got %v %v\nwant %v %v", trim(ref.Corpus[o.Text]), e.IDs, e.AttentionMask, o.IDs, o.AttentionMask)
		}
	}
}

// TestSyntheticTokenizersAgainstHuggingFace does the same with the small
// tokenizers testdata/gen_synth.py trains (the components the real files
// do not use).
func TestSyntheticTokenizersAgainstHuggingFace(t *testing.T) {
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tokenizer", "testdata", "gen_synth.py")
	if b, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_synth.py: %v\n%s", err, b)
	}
	names := []string{"unigram", "wordpiece", "bpe_suffix", "bytelevel"}
	var specs []string
	for _, n := range names {
		specs = append(specs, n+"="+filepath.Join(dir, n+".json"))
	}
	ref := runRef(t, specs)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			checkAgainstRef(t, ref, n, func(t testing.TB) *tokenizer.Tokenizer {
				tk, err := tokenizer.LoadTokenizerFile(filepath.Join(dir, n+".json"))
				if err != nil {
					t.Fatal(err)
				}
				return tk
			})
		})
	}
}
