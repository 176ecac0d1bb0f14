// Package easynlp serves EAS's easynlp processor: a text app of Alibaba's
// EasyNLP (PyTorch) as EasyNLP saves it, a directory with the backbone's
// config.json, the state_dict (pytorch_model.bin, or model.safetensors),
// vocab.txt and label_mapping.json, answering raw text in the shapes of
// EasyNLP's appzoo predictors.
//
// Nothing of EasyNLP or PyTorch runs: the checkpoint is read in Go (package
// ckpt: a restricted unpickler that executes nothing), the BERT or RoBERTa
// encoder and the app's head are written as an ONNX graph (engines/onnxbuild)
// and run on ONNX Runtime through processors/onnx (its CUDA provider when the
// service has a GPU), the text is tokenized in Go (engines/tokenizer's
// WordPiece, with Hugging Face's BertTokenizer's handling of special tokens)
// and the outputs are post-processed as EasyNLP's predictors do.
package easynlp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/eas-server/eas-server/engines/encoder"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/engines/torchckpt"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
)

// Code is the EAS processor code.
const Code = "easynlp"

func init() {
	processors.Register(Code, "EasyNLP text apps (text_classify, text_classify_multi, text_match, sequence_labeling, vectorization) of a BERT or RoBERTa saved by EasyNLP: JSON text in, tokenized in Go, the encoder built as ONNX on ONNX Runtime",
		func() *processors.Engine { return processors.Adapt[*Payload, *Result](New()) })
}

// The apps (model_config.type) served here.
const (
	TextClassify      = "text_classify"
	TextClassifyMulti = "text_classify_multi"
	TextMatch         = "text_match"
	SequenceLabeling  = "sequence_labeling"
	Vectorization     = "vectorization"
)

// Types lists the served apps.
var Types = []string{TextClassify, TextClassifyMulti, TextMatch, SequenceLabeling, Vectorization}

// refused are EasyNLP's other apps and why they are not served.
var refused = map[string]string{
	"sequence_generation":                 "it generates text token by token (beam search over a decoder), which this processor's single encoder run does not do",
	"sequence_generation_zh":              "it generates text token by token (beam search over a decoder), which this processor's single encoder run does not do",
	"sequence_generation_en":              "it generates text token by token (beam search over a decoder), which this processor's single encoder run does not do",
	"machine_reading_comprehension":       "it answers spans of a passage cut into strided windows with a start/end search over them, which is not built here",
	"machine_reading_comprehension_zh":    "it answers spans of a passage cut into strided windows with a start/end search over them, which is not built here",
	"machine_reading_comprehension_en":    "it answers spans of a passage cut into strided windows with a start/end search over them, which is not built here",
	"clip":                                "it takes images (a vision transformer beside the text encoder), and this processor reads text only",
	"wukong_clip":                         "it takes images (a vision transformer beside the text encoder), and this processor reads text only",
	"clip4clip":                           "it takes video frames, and this processor reads text only",
	"text2image_generation":               "it generates images, which needs a decoder loop and an image codec not built here",
	"image2text_generation":               "it takes images and generates text token by token, neither of which is built here",
	"video2text_generation":               "it takes video and generates text token by token, neither of which is built here",
	"latent_diffusion":                    "it generates images by diffusion, which is not built here",
	"data_augmentation":                   "it generates text with a masked language model's sampling loop, which is not built here",
	"open_domain_dialogue":                "it generates text token by token, which is not built here",
	"information_extraction":              "its span-pointer decoding over a global-pointer head is not built here",
	"geep_classify":                       "its early-exit classifiers (one per layer, stopping on an entropy threshold) are not built here",
	"language_modeling":                   "it is a pretraining task with no predictor in EasyNLP",
	"text_classify_fewshot":               "few-shot (PET/CPT) models predict through a prompt and a masked language model's verbaliser, which is not built here",
	"machine_reading_comprehension_multi": "it answers spans of a passage, which is not built here",
}

