package tokenizer_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eas-server/eas-server/engines/tokenizer"
)

// A small byte-level BPE tokenizer.json written by hand: merges in both
// forms, an added special token, a template.
const tinyBPE = `{
  "version": "1.0",
  "added_tokens": [{"id": 6, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing", "single": "<s> $A", "pair": "<s> $A <s> $B:1",
    "special_tokens": {"<s>": {"id": "<s>", "ids": [6], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4, "c": 5},
    "merges": ["a b", ["Ġ", "ab"]]}
}`

func TestTinyBPE(t *testing.T) {
	tk, err := tokenizer.ParseTokenizerJSON([]byte(tinyBPE))
	if err != nil {
		t.Fatal(err)
	}
	e, err := tk.Encode("AB ab<s>c", true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.IDs, []int32{6, 2, 4, 6, 5}) || !slices.Equal(e.Tokens, []string{"<s>", "ab", "Ġab", "<s>", "c"}) {
		t.Errorf("encode: %v %q", e.IDs, e.Tokens)
	}
	if !slices.Equal(e.Offsets, [][2]int{{0, 0}, {0, 2}, {2, 5}, {5, 8}, {8, 9}}) {
		t.Errorf("offsets: %v", e.Offsets)
	}
	if s, _ := tk.Decode(e.IDs, true); s != "ab abc" {
		t.Errorf("decode: %q", s)
	}
	p, err := tk.EncodePair("ab", "c", true)
	if err != nil || !slices.Equal(p.TypeIDs, []int32{0, 0, 0, 1}) || !slices.Equal(p.SpecialTokensMask, []int32{1, 0, 1, 0}) {
		t.Errorf("pair: %+v %v", p, err)
	}
	tr, _ := tk.WithTruncation(&tokenizer.Truncation{MaxLength: 3, Strategy: "LongestFirst", Direction: "Right"})
	padded := tr.WithPadding(&tokenizer.Padding{Length: 0, PadToMultipleOf: 4, Direction: "Left", PadID: 5, PadToken: "c"})
	b, err := padded.EncodeBatch([]string{"ab ab ab ab", "a"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b[0].IDs, []int32{5, 6, 2, 4}) || !slices.Equal(b[0].AttentionMask, []int32{0, 1, 1, 1}) || !slices.Equal(b[1].IDs, []int32{5, 5, 6, 0}) {
		t.Errorf("batch: %v %v %v", b[0].IDs, b[0].AttentionMask, b[1].IDs)
	}
}

// TestRefusals: what is not implemented is refused at load, named by its
// JSON path and type.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct{ edit, old, want string }{
		{`"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AA=="}`, `"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}`, `$.normalizer: normalizer type "Precompiled"`},
		{`{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]}`, `{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}`, `$.normalizer.normalizers[1]: normalizer type "Nmt"`},
		{`{"type": "UnicodeScripts"}`, `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`, `$.pre_tokenizer: pre-tokenizer type "UnicodeScripts"`},
		{`{"type": "CTC"}`, `{"type": "ByteLevel"}`, `$.decoder: decoder type "CTC"`},
		{`"model": {"type": "WordLevel"`, `"model": {"type": "BPE"`, `$.model: model type "WordLevel"`},
		{`"merges": ["a b"], "dropout": 0.1`, `"merges": ["a b", ["Ġ", "ab"]]`, `$.model.dropout`},
		{`"merges": ["a b", "x y"]`, `"merges": ["a b", ["Ġ", "ab"]]`, `"x" is not in the vocabulary`},
		{`"decoder": {"type": "ByteLevel", "frobnicate": 1}`, `"decoder": {"type": "ByteLevel"}`, `$.decoder: unsupported setting "frobnicate"`},
		{`{"type": "Split", "pattern": {"Regex": "a(?=b)"}, "behavior": "Isolated", "invert": false}`, `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`, `lookaround`},
		{`"truncation": {"max_length": 8, "stride": 2}, "decoder"`, `"decoder"`, `$.truncation.stride`},
	} {
		js := strings.Replace(tinyBPE, tc.old, tc.edit, 1)
		if js == tinyBPE {
			t.Fatalf("edit %q did not apply", tc.old)
		}
		_, err := tokenizer.ParseTokenizerJSON([]byte(js))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.edit, err, tc.want)
		}
	}
}

