#!/usr/bin/env python3
"""gen-bench-llm-models.py [--models gpt2,llama] OUT writes the generation
benchmark's models (issue 39) into OUT (never committed; scripts/
bench-generation.sh keeps them in $EAS_BENCH_CACHE).

Run it with the `llm` venv (scripts/python-venv.sh llm), as
scripts/gen-llm-models.py, whose export and side files it reuses:

    $EAS_PYVENV_DIR/llm/bin/python scripts/gen-bench-llm-models.py OUT

Two models at real sizes, random weights from a fixed torch seed at
transformers' own initialisation (std 0.02), float32, each with a real
tokenizer from scripts/fetch-tokenizers.sh's cache:

    gpt2   GPT-2 small's architecture (124M parameters): 12 layers, hidden
           768, 12 heads, vocabulary 50257, 1024 positions, the output
           projection tied to the embeddings (as GPT-2's is); GPT-2's
           byte-level BPE
    llama  Llama-shaped, of a similar body: 12 layers, hidden 768, 12
           heads, 4 key/value heads (grouped-query attention),
           intermediate 2048, 1024 positions, tied embeddings, with Llama
           3's tokenizer and so its vocabulary of 128256: 174M parameters,
           of which 98.5M are the (tied) embeddings. The real vocabulary is
           kept, rather than a smaller one, because it is what a Llama 3
           model pays per token (the output projection is 57% of a decode
           step's multiply-adds here) and because llama.cpp's converter
           recognises this tokenizer

Each model's directory holds

    hf       the transformers checkpoint (safetensors, config.json,
             generation_config.json, the tokenizer): what the peers load or
             convert (llama.cpp's GGUF converter, batch-inference's
             transformers class)
    optimum  optimum's text-generation-with-past export (model.onnx with
             position_ids, as scripts/gen-llm-models.py makes it) with the
             side files: what eas-server serves as llm_cpu and what
             onnxruntime-genai may run

generation_config.json says greedy (do_sample false); the benchmark's
requests are greedy anyway and ignore end-of-text.
"""

import argparse
import importlib.util
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("gen_llm_models", os.path.join(here, "gen-llm-models.py"))
glm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(glm)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    GPT2Config,
    GPT2LMHeadModel,
    GPT2TokenizerFast,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

SEED = 39
POSITIONS = 1024


def gpt2_model(cache):
    d = os.path.join(cache, "gpt2")
    tok = GPT2TokenizerFast(vocab_file=glm.need(os.path.join(d, "encoder.json")),
                            merges_file=glm.need(os.path.join(d, "vocab.bpe")))
    cfg = GPT2Config(vocab_size=50257, n_positions=POSITIONS, n_embd=768, n_layer=12, n_head=12,
                     bos_token_id=50256, eos_token_id=50256, tie_word_embeddings=True)
    special = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    return tok, GPT2LMHeadModel(cfg), special, [50256], "gpt2"


def llama_model(cache):
    tok = PreTrainedTokenizerFast(tokenizer_file=glm.need(os.path.join(cache, "llama3", "tokenizer.json")))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                      num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=POSITIONS,
                      bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=True)
    special = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    return tok, LlamaForCausalLM(cfg), special, [128001, 128009], "llama3"


def main():
    ap = argparse.ArgumentParser(description="the generation benchmark's models")
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("out")
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    cache = glm.tokenizer_cache()
    makers = {"gpt2": gpt2_model, "llama": llama_model}
    for name in args.models.split(","):
        if name not in makers:
            sys.exit(f"gen-bench-llm-models: unknown model {name!r}; known: {', '.join(makers)}")
        torch.manual_seed(SEED)
        tok, model, special, eos, tok_dir = makers[name](cache)
        model.eval()
        fam = os.path.join(args.out, name)
        hf_dir, onnx_dir = os.path.join(fam, "hf"), os.path.join(fam, "optimum")
        os.makedirs(onnx_dir, exist_ok=True)
        model.save_pretrained(hf_dir)
        tok.save_pretrained(hf_dir)
        for d in (hf_dir, onnx_dir):
            glm.save_side_files(d, os.path.join(cache, tok_dir), tok, special, eos, hf_dir)
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                json.dump({"bos_token_id": tok.bos_token_id, "eos_token_id": eos, "do_sample": False,
                           "transformers_version": transformers.__version__}, f, indent=1)
        glm.export_optimum(hf_dir, onnx_dir, legacy=False)
        params = sum(p.numel() for p in model.parameters())
        print(f"gen-bench-llm-models: {name}: {params / 1e6:.1f}M parameters", flush=True)


if __name__ == "__main__":
    main()