// Config is model_config; the keys this package does not read go to the
// ONNX runtime (intra_op_threads, inter_op_threads, graph_optimization,
// device_id, gpu_mem_limit, ...).
type Config struct {
	AppName        string   `json:"app_name"`
	Type           string   `json:"type"`
	SequenceLength int      `json:"sequence_length"`
	FirstSequence  string   `json:"first_sequence"`
	SecondSequence string   `json:"second_sequence"`
	Threshold      *float64 `json:"threshold"`
	DoLowerCase    *bool    `json:"do_lower_case"`
}

var ownKeys = []string{"app_name", "type", "sequence_length", "first_sequence", "second_sequence", "threshold", "do_lower_case"}

const accepts = `{"app_name": "text_classify", "type": "text_classify" | "text_classify_multi" | "text_match" | "sequence_labeling" | "vectorization", "sequence_length": N, "first_sequence": "key", "second_sequence": "key", "threshold": 0.5, "do_lower_case": bool, and the onnx processor's keys (intra_op_threads, inter_op_threads, graph_optimization, device_id, gpu_mem_limit, ...)}`

// defaultSequenceLength is EasyNLP's predictors' default.
const defaultSequenceLength = 128

// App is a loaded EasyNLP app.
type App struct {
	spec    processors.Spec
	cfg     Config
	app     string
	rtSpec  processors.Spec
	rt      *onnx.Model
	head    encoder.Head
	model   encoder.Config
	tok     *tokenizer.Bert
	special []special // the vocabulary's special tokens, longest first
	padID   int32
	oneType bool // the token type table has one row: every type id is 0

	seqLen        int
	first, second string
	threshold     float64
	labels        []string // class id -> label
	embSize       int
}

// New returns an unconfigured app.
func New() *App { return &App{} }

// Configure checks model_config without any I/O.
func (a *App) Configure(spec processors.Spec) error {
	a.spec = spec
	own, rest, err := processors.SplitConfig(spec.ModelConfig, ownKeys)
	if err != nil {
		return fmt.Errorf("model_config: %v; easynlp accepts %s", err, accepts)
	}
	ownSpec := spec
	ownSpec.ModelConfig = own
	if err := ownSpec.DecodeConfig(&a.cfg, accepts); err != nil {
		return err
	}
	a.app = a.cfg.Type
	if a.app == "" {
		a.app = a.cfg.AppName
	}
	if why, ok := refused[a.app]; ok {
		return fmt.Errorf("model_config.type %q is an EasyNLP app this server does not serve: %s; served: %s", a.app, why, strings.Join(Types, ", "))
	}
	switch {
	case a.app == "":
		return fmt.Errorf("model_config.type (or app_name) is required: the EasyNLP app the model was trained for, one of %s", strings.Join(Types, ", "))
	case !slices.Contains(Types, a.app):
		return fmt.Errorf("model_config.type %q is not an EasyNLP app served here; use one of %s", a.app, strings.Join(Types, ", "))
	case a.cfg.AppName != "" && a.cfg.Type != "" && a.cfg.AppName != a.cfg.Type && !strings.HasPrefix(a.cfg.Type, a.cfg.AppName):
		return fmt.Errorf("model_config.app_name %q and type %q name different apps", a.cfg.AppName, a.cfg.Type)
	case a.cfg.SequenceLength != 0 && (a.cfg.SequenceLength < 2 || a.cfg.SequenceLength > maxSequenceLength):
		return fmt.Errorf("model_config.sequence_length %d is out of range 2 to %d", a.cfg.SequenceLength, maxSequenceLength)
	case a.cfg.Threshold != nil && (*a.cfg.Threshold < 0 || *a.cfg.Threshold > 1):
		return fmt.Errorf("model_config.threshold %v is not a probability (0 to 1)", *a.cfg.Threshold)
	case a.cfg.Threshold != nil && a.app != TextClassifyMulti:
		return fmt.Errorf("model_config.threshold is for type %s only", TextClassifyMulti)
	}
	a.threshold = 0.5
	if a.cfg.Threshold != nil {
		a.threshold = *a.cfg.Threshold
	}
	a.rtSpec = spec
	a.rtSpec.Code = Code
	a.rtSpec.ModelSource, a.rtSpec.ModelEntry = "model.onnx", ""
	a.rtSpec.ModelConfig = rest
	a.rtSpec.Batcher = ""
	probe := onnx.NewRuntime(Code, spec.GPU > 0, Code)
	if err := probe.Configure(a.rtSpec); err != nil {
		return fmt.Errorf("the encoder runs on ONNX Runtime, which says: %w", err)
	}
	return nil
}

