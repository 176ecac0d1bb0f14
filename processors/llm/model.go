// Package llm runs decoder-only language models exported to ONNX (the
// llm_cpu and llm_gpu processor codes) one iteration at a time over a batch
// of sequences, each with its own key/value cache: Model implements
// processors.Stepper for the sequence scheduler.
//
// Open reads a model directory (config.json, generation_config.json,
// tokenizer.json, tokenizer_config.json and the .onnx file), finds the
// decoder's interface among the graph's inputs and outputs by their names
// (layout.go), and makes one ONNX Runtime session with processors/onnx's
// session options and GPU rules. Step (kv.go) pads the batch's new tokens to
// one length and their caches to another, with attention_mask marking the
// padding and explicit position_ids, so prefill chunks and single decode
// tokens of sequences with different cached lengths run together; each
// sequence's cache is kept between steps, in the batch's own present
// tensors while the batch does not change. README.md says what is accepted
// and how the cache is kept.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/eas-server/eas-server/engines/decoding"
	"github.com/eas-server/eas-server/engines/tokenizer"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
)

// Bounds on what a model directory may declare. They are far above any
// real model and keep a hostile config from sizing huge buffers.
const (
	maxLayers    = 1024
	maxHeads     = 4096
	maxHeadDim   = 4096
	maxVocab     = 1 << 24
	maxContext   = 1 << 24
	maxEOS       = 64
	maxJSONBytes = 16 << 20 // config.json, generation_config.json, genai_config.json
	// MaxTokenizerConfigBytes bounds tokenizer_config.json (chat templates
	// and added-token tables; real ones are tens of kilobytes).
	MaxTokenizerConfigBytes = 32 << 20
)

// Options tune Open. The zero value runs on the CPU with ONNX Runtime's
// default threads.
type Options struct {
	// GPU runs the session on ONNX Runtime's CUDA execution provider, with
	// no CPU fallback.
	GPU bool
	// Code and CPUCode are the processor codes a failed GPU load names and
	// suggests (default "llm_gpu" and "llm_cpu").
	Code, CPUCode string
	// Session is processors/onnx's model_config (threads, graph
	// optimisation, device_id, the CUDA options).
	Session onnx.Config
	// Threads is ONNX Runtime's intra-op thread count (0: Session's
	// intra_op_threads, else ONNX Runtime's default).
	Threads int
	// MaxContext lowers the model's context length (0: config.json's).
	MaxContext int
	// MaxModelBytes bounds the .onnx file (0: processors.DefaultMaxModelBytes).
	MaxModelBytes int64
	// AllPositions keeps the graph as exported, computing logits at every
	// position; by default the vocabulary projection is rewritten to run on
	// each row's last token only (lastPositionLogits) where the graph
	// allows it.
	AllPositions bool
	// ExportedAttention keeps the graph's attention as exported, its cache
	// concatenated into a new present every step (kv.go's blocks); by
	// default the attention is rewritten to append the cache in place
	// (slotAttention) where the graph and config.json allow it.
	ExportedAttention bool
	// NoPrefixReuse turns off, on the slot cache, the reuse of a prompt
	// prefix that another sequence, running or released, already computed
	// (a released sequence's slot is then freed at once).
	NoPrefixReuse bool
}

// Config is what config.json says that the runner uses; the names are
// Hugging Face's, with GPT-2's aliases.
type Config struct {
	ModelType     string
	Vocab         int
	ContextLength int // max_position_embeddings, n_positions or n_ctx
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int
	Hidden        int
	EOS           []int32
	BOS           []int32
	// PlainAttention says the model's attention is softmax(q·kᵀ/√d)·v under
	// a causal mask, with nothing config.json changes (no sliding window,
	// no other scaling): what slotAttention's GroupQueryAttention
	// computes. Set for the families tested against transformers.
	PlainAttention bool
}

// GenerationConfig is what generation_config.json says; a nil field was
// not set.
type GenerationConfig struct {
	EOS               []int32
	DoSample          *bool
	Temperature       *float64
	TopK              *int
	TopP              *float64
	RepetitionPenalty *float64
}

