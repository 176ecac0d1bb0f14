package textencoder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
)

// stConfig is what a sentence-transformers directory says: its pooling
// (1_Pooling/config.json), whether a Normalize module follows
// (modules.json) and its max_seq_length (sentence_bert_config.json).
type stConfig struct {
	pooling   string
	normalize bool
	maxSeqLen int
}

// readSentenceTransformers reads dir's modules.json and what it names;
// a directory without one gives the zero stConfig.
func readSentenceTransformers(dir string) (stConfig, error) {
	var st stConfig
	if p := filepath.Join(dir, "sentence_bert_config.json"); isFile(p) {
		b, err := readSide(p)
		if err != nil {
			return st, err
		}
		var c struct {
			MaxSeqLength int `json:"max_seq_length"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return st, fmt.Errorf("sentence_bert_config.json: %v", err)
		}
		st.maxSeqLen = c.MaxSeqLength
	}
	p := filepath.Join(dir, "modules.json")
	if !isFile(p) {
		return st, nil
	}
	b, err := readSide(p)
	if err != nil {
		return st, err
	}
	var mods []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &mods); err != nil {
		return st, fmt.Errorf("modules.json: %v", err)
	}
	for _, mod := range mods {
		switch {
		case strings.HasSuffix(mod.Type, ".Normalize"):
			st.normalize = true
		case strings.HasSuffix(mod.Type, ".Pooling"):
			rel := filepath.Clean(mod.Path)
			if filepath.IsAbs(rel) || strings.HasPrefix(rel, "..") {
				return st, fmt.Errorf("modules.json: the pooling module's path %q is outside the model directory", mod.Path)
			}
			pb, err := readSide(filepath.Join(dir, rel, "config.json"))
			if err != nil {
				return st, fmt.Errorf("modules.json names a pooling module at %q: %v", mod.Path, err)
			}
			var pc map[string]any
			if err := json.Unmarshal(pb, &pc); err != nil {
				return st, fmt.Errorf("%s/config.json: %v", mod.Path, err)
			}
			var modes []string
			for _, k := range []string{"cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken"} {
				if v, _ := pc["pooling_mode_"+k].(bool); v {
					modes = append(modes, k)
				}
			}
			switch {
			case slices.Equal(modes, []string{"cls_token"}):
				st.pooling = "cls"
			case slices.Equal(modes, []string{"mean_tokens"}):
				st.pooling = "mean"
			case slices.Equal(modes, []string{"max_tokens"}):
				st.pooling = "max"
			default:
				return st, fmt.Errorf("%s/config.json: pooling modes %v: one of cls_token, mean_tokens, max_tokens is served here", mod.Path, modes)
			}
		}
	}
	return st, nil
}

// loadTokenizer reads tokenizer.json, else vocab.txt (BERT's WordPiece,
// tokenizer_config.json's do_lower_case).
func (m *Model) loadTokenizer(dir string) error {
	if p := filepath.Join(dir, "tokenizer.json"); isFile(p) {
		b, err := readSide(p)
		if err != nil {
			return err
		}
		t, err := tokenizer.ParseTokenizerJSON(b)
		if err != nil {
			return fmt.Errorf("tokenizer.json: %v", err)
		}
		if pd := t.Padding(); pd != nil {
			m.padID = pd.PadID
		} else {
			for _, s := range []string{"[PAD]", "<pad>"} {
				if id, ok := t.TokenToID(s); ok {
					m.padID = id
					break
				}
			}
		}
		m.tok = t.WithPadding(nil)
		return nil
	}
	vocab, lower, err := tokenizer.ReadBertDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s has no tokenizer.json and no vocab.txt: the text encoder tokenizes with one of them, beside the model", dir)
	}
	if err != nil {
		return err
	}
	if m.bert, err = tokenizer.NewBert(vocab, tokenizer.BertOptions{LowerCase: lower, MaxInputCharsPerWord: 100, PythonLower: true}); err != nil {
		return fmt.Errorf("vocab.txt: %v", err)
	}
	if _, err := m.bert.EncodePair(nil, nil, false, 2, false); err != nil {
		return fmt.Errorf("vocab.txt: %v", err)
	}
	if id, ok := vocab.ID("[PAD]"); ok {
		m.padID = id
	}
	return nil
}

// defaultMaxLength is the length a model with no other word gets.
const defaultMaxLength = 512

// bind matches the model's inputs and outputs with the roles and settles
// the defaults.
func (m *Model) bind(md processors.Metadata, hf *hfConfig, st stConfig) error {
	c := &m.cfg
	inputs := map[string]processors.IOSpec{}
	var names []string
	for _, in := range md.Inputs {
		inputs[in.Name] = in
		names = append(names, in.Name)
	}
	role := func(set, def, key string) (string, error) {
		if set != "" {
			if _, ok := inputs[set]; !ok {
				return "", fmt.Errorf("model_config.%s names %q, which is not an input of the model (its inputs: %s)", key, set, strings.Join(names, ", "))
			}
			return set, nil
		}
		if _, ok := inputs[def]; ok {
			return def, nil
		}
		return "", nil
	}
	var err error
	if m.ids, err = role(c.InputIDs, "input_ids", "input_ids"); err != nil {
		return err
	}
	if m.ids == "" {
		return fmt.Errorf("the model has no input_ids input (its inputs: %s): name the token ids' input in model_config.input_ids", strings.Join(names, ", "))
	}
	if m.mask, err = role(c.AttentionMask, "attention_mask", "attention_mask"); err != nil {
		return err
	}
	if m.types, err = role(c.TokenTypeIDs, "token_type_ids", "token_type_ids"); err != nil {
		return err
	}
	for _, n := range names {
		if n != m.ids && n != m.mask && n != m.types {
			return fmt.Errorf("the model's input %q is none of the token ids, attention mask and token type ids (%s, %s, %s): name it in model_config.input_ids, attention_mask or token_type_ids", n, m.ids, cmpOr(m.mask, "no mask"), cmpOr(m.types, "no types"))
		}
	}
	for _, n := range []string{m.ids, m.mask, m.types} {
		if n == "" {
			continue
		}
		switch inputs[n].DType {
		case "INT64", "":
		case "INT32":
			m.intInputs = true
		default:
			return fmt.Errorf("the model's input %q is %s: token ids, masks and types are fed as INT64 or INT32", n, inputs[n].DType)
		}
	}
	if m.intInputs {
		for _, n := range []string{m.ids, m.mask, m.types} {
			if n != "" && inputs[n].DType != "INT32" {
				return fmt.Errorf("the model's inputs mix INT32 and INT64; feed one of them")
			}
		}
	}

	outs := map[string]processors.IOSpec{}
	var onames []string
	for _, o := range md.Outputs {
		outs[o.Name] = o
		onames = append(onames, o.Name)
	}
	if len(onames) == 0 {
		return fmt.Errorf("the model has no outputs")
	}
	if m.task == "" {
		m.task = TaskEmbedding
		if _, ok := outs["logits"]; ok {
			if _, ok := outs["last_hidden_state"]; !ok {
				m.task = TaskClassification
			}
		}
	}
	prefer := []string{"last_hidden_state", "token_embeddings", "sentence_embedding"}
	if m.task == TaskClassification {
		prefer = []string{"logits"}
	}
	m.output = c.Output
	if m.output != "" {
		if _, ok := outs[m.output]; !ok {
			return fmt.Errorf("model_config.output %q is not an output of the model (its outputs: %s)", m.output, strings.Join(onames, ", "))
		}
	} else {
		for _, p := range prefer {
			if _, ok := outs[p]; ok {
				m.output = p
				break
			}
		}
		if m.output == "" {
			m.output = onames[0]
		}
	}
	rank := len(outs[m.output].Shape)

	// lengths
	m.maxLen = c.MaxLength
	switch {
	case m.maxLen > 0:
	case st.maxSeqLen > 0:
		m.maxLen = st.maxSeqLen
	case m.tok != nil && m.tok.Truncation() != nil:
		m.maxLen = m.tok.Truncation().MaxLength
	case hf.MaxPositions > 0:
		m.maxLen = hf.MaxPositions
	default:
		m.maxLen = defaultMaxLength
	}
	if hf.MaxPositions > 0 && m.maxLen > hf.MaxPositions {
		if c.MaxLength > 0 {
			return fmt.Errorf("model_config.max_length %d is over the %d positions the model has", c.MaxLength, hf.MaxPositions)
		}
		m.maxLen = hf.MaxPositions
	}
	if m.maxLen < 2 {
		return fmt.Errorf("max_length %d leaves no room for the special tokens", m.maxLen)
	}
	m.truncate = c.Truncation == nil || *c.Truncation
	if m.tok != nil {
		var tr *tokenizer.Truncation
		if m.truncate {
			tr = &tokenizer.Truncation{MaxLength: m.maxLen, Strategy: "LongestFirst", Direction: "Right"}
		}
		if m.tok, err = m.tok.WithTruncation(tr); err != nil {
			return fmt.Errorf("tokenizer.json: %v", err)
		}
	}

	if m.task == TaskEmbedding {
		m.pooling = c.Pooling
		if m.pooling == "" {
			m.pooling = st.pooling
		}
		if m.pooling == "" {
			m.pooling = "mean"
			if rank == 2 {
				m.pooling = "none"
			}
		}
		if rank != 3 && m.pooling != "none" && rank > 0 {
			return fmt.Errorf("the output %q has rank %d (already one vector per text): model_config.pooling must be none, not %s", m.output, rank, m.pooling)
		}
		m.normalize = st.normalize
		if c.Normalize != nil {
			m.normalize = *c.Normalize
		}
		return nil
	}
	if rank != 2 && rank > 0 {
		return fmt.Errorf("the classification output %q has rank %d, not [batch, labels]", m.output, rank)
	}
	if len(hf.ID2Label) > 0 {
		m.labels = make([]string, len(hf.ID2Label))
		for k, v := range hf.ID2Label {
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(m.labels) || m.labels[i] != "" {
				return fmt.Errorf("config.json: id2label's keys are not 0 to %d, each once", len(m.labels)-1)
			}
			m.labels[i] = v
		}
	}
	if sh := outs[m.output].Shape; len(sh) == 2 && sh[1] > 0 && m.labels != nil && int(sh[1]) != len(m.labels) {
		return fmt.Errorf("the output %q has %d classes but config.json's id2label %d labels", m.output, sh[1], len(m.labels))
	}
	m.fn = c.FunctionToApply
	if m.fn == "" {
		m.fn = "softmax"
		if hf.ProblemType == "multi_label_classification" || len(m.labels) == 1 {
			m.fn = "sigmoid"
		}
		if sh := outs[m.output].Shape; len(sh) == 2 && sh[1] == 1 {
			m.fn = "sigmoid"
		}
	}
	m.topK = c.TopK
	if m.topK == 0 {
		m.topK = 1
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