// maxSequenceLength bounds sequence_length; the model's position table
// bounds it further at load.
const maxSequenceLength = 8192

// maxSideFileBytes bounds config.json, vocab.txt and the JSON files.
const maxSideFileBytes = 64 << 20

// readSide reads a small file beside the model (a config, a vocabulary)
// with the model files' checks (processors.ReadModel: regular files only,
// bounded by maxSideFileBytes).
func readSide(path string) ([]byte, error) {
	return processors.ReadModel(context.Background(), path, maxSideFileBytes)
}

// findModelDir returns model_path, or the one directory below it, that
// holds config.json.
func findModelDir(root string) (string, error) {
	st, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		root = filepath.Dir(root)
	}
	if isFile(filepath.Join(root, "config.json")) {
		return root, nil
	}
	ents, _ := os.ReadDir(root)
	var found []string
	for _, e := range ents {
		if e.IsDir() && isFile(filepath.Join(root, e.Name(), "config.json")) {
			found = append(found, filepath.Join(root, e.Name()))
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	return "", fmt.Errorf("model_path holds no config.json (or several folders do): EasyNLP saves its model as a directory with config.json, pytorch_model.bin, vocab.txt and label_mapping.json; point model_path at it")
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Load reads EasyNLP's directory, builds the graph and starts the runtime.
func (a *App) Load(ctx context.Context, files processors.Files) error {
	if a.app == "" {
		return errors.New("easynlp: Load before Configure")
	}
	dir, err := findModelDir(files.ModelPath)
	if err != nil {
		return err
	}
	cb, err := readSide(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(cb, &a.model); err != nil {
		return fmt.Errorf("config.json: %v", err)
	}
	if err := a.model.Check(); err != nil {
		return err
	}
	if err := a.loadTokenizer(dir); err != nil {
		return err
	}
	if err := a.loadSettings(dir); err != nil {
		return err
	}
	sd, src, err := a.readCheckpoint(ctx, dir)
	if err != nil {
		return err
	}
	w, err := encoder.NewWeights(sd)
	if err != nil {
		return fmt.Errorf("%s: %v", src, err)
	}
	if err := a.bindHead(w); err != nil {
		return fmt.Errorf("%s: %v", src, err)
	}
	if err := a.checkSizes(w); err != nil {
		return fmt.Errorf("%s: %v", src, err)
	}
	model, err := encoder.Build(&a.model, w, encoder.Options{Head: a.head, Labels: len(a.labels), Name: Code})
	if err != nil {
		return fmt.Errorf("%s: %v", src, err)
	}
	sd, w = nil, nil
	rt := onnx.NewRuntime(Code, a.spec.GPU > 0, Code)
	if err := rt.Configure(a.rtSpec); err != nil {
		return err
	}
	if err := rt.LoadBytes(ctx, model); err != nil {
		return err
	}
	a.rt = rt
	if a.spec.Logger != nil {
		a.spec.Logger.Info("easynlp app loaded", "dir", dir, "type", a.app, "model_type", a.model.ModelType, "layers", a.model.NumHiddenLayers, "hidden", a.model.HiddenSize, "sequence_length", a.seqLen, "gpu", a.spec.GPU > 0)
	}
	return nil
}

// readCheckpoint reads model.safetensors, else pytorch_model.bin.
func (a *App) readCheckpoint(ctx context.Context, dir string) (*torchckpt.StateDict, string, error) {
	for _, c := range encoder.Checkpoints {
		p := filepath.Join(dir, c.Name)
		if !isFile(p) {
			continue
		}
		data, err := processors.ReadModel(ctx, p, a.spec.ModelLimit())
		if err != nil {
			return nil, "", fmt.Errorf("model_path: %w", err)
		}
		sd, err := c.Read(data)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", c.Name, err)
		}
		return sd, c.Name, nil
	}
	return nil, "", fmt.Errorf("%s holds no pytorch_model.bin or model.safetensors: EasyNLP saves the weights as pytorch_model.bin", dir)
}

// loadTokenizer reads vocab.txt (and tokenizer_config.json's
// do_lower_case).
func (a *App) loadTokenizer(dir string) error {
	vocab, lower, err := tokenizer.ReadBertDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if isFile(filepath.Join(dir, "merges.txt")) {
			return fmt.Errorf("%s has a byte-level BPE vocabulary (vocab.json, merges.txt) and no vocab.txt: only WordPiece (vocab.txt) tokenization is built for EasyNLP's apps here", dir)
		}
		return fmt.Errorf("%s has no vocab.txt, the WordPiece vocabulary EasyNLP's BERT tokenizer reads", dir)
	}
	if err != nil {
		return err
	}
	if a.cfg.DoLowerCase != nil {
		lower = *a.cfg.DoLowerCase
	}
	// Hugging Face's BertTokenizer (EasyNLP's): Python's lower(), words of
	// over 100 characters are [UNK].
	a.tok, err = tokenizer.NewBert(vocab, tokenizer.BertOptions{LowerCase: lower, MaxInputCharsPerWord: 100, PythonLower: true})
	if err != nil {
		return fmt.Errorf("vocab.txt: %v", err)
	}
	if _, err := a.tok.EncodePair(nil, nil, false, 2, false); err != nil {
		return fmt.Errorf("vocab.txt: %v", err)
	}
	a.special = specialTokens(vocab)
	if id, ok := vocab.ID("[PAD]"); ok {
		a.padID = id
	}
	return nil
}

// loadSettings reads label_mapping.json and train_config.json's
// sequence_length; model_config overrides.
func (a *App) loadSettings(dir string) error {
	a.seqLen = defaultSequenceLength
	if p := filepath.Join(dir, "train_config.json"); isFile(p) {
		b, err := readSide(p)
		if err != nil {
			return err
		}
		if n, ok := findInt(b, "sequence_length"); ok {
			a.seqLen = n
		}
	}
	if a.cfg.SequenceLength > 0 {
		a.seqLen = a.cfg.SequenceLength
	}
	if max := a.model.MaxLen(); a.seqLen > max {
		if a.cfg.SequenceLength > 0 {
			return fmt.Errorf("model_config.sequence_length %d is over the %d positions the model has", a.seqLen, max)
		}
		a.seqLen = max
	}
	if a.seqLen < 2 {
		return fmt.Errorf("sequence_length %d leaves no room for [CLS] and [SEP]", a.seqLen)
	}
	a.first, a.second = "first_sequence", "second_sequence"
	if a.cfg.FirstSequence != "" {
		a.first = a.cfg.FirstSequence
	}
	if a.cfg.SecondSequence != "" {
		a.second = a.cfg.SecondSequence
	}
	if a.app == Vectorization {
		return nil
	}
	p := filepath.Join(dir, "label_mapping.json")
	if !isFile(p) {
		if a.app == TextMatch {
			return nil // a two-tower model needs none; bindHead checks
		}
		return fmt.Errorf("%s has no label_mapping.json ({\"label\": index, ...}), which EasyNLP's %s predictor reads", dir, a.app)
	}
	b, err := readSide(p)
	if err != nil {
		return err
	}
	a.labels, err = labelsFromMapping(b)
	return err
}

// findInt finds key at the top of a JSON object or in an object under it
// (EasyNLP's train_config.json nests its arguments).
func findInt(b []byte, key string) (int, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return 0, false
	}
	if raw, ok := top[key]; ok {
		var n int
		if json.Unmarshal(raw, &n) == nil {
			return n, true
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if _, err := fmt.Sscanf(s, "%d", &n); err == nil {
				return n, true
			}
		}
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var sub map[string]json.RawMessage
		if json.Unmarshal(top[k], &sub) == nil {
			if raw, ok := sub[key]; ok {
				var n int
				if json.Unmarshal(raw, &n) == nil {
					return n, true
				}
			}
		}
	}
	return 0, false
}