// Model is a decoder-only model opened by Open. Its accessors are safe from
// any goroutine; NewSequence, Step and Release are called from one
// goroutine at a time (the sequence scheduler's loop), as
// processors.Stepper says.
type Model struct {
	dir      string
	file     string // the .onnx file
	provider string
	cfg      Config
	gen      GenerationConfig
	tok      *tokenizer.Tokenizer
	tokCfg   []byte
	lay      *layout
	ctxLen   int

	session *ort.DynamicAdvancedSession
	sc      *slotCache // the slot cache when lay.slots, else nil (kv.go's blocks)

	// The cache (kv.go), guarded by mu so that Release from another
	// goroutine than Step's stays safe.
	mu      sync.Mutex
	kvBytes int64       // bytes of the blocks that hold caches
	spare   [][]byte    // freed cache buffers, reused by the next steps
	logits  [][]float32 // one buffer per run of the last Step
	closed  bool
	runs    int // session runs so far
	repacks int // runs whose past was repacked (not the last run's present)
}

// Open opens the model directory dir: config.json, generation_config.json
// (optional), tokenizer.json, tokenizer_config.json (optional) and the
// .onnx file (ModelFile says which), whose inputs and outputs must be a
// decoder with a cache in one of the layouts README.md lists. Every file is
// untrusted: sizes are bounded and every value checked.
func Open(ctx context.Context, dir string, opt Options) (*Model, error) {
	m := &Model{dir: dir}
	read := func(name string, limit int64, optional bool) ([]byte, error) {
		b, err := processors.ReadModel(ctx, filepath.Join(dir, name), limit)
		if err != nil {
			if optional && errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return b, nil
	}
	b, err := read("config.json", maxJSONBytes, false)
	if err != nil {
		return nil, err
	}
	if m.cfg, err = ParseConfig(b); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	if b, err = read("generation_config.json", maxJSONBytes, true); err != nil {
		return nil, err
	}
	if b != nil {
		if m.gen, err = ParseGenerationConfig(b); err != nil {
			return nil, fmt.Errorf("generation_config.json: %w", err)
		}
	}
	if m.tokCfg, err = read("tokenizer_config.json", MaxTokenizerConfigBytes, true); err != nil {
		return nil, err
	}
	if m.tokCfg != nil && !isJSONObject(m.tokCfg) {
		return nil, errors.New("tokenizer_config.json: not a JSON object")
	}
	m.ctxLen = m.cfg.ContextLength
	if opt.MaxContext < 0 {
		return nil, fmt.Errorf("max context: must be >= 0, got %d", opt.MaxContext)
	}
	if opt.MaxContext > 0 && opt.MaxContext < m.ctxLen {
		m.ctxLen = opt.MaxContext
	}
	if m.file, err = ModelFile(ctx, dir); err != nil {
		return nil, err
	}
	if _, err := processors.StatModel(m.file, opt.MaxModelBytes); err != nil {
		return nil, err
	}
	// The cheap checks first: the graph's interface, then the tokenizer
	// (parsing a large tokenizer.json takes a while), then the session.
	if err := m.detect(); err != nil {
		return nil, err
	}
	if b, err = read("tokenizer.json", tokenizer.MaxTokenizerJSONBytes, false); err != nil {
		return nil, err
	}
	if m.tok, err = tokenizer.ParseTokenizerJSON(b); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if n := m.tok.Vocab().Len(); n > m.cfg.Vocab {
		return nil, fmt.Errorf("tokenizer.json has %d tokens but config.json's vocab_size is %d; the model cannot score the tokenizer's ids", n, m.cfg.Vocab)
	}
	if err := m.openSession(opt); err != nil {
		return nil, err
	}
	return m, nil
}

// detect reads the graph's interface and finds its layout.
func (m *Model) detect() error {
	if err := onnx.EnsureEnvironment(); err != nil {
		return err
	}
	base := filepath.Base(m.file)
	infoOpts, err := ort.NewSessionOptions()
	if err != nil {
		return fmt.Errorf("onnx session options: %w", err)
	}
	_ = infoOpts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll)
	_ = infoOpts.SetIntraOpNumThreads(1)
	rawIn, rawOut, err := ort.GetInputOutputInfoWithOptions(m.file, infoOpts)
	infoOpts.Destroy()
	if err != nil {
		return fmt.Errorf("load %s: %w; is it a valid ONNX model?", base, err)
	}
	ins, err := convertInfo("input", rawIn)
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	outs, err := convertInfo("output", rawOut)
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	geo := geometry{layers: m.cfg.Layers, heads: m.cfg.Heads, kvHeads: m.cfg.KVHeads, headDim: m.cfg.HeadDim}
	if m.lay, err = detectLayout(ins, outs, geo); err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	return nil
}

