#!/usr/bin/env python3
"""The ChexNet flow of the GraphPipe article, made here: torchvision's
DenseNet-121 with a 14-class sigmoid head (ChexNet's architecture), seeded
random weights, exported to ONNX with a dynamic batch axis, and PyTorch's
own outputs for TenCrop batches as references.

Run with Debian's python3-torch and python3-torchvision (scripts/
install-test-deps.sh installs them):

    /usr/bin/python3 e2e/testdata/graphpipe/chexnet.py OUTDIR

Writes OUTDIR/chexnet.onnx (input "image" fp32 [N,3,224,224], output
"probs" fp32 [N,14]) and OUTDIR/chexnet.json: cases in the KServe v2 JSON
tensor form of scripts/gen-test-models.py, each a batch of ten crops
(torchvision's TenCrop of a 256x256 image, ImageNet-normalised, as ChexNet
evaluates) and the model's probabilities for each crop (one case: the
input alone is 30 MB of JSON).
"""
import json
import os
import sys

import torch
import torchvision
from torchvision import transforms


class ChexNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.densenet121 = torchvision.models.densenet121(weights=None)
        n = self.densenet121.classifier.in_features
        self.densenet121.classifier = torch.nn.Sequential(torch.nn.Linear(n, 14), torch.nn.Sigmoid())

    def forward(self, x):
        return self.densenet121(x)


def tensor_json(name, t):
    t = t.detach().cpu().contiguous()
    return {"name": name, "datatype": "FP32", "shape": list(t.shape), "data": t.reshape(-1).tolist()}


def ten_crops(seed):
    g = torch.Generator().manual_seed(seed)
    image = torch.rand(3, 256, 256, generator=g)
    norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    return torch.stack([norm(c) for c in transforms.TenCrop(224)(image)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(14)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = ChexNet().eval()
    path = os.path.join(out, "chexnet.onnx")
    with torch.no_grad():
        torch.onnx.export(model, ten_crops(0), path, input_names=["image"], output_names=["probs"],
                          dynamic_axes={"image": {0: "n"}, "probs": {0: "n"}}, opset_version=13,
                          do_constant_folding=True)
        cases = []
        for seed in (1,):
            x = ten_crops(seed)
            cases.append({"name": f"tencrop{seed}", "inputs": [tensor_json("image", x)],
                          "outputs": [tensor_json("probs", model(x))]})
    with open(os.path.join(out, "chexnet.json"), "w") as f:
        json.dump({"model": "chexnet.onnx", "cases": cases}, f)


if __name__ == "__main__":
    main()