// labelsFromMapping reads {"label": index, ...} into the labels in index
// order.
func labelsFromMapping(b []byte) ([]string, error) {
	var m map[string]int
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("label_mapping.json: %v (want {\"label\": index, ...})", err)
	}
	out := make([]string, len(m))
	seen := make([]bool, len(m))
	for label, i := range m {
		if i < 0 || i >= len(m) || seen[i] {
			return nil, fmt.Errorf("label_mapping.json: the indices are not 0 to %d, each once", len(m)-1)
		}
		out[i], seen[i] = label, true
	}
	if len(out) == 0 {
		return nil, errors.New("label_mapping.json has no labels")
	}
	return out, nil
}

// bindHead picks the graph's head from the app and the checkpoint.
func (a *App) bindHead(w *encoder.Weights) error {
	switch a.app {
	case TextClassify:
		a.head = encoder.Classify
	case TextClassifyMulti:
		a.head = encoder.Multi
	case SequenceLabeling:
		a.head = encoder.TokenLabels
	case Vectorization:
		a.head = encoder.Vector
		return nil
	case TextMatch:
		a.head = encoder.Classify
		if e, ok := w.T["emb_layer.weight"]; ok {
			if len(e.Shape) != 2 {
				return fmt.Errorf("emb_layer.weight has shape %v", e.Shape)
			}
			a.head, a.embSize = encoder.TwoTower, int(e.Shape[0])
			return nil
		}
		if a.labels == nil {
			return errors.New("a single-tower text_match model needs label_mapping.json")
		}
	}
	c, ok := w.T["classifier.weight"]
	if !ok || len(c.Shape) != 2 {
		return fmt.Errorf("no classifier.weight [labels, hidden]: EasyNLP's %s model keeps its head there", a.app)
	}
	if int(c.Shape[0]) != len(a.labels) {
		return fmt.Errorf("classifier.weight has %d classes but label_mapping.json %d labels", c.Shape[0], len(a.labels))
	}
	return nil
}