// openSession makes the session.
func (m *Model) openSession(opt Options) error {
	threads := opt.Threads
	if threads == 0 {
		threads = opt.Session.IntraOpThreads
	}
	sess := onnx.Session{Code: opt.Code, CPUCode: opt.CPUCode, GPU: opt.GPU, Config: opt.Session, Threads: threads}
	if sess.Code == "" {
		sess.Code = "llm_cpu"
		if opt.GPU {
			sess.Code = "llm_gpu"
		}
	}
	if sess.CPUCode == "" {
		sess.CPUCode = "llm_cpu"
	}
	opts, provider, err := sess.Options()
	if err != nil {
		return err
	}
	defer opts.Destroy()
	if s := m.rewrittenSession(opt, opts); s != nil {
		m.session, m.provider = s, provider
		if m.lay.slots {
			m.sc = &slotCache{reuse: !opt.NoPrefixReuse}
		}
		return nil
	}
	s, err := ort.NewDynamicAdvancedSession(m.file, m.lay.inputNames(), m.lay.outputNames(), opts)
	if err != nil {
		return sess.LoadError(m.file, err)
	}
	m.session, m.provider = s, provider
	return nil
}

// rewrittenSession makes the session from the graph rewritten by
// slotAttention and lastPositionLogits, each where the graph allows it and
// opt does not turn it off, or returns nil (the layout unchanged) when
// neither applies or no rewritten graph loads (weights in external files,
// which a graph loaded from memory cannot find; an operator the execution
// provider lacks): the exported graph then serves, as exported.
func (m *Model) rewrittenSession(opt Options, opts *ort.SessionOptions) *ort.DynamicAdvancedSession {
	b, err := processors.ReadModel(context.Background(), m.file, opt.MaxModelBytes)
	if err != nil {
		return nil
	}
	try := func(slots, last bool) *ort.DynamicAdvancedSession {
		g := b
		if slots {
			if g, err = slotAttention(g, m.lay, m.cfg.Heads); err != nil {
				return nil
			}
		}
		if last {
			if r, err := lastPositionLogits(g, m.lay.logits); err == nil {
				g = r
			} else {
				last = false
			}
		}
		m.lay.slots, m.lay.lastOnly = slots, last
		s, err := ort.NewDynamicAdvancedSessionWithONNXData(g, m.lay.inputNames(), m.lay.outputNames(), opts)
		if err != nil {
			m.lay.slots, m.lay.lastOnly = false, false
			return nil
		}
		return s
	}
	slots := !opt.ExportedAttention && m.cfg.PlainAttention
	if slots {
		if s := try(true, !opt.AllPositions); s != nil {
			return s
		}
	}
	if !opt.AllPositions {
		if s := try(false, true); s != nil && m.lay.lastOnly {
			return s
		} else if s != nil {
			_ = s.Destroy() // nothing rewritten: the exported file serves
		}
	}
	return nil
}

