package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// NewBertTokenizer is BERT's pipeline over a vocab.txt as a Tokenizer
// (tokenizers' BertWordPieceTokenizer): BertNormalizer (lower-casing and
// stripping accents when lower), BertPreTokenizer, WordPiece ("##", at most
// 100 characters a word), [CLS] A [SEP] (B [SEP]), the WordPiece decoder.
func NewBertTokenizer(v *Vocab, lower bool) (*Tokenizer, error) {
	wp := &wordPiece{v: v, prefix: "##", unk: "[UNK]", unkID: -1, maxChars: 100}
	if id, ok := v.ID("[UNK]"); ok {
		wp.unkID = id
	} else {
		return nil, fmt.Errorf("the vocabulary has no [UNK]")
	}
	cls, ok1 := v.ID("[CLS]")
	sep, ok2 := v.ID("[SEP]")
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("the vocabulary has no [CLS] or no [SEP]")
	}
	var added []AddedToken
	for _, s := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		if id, ok := v.ID(s); ok {
			added = append(added, AddedToken{ID: id, Content: s, Special: true})
		}
	}
	nz := bertNormalizer{clean: true, chinese: true, stripAccents: lower, lower: lower}
	return &Tokenizer{
		normalizer: nz,
		pre:        bertPre{},
		model:      wp,
		post:       &bertProcessor{sep: "[SEP]", sepID: sep, cls: "[CLS]", clsID: cls},
		decoder:    wordPieceDecoder{prefix: "##", cleanup: true},
		added:      newAddedVocab(added, nz),
	}, nil
}

// MaxMergesLineBytes bounds one line of a merges.txt / vocab.bpe.
const MaxMergesLineBytes = 1 << 16

// ParseMergesTxt reads GPT-2's merges (vocab.bpe, merges.txt): one "a b"
// pair a line, a first line "#version..." skipped; the rank is the order.
func ParseMergesTxt(b []byte) ([][2]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxMergesLineBytes)
	var out [][2]string
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if strings.HasPrefix(s, "#version") {
			continue
		}
		s = strings.TrimSuffix(s, "\r")
		if s == "" && line > 0 {
			// GPT-2's vocab.bpe ends with an empty line.
			continue
		}
		a, c, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(c, " ") {
			return nil, fmt.Errorf("merges line %d: %q is not two tokens", line, s)
		}
		out = append(out, [2]string{a, c})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("merges line %d: %w", line+1, err)
	}
	return out, nil
}

// ParseVocabJSON reads GPT-2's vocab.json / encoder.json: token -> id.
func ParseVocabJSON(b []byte) (*Vocab, error) {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("vocab.json: %v", err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("vocab.json is empty")
	}
	return vocabFromMap("vocab.json", m)
}

// NewGPT2Tokenizer is GPT-2's byte-level BPE from its vocab.json
// (encoder.json) and merges.txt (vocab.bpe): the ByteLevel pre-tokenizer
// (GPT-2's split, no prefix space), BPE, the ByteLevel post-processor
// (offsets trimmed of spaces) and decoder; <|endoftext|> a special token
// when the vocabulary has it.
func NewGPT2Tokenizer(vocabJSON, merges []byte) (*Tokenizer, error) {
	v, err := ParseVocabJSON(vocabJSON)
	if err != nil {
		return nil, err
	}
	ms, err := ParseMergesTxt(merges)
	if err != nil {
		return nil, err
	}
	b, err := newBPE(v, ms, "")
	if err != nil {
		return nil, err
	}
	var added []AddedToken
	if id, ok := v.ID("<|endoftext|>"); ok {
		added = append(added, AddedToken{ID: id, Content: "<|endoftext|>", Special: true})
	}
	return &Tokenizer{
		pre:     byteLevelPre{addPrefixSpace: false, trimOffsets: true, useRegex: true},
		model:   b,
		post:    byteLevelProcessor{trim: true, prefixSpace: false},
		decoder: byteLevelDecoder{},
		added:   newAddedVocab(added, nil),
	}, nil
}
