// Package easytransfer serves EAS's easytransfer_cpu and easytransfer_gpu
// processors: a BERT app of Alibaba's EasyTransfer (TensorFlow 1) as its
// export writes it, a SavedModel taking input_ids, input_mask and
// segment_ids, with the pretrained model's vocab.txt and the training's
// train_config.json beside it, answering raw text.
//
// The text is tokenized in Go as EasyTransfer's FullTokenizer does
// (engines/tokenizer: "[CLS] a [SEP] b [SEP]", truncated and padded to the
// training's sequence_length), the SavedModel runs on the tensorflow
// processor (translated to ONNX, or on libtensorflow: model_config.runtime),
// and the outputs are answered as EasyTransfer's postprocessors write them:
// class ids become the labels of label_enumerate_values, and sequence
// labeling's per-piece tags become one tag per word.
package easytransfer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
	_ "github.com/eas-server/eas-server/processors/tensorflow" // registers the tensorflow_* codes processors.New makes
	"github.com/eas-server/eas-server/tensor"
)

// The EAS processor codes, and the tensorflow codes that run their models.
var codes = map[string]string{
	"easytransfer_cpu": "tensorflow_cpu_1.15",
	"easytransfer_gpu": "tensorflow_gpu_1.15",
}

func init() {
	for code := range codes {
		desc := "EasyTransfer BERT apps (text_classify_bert, text_match_bert, sequence_labeling_bert, vectorization_bert): JSON text in, BERT tokenization in Go, the SavedModel on the tensorflow processor's runtime"
		if code == "easytransfer_gpu" {
			desc += " (ONNX Runtime's CUDA execution provider)"
		}
		processors.Register(code, desc, func() *processors.Engine {
			return processors.Adapt[*Payload, *Result](New(code))
		})
	}
}

// The app types (model_config.type) and what their "predictions" output
// holds.
const (
	TextClassify     = "text_classify_bert"
	TextMatch        = "text_match_bert"
	SequenceLabeling = "sequence_labeling_bert"
	Vectorization    = "vectorization_bert"
)

// Types lists model_config.type's values.
var Types = []string{TextClassify, TextMatch, SequenceLabeling, Vectorization}

// Config is model_config: type, and overrides of what train_config.json
// says; the other keys (runtime, intra_op_threads, ...) go to the
// tensorflow processor.
type Config struct {
	Type string `json:"type"`
	// SequenceLength, FirstSequence, SecondSequence and
	// LabelEnumerateValues override train_config.json's.
	SequenceLength       int    `json:"sequence_length"`
	FirstSequence        string `json:"first_sequence"`
	SecondSequence       string `json:"second_sequence"`
	LabelEnumerateValues string `json:"label_enumerate_values"`
	// DoLowerCase is FullTokenizer's do_lower_case (EasyTransfer always
	// passes true); nil means true.
	DoLowerCase *bool `json:"do_lower_case"`
	// MaxInputCharsPerWord is FullTokenizer's WordPiece limit (EasyTransfer:
	// 200, google-research/bert: 100); 0 means 200.
	MaxInputCharsPerWord int `json:"max_input_chars_per_word"`
}

// ownKeys are the model_config keys this package reads; the rest are the
// tensorflow processor's.
var ownKeys = []string{"type", "sequence_length", "first_sequence", "second_sequence", "label_enumerate_values", "do_lower_case", "max_input_chars_per_word"}

const accepts = `{"type": "text_classify_bert" | "text_match_bert" | "sequence_labeling_bert" | "vectorization_bert", "sequence_length": N, "first_sequence": "column", "second_sequence": "column", "label_enumerate_values": "a,b,...", "do_lower_case": bool, "max_input_chars_per_word": N, and the tensorflow processor's keys (runtime, intra_op_threads, inter_op_threads, ...)}`

// App is a loaded EasyTransfer app.
type App struct {
	code  string
	spec  processors.Spec
	cfg   Config
	inner *processors.Engine // the tensorflow processor running the SavedModel

	tok     *tokenizer.Bert
	seqLen  int
	first   string // the request keys of the texts: "first_sequence" and the training's column name
	second  string
	labels  []string
	inputs  [3]processors.IOSpec // input_ids, input_mask, segment_ids as the signature has them
	outputs []string
}

// New returns an unconfigured app for code.
func New(code string) *App { return &App{code: code} }