// ModelFile finds the decoder's .onnx file in dir: the one
// genai_config.json names (model.decoder.filename), else model.onnx, else
// decoder_model_merged.onnx, in dir or its onnx/ folder.
func ModelFile(ctx context.Context, dir string) (string, error) {
	b, err := processors.ReadModel(ctx, filepath.Join(dir, "genai_config.json"), maxJSONBytes)
	switch {
	case err == nil:
		var g struct {
			Model struct {
				Decoder struct {
					Filename string `json:"filename"`
				} `json:"decoder"`
			} `json:"model"`
		}
		if err := json.Unmarshal(b, &g); err != nil {
			return "", fmt.Errorf("genai_config.json: %w", err)
		}
		name := g.Model.Decoder.Filename
		if name == "" || !filepath.IsLocal(name) {
			return "", fmt.Errorf("genai_config.json: model.decoder.filename must name a file inside %s, got %q", dir, name)
		}
		return filepath.Join(dir, name), nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("genai_config.json: %w", err)
	}
	for _, sub := range []string{"", "onnx"} {
		for _, name := range []string{"model.onnx", "decoder_model_merged.onnx"} {
			p := filepath.Join(dir, sub, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
	}
	found, _ := filepath.Glob(filepath.Join(dir, "*.onnx"))
	more, _ := filepath.Glob(filepath.Join(dir, "onnx", "*.onnx"))
	found = append(found, more...)
	for i, f := range found {
		found[i], _ = filepath.Rel(dir, f)
	}
	hint := "none"
	if len(found) > 0 {
		hint = strings.Join(found, ", ")
	}
	return "", fmt.Errorf("%s has no model.onnx or decoder_model_merged.onnx (nor under onnx/, nor a genai_config.json naming one); .onnx files there: %s. "+
		"Export the decoder with its cache, e.g. optimum's text-generation-with-past task (a decoder_model.onnx alone takes no cache)", dir, hint)
}

// ParseConfig reads config.json. vocab_size, the context length
// (max_position_embeddings, n_positions or n_ctx), the layer count and the
// head counts are required; every number is bounded.
func ParseConfig(b []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, err
	}
	var c Config
	var errs []error
	str := func(key string) string {
		var s string
		if v, ok := raw[key]; ok {
			if err := json.Unmarshal(v, &s); err != nil {
				errs = append(errs, fmt.Errorf("%s: must be a string", key))
			}
		}
		return s
	}
	// num returns the first of keys that is set, checked to be an integer
	// within [lo, hi]; 0 when none is set.
	num := func(lo, hi int, keys ...string) int {
		for _, k := range keys {
			v, ok := raw[k]
			if !ok || string(v) == "null" {
				continue
			}
			var f float64
			if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
				errs = append(errs, fmt.Errorf("%s: must be an integer between %d and %d, got %s", k, lo, hi, clip(v)))
				return 0
			}
			return int(f)
		}
		return 0
	}
	c.ModelType = str("model_type")
	c.Vocab = num(1, maxVocab, "vocab_size")
	c.ContextLength = num(1, maxContext, "max_position_embeddings", "n_positions", "n_ctx")
	c.Layers = num(1, maxLayers, "num_hidden_layers", "n_layer")
	c.Heads = num(1, maxHeads, "num_attention_heads", "n_head")
	c.KVHeads = num(1, maxHeads, "num_key_value_heads")
	c.Hidden = num(1, maxHeads*maxHeadDim, "hidden_size", "n_embd")
	c.HeadDim = num(1, maxHeadDim, "head_dim")
	c.PlainAttention = plainAttention(c.ModelType, raw)
	var err error
	if c.EOS, err = tokenIDs(raw["eos_token_id"], c.Vocab); err != nil {
		errs = append(errs, fmt.Errorf("eos_token_id: %w", err))
	}
	if c.BOS, err = tokenIDs(raw["bos_token_id"], c.Vocab); err != nil {
		errs = append(errs, fmt.Errorf("bos_token_id: %w", err))
	}
	for _, req := range []struct {
		v   int
		key string
	}{{c.Vocab, "vocab_size"}, {c.ContextLength, "max_position_embeddings (or n_positions)"}, {c.Layers, "num_hidden_layers (or n_layer)"}, {c.Heads, "num_attention_heads (or n_head)"}} {
		if req.v == 0 && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("%s: required", req.key))
		}
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Heads > 0 && c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		errs = append(errs, fmt.Errorf("num_key_value_heads: %d does not divide num_attention_heads %d", c.KVHeads, c.Heads))
	}
	if c.HeadDim == 0 && c.Hidden > 0 && c.Heads > 0 {
		if c.Hidden%c.Heads != 0 {
			errs = append(errs, fmt.Errorf("hidden_size: %d is not a multiple of num_attention_heads %d; set head_dim", c.Hidden, c.Heads))
		} else if d := c.Hidden / c.Heads; d <= maxHeadDim {
			c.HeadDim = d
		}
	}
	return c, errors.Join(errs...)
}

