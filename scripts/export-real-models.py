#!/usr/bin/env python3
"""Exports real architectures with random weights to ONNX, with PyTorch's own
outputs as references, for the whole-stack tests (e2e/real_models_test.go).

Needs PyTorch, torchvision and transformers (not available on the
development machines; it was run once on a machine that has them):

    python3 scripts/export-real-models.py OUTDIR

Writes, each under 16 MiB:
  bert_tiny.onnx + bert_tiny.json: a 2-layer BERT (hidden 128, 2 heads,
    vocab 1000) with dynamic batch and sequence axes; inputs input_ids and
    attention_mask (int64 [N,T]); outputs last_hidden_state [N,T,128] and
    pooler_output [N,128].
  mobilenet_v3_small.onnx + mobilenet_v3_small.json: torchvision's
    MobileNetV3-Small (10 classes), input [N,3,64,64] fp32, output logits [N,10].
The .json files hold cases in the KServe v2 JSON tensor form that
scripts/gen-test-models.py writes: inputs and the PyTorch (CPU, float32)
outputs for them.
"""
import json
import os
import sys

import torch


def tensor_json(name, t):
    t = t.detach().cpu()
    dt = {torch.float32: "FP32", torch.int64: "INT64"}[t.dtype]
    return {"name": name, "datatype": dt, "shape": list(t.shape), "data": t.reshape(-1).tolist()}


def export(model, args, names_in, names_out, dynamic, path):
    torch.onnx.export(model, args, path, input_names=names_in, output_names=names_out,
                      dynamic_axes=dynamic, opset_version=17, do_constant_folding=True, dynamo=False)


class BertOutputs(torch.nn.Module):
    """A transformers BertModel as an ONNX graph wants it: two tensors in, two out."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        o = self.m(input_ids=input_ids, attention_mask=attention_mask)
        return o.last_hidden_state, o.pooler_output


def export_bert(w, path, export=export):
    """Exports a BertOutputs with dynamic batch and sequence axes."""
    ids = torch.randint(1, 1000, (2, 7))
    export(w, (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"],
           {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}}, path)


def bert_cases(w, sizes, vocab, seed):
    """Cases of random token ids (batch n, length t for each of sizes) with w's outputs."""
    cases = []
    g = torch.Generator().manual_seed(seed)
    for n, t in sizes:
        ids = torch.randint(1, vocab, (n, t), generator=g)
        mask = torch.ones_like(ids)
        with torch.no_grad():
            h, p = w(ids, mask)
        cases.append({"name": f"n{n}_t{t}",
                      "inputs": [tensor_json("input_ids", ids), tensor_json("attention_mask", mask)],
                      "outputs": [tensor_json("last_hidden_state", h), tensor_json("pooler_output", p)]})
    return cases


def bert(outdir):
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=256, max_position_embeddings=64)
    w = BertOutputs(BertModel(cfg).eval()).eval()
    export_bert(w, os.path.join(outdir, "bert_tiny.onnx"))
    cases = bert_cases(w, ((1, 5), (2, 9), (3, 16)), 1000, seed=1)
    with open(os.path.join(outdir, "bert_tiny.json"), "w") as f:
        json.dump({"model": "bert_tiny.onnx", "cases": cases}, f)


def mobilenet(outdir):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=10).eval()
    x = torch.randn(1, 3, 64, 64)
    path = os.path.join(outdir, "mobilenet_v3_small.onnx")
    export(model, (x,), ["images"], ["logits"], {"images": {0: "batch"}, "logits": {0: "batch"}}, path)
    cases = []
    g = torch.Generator().manual_seed(2)
    for n in (1, 3):
        x = torch.randn(n, 3, 64, 64, generator=g)
        with torch.no_grad():
            y = model(x)
        cases.append({"name": f"batch{n}", "inputs": [tensor_json("images", x)], "outputs": [tensor_json("logits", y)]})
    with open(os.path.join(outdir, "mobilenet_v3_small.json"), "w") as f:
        json.dump({"model": "mobilenet_v3_small.onnx", "cases": cases}, f)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    bert(out)
    mobilenet(out)
    for name in sorted(os.listdir(out)):
        print(name, os.path.getsize(os.path.join(out, name)))
