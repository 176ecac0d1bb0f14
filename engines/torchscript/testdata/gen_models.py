"""Generates the TorchScript test models of package torchscript, with
reference outputs, into the directory given as the only argument.

Run by the Go tests with Debian's /usr/bin/python3 (python3-torch, from
scripts/install-test-deps.sh). Weights are random (seeded); nothing is
downloaded. Writes <name>.pt for each model and refs.json:

  {"<name>": {"args": [[name, type], ...],
              "cases": [{"inputs": [T, ...], "outputs": [T, ...]}]}}

where T is {"name", "dtype" (torch dtype name), "shape", "data" (flat)}.

With --examples DIR (the repository's examples/) it writes instead only the
TorchScript example service's files: DIR/models/torchscript_mlp.pt (a traced
16 -> 32 -> 8 MLP), DIR/requests/torchscript_mlp.pb (an EAS Torch
PredictRequest of a [2, 16] float32 input) and, when a third argument names
it, a JSON reference {"input": T, "output": T} of that request's answer:

  /usr/bin/python3 engines/torchscript/testdata/gen_models.py --examples examples \
      examples/requests/torchscript_mlp_expected.json
"""
import json
import os
import struct
import sys
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn


def varint(n):
    b = bytearray()
    while True:
        c = n & 0x7F
        n >>= 7
        if n:
            b.append(c | 0x80)
        else:
            b.append(c)
            return bytes(b)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def torch_request(x):
    """pytorch.eas.PredictRequest{inputs: [ArrayProto(DT_FLOAT, shape, float_val)]}."""
    shape = field(1, 2, b"".join(varint(d) for d in x.shape))  # ArrayShape.dim, packed
    floats = struct.pack("<%df" % x.numel(), *x.reshape(-1).tolist())
    array = field(1, 0, varint(1)) + field(2, 2, shape) + field(3, 2, floats)  # DT_FLOAT = 1
    return field(1, 2, array)


def write_examples(examples, ref_path=None):
    torch.manual_seed(16)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    traced = torch.jit.trace(mlp, torch.randn(1, 16))
    os.makedirs(os.path.join(examples, "models"), exist_ok=True)
    os.makedirs(os.path.join(examples, "requests"), exist_ok=True)
    path = os.path.join(examples, "models", "torchscript_mlp.pt")
    torch.jit.save(traced, path)
    x = torch.randn(2, 16)
    with open(os.path.join(examples, "requests", "torchscript_mlp.pb"), "wb") as f:
        f.write(torch_request(x))
    with torch.no_grad():
        y = torch.jit.load(path).eval()(x)
    if ref_path:
        with open(ref_path, "w") as f:
            json.dump({"input": tj("input__0", x), "output": tj("output__0", y)}, f)
            f.write("\n")
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


def flat(t):
    return t.detach().reshape(-1).tolist()


def tj(name, t):
    t = t.detach()
    return {"name": name, "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape), "data": flat(t)}


if len(sys.argv) > 1 and sys.argv[1] == "--examples":
    write_examples(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    sys.exit(0)

out = sys.argv[1]
torch.manual_seed(0)
refs = {}


def record(name, mod, cases, arg_names=None):
    """Saves mod, reloads the file (the reference runs what Go loads) and
    records each case's outputs."""
    path = os.path.join(out, name + ".pt")
    torch.jit.save(mod, path)
    loaded = torch.jit.load(path).eval()
    schema = loaded.forward.schema
    args = [[a.name, str(a.type)] for a in schema.arguments if a.name != "self"]
    rc = []
    with torch.no_grad():
        for inputs in cases:
            res = loaded(*inputs)
            if isinstance(res, dict):
                outs = [tj(k, v) for k, v in res.items()]
            elif isinstance(res, (tuple, list)):
                outs = [tj("output__%d" % i, v) for i, v in enumerate(res)]
            else:
                outs = [tj("output__0", res)]
            rc.append({"inputs": [tj("input__%d" % i, x) for i, x in enumerate(inputs)],
                       "outputs": outs})
    refs[name] = {"args": args, "cases": rc}


# A traced MLP, float32.
mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
traced = torch.jit.trace(mlp, torch.randn(2, 4))
record("mlp", traced, [[torch.randn(2, 4)], [torch.randn(5, 4)]])


# A scripted model with an if on the data and a loop over a runtime length,
# float64.
class Control(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: Tensor) -> Tensor:
        h = x
        for _ in range(x.size(0)):
            h = torch.tanh(self.lin(h))
        if bool(x.mean() > 0):
            return h * 2.0
        return h - 1.0


ctl = torch.jit.script(Control().double().eval())
record("control", ctl, [
    [torch.rand(1, 3, dtype=torch.float64) + 0.5],
    [torch.rand(4, 3, dtype=torch.float64) + 0.5],
    [-torch.rand(3, 3, dtype=torch.float64) - 0.5],
])


# Two inputs, a tuple of two outputs.
class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        return a + b, torch.matmul(a, self.w) * b.sum()


record("two", torch.jit.script(Two().eval()), [[torch.randn(2, 4), torch.randn(2, 4)]])


# A Dict[str, Tensor] output, with an int64 tensor in it.
class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 5)

    def forward(self, x: Tensor) -> Dict[str, Tensor]:
        logits = self.lin(x)
        return {"probs": torch.softmax(logits, -1), "label": logits.argmax(-1)}


record("named", torch.jit.script(Named().eval()), [[torch.randn(3, 4)]])


# An int64 input (token ids) into an embedding.
class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, ids: Tensor) -> Tensor:
        return self.emb(ids).sum(1)