// plainAttention says whether config.json describes attention that
// slotAttention may replace: a family whose exports were checked against
// transformers (GPT-2, Llama, Qwen2), without the options that change the
// scores (GPT-2's unscaled or layer-scaled scores, Qwen2's sliding window,
// an attention softcap).
func plainAttention(modelType string, raw map[string]json.RawMessage) bool {
	is := func(key, want string) bool { v, ok := raw[key]; return ok && string(v) == want }
	set := func(key string) bool { v, ok := raw[key]; return ok && string(v) != "null" && string(v) != "false" }
	switch modelType {
	case "gpt2":
		return !is("scale_attn_weights", "false") && !set("scale_attn_by_inverse_layer_idx")
	case "llama", "qwen2":
		return !set("use_sliding_window") && !set("attn_logit_softcapping")
	}
	return false
}

// ParseGenerationConfig reads generation_config.json.
func ParseGenerationConfig(b []byte) (GenerationConfig, error) {
	var raw struct {
		EOS               json.RawMessage `json:"eos_token_id"`
		DoSample          *bool           `json:"do_sample"`
		Temperature       *float64        `json:"temperature"`
		TopK              *float64        `json:"top_k"`
		TopP              *float64        `json:"top_p"`
		RepetitionPenalty *float64        `json:"repetition_penalty"`
	}
	var g GenerationConfig
	if err := json.Unmarshal(b, &raw); err != nil {
		return g, err
	}
	var errs []error
	var err error
	if g.EOS, err = tokenIDs(raw.EOS, maxVocab); err != nil {
		errs = append(errs, fmt.Errorf("eos_token_id: %w", err))
	}
	g.DoSample = raw.DoSample
	check := func(key string, v *float64, ok func(float64) bool, want string) *float64 {
		if v == nil {
			return nil
		}
		if !ok(*v) {
			errs = append(errs, fmt.Errorf("%s: must be %s, got %g", key, want, *v))
			return nil
		}
		return v
	}
	g.Temperature = check("temperature", raw.Temperature, func(f float64) bool { return f >= 0 && f <= 100 }, "between 0 and 100")
	g.TopP = check("top_p", raw.TopP, func(f float64) bool { return f > 0 && f <= 1 }, "in (0, 1]")
	g.RepetitionPenalty = check("repetition_penalty", raw.RepetitionPenalty, func(f float64) bool { return f > 0 && f <= 100 }, "in (0, 100]")
	if k := check("top_k", raw.TopK, func(f float64) bool { return f == math.Trunc(f) && f >= 0 && f <= maxVocab }, "an integer between 0 and 16777216"); k != nil {
		n := int(*k)
		g.TopK = &n
	}
	return g, errors.Join(errs...)
}

