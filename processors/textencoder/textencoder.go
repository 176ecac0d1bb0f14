// Package textencoder serves a text encoder from raw text, without
// EasyNLP's layout: an ONNX model (an optimum-style export: input_ids,
// attention_mask, token_type_ids in; last_hidden_state or logits out)
// beside a tokenizer.json, or a Hugging Face checkpoint directory
// (config.json with model_type bert or roberta, model.safetensors or
// pytorch_model.bin, tokenizer.json or vocab.txt) built into ONNX by
// engines/encoder. It answers embeddings (pooled as model_config or a
// sentence-transformers directory says, optionally L2-normalized) or
// classification labels. The code, text_encoder, is ours: EAS has none.
package textencoder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/encoder"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
)

// Code is the processor code (ours).
const Code = "text_encoder"

func init() {
	processors.Register(Code, "a text encoder (ONNX beside tokenizer.json, or a Hugging Face BERT/RoBERTa checkpoint built as ONNX) from raw text: embeddings (pooled, normalized) or classification labels; ours, EAS has no such code",
		func() *processors.Engine { return processors.Adapt[*Payload, *Result](New()) })
}

// Tasks.
const (
	TaskEmbedding      = "embedding"
	TaskClassification = "classification"
)

// Poolings.
var poolings = []string{"cls", "mean", "max", "none"}

// Config is model_config; keys this package does not read go to the ONNX
// runtime (intra_op_threads, graph_optimization, device_id, ...).
type Config struct {
	Task            string `json:"task"`
	InputIDs        string `json:"input_ids"`
	AttentionMask   string `json:"attention_mask"`
	TokenTypeIDs    string `json:"token_type_ids"`
	Output          string `json:"output"`
	Pooling         string `json:"pooling"`
	Normalize       *bool  `json:"normalize"`
	MaxLength       int    `json:"max_length"`
	Truncation      *bool  `json:"truncation"`
	TopK            int    `json:"top_k"`
	FunctionToApply string `json:"function_to_apply"`
}

var ownKeys = []string{"task", "input_ids", "attention_mask", "token_type_ids", "output", "pooling", "normalize", "max_length", "truncation", "top_k", "function_to_apply"}

const accepts = `{"task": "embedding" | "classification", "input_ids": "name", "attention_mask": "name", "token_type_ids": "name", "output": "name", "pooling": "cls" | "mean" | "max" | "none", "normalize": bool, "max_length": N, "truncation": bool, "top_k": N, "function_to_apply": "softmax" | "sigmoid" | "none", and the onnx processor's keys (intra_op_threads, inter_op_threads, graph_optimization, device_id, gpu_mem_limit, ...)}`

// maxLength bounds max_length.
const maxLength = 8192

// maxSideFileBytes bounds the JSON and vocabulary files.
const maxSideFileBytes = 64 << 20

// Model is a loaded text encoder.
type Model struct {
	spec   processors.Spec
	cfg    Config
	rtSpec processors.Spec
	rt     *onnx.Model

	task      string
	pooling   string
	normalize bool
	maxLen    int
	truncate  bool
	topK      int
	fn        string
	labels    []string

	tok   *tokenizer.Tokenizer // tokenizer.json
	bert  *tokenizer.Bert      // vocab.txt when there is no tokenizer.json
	padID int32

	// the model's inputs fed, by role, "" when the model has none
	ids, mask, types string
	intInputs        bool // the inputs are int32, not int64
	output           string
	source           string // "onnx" or "checkpoint"
}

// New returns an unconfigured model.
func New() *Model { return &Model{} }

