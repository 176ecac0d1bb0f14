#!/usr/bin/env python3
"""The models and the output check of scripts/bench-gpu.sh.

    gpu-models.py export OUTDIR
        Writes resnet50.onnx (torchvision's ResNet-50, random weights, input
        "input" [N,3,224,224] fp32, output "logits" [N,1000]) and, where
        transformers is installed, bert_base.onnx (BERT-base: 12 layers,
        hidden 768, 12 heads, random weights; inputs input_ids and
        attention_mask int64 [N,T], outputs last_hidden_state and
        pooler_output), each with a .json of cases in the form of
        scripts/export-real-models.py: inputs and PyTorch's CPU float32
        outputs. Prints one line per model: NAME FILE CASES.
    gpu-models.py check URL TOKEN SERVICE CASES.json RTOL ATOL
        Sends every case to URL/v2/models/SERVICE/infer (KServe v2 JSON) and
        compares each output with PyTorch's by the rule of tensor.Close
        (tensor/close.go): every |got - want| <= ATOL + RTOL * max|want| of
        that output. Prints a markdown table row (service, cases, the worst
        |got - want| over that bound, within it); exits 1 when it is over 1.

Both run on PyTorch 1.13 (Debian) and 2.x (the GPU machines' pip install).
"""
import importlib.util
import json
import os
import sys
import urllib.request

_spec = importlib.util.spec_from_file_location(
    "export_real_models", os.path.join(os.path.dirname(os.path.abspath(__file__)), "export-real-models.py"))
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
tensor_json = _real.tensor_json


def export(model, args, names_in, names_out, dynamic, path):
    try:
        _real.export(model, args, names_in, names_out, dynamic, path)
    except TypeError:  # PyTorch before 2.5 has no dynamo argument
        import torch
        torch.onnx.export(model, args, path, input_names=names_in, output_names=names_out,
                          dynamic_axes=dynamic, opset_version=17, do_constant_folding=True)


def resnet50(outdir):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50().eval()
    path = os.path.join(outdir, "resnet50.onnx")
    export(model, (torch.randn(1, 3, 224, 224),), ["input"], ["logits"],
           {"input": {0: "batch"}, "logits": {0: "batch"}}, path)
    g = torch.Generator().manual_seed(3)
    cases = []
    for n in (1, 4):
        x = torch.randn(n, 3, 224, 224, generator=g)
        with torch.no_grad():
            y = model(x)
        cases.append({"name": f"batch{n}", "inputs": [tensor_json("input", x)], "outputs": [tensor_json("logits", y)]})
    write_cases(outdir, "resnet50", cases)


def bert_base(outdir):
    import torch
    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        print("bert_base skipped: transformers is not installed", file=sys.stderr)
        return
    torch.manual_seed(0)
    w = _real.BertOutputs(BertModel(BertConfig()).eval()).eval()  # BERT-base sizes
    _real.export_bert(w, os.path.join(outdir, "bert_base.onnx"), export=export)
    cases = _real.bert_cases(w, ((1, 128), (3, 32)), 30000, seed=4)
    write_cases(outdir, "bert_base", cases)


def write_cases(outdir, name, cases):
    cases_path = os.path.join(outdir, name + ".json")
    with open(cases_path, "w") as f:
        json.dump({"model": name + ".onnx", "cases": cases}, f)
    print(name, os.path.join(outdir, name + ".onnx"), cases_path)


def check(url, token, service, cases_path, rtol, atol):
    with open(cases_path) as f:
        cases = json.load(f)["cases"]
    worst = 0.0
    for c in cases:
        body = json.dumps({"inputs": c["inputs"]}).encode()
        req = urllib.request.Request(f"{url}/v2/models/{service}/infer", data=body,
                                     headers={"Authorization": token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            got = {o["name"]: o for o in json.load(r)["outputs"]}
        for want in c["outputs"]:
            g = got[want["name"]]
            if g["shape"] != want["shape"]:
                raise SystemExit(f"{service} {c['name']} {want['name']}: shape {g['shape']}, want {want['shape']}")
            bound = max(atol + rtol * max(abs(v) for v in want["data"]), sys.float_info.min)
            err = max(abs(a - b) for a, b in zip(g["data"], want["data"])) / bound
            worst = max(worst, err)
    ok = worst <= 1
    print(f"| {service} | {len(cases)} | {worst:.2e} | {'yes' if ok else '**no**'} |")
    return ok


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "export":
        os.makedirs(sys.argv[2], exist_ok=True)
        resnet50(sys.argv[2])
        bert_base(sys.argv[2])
    elif len(sys.argv) == 8 and sys.argv[1] == "check":
        sys.exit(0 if check(*sys.argv[2:6], float(sys.argv[6]), float(sys.argv[7])) else 1)
    else:
        sys.exit(__doc__)