func FuzzParseTokenizerJSON(f *testing.F) {
	f.Add([]byte(tinyBPE))
	f.Add([]byte(`{"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1, "##b": 2}}, "normalizer": {"type": "BertNormalizer"}, "pre_tokenizer": {"type": "BertPreTokenizer"}}`))
	f.Add([]byte(`{"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["▁a", -1.5], ["b", -2]]}, "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}}`))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"<0x61>": 0, "b": 1}, "merges": [], "byte_fallback": true, "unk_token": "b", "fuse_unk": true}, "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": true}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := tokenizer.ParseTokenizerJSON(b)
		if err != nil {
			return
		}
		for _, s := range []string{"", "ab AB\n\t 北京 😀 a\u0301", "<s> ab</s>b"} {
			e, err := tk.Encode(s, true)
			if err != nil {
				continue
			}
			for i, o := range e.Offsets {
				if o[0] < 0 || o[1] < o[0] || o[1] > len(s) {
					t.Fatalf("%q: token %d offsets %v", s, i, o)
				}
			}
			if _, err := tk.Decode(e.IDs, false); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzParseVocabJSONAndMerges(f *testing.F) {
	f.Add([]byte(`{"a": 0, "b": 1, "ab": 2, "Ġ": 3}`), []byte("#version: 0.2\na b\n"))
	f.Add([]byte(`{"a": 5}`), []byte("a a\n"))
	f.Add([]byte(`[]`), []byte("a b c\n"))
	f.Fuzz(func(t *testing.T, vocab, merges []byte) {
		if _, err := tokenizer.ParseMergesTxt(merges); err != nil {
			return
		}
		tk, err := tokenizer.NewGPT2Tokenizer(vocab, merges)
		if err != nil {
			return
		}
		for _, s := range []string{"ab ab", "Hello, 北京! 😀"} {
			if e, err := tk.Encode(s, true); err == nil {
				out, _ := tk.Decode(e.IDs, false)
				if !utf8.ValidString(out) {
					t.Fatalf("decode of %q is not UTF-8", s)
				}
			}
		}
	})
}

func FuzzEncodeGPTPattern(f *testing.F) {
	f.Add("Hello world's  \n\n  x123456 ,.!? 😀\r\n")
	tk, err := tokenizer.ParseTokenizerJSON([]byte(tinyBPE))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		e, err := tk.Encode(s, false)
		if err != nil {
			t.Fatal(err)
		}
		// The pre-tokens tile the text: the offsets never go back.
		last := 0
		for _, o := range e.Offsets {
			if o[0] < last-4 || o[1] > len(s) {
				t.Fatalf("%q: offsets %v", s, e.Offsets)
			}
			last = o[0]
		}
	})
}

// TestDecodeStreamBytes: byte-fallback pieces of one character give
// nothing until the character is whole.
func TestDecodeStreamBytes(t *testing.T) {
	js := `{"model": {"type": "BPE", "vocab": {"<unk>": 0, "▁a": 1, "<0xE2>": 2, "<0x82>": 3, "<0xAC>": 4, "▁": 5, "a": 6}, "merges": ["▁ a"],
	  "byte_fallback": true, "unk_token": "<unk>", "fuse_unk": true},
	 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
	 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}`
	tk, err := tokenizer.ParseTokenizerJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	e, err := tk.Encode("a €a", false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.IDs, []int32{1, 5, 2, 3, 4, 6}) || !slices.Equal(e.Offsets, [][2]int{{0, 1}, {1, 2}, {2, 5}, {2, 5}, {2, 5}, {5, 6}}) {
		t.Fatalf("encode: %v %q %v", e.IDs, e.Tokens, e.Offsets)
	}
	ds := tk.NewDecodeStream(false)
	var got []string
	for _, id := range e.IDs {
		s, err := ds.Step(id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if !slices.Equal(got, []string{"a", " ", "", "", "€", "a"}) {
		t.Errorf("stream: %q", got)
	}
	if s, _ := tk.Decode(e.IDs, false); s != "a €a" {
		t.Errorf("decode: %q", s)
	}
}