record("embed", torch.jit.script(Embed().eval()), [[torch.tensor([[1, 2, 3], [9, 0, 4]])]])


# Real architectures: torchvision's ResNet-18 and MobileNetV3-Small (random
# seeded weights, eval mode, traced), and a 2-layer transformer encoder with
# a padding mask. Images are pixel-like values k/64 - 2: exact in float32
# and short in refs.json.
import torchvision  # noqa: E402  (only these models need it)


def image(*shape):
    return torch.randint(0, 256, shape).float() / 64 - 2


# ResNet-18. Cases 0-1 (224x224) go through every wire format; cases 2-4
# (112x112, batch sizes 1, 2, 3) are the dynamic-batching requests.
resnet = torchvision.models.resnet18().eval()
with torch.no_grad():
    record("resnet18", torch.jit.trace(resnet, image(1, 3, 64, 64)),
           [[image(2, 3, 224, 224)], [image(1, 3, 224, 224)],
            [image(1, 3, 112, 112)], [image(2, 3, 112, 112)], [image(3, 3, 112, 112)]])
del resnet

mobilenet = torchvision.models.mobilenet_v3_small().eval()
with torch.no_grad():
    record("mobilenet_v3_small", torch.jit.trace(mobilenet, image(1, 3, 64, 64)),
           [[image(1, 3, 224, 224)], [image(2, 3, 96, 96)]])
del mobilenet


# A transformer encoder over token ids with a padding mask. mask is int64 (or
# bool): 1 marks a real token, 0 padding, so the server's pad batcher, which
# pads every input with one pad_value (0), marks its padding as padding. The
# outputs at real positions do not depend on padded ones (keys are masked,
# every layer is per-token otherwise). enable_nested_tensor=False keeps the
# output as long as the input (a nested tensor comes back cut to the longest
# real sequence).
class Encoder(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 32, max_len: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        pos = torch.arange(ids.size(1), device=ids.device).unsqueeze(0)
        return self.enc(self.tok(ids) + self.pos(pos), src_key_padding_mask=mask == 0)


def tokens(n, length):
    return [torch.randint(1, 50, (n, length)), torch.ones(n, length, dtype=torch.int64)]


# Case 0 pads its second row itself (mask 0 past 4 tokens): every wire
# format. Cases 1-6 are unpadded requests of lengths 3, 7, 12, 5, 20 and 32
# (32 = d_model: the padded length of a bucket equals the hidden size).
padded = tokens(2, 6)
padded[0][1, 4:] = 0
padded[1][1, 4:] = 0
enc = torch.jit.script(Encoder().eval())
record("encoder", enc, [padded, tokens(1, 3), tokens(2, 7), tokens(1, 12), tokens(3, 5),
                        tokens(1, 20), tokens(2, 32)])
with torch.no_grad():
    # The premise of the pad batcher: real positions ignore padding.
    ids, mask = tokens(1, 5)
    alone = enc(ids, mask)
    ids9 = torch.cat([ids, torch.zeros(1, 4, dtype=torch.int64)], 1)
    mask9 = torch.cat([mask, torch.zeros(1, 4, dtype=torch.int64)], 1)
    with_pad = enc(ids9, mask9)[:, :5]
    assert torch.allclose(alone, with_pad, rtol=1e-5, atol=1e-6), (alone - with_pad).abs().max()
    assert torch.equal(enc(ids, mask.bool()), alone)

# The identity (a copy), to round-trip every dtype; and a list output.
class Ident(nn.Module):
    def forward(self, x: Tensor) -> List[Tensor]:
        return [x.clone(), x.clone()]


torch.jit.save(torch.jit.script(Ident().eval()), os.path.join(out, "ident.pt"))

# A plain checkpoint: a zip, but not TorchScript.
torch.save(mlp.state_dict(), os.path.join(out, "state_dict.pt"))

with open(os.path.join(out, "refs.json"), "w") as f:
    json.dump(refs, f)