// checkSizes checks config.json and vocab.txt against the tables.
func (a *App) checkSizes(w *encoder.Weights) error {
	word := w.T[w.Prefix+"embeddings.word_embeddings.weight"]
	if int64(a.tok.Vocab().Len()) > word.Shape[0] {
		return fmt.Errorf("vocab.txt has %d tokens but the word embeddings %d rows", a.tok.Vocab().Len(), word.Shape[0])
	}
	pos := w.T[w.Prefix+"embeddings.position_embeddings.weight"]
	if pos != nil && len(pos.Shape) == 2 {
		n := int(pos.Shape[0])
		if a.model.RoBERTa() {
			n -= a.model.PadIdx() + 1
		}
		if n < a.seqLen {
			return fmt.Errorf("the position table has room for %d tokens, under sequence_length %d", n, a.seqLen)
		}
	}
	if t := w.T[w.Prefix+"embeddings.token_type_embeddings.weight"]; t != nil && len(t.Shape) == 2 && t.Shape[0] == 1 {
		a.oneType = true
	}
	return nil
}

// Close releases the session.
func (a *App) Close() error {
	if a.rt == nil {
		return nil
	}
	err := a.rt.Close()
	a.rt = nil
	return err
}

// Metadata describes the JSON request and the answer's keys.
func (a *App) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: Code, Inputs: []processors.IOSpec{{Name: a.first, DType: "BYTES"}}}
	if a.app != SequenceLabeling {
		md.Inputs = append(md.Inputs, processors.IOSpec{Name: a.second, DType: "BYTES"})
	}
	var outs []string
	switch a.head {
	case encoder.Classify, encoder.Multi:
		outs = []string{"id", "output", "predictions", "probabilities", "logits"}
	case encoder.TwoTower:
		outs = []string{"emb_output"}
	case encoder.TokenLabels:
		outs = []string{"id", "output", "predictions"}
	case encoder.Vector:
		outs = []string{"id", "pooler_output", "first_token_output", "all_hidden_outputs"}
	}
	for _, o := range outs {
		md.Outputs = append(md.Outputs, processors.IOSpec{Name: o, DType: "BYTES"})
	}
	md.Extra = map[string]any{"type": a.app, "model_type": a.model.ModelType, "sequence_length": a.seqLen}
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
