package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/eas-server/eas-server/engines/jinja"
	"github.com/eas-server/eas-server/internal/scheduler"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
)

// The processor codes (EAS deploys LLMs under codes of their own; these are
// ours): the same model on the CPU, or on ONNX Runtime's CUDA provider.
const (
	CodeCPU = "llm_cpu"
	CodeGPU = "llm_gpu"
)

func init() {
	processors.Register(CodeCPU, "a decoder-only generative model (an ONNX export with a key/value cache beside its Hugging Face tokenizer and configs) with continuous batching behind OpenAI-compatible endpoints, on the CPU",
		func() *processors.Engine { return processors.Adapt[*Payload, *Result](New(false)) })
	processors.Register(CodeGPU, "as llm_cpu, on ONNX Runtime's CUDA execution provider",
		func() *processors.Engine { return processors.Adapt[*Payload, *Result](New(true)) })
}

// ServiceConfig is model_config's own keys; the others go to ONNX Runtime's
// session (intra_op_threads, graph_optimization, device_id, the CUDA
// options), as the onnx processor reads them.
type ServiceConfig struct {
	// ModelName is the id /v1/models lists and requests may name ("" =
	// the service's name, which requests may always use).
	ModelName string `json:"model_name"`
	// MaxNumSeqs bounds the sequences running at once (default 32).
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxNumBatchedTokens bounds the tokens fed in one step, prompt chunks
	// and decode rows together (default 512).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
	// MaxCachedTokens bounds the tokens the running sequences may hold in
	// the key/value cache (default max_num_seqs x the context length).
	MaxCachedTokens int `json:"max_cached_tokens"`
	// MaxModelLen lowers the model's context length (default config.json's).
	MaxModelLen int `json:"max_model_len"`
	// ChatTemplate replaces tokenizer_config.json's chat_template.
	ChatTemplate string `json:"chat_template"`
	// EnablePrefixCaching reuses the keys and values of a prompt prefix
	// that a running or finished sequence computed (default true; applies
	// where the cache is appended in place).
	EnablePrefixCaching *bool `json:"enable_prefix_caching"`
}

const accepts = `{"model_name": "id", "max_num_seqs": N, "max_num_batched_tokens": N, "max_cached_tokens": N, "max_model_len": N, "chat_template": "jinja", "enable_prefix_caching": true|false, and the onnx processor's keys (intra_op_threads, graph_optimization, device_id, gpu_mem_limit, ...)}`

var ownKeys = []string{"model_name", "max_num_seqs", "max_num_batched_tokens", "max_cached_tokens", "max_model_len", "chat_template", "enable_prefix_caching"}

// Limits of model_config.
const (
	maxNumSeqs          = 4096
	maxNumBatchedTokens = 1 << 20
)

// Processor serves one generative model. Its requests never reach Decode:
// the server routes a Generative processor's requests to its sequence
// scheduler (processors.Generative).
type Processor struct {
	gpu     bool
	spec    processors.Spec
	cfg     ServiceConfig
	session onnx.Config
	chat    *jinja.Template // a chat_template given in model_config, parsed
	model   *Model
	gen     *processors.Generator
}

// New returns an unconfigured processor; gpu selects llm_gpu.
func New(gpu bool) *Processor { return &Processor{gpu: gpu} }

func (p *Processor) code() string {
	if p.gpu {
		return CodeGPU
	}
	return CodeCPU
}

// Configure reads model_config.
func (p *Processor) Configure(spec processors.Spec) error {
	own, rest, err := processors.SplitConfig(spec.ModelConfig, ownKeys)
	if err != nil {
		return fmt.Errorf("model_config: %v", err)
	}
	var c ServiceConfig
	ospec := spec
	ospec.ModelConfig = own
	if err := ospec.DecodeConfig(&c, accepts); err != nil {
		return err
	}
	switch {
	case c.MaxNumSeqs < 0 || c.MaxNumSeqs > maxNumSeqs:
		return fmt.Errorf("model_config.max_num_seqs %d is out of range 1 to %d (default 32)", c.MaxNumSeqs, maxNumSeqs)
	case c.MaxNumBatchedTokens < 0 || c.MaxNumBatchedTokens > maxNumBatchedTokens:
		return fmt.Errorf("model_config.max_num_batched_tokens %d is out of range 1 to %d (default 512)", c.MaxNumBatchedTokens, maxNumBatchedTokens)
	case c.MaxNumBatchedTokens > 0 && c.MaxNumSeqs > 0 && c.MaxNumBatchedTokens < c.MaxNumSeqs:
		return fmt.Errorf("model_config.max_num_batched_tokens %d is below max_num_seqs %d: every running sequence feeds a token each step; raise max_num_batched_tokens", c.MaxNumBatchedTokens, c.MaxNumSeqs)
	case c.MaxCachedTokens < 0:
		return fmt.Errorf("model_config.max_cached_tokens %d is negative (0 = max_num_seqs x the context length)", c.MaxCachedTokens)
	case c.MaxModelLen < 0:
		return fmt.Errorf("model_config.max_model_len %d is negative (0 = config.json's context length)", c.MaxModelLen)
	}
	if c.ChatTemplate != "" {
		t, err := jinja.Parse(c.ChatTemplate)
		if err != nil {
			return fmt.Errorf("model_config.chat_template: %v", err)
		}
		p.chat = t
	}
	rspec := spec
	rspec.ModelConfig = rest
	if p.session, err = onnx.ParseConfig(rspec); err != nil {
		return err
	}
	if spec.Batcher != "" {
		return fmt.Errorf("metadata.rpc.batching does not apply to %s: a generative service batches every step of its sequences (model_config.max_num_seqs, max_num_batched_tokens); remove rpc.batching", p.code())
	}
	p.spec, p.cfg = spec, c
	return nil
}