// Configure checks model_config without any I/O.
func (m *Model) Configure(spec processors.Spec) error {
	m.spec = spec
	own, rest, err := processors.SplitConfig(spec.ModelConfig, ownKeys)
	if err != nil {
		return fmt.Errorf("model_config: %v; %s accepts %s", err, Code, accepts)
	}
	ownSpec := spec
	ownSpec.ModelConfig = own
	if err := ownSpec.DecodeConfig(&m.cfg, accepts); err != nil {
		return err
	}
	c := &m.cfg
	switch {
	case c.Task != "" && c.Task != TaskEmbedding && c.Task != TaskClassification:
		return fmt.Errorf("model_config.task %q is not %q or %q", c.Task, TaskEmbedding, TaskClassification)
	case c.Pooling != "" && !slices.Contains(poolings, c.Pooling):
		return fmt.Errorf("model_config.pooling %q is not one of %s", c.Pooling, strings.Join(poolings, ", "))
	case c.MaxLength != 0 && (c.MaxLength < 2 || c.MaxLength > maxLength):
		return fmt.Errorf("model_config.max_length %d is out of range 2 to %d", c.MaxLength, maxLength)
	case c.TopK < 0:
		return fmt.Errorf("model_config.top_k %d is negative", c.TopK)
	case c.FunctionToApply != "" && c.FunctionToApply != "softmax" && c.FunctionToApply != "sigmoid" && c.FunctionToApply != "none":
		return fmt.Errorf("model_config.function_to_apply %q is not softmax, sigmoid or none", c.FunctionToApply)
	case c.Task == TaskClassification && (c.Pooling != "" || c.Normalize != nil):
		return errors.New("model_config.pooling and normalize are for task embedding; a classifier pools in the model")
	case c.Task == TaskEmbedding && (c.TopK != 0 || c.FunctionToApply != ""):
		return errors.New("model_config.top_k and function_to_apply are for task classification")
	}
	m.rtSpec = spec
	m.rtSpec.Code = Code
	m.rtSpec.ModelSource, m.rtSpec.ModelEntry = "model.onnx", ""
	m.rtSpec.ModelConfig = rest
	m.rtSpec.Batcher = ""
	probe := onnx.NewRuntime(Code, spec.GPU > 0, Code)
	if err := probe.Configure(m.rtSpec); err != nil {
		return fmt.Errorf("the encoder runs on ONNX Runtime, which says: %w", err)
	}
	return nil
}

