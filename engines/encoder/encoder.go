// Package encoder builds a BERT or RoBERTa encoder as an ONNX graph
// (engines/onnxbuild) from its Hugging Face config.json and a state_dict
// read by engines/torchckpt, with an optional head (a classifier, a
// token classifier, a pooler, an embedding layer). The graph takes
// input_ids, attention_mask and token_type_ids and runs on ONNX Runtime;
// processors/easynlp (EasyNLP's apps) and processors/textencoder (Hugging
// Face checkpoints) serve it.
package encoder

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/torchckpt"
	"github.com/eas-server/eas-server/tensor"
)

// Config is the backbone's config.json in Hugging Face's layout (as
// transformers and EasyNLP write it).
type Config struct {
	ModelType             string   `json:"model_type"`
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	IntermediateSize      int      `json:"intermediate_size"`
	VocabSize             int      `json:"vocab_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	TypeVocabSize         int      `json:"type_vocab_size"`
	LayerNormEps          *float64 `json:"layer_norm_eps"`
	HiddenAct             string   `json:"hidden_act"`
	PadTokenID            *int     `json:"pad_token_id"`
}

// RoBERTa reports whether position ids follow RoBERTa (counted from
// padding_idx+1) rather than BERT (0, 1, ...).
func (c *Config) RoBERTa() bool { return c.ModelType == "roberta" }

// PadIdx is RoBERTa's padding_idx: its position ids start after it.
func (c *Config) PadIdx() int {
	if c.PadTokenID != nil {
		return *c.PadTokenID
	}
	return 1
}

// MaxLen is the longest sequence the position table holds.
func (c *Config) MaxLen() int {
	if c.RoBERTa() {
		return c.MaxPositionEmbeddings - c.PadIdx() - 1
	}
	return c.MaxPositionEmbeddings
}

// Check refuses a config this package cannot build: a model_type other
// than bert or roberta, sizes that do not fit, an unknown activation.
func (c *Config) Check() error {
	switch c.ModelType {
	case "bert", "roberta":
	case "":
		return errors.New("config.json has no model_type; BERT and RoBERTa encoders (model_type bert, roberta) are built here")
	default:
		return fmt.Errorf("config.json's model_type %q is not served here: the encoder builder builds BERT and RoBERTa encoders (model_type bert, roberta)", c.ModelType)
	}
	switch {
	case c.HiddenSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.IntermediateSize <= 0:
		return fmt.Errorf("config.json: hidden_size %d, num_hidden_layers %d, num_attention_heads %d and intermediate_size %d must be positive", c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize)
	case c.HiddenSize%c.NumAttentionHeads != 0:
		return fmt.Errorf("config.json: hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	case c.NumHiddenLayers > 1024:
		return fmt.Errorf("config.json: num_hidden_layers %d", c.NumHiddenLayers)
	}
	switch c.HiddenAct {
	case "", "gelu", "relu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "tanh":
	default:
		return fmt.Errorf("config.json: hidden_act %q is not one of gelu, gelu_new, gelu_pytorch_tanh, relu, tanh", c.HiddenAct)
	}
	return nil
}

// Head is what the graph answers after the encoder.
type Head int

const (
	// Classify answers logits and probabilities (softmax) of the pooled
	// output through a linear "classifier" (BERT's pooler then
	// classifier; a RoBERTa's classifier.dense + classifier.out_proj on
	// the first token when the checkpoint has them).
	Classify    Head = iota
	Multi            // as Classify with a sigmoid: logits, probabilities
	TwoTower         // emb_output: emb_layer of the pooled output
	TokenLabels      // per-token logits of a linear "classifier"
	Vector           // pooler_output and sequence_output
	Hidden           // last_hidden_state only (no pooler needed)
)

// Weights looks a state_dict's tensors up by their names under the
// backbone's prefix (backbone., bert., roberta. or none), LayerNorm's
// gamma/beta renamed to weight/bias as EasyNLP's and transformers' loaders
// do.
type Weights struct {
	T      map[string]*torchckpt.Tensor
	Prefix string
}

// NewWeights indexes sd and finds the backbone's prefix.
func NewWeights(sd *torchckpt.StateDict) (*Weights, error) {
	w := &Weights{T: map[string]*torchckpt.Tensor{}}
	for _, k := range sd.Keys {
		n := k
		// EasyNLP's Application.from_pretrained renames the same way.
		if strings.Contains(n, "gamma") {
			n = strings.ReplaceAll(n, "gamma", "weight")
		}
		if strings.Contains(n, "beta") {
			n = strings.ReplaceAll(n, "beta", "bias")
		}
		w.T[n] = sd.Tensors[k]
	}
	for _, p := range []string{"backbone.", "bert.", "roberta.", ""} {
		if _, ok := w.T[p+"embeddings.word_embeddings.weight"]; ok {
			w.Prefix = p
			return w, nil
		}
	}
	keys := sd.SortedKeys()
	if len(keys) > 8 {
		keys = append(keys[:8], "...")
	}
	return nil, fmt.Errorf("the checkpoint has no backbone.embeddings.word_embeddings.weight (EasyNLP's key for the BERT/RoBERTa backbone; bert., roberta. or no prefix are read too); its keys: %s", strings.Join(keys, ", "))
}

// Backbone returns the backbone's tensor name (under the prefix).
func (w *Weights) Backbone(name string) *torchckpt.Tensor { return w.T[w.Prefix+name] }

// get returns the float tensor name of the given shape.
func (w *Weights) get(name string, shape ...int64) ([]float32, error) {
	t, ok := w.T[name]
	if !ok {
		return nil, fmt.Errorf("the checkpoint has no %s", name)
	}
	if t.F32 == nil {
		return nil, fmt.Errorf("the checkpoint's %s is %s, not a float tensor", name, t.DType)
	}
	if !slices.Equal(t.Shape, shape) {
		return nil, fmt.Errorf("the checkpoint's %s has shape %v, want %v (config.json's sizes)", name, t.Shape, shape)
	}
	return t.F32, nil
}

// Has reports whether the checkpoint has name.
func (w *Weights) Has(name string) bool { _, ok := w.T[name]; return ok }

// builder emits the encoder graph.
type builder struct {
	g   onnxbuild.Graph
	w   *Weights
	cfg *Config
	eps float32
}

func (b *builder) f32(v []float32, shape ...int64) string { return b.g.F32Const(v, shape) }

func (b *builder) scalar(v float32) string { return b.f32([]float32{v}) }

// linear is x @ W^T + b for a torch Linear named name ([out, in] weight).
func (b *builder) linear(x, name string, in, out int64) (string, error) {
	wt, err := b.w.get(name+".weight", out, in)
	if err != nil {
		return "", err
	}
	bias, err := b.w.get(name+".bias", out)
	if err != nil {
		return "", err
	}
	tr := make([]float32, len(wt))
	for o := int64(0); o < out; o++ {
		for i := int64(0); i < in; i++ {
			tr[i*out+o] = wt[o*in+i]
		}
	}
	return b.g.Op1("Add", b.g.Op1("MatMul", x, b.f32(tr, in, out)), b.f32(bias, out)), nil
}

func (b *builder) layerNorm(x, name string, h int64) (string, error) {
	s, err := b.w.get(name+".weight", h)
	if err != nil {
		return "", err
	}
	bias, err := b.w.get(name+".bias", h)
	if err != nil {
		return "", err
	}
	return b.g.Op1("LayerNormalization", x, b.f32(s, h), b.f32(bias, h), onnxbuild.AttrInt("axis", -1), onnxbuild.AttrFloat("epsilon", b.eps)), nil
}

func (b *builder) act(x string) string {
	switch b.cfg.HiddenAct {
	case "relu":
		return b.g.Op1("Relu", x)
	case "tanh":
		return b.g.Op1("Tanh", x)
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
		x3 := b.g.Op1("Mul", b.g.Op1("Mul", x, x), x)
		in := b.g.Op1("Mul", b.g.Op1("Add", x, b.g.Op1("Mul", x3, b.scalar(0.044715))), b.scalar(float32(math.Sqrt(2/math.Pi))))
		return b.g.Op1("Mul", b.g.Op1("Mul", x, b.scalar(0.5)), b.g.Op1("Add", b.g.Op1("Tanh", in), b.scalar(1)))
	}
	// gelu: 0.5 x (1 + erf(x / sqrt 2))
	e := b.g.Op1("Erf", b.g.Op1("Div", x, b.scalar(float32(math.Sqrt2))))
	return b.g.Op1("Mul", b.g.Op1("Mul", x, b.scalar(0.5)), b.g.Op1("Add", e, b.scalar(1)))
}

// Options name the graph.
type Options struct {
	Head   Head
	Labels int    // the classifier's width (the label count)
	Name   string // the graph's name and its nodes' prefix ("easynlp")
}

// Build writes the ONNX model (opset of engines/onnxbuild): input_ids,
// attention_mask and token_type_ids ([batch, sequence] int64) in, the
// head's outputs out ([batch, ...] float32). Padding (attention_mask 0)
// is masked out of attention as (1 - mask) * -10000, so a row's outputs
// at its real positions do not depend on how far it is padded.
func Build(cfg *Config, w *Weights, opt Options) ([]byte, error) {
	hd, labels := opt.Head, opt.Labels
	name := opt.Name
	if name == "" {
		name = "encoder"
	}
	b := &builder{g: onnxbuild.Graph{Prefix: name + "/"}, w: w, cfg: cfg, eps: 1e-12}
	if cfg.LayerNormEps != nil {
		b.eps = float32(*cfg.LayerNormEps)
	}
	g := &b.g
	H := int64(cfg.HiddenSize)
	heads := int64(cfg.NumAttentionHeads)
	dh := H / heads
	p := w.Prefix
	word, ok := w.T[p+"embeddings.word_embeddings.weight"]
	if !ok || len(word.Shape) != 2 || word.Shape[1] != H {
		return nil, fmt.Errorf("the checkpoint's %sembeddings.word_embeddings.weight is not [vocab, %d]", p, H)
	}
	posT := w.T[p+"embeddings.position_embeddings.weight"]
	typT := w.T[p+"embeddings.token_type_embeddings.weight"]
	if posT == nil || typT == nil || len(posT.Shape) != 2 || len(typT.Shape) != 2 {
		return nil, fmt.Errorf("the checkpoint lacks %sembeddings.position_embeddings or token_type_embeddings", p)
	}
	wordV, err := w.get(p+"embeddings.word_embeddings.weight", word.Shape[0], H)
	if err != nil {
		return nil, err
	}
	posV, err := w.get(p+"embeddings.position_embeddings.weight", posT.Shape[0], H)
	if err != nil {
		return nil, err
	}
	typV, err := w.get(p+"embeddings.token_type_embeddings.weight", typT.Shape[0], H)
	if err != nil {
		return nil, err
	}
	ids, mask, types := "input_ids", "attention_mask", "token_type_ids"
	emb := g.Op1("Gather", b.f32(wordV, word.Shape...), ids, onnxbuild.AttrInt("axis", 0))
	var pos string
	if cfg.RoBERTa() {
		// RoBERTa: position ids count the real tokens from padding_idx+1;
		// padding sits at padding_idx (Hugging Face's
		// create_position_ids_from_input_ids, from the mask).
		cs := g.Op1("CumSum", mask, g.I64Scalar(1))
		pos = g.Op1("Add", g.Op1("Mul", cs, mask), g.I64Scalar(int64(cfg.PadIdx())))
	} else {
		seq := g.Op1("Squeeze", g.Op1("Shape", ids, onnxbuild.AttrInt("start", 1), onnxbuild.AttrInt("end", 2)), g.I64Const([]int64{0}))
		pos = g.Op1("Unsqueeze", g.Op1("Range", g.I64Scalar(0), seq, g.I64Scalar(1)), g.I64Const([]int64{0}))
	}
	emb = g.Op1("Add", emb, g.Op1("Gather", b.f32(posV, posT.Shape...), pos, onnxbuild.AttrInt("axis", 0)))
	emb = g.Op1("Add", emb, g.Op1("Gather", b.f32(typV, typT.Shape...), types, onnxbuild.AttrInt("axis", 0)))
	h, err := b.layerNorm(emb, p+"embeddings.LayerNorm", H)
	if err != nil {
		return nil, err
	}
	// (1 - mask) * -10000, [B, 1, 1, S], as EasyNLP's get_extended_attention_mask.
	fm := g.Op1("Cast", mask, onnxbuild.AttrInt("to", onnxbuild.Type(tensor.Float32)))
	ext := g.Op1("Mul", g.Op1("Sub", b.scalar(1), fm), b.scalar(-10000))
	ext = g.Op1("Unsqueeze", ext, g.I64Const([]int64{1, 2}))
	split := g.I64Const([]int64{0, 0, heads, dh})
	merge := g.I64Const([]int64{0, 0, H})
	scale := b.scalar(float32(math.Sqrt(float64(dh))))
	for l := 0; l < cfg.NumHiddenLayers; l++ {
		lp := fmt.Sprintf("%sencoder.layer.%d.", p, l)
		var qkv [3]string
		for i, n := range []string{"query", "key", "value"} {
			x, err := b.linear(h, lp+"attention.self."+n, H, H)
			if err != nil {
				return nil, err
			}
			qkv[i] = g.Op1("Transpose", g.Op1("Reshape", x, split), onnxbuild.AttrInts("perm", []int64{0, 2, 1, 3}))
		}
		kT := g.Op1("Transpose", qkv[1], onnxbuild.AttrInts("perm", []int64{0, 1, 3, 2}))
		scores := g.Op1("Add", g.Op1("Div", g.Op1("MatMul", qkv[0], kT), scale), ext)
		probs := g.Op1("Softmax", scores, onnxbuild.AttrInt("axis", -1))
		ctx := g.Op1("Reshape", g.Op1("Transpose", g.Op1("MatMul", probs, qkv[2]), onnxbuild.AttrInts("perm", []int64{0, 2, 1, 3})), merge)
		ao, err := b.linear(ctx, lp+"attention.output.dense", H, H)
		if err != nil {
			return nil, err
		}
		attn, err := b.layerNorm(g.Op1("Add", ao, h), lp+"attention.output.LayerNorm", H)
		if err != nil {
			return nil, err
		}
		inter, err := b.linear(attn, lp+"intermediate.dense", H, int64(cfg.IntermediateSize))
		if err != nil {
			return nil, err
		}
		out, err := b.linear(b.act(inter), lp+"output.dense", int64(cfg.IntermediateSize), H)
		if err != nil {
			return nil, err
		}
		if h, err = b.layerNorm(g.Op1("Add", out, attn), lp+"output.LayerNorm", H); err != nil {
			return nil, err
		}
	}
	pooled := func() (string, error) {
		first := g.Op1("Gather", h, g.I64Scalar(0), onnxbuild.AttrInt("axis", 1))
		d, err := b.linear(first, p+"pooler.dense", H, H)
		if err != nil {
			return "", fmt.Errorf("%v: this app needs the backbone's pooler", err)
		}
		return g.Op1("Tanh", d), nil
	}
	type out struct {
		name, value string
		shape       []int64
	}
	var outs []out
	switch hd {
	case Classify, Multi:
		var lg string
		if w.Has("classifier.out_proj.weight") {
			// transformers' RobertaClassificationHead: dense, tanh,
			// out_proj of the first token.
			first := g.Op1("Gather", h, g.I64Scalar(0), onnxbuild.AttrInt("axis", 1))
			d, err := b.linear(first, "classifier.dense", H, H)
			if err != nil {
				return nil, err
			}
			if lg, err = b.linear(g.Op1("Tanh", d), "classifier.out_proj", H, int64(labels)); err != nil {
				return nil, err
			}
		} else {
			pl, err := pooled()
			if err != nil {
				return nil, err
			}
			if lg, err = b.linear(pl, "classifier", H, int64(labels)); err != nil {
				return nil, err
			}
		}
		prob := g.Op1("Softmax", lg, onnxbuild.AttrInt("axis", -1))
		if hd == Multi {
			prob = g.Op1("Sigmoid", lg)
		}
		outs = []out{{"logits", lg, []int64{-1, int64(labels)}}, {"probabilities", prob, []int64{-1, int64(labels)}}}
	case TwoTower:
		pl, err := pooled()
		if err != nil {
			return nil, err
		}
		e := w.T["emb_layer.weight"]
		if e == nil || len(e.Shape) != 2 {
			return nil, errors.New("the checkpoint has no emb_layer.weight [embedding_size, hidden]")
		}
		em, err := b.linear(pl, "emb_layer", H, e.Shape[0])
		if err != nil {
			return nil, err
		}
		outs = []out{{"emb_output", em, []int64{-1, e.Shape[0]}}}
	case TokenLabels:
		lg, err := b.linear(h, "classifier", H, int64(labels))
		if err != nil {
			return nil, err
		}
		outs = []out{{"logits", lg, []int64{-1, -1, int64(labels)}}}
	case Vector:
		pl, err := pooled()
		if err != nil {
			return nil, err
		}
		outs = []out{{"pooler_output", pl, []int64{-1, H}}, {"sequence_output", h, []int64{-1, -1, H}}}
	case Hidden:
		outs = []out{{"last_hidden_state", h, []int64{-1, -1, H}}}
	default:
		return nil, fmt.Errorf("unknown head %d", hd)
	}
	gp := &onnxpb.GraphProto{Name: name, Node: g.Nodes, Initializer: g.Inits}
	for _, n := range []string{ids, mask, types} {
		gp.Input = append(gp.Input, onnxbuild.ValueInfo(n, tensor.Int64, []int64{-1, -1}))
	}
	for _, o := range outs {
		g.Emit("Identity", []string{o.value}, []string{o.name})
		gp.Output = append(gp.Output, onnxbuild.ValueInfo(o.name, tensor.Float32, o.shape))
	}
	gp.Node = g.Nodes
	return onnxbuild.Model(gp, "eas-server "+name)
}

// ParseConfig reads config.json and checks it.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("config.json: %v", err)
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Checkpoint is a weight file a Hugging Face directory may hold.
type Checkpoint struct {
	Name string
	Read func([]byte) (*torchckpt.StateDict, error)
}

// Checkpoints are the weight files read, in order of preference.
var Checkpoints = []Checkpoint{{"model.safetensors", torchckpt.ReadSafetensors}, {"pytorch_model.bin", torchckpt.ReadTorch}}