// Configure checks model_config without any I/O and configures the
// tensorflow processor with the keys that are its own.
func (a *App) Configure(spec processors.Spec) error {
	if _, ok := codes[spec.Code]; ok {
		a.code = spec.Code
	}
	a.spec = spec
	own, rest, err := processors.SplitConfig(spec.ModelConfig, ownKeys)
	if err != nil {
		return fmt.Errorf("model_config: %v; %s accepts %s", err, a.code, accepts)
	}
	ownSpec := spec
	ownSpec.ModelConfig = own
	if err := ownSpec.DecodeConfig(&a.cfg, accepts); err != nil {
		return err
	}
	switch {
	case a.cfg.Type == "":
		return fmt.Errorf("model_config.type is required: the task the model was trained for, one of %s", strings.Join(Types, ", "))
	case !slices.Contains(Types, a.cfg.Type):
		return fmt.Errorf("model_config.type %q is not an EasyTransfer app served here; use one of %s", a.cfg.Type, strings.Join(Types, ", "))
	case a.cfg.SequenceLength < 0 || a.cfg.SequenceLength > maxSequenceLength:
		return fmt.Errorf("model_config.sequence_length %d is out of range: give the training's sequence length, 3 to %d", a.cfg.SequenceLength, maxSequenceLength)
	case a.cfg.MaxInputCharsPerWord < 0:
		return fmt.Errorf("model_config.max_input_chars_per_word %d is negative", a.cfg.MaxInputCharsPerWord)
	}
	a.inner, err = processors.New(codes[a.code])
	if err != nil {
		return err
	}
	innerSpec := spec
	innerSpec.Code = codes[a.code]
	innerSpec.ModelConfig = rest
	innerSpec.Batcher = ""
	if err := a.inner.Processor().Configure(innerSpec); err != nil {
		return fmt.Errorf("%s runs the SavedModel as %s, which says: %w", a.code, innerSpec.Code, err)
	}
	return nil
}

// maxSequenceLength bounds sequence_length (BERT's position table is 512).
const maxSequenceLength = 4096

// Load loads the SavedModel on the tensorflow processor, then the
// vocabulary and the training's preprocessing settings found beside it.
func (a *App) Load(ctx context.Context, files processors.Files) error {
	if a.inner == nil {
		return errors.New("easytransfer: Load before Configure")
	}
	dir, err := savedmodel.FindDir(files.ModelPath)
	if err != nil {
		return err
	}
	if err := a.inner.Processor().Load(ctx, files); err != nil {
		return err
	}
	if err := a.loadPreprocess(dir, files.ModelPath); err != nil {
		a.Close()
		return err
	}
	if err := a.bindSignature(); err != nil {
		a.Close()
		return err
	}
	return nil
}

// findBeside returns the first of the SavedModel's directory and those
// above it, up to model_path, that holds name; "" when none does.
func findBeside(dir, root, name string) string {
	root = filepath.Clean(root)
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && st.Mode().IsRegular() {
			return filepath.Join(d, name)
		}
		if d == root || !strings.HasPrefix(d, root) || filepath.Dir(d) == d {
			return ""
		}
	}
}

// maxSideFileBytes bounds vocab.txt, train_config.json and
// label_mapping.json.
const maxSideFileBytes = 64 << 20

// readSide reads a small file beside the model (a config, a vocabulary)
// with the model files' checks (processors.ReadModel: regular files only,
// bounded by maxSideFileBytes).
func readSide(path string) ([]byte, error) {
	return processors.ReadModel(context.Background(), path, maxSideFileBytes)
}

// Close releases the SavedModel's sessions.
func (a *App) Close() error {
	if a.inner == nil {
		return nil
	}
	if c, ok := a.inner.Processor().(processors.Closer); ok {
		return c.Close()
	}
	return nil
}

// Metadata describes the JSON request and the model's outputs.
func (a *App) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: a.code, Inputs: []processors.IOSpec{{Name: "first_sequence", DType: "BYTES"}}}
	if a.cfg.Type == TextMatch || a.second != "" {
		md.Inputs = append(md.Inputs, processors.IOSpec{Name: "second_sequence", DType: "BYTES"})
	}
	if a.inner != nil {
		md.Outputs = a.inner.Processor().Metadata().Outputs
	}
	md.Extra = map[string]any{"type": a.cfg.Type, "sequence_length": a.seqLen}
	if len(a.labels) > 0 {
		md.Extra["labels"] = a.labels
	}
	return md
}

var (
	_ processors.Typed[*Payload, *Result] = (*App)(nil)
	_ processors.Batcher[*Payload]        = (*App)(nil)
	_ processors.Closer                   = (*App)(nil)
)

// rows is t's rows [lo, hi) of its first dimension.
func rows(t tensor.Tensor, lo, hi int64) (tensor.Tensor, error) {
	parts, err := tensor.Split(t, []int64{lo, hi - lo, t.Shape[0] - hi})
	if err != nil {
		return tensor.Tensor{}, err
	}
	return parts[1], nil
}