// readSide reads a small file beside the model (a config, a vocabulary)
// with the model files' checks (processors.ReadModel: regular files only,
// bounded by maxSideFileBytes).
func readSide(path string) ([]byte, error) {
	return processors.ReadModel(context.Background(), path, maxSideFileBytes)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// layout is what model_path holds.
type layout struct {
	dir  string // the tokenizer's and config.json's directory
	onnx string // the ONNX file, "" for a checkpoint
}

// findLayout reads model_path: an .onnx file, a directory with model.onnx
// (or onnx/model.onnx), or a directory with config.json and weights; a
// folder holding exactly one such directory is followed.
func findLayout(root string) (layout, error) {
	st, err := os.Stat(root)
	if err != nil {
		return layout{}, err
	}
	if !st.IsDir() {
		if strings.HasSuffix(root, ".onnx") {
			return layout{dir: filepath.Dir(root), onnx: root}, nil
		}
		root = filepath.Dir(root)
	}
	try := func(d string) (layout, bool) {
		for _, o := range []string{"model.onnx", filepath.Join("onnx", "model.onnx")} {
			if isFile(filepath.Join(d, o)) {
				return layout{dir: d, onnx: filepath.Join(d, o)}, true
			}
		}
		if isFile(filepath.Join(d, "config.json")) {
			for _, c := range encoder.Checkpoints {
				if isFile(filepath.Join(d, c.Name)) {
					return layout{dir: d}, true
				}
			}
		}
		return layout{}, false
	}
	if l, ok := try(root); ok {
		return l, nil
	}
	ents, _ := os.ReadDir(root)
	var found []layout
	for _, e := range ents {
		if e.IsDir() {
			if l, ok := try(filepath.Join(root, e.Name())); ok {
				found = append(found, l)
			}
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	return layout{}, errors.New("model_path holds no model.onnx and no config.json with model.safetensors or pytorch_model.bin (or several folders do): point it at an ONNX file beside its tokenizer.json, or at a Hugging Face checkpoint directory")
}

// hfConfig is what this package reads of config.json besides the sizes.
type hfConfig struct {
	ID2Label      map[string]string `json:"id2label"`
	Architectures []string          `json:"architectures"`
	ProblemType   string            `json:"problem_type"`
	MaxPositions  int               `json:"max_position_embeddings"`
}

// Load reads the model, the tokenizer and the side files, and starts the
// runtime.
func (m *Model) Load(ctx context.Context, files processors.Files) error {
	if m.rtSpec.Code == "" {
		return errors.New("text_encoder: Load before Configure")
	}
	l, err := findLayout(files.ModelPath)
	if err != nil {
		return err
	}
	var hf hfConfig
	var cfgBytes []byte
	if p := filepath.Join(l.dir, "config.json"); isFile(p) {
		if cfgBytes, err = readSide(p); err != nil {
			return err
		}
		if err := json.Unmarshal(cfgBytes, &hf); err != nil {
			return fmt.Errorf("config.json: %v", err)
		}
	}
	if err := m.loadTokenizer(l.dir); err != nil {
		return err
	}
	st, err := readSentenceTransformers(l.dir)
	if err != nil {
		return err
	}
	m.task = m.cfg.Task
	var model []byte
	rt := onnx.NewRuntime(Code, m.spec.GPU > 0, Code)
	if err := rt.Configure(m.rtSpec); err != nil {
		return err
	}
	if l.onnx == "" {
		m.source = "checkpoint"
		ec, err := encoder.ParseConfig(cfgBytes)
		if err != nil {
			return err
		}
		if hf.MaxPositions == 0 || ec.MaxLen() < hf.MaxPositions {
			hf.MaxPositions = ec.MaxLen()
		}
		if model, err = m.build(ctx, l.dir, ec, &hf); err != nil {
			return err
		}
		if err := rt.LoadBytes(ctx, model); err != nil {
			return err
		}
	} else {
		m.source = "onnx"
		if err := rt.Load(ctx, processors.Files{ModelPath: l.onnx}); err != nil {
			return err
		}
	}
	if err := m.bind(rt.Metadata(), &hf, st); err != nil {
		rt.Close()
		return err
	}
	m.rt = rt
	if m.spec.Logger != nil {
		m.spec.Logger.Info("text encoder loaded", "dir", l.dir, "source", m.source, "task", m.task, "output", m.output, "pooling", m.pooling, "normalize", m.normalize, "max_length", m.maxLen, "gpu", m.spec.GPU > 0)
	}
	return nil
}

// build reads the checkpoint and writes the encoder graph: the last
// hidden state for embeddings, the classifier's logits for a
// classification model.
func (m *Model) build(ctx context.Context, dir string, ec *encoder.Config, hf *hfConfig) ([]byte, error) {
	var data []byte
	var ck encoder.Checkpoint
	for _, c := range encoder.Checkpoints {
		p := filepath.Join(dir, c.Name)
		if !isFile(p) {
			continue
		}
		var err error
		if data, err = processors.ReadModel(ctx, p, m.spec.ModelLimit()); err != nil {
			return nil, fmt.Errorf("model_path: %w", err)
		}
		ck = c
		break
	}
	if data == nil {
		return nil, fmt.Errorf("%s holds no model.safetensors or pytorch_model.bin", dir)
	}
	sd, err := ck.Read(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", ck.Name, err)
	}
	data = nil
	w, err := encoder.NewWeights(sd)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", ck.Name, err)
	}
	hasHead := w.Has("classifier.weight") || w.Has("classifier.out_proj.weight")
	if m.task == "" {
		m.task = TaskEmbedding
		if hasHead {
			m.task = TaskClassification
		}
	}
	opt := encoder.Options{Head: encoder.Hidden, Name: Code}
	if m.task == TaskClassification {
		name := "classifier.weight"
		if w.Has("classifier.out_proj.weight") {
			name = "classifier.out_proj.weight"
		}
		c := w.T[name]
		if c == nil || len(c.Shape) != 2 {
			return nil, fmt.Errorf("%s: task classification needs a classifier (classifier.weight, or a RoBERTa's classifier.out_proj.weight) and the checkpoint has none", ck.Name)
		}
		opt.Head, opt.Labels = encoder.Classify, int(c.Shape[0])
	}
	if word := w.Backbone("embeddings.word_embeddings.weight"); word != nil && len(word.Shape) == 2 && m.bert != nil && int64(m.bert.Vocab().Len()) > word.Shape[0] {
		return nil, fmt.Errorf("vocab.txt has %d tokens but the word embeddings %d rows", m.bert.Vocab().Len(), word.Shape[0])
	}
	model, err := encoder.Build(ec, w, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", ck.Name, err)
	}
	return model, nil
}

// Close releases the session.
func (m *Model) Close() error {
	if m.rt == nil {
		return nil
	}
	err := m.rt.Close()
	m.rt = nil
	return err
}

// Metadata describes the request and the answer.
func (m *Model) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: Code, Inputs: []processors.IOSpec{{Name: "text", DType: "BYTES"}}}
	if m.task == TaskClassification {
		md.Outputs = []processors.IOSpec{{Name: "label", DType: "BYTES"}, {Name: "score", DType: "FP32"}}
	} else {
		md.Outputs = []processors.IOSpec{{Name: "embedding", DType: "FP32"}}
	}
	md.Extra = map[string]any{"task": m.task, "source": m.source, "output": m.output, "max_length": m.maxLen}
	if m.task == TaskEmbedding {
		md.Extra["pooling"], md.Extra["normalize"] = m.pooling, m.normalize
	} else {
		md.Extra["labels"], md.Extra["top_k"], md.Extra["function_to_apply"] = m.labels, m.topK, m.fn
	}
	return md
}

var (
	_ processors.Typed[*Payload, *Result] = (*Model)(nil)
	_ processors.Batcher[*Payload]        = (*Model)(nil)
	_ processors.Closer                   = (*Model)(nil)
)