// tokenIDs reads an eos_token_id or bos_token_id: absent, null, one id or
// a list of ids, each in [0, vocab).
func tokenIDs(v json.RawMessage, vocab int) ([]int32, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	var list []float64
	if v[0] == '[' {
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("must be a token id or a list of them, got %s", clip(v))
		}
	} else {
		var one float64
		if err := json.Unmarshal(v, &one); err != nil {
			return nil, fmt.Errorf("must be a token id or a list of them, got %s", clip(v))
		}
		list = []float64{one}
	}
	if len(list) > maxEOS {
		return nil, fmt.Errorf("at most %d ids, got %d", maxEOS, len(list))
	}
	ids := make([]int32, 0, len(list))
	for _, f := range list {
		if f != math.Trunc(f) || f < 0 || (vocab > 0 && f >= float64(vocab)) {
			return nil, fmt.Errorf("%g is not a token id of a vocabulary of %d", f, vocab)
		}
		if !slices.Contains(ids, int32(f)) {
			ids = append(ids, int32(f))
		}
	}
	return ids, nil
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// clip shortens a JSON value for an error message.
func clip(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// Vocab is the length of one row of logits (config.json's vocab_size).
func (m *Model) Vocab() int { return m.cfg.Vocab }

// ContextLength is the most tokens one sequence may hold: config.json's
// max_position_embeddings (n_positions), or Options.MaxContext when lower.
func (m *Model) ContextLength() int { return m.ctxLen }

// EOS are the ids that end a sequence: generation_config.json's
// eos_token_id, else config.json's. Each is within the vocabulary.
func (m *Model) EOS() []int32 {
	ids := m.gen.EOS
	if len(ids) == 0 {
		ids = m.cfg.EOS
	}
	var out []int32
	for _, id := range ids {
		if int(id) < m.cfg.Vocab {
			out = append(out, id)
		}
	}
	return out
}

// Defaults are the model's sampling defaults, over OpenAI's (temperature
// 1, top_p 1, no top_k, no penalty): when generation_config.json sets
// do_sample, its temperature, top_k and top_p; its repetition_penalty in
// any case (Hugging Face applies it to greedy decoding too).
func (m *Model) Defaults() decoding.Params {
	p := decoding.Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}
	g := m.gen
	if g.DoSample != nil && *g.DoSample {
		if g.Temperature != nil {
			p.Temperature = *g.Temperature
		}
		if g.TopK != nil {
			p.TopK = *g.TopK
		}
		if g.TopP != nil {
			p.TopP = *g.TopP
		}
	}
	if g.RepetitionPenalty != nil {
		p.RepetitionPenalty = *g.RepetitionPenalty
	}
	return p
}

// Config is what config.json said.
func (m *Model) Config() Config { return m.cfg }

// GenerationConfig is what generation_config.json said (zero when absent).
func (m *Model) GenerationConfig() GenerationConfig { return m.gen }

// Tokenizer is the model's tokenizer.json.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// TokenizerConfig is tokenizer_config.json as read (a JSON object; its
// chat_template, special tokens), or nil when the directory has none.
func (m *Model) TokenizerConfig() []byte { return m.tokCfg }

// File is the .onnx file in use.
func (m *Model) File() string { return m.file }

// Provider is the ONNX Runtime execution provider: CPUExecutionProvider or
// CUDAExecutionProvider.
func (m *Model) Provider() string { return m.provider }

// Layout describes the graph's interface, for logs and metadata: the cache
// form, its element type, layers and heads, and the optional inputs.
func (m *Model) Layout() string {
	l := m.lay
	s := fmt.Sprintf("%s; %d layers, %d kv heads of %d; cache %s; ids %s", l.form, l.layers, l.kvHeads, l.headDim, elemName(l.kvElem), elemName(l.idsElem))
	if l.positions == "" {
		s += "; no position_ids (sequences run one at a time)"
	}
	if l.useCacheBranch != "" {
		s += "; merged decoder (use_cache_branch)"
	}
	if l.lastOnly {
		s += "; logits at each row's last token"
	}
	if l.slots {
		s += "; cache appended in place (GroupQueryAttention slots)"
	}
	return s
}

// Close releases the session. Sequences must not be stepped afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.spare, m.logits = nil, nil
	if m.sc != nil {
		m.freeSlots() // a sequence released later finds no slot
	}
	if m.session != nil {
		return m.session.Destroy()
	}
	return nil
}

var _ processors.Stepper = (*Model)(nil)