// Load opens the export directory and makes the Generator.
func (p *Processor) Load(ctx context.Context, files processors.Files) error {
	if files.ModelPath == "" {
		return errors.New("model_path is required: the directory of the ONNX export with its config.json, tokenizer.json and tokenizer_config.json")
	}
	m, err := Open(ctx, files.ModelPath, Options{GPU: p.gpu, Code: p.code(), CPUCode: CodeCPU, Session: p.session,
		MaxContext: p.cfg.MaxModelLen, MaxModelBytes: p.spec.MaxModelBytes,
		NoPrefixReuse: p.cfg.EnablePrefixCaching != nil && !*p.cfg.EnablePrefixCaching})
	if err != nil {
		return err
	}
	chat, err := p.chatFunc(m.TokenizerConfig())
	if err != nil {
		m.Close()
		return err
	}
	name := p.cfg.ModelName
	if name == "" {
		name = p.spec.Service
	}
	p.model = m
	p.gen = &processors.Generator{
		Model: name, Vocab: m.Vocab(), ContextLength: m.ContextLength(), EOS: m.EOS(), Defaults: m.Defaults(),
		Tokenizer: m.Tokenizer(), Chat: chat, Stepper: m,
		Limits: scheduler.SeqConfig{MaxSeqs: p.cfg.MaxNumSeqs, StepTokens: p.cfg.MaxNumBatchedTokens, MaxCachedTokens: p.cfg.MaxCachedTokens},
	}
	return nil
}

// chatFunc renders model_config's chat_template, else tokenizer_config's;
// nil when there is neither (chat requests are then refused).
func (p *Processor) chatFunc(tokCfg []byte) (func([]map[string]any, bool, map[string]any) (string, error), error) {
	t := p.chat
	var special map[string]any
	if len(tokCfg) > 0 {
		var err error
		if special, err = jinja.SpecialTokens(tokCfg); err != nil {
			return nil, err
		}
		if t == nil {
			ct, err := jinja.ParseTokenizerConfigTemplate(tokCfg)
			switch {
			case errors.Is(err, jinja.ErrNoChatTemplate):
			case err != nil:
				return nil, err
			case ct.Default == "":
				return nil, errors.New("tokenizer_config.json's chat_template list has no template named \"default\": give one in model_config.chat_template")
			default:
				if t, err = jinja.Parse(ct.Default); err != nil {
					return nil, fmt.Errorf("tokenizer_config.json: chat_template: %v", err)
				}
			}
		}
	}
	if t == nil {
		return nil, nil
	}
	return func(messages []map[string]any, addGenerationPrompt bool, extra map[string]any) (string, error) {
		vars := make(map[string]any, len(special)+len(extra))
		for k, v := range special {
			vars[k] = v
		}
		for k, v := range extra {
			vars[k] = v
		}
		return jinja.RenderChat(t, messages, addGenerationPrompt, vars)
	}, nil
}

// Generator is the loaded model for the sequence scheduler.
func (p *Processor) Generator() *processors.Generator { return p.gen }

// Metadata describes the service for GET /api/predict/<service>.
func (p *Processor) Metadata() processors.Metadata {
	md := processors.Metadata{Processor: p.code(),
		Inputs:  []processors.IOSpec{{Name: "prompt", DType: "BYTES"}},
		Outputs: []processors.IOSpec{{Name: "text", DType: "BYTES"}}}
	if p.gen != nil {
		md.Extra = map[string]any{"model": p.gen.Model, "max_model_len": p.gen.ContextLength, "layout": p.model.Layout(),
			"endpoints": []string{"/v1/completions", "/v1/chat/completions", "/v1/models"}, "chat_template": p.gen.Chat != nil}
	}
	return md
}

// Close frees the session.
func (p *Processor) Close() error {
	if p.model == nil {
		return nil
	}
	return p.model.Close()
}

// Payload and Result complete the processor contract; a generative
// service's requests go to its sequence scheduler instead, so Decode is
// never reached through the server.
type (
	Payload struct{}
	Result  struct{}
)

// errScheduled is what the request path would answer if it ever reached
// the batch contract.
var errScheduled = errors.New("a generative service's requests run on its sequence scheduler, not the request batcher")

// Decode refuses: see Payload.
func (p *Processor) Decode(context.Context, *processors.Request) (*Payload, error) {
	return nil, errScheduled
}

// Run refuses: see Payload.
func (p *Processor) Run(context.Context, []*Payload) ([]*Result, error) { return nil, errScheduled }

// Encode refuses: see Payload.
func (p *Processor) Encode(context.Context, *Payload, *Result) (*processors.Response, error) {
	return nil, errScheduled
}
