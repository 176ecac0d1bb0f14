#!/usr/bin/env python3
"""gen-llm-models.py [--layouts L,...] OUT writes the small generative test models of
processors/llm and their transformers references into OUT (never committed).

Run it with the `llm` venv (scripts/python-venv.sh llm: transformers 4.45.2,
optimum 1.23.3, onnxruntime 1.20.1 on Debian's torch 1.13):

    $EAS_PYVENV_DIR/llm/bin/python scripts/gen-llm-models.py OUT

processors/llm's tests run it once per cache key (the sha256 of this file)
into os.UserCacheDir()/eas-server/llm-models/<key>.

Three families, random weights from a fixed torch seed, each with a real
tokenizer from scripts/fetch-tokenizers.sh's cache
(${EAS_TOKENIZER_CACHE:-~/.cache/eas-server/tokenizers}):

    gpt2   GPT-2 (hidden 64, 2 layers, 4 heads, 512 positions) with GPT-2's
           byte-level BPE (gpt2/encoder.json + vocab.bpe, saved as a
           tokenizer.json by GPT2TokenizerFast)
    llama  Llama (hidden 64, 2 layers, 4 heads, 2 key/value heads: GQA) with
           Llama 3's tokenizer (llama3/tokenizer.json)
    qwen2  Qwen2 (as Llama, with the q/k/v biases) with Qwen3's tokenizer
           (qwen3/tokenizer.json)

Embeddings are tied to the output projection (tie_word_embeddings) to keep
the files small. Each family's directory holds one subdirectory per ONNX
layout, each a complete model directory (config.json,
generation_config.json, tokenizer.json, tokenizer_config.json and the .onnx
file):

    optimum   optimum's text-generation-with-past export: model.onnx with
              input_ids, attention_mask, position_ids (GPT-2: also, optimum
              1.23 declares it), past_key_values.{i}.key/.value ->
              logits, present.{i}.key/.value, int64 ids, float32 KV
    merged    optimum's legacy export (decoder, decoder-with-past, merged by
              its post-processing): decoder_model_merged.onnx, the same
              names plus the bool use_cache_branch; GPT-2's without
              position_ids, as legacy exports are, Llama's and Qwen2's with
              them (export_optimum says how)
    ortgpt2   (gpt2 only) ONNX Runtime's GPT-2 layout, made with
              onnxruntime.transformers' gpt2_helper (the export of its
              convert_to_onnx tool, then its optimizer's attention fusion):
              input_ids, position_ids, attention_mask (int32),
              past_{i} [2, batch, heads, past, head_dim] -> logits,
              present_{i}
    fp16kv    (llama only) the optimum model.onnx with float16 past and
              present (a Cast on each, the network itself float32), int32
              input_ids, attention_mask and position_ids: the dtypes a
              graph may declare, converted by the Go side

hf          the transformers checkpoint (weights, config, tokenizer with the
              real tokenizer_config.json and its chat template, the same
              generation_config.json) the layouts were exported from, for
              references computed at test time

--layouts optimum,merged,... exports only those (make run's examples:
optimum).

bad_dtype.onnx is a graph with optimum's names and GPT-2's geometry but a
float32 input_ids, for the tests of what Open refuses.

onnxruntime-genai's GroupQueryAttention layout is not made: its builder
needs a newer torch than Debian's 1.13.

reference.json in each family's directory holds, for prompts of different
lengths (text and the tokenizer's ids), transformers' greedy generate()
tokens (do_sample=False, MAX_NEW tokens, eos_token_id unset so nothing stops
early and no logits processor touches the scores: each token is the plain
argmax), the gap between the best and second-best logit at each step (a test
may only see a different token where that gap is within float tolerance),
and the file (logits_<i>.f32, little-endian float32 [LOGIT_STEPS, vocab]) of
the raw logits of the first steps: after the prompt, then after each of the
first generated tokens.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from transformers import (  # noqa: E402
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2TokenizerFast,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

transformers.logging.set_verbosity_error()

SEED = 38
# INIT is the weights' standard deviation: at transformers' 0.02 the
# residual stream of these tiny models is the token's own embedding, which
# the tied output projection maps back to the same token, so greedy
# decoding repeats the prompt's last token whatever the context; at 0.1
# the tokens depend on the whole context, which is what the tests check.
INIT = 0.1
MAX_NEW = 12
LOGIT_STEPS = 3
PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker "
    "who repaired every clock in the valley, and nobody knew how old he was.",
]


def tokenizer_cache():
    d = os.environ.get("EAS_TOKENIZER_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "eas-server", "tokenizers")


def need(path):
    if not os.path.exists(path):
        sys.exit(f"gen-llm-models: {path} is missing; run scripts/fetch-tokenizers.sh")
    return path


def gpt2_family(cache):
    d = os.path.join(cache, "gpt2")
    tok = GPT2TokenizerFast(vocab_file=need(os.path.join(d, "encoder.json")), merges_file=need(os.path.join(d, "vocab.bpe")))
    cfg = GPT2Config(
        vocab_size=len(tok), n_positions=512, n_embd=64, n_layer=2, n_head=4,
        bos_token_id=50256, eos_token_id=50256, tie_word_embeddings=True, initializer_range=INIT,
    )
    return "gpt2", tok, GPT2LMHeadModel(cfg), {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}, [50256]


def llama_family(cache):
    tok = PreTrainedTokenizerFast(tokenizer_file=need(os.path.join(cache, "llama3", "tokenizer.json")))
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=True, initializer_range=INIT,
    )
    special = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    return "llama", tok, LlamaForCausalLM(cfg), special, [128001, 128009]


def qwen2_family(cache):
    tok = PreTrainedTokenizerFast(tokenizer_file=need(os.path.join(cache, "qwen3", "tokenizer.json")))
    cfg = Qwen2Config(
        vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=151643, eos_token_id=151645, tie_word_embeddings=True, initializer_range=INIT,
    )
    assert len(tok) <= cfg.vocab_size
    special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    return "qwen2", tok, Qwen2ForCausalLM(cfg), special, [151645, 151643]


def save_side_files(dst, src_tok_dir, tok, special, eos, hf_dir):
    """config.json, generation_config.json, tokenizer.json and
    tokenizer_config.json of one layout directory."""
    if os.path.abspath(dst) != os.path.abspath(hf_dir):
        for f in ("config.json", "tokenizer.json"):
            shutil.copy(os.path.join(hf_dir, f), os.path.join(dst, f))
    cached = os.path.join(src_tok_dir, "tokenizer_config.json") if src_tok_dir else None
    if cached and os.path.exists(cached):
        shutil.copy(cached, os.path.join(dst, "tokenizer_config.json"))
    else:
        with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
            json.dump(dict(special, model_max_length=512, tokenizer_class="PreTrainedTokenizerFast"), f, indent=1)
    with open(os.path.join(dst, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": tok.bos_token_id, "eos_token_id": eos, "do_sample": True,
                   "temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05,
                   "transformers_version": transformers.__version__}, f, indent=1)


def reference(model, tok, out_dir):
    """Greedy tokens and first logits of every prompt, by transformers."""
    gc = GenerationConfig(do_sample=False, max_new_tokens=MAX_NEW, eos_token_id=None, pad_token_id=0,
                          bos_token_id=None, output_logits=True, return_dict_in_generate=True)
    prompts = []
    for i, text in enumerate(PROMPTS):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        x = torch.tensor([ids], dtype=torch.long)
        with torch.no_grad():
            res = model.generate(x, attention_mask=torch.ones_like(x), generation_config=gc)
        gen = res.sequences[0, len(ids):].tolist()
        logits = torch.stack([lg[0] for lg in res.logits]).float()  # [MAX_NEW, vocab]
        top2 = torch.topk(logits, 2, dim=-1).values
        assert gen == logits.argmax(-1).tolist(), "generate() is not the plain argmax"
        name = f"logits_{i}.f32"
        logits[:LOGIT_STEPS].numpy().astype("<f4").tofile(os.path.join(out_dir, name))
        prompts.append({"text": text, "ids": ids, "greedy": gen,
                        "gaps": (top2[:, 0] - top2[:, 1]).tolist(),
                        "logits": name, "logit_steps": LOGIT_STEPS})
    return prompts


def export_optimum(hf_dir, dst, legacy, positions=True):
    """optimum's export: model.onnx, or with legacy the merged decoder.
    optimum's legacy export drops position_ids; positions=True keeps them
    (as optimum's current Llama/Qwen2 merged exports have them), False
    leaves the graph as legacy makes it (older GPT-2 exports)."""
    from optimum.exporters.onnx import config as oc
    from optimum.exporters.onnx import main_export

    inputs = oc.TextDecoderWithPositionIdsOnnxConfig.inputs

    def with_positions(self):
        common = inputs.fget(self)
        if self.task in ("text-generation", "feature-extraction"):
            common["position_ids"] = {0: "batch_size", 1: "sequence_length"}
        return common

    if positions:
        oc.TextDecoderWithPositionIdsOnnxConfig.inputs = property(with_positions)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            main_export(hf_dir, output=tmp, task="text-generation-with-past", legacy=legacy,
                        do_validation=False, no_post_process=True)
            _save_export(tmp, dst, legacy)
    finally:
        oc.TextDecoderWithPositionIdsOnnxConfig.inputs = inputs


def _save_export(tmp, dst, legacy):
    if not legacy:
        onnx.save(onnx.load(os.path.join(tmp, "model.onnx")), os.path.join(dst, "model.onnx"))
        return
    # optimum's post-processing merges the two decoders into one graph
    # with an If on use_cache_branch, declaring IR version 9, which
    # Debian's onnx 1.12 checker refuses: merge here, declaring the IR
    # version the installed onnx knows (the graph uses nothing newer).
    from optimum.onnx import graph_transformations as gt

    check = gt.check_and_save_model

    def check_older_ir(model, save_path):
        model.ir_version = min(model.ir_version, onnx.IR_VERSION)
        check(model, save_path)

    gt.check_and_save_model = check_older_ir
    try:
        gt.merge_decoders(os.path.join(tmp, "decoder_model.onnx"), os.path.join(tmp, "decoder_with_past_model.onnx"),
                          save_path=os.path.join(dst, "decoder_model_merged.onnx"))
    finally:
        gt.check_and_save_model = check


def export_ortgpt2(model, dst):
    """ONNX Runtime's GPT-2 layout through its own tools."""
    import onnxruntime

    sys.path.insert(0, os.path.join(os.path.dirname(onnxruntime.__file__), "transformers"))
    sys.path.insert(0, os.path.join(os.path.dirname(onnxruntime.__file__), "transformers", "models", "gpt2"))
    from gpt2_helper import Gpt2Helper, MyGPT2LMHeadModel

    m = MyGPT2LMHeadModel(model.config)
    m.load_state_dict(model.state_dict())
    m.eval()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.onnx")
        Gpt2Helper.export_onnx(m, torch.device("cpu"), raw)
        Gpt2Helper.optimize_onnx(raw, os.path.join(dst, "model.onnx"), False,
                                 model.config.num_attention_heads, model.config.hidden_size)


def make_fp16kv(src, dst):
    """The optimum model with float16 past/present and int32 ids: each
    float16 past input is cast to float32 before the network, each present
    cast to float16 after it, and the int32 inputs cast to int64."""
    m = onnx.load(src)
    g = m.graph
    nodes = []
    for inp in g.input:
        name = inp.name
        tt = inp.type.tensor_type
        if name.startswith("past_key_values."):
            to, frm = TensorProto.FLOAT, TensorProto.FLOAT16
        elif name in ("input_ids", "attention_mask", "position_ids"):
            to, frm = TensorProto.INT64, TensorProto.INT32
        else:
            continue
        inner = name + "_inner"
        for n in g.node:
            for k, x in enumerate(n.input):
                if x == name:
                    n.input[k] = inner
        nodes.append(helper.make_node("Cast", [name], [inner], to=to))
        tt.elem_type = frm
    for out in g.output:
        if not out.name.startswith("present."):
            continue
        inner = out.name + "_inner"
        for n in g.node:
            for k, x in enumerate(n.output):
                if x == out.name:
                    n.output[k] = inner
            for k, x in enumerate(n.input):
                if x == out.name:
                    n.input[k] = inner
        g.node.append(helper.make_node("Cast", [inner], [out.name], to=TensorProto.FLOAT16))
        out.type.tensor_type.elem_type = TensorProto.FLOAT16
    for k, n in enumerate(nodes):
        g.node.insert(k, n)
    onnx.checker.check_model(m)
    onnx.save(m, dst)


def make_bad_dtype(dst):
    """A graph with the names of optimum's layout for GPT-2's geometry but a
    float32 input_ids: Open must refuse it, naming the input and its type.
    The graph only passes its inputs through (it is never run)."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    ins = [helper.make_tensor_value_info("input_ids", f, ["batch", "seq"]),
           helper.make_tensor_value_info("attention_mask", i64, ["batch", "total"]),
           helper.make_tensor_value_info("position_ids", i64, ["batch", "seq"])]
    outs, nodes = [helper.make_tensor_value_info("logits", f, ["batch", "seq", 50257])], []
    for layer in range(2):
        for kv in ("key", "value"):
            ins.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{kv}", f, ["batch", 4, "past", 16]))
            outs.append(helper.make_tensor_value_info(f"present.{layer}.{kv}", f, ["batch", 4, "total", 16]))
            nodes.append(helper.make_node("Identity", [f"past_key_values.{layer}.{kv}"], [f"present.{layer}.{kv}"]))
    nodes.append(helper.make_node("Unsqueeze", ["input_ids", "axes"], ["logits"]))
    axes = helper.make_tensor("axes", i64, [1], [2])
    g = helper.make_graph(nodes, "bad_dtype", ins, outs, initializer=[axes])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = min(m.ir_version, onnx.IR_VERSION)
    onnx.save(m, dst)


def main():
    ap = argparse.ArgumentParser(description="the generative test models of processors/llm")
    ap.add_argument("--layouts", default="all",
                    help="comma-separated layouts to export (optimum, merged, ortgpt2, fp16kv), or all")
    ap.add_argument("out")
    args = ap.parse_args()
    out = args.out
    wanted = None if args.layouts == "all" else set(args.layouts.split(","))
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    cache = tokenizer_cache()
    os.makedirs(out, exist_ok=True)
    for make, tok_dir in ((gpt2_family, "gpt2"), (llama_family, "llama3"), (qwen2_family, "qwen3")):
        torch.manual_seed(SEED)
        name, tok, model, special, eos = make(cache)
        model.eval()
        fam = os.path.join(out, name)
        os.makedirs(fam, exist_ok=True)
        # hf: the transformers checkpoint every layout was exported from,
        # for references computed at test time (processors/llm's
        # acceptance test runs generate() on it).
        hf_dir = os.path.join(fam, "hf")
        model.save_pretrained(hf_dir)
        tok.save_pretrained(hf_dir)
        save_side_files(hf_dir, os.path.join(cache, tok_dir), tok, special, eos, hf_dir)
        layouts = ["optimum", "merged"] + (["ortgpt2"] if name == "gpt2" else []) + (["fp16kv"] if name == "llama" else [])
        if wanted is not None:
            layouts = [lay for lay in layouts if lay in wanted]
        for lay in layouts:
            dst = os.path.join(fam, lay)
            os.makedirs(dst, exist_ok=True)
            save_side_files(dst, os.path.join(cache, tok_dir), tok, special, eos, hf_dir)
            if lay == "optimum":
                export_optimum(hf_dir, dst, legacy=False)
            elif lay == "merged":
                export_optimum(hf_dir, dst, legacy=True, positions=name != "gpt2")
            elif lay == "ortgpt2":
                export_ortgpt2(model, dst)
            elif lay == "fp16kv":
                make_fp16kv(os.path.join(fam, "optimum", "model.onnx"), os.path.join(dst, "model.onnx"))
        prompts = reference(model, tok, fam)
        with open(os.path.join(fam, "reference.json"), "w") as f:
            json.dump({"family": name, "max_new_tokens": MAX_NEW, "vocab": model.config.vocab_size,
                       "layouts": layouts, "prompts": prompts}, f, indent=1)
        print(f"gen-llm-models: {name}: {', '.join(layouts)}", flush=True)
    make_bad_dtype(os.path.join(out, "bad_dtype.onnx"))


if __name__ == "__main__":
    main()
