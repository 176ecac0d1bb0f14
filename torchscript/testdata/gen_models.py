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

  /usr/bin/python3 torchscript/testdata/gen_models.py --examples examples \
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


# The identity (a copy), to round-trip every dtype; and a list output.
class Ident(nn.Module):
    def forward(self, x: Tensor) -> List[Tensor]:
        return [x.clone(), x.clone()]


torch.jit.save(torch.jit.script(Ident().eval()), os.path.join(out, "ident.pt"))

# A plain checkpoint: a zip, but not TorchScript.
torch.save(mlp.state_dict(), os.path.join(out, "state_dict.pt"))

with open(os.path.join(out, "refs.json"), "w") as f:
    json.dump(refs, f)
