"""Writes checkpoints for ckpt's tests: torch.save'd state_dicts (zip
format) of float32 (contiguous, a transposed view, a slice at an offset of a
shared storage), float16, bfloat16 and an int64 buffer, a safetensors file of
the same written by hand (the format is a length, a JSON header and the
bytes), and want.json with every float tensor's values.

usage: /usr/bin/python3 gen_ckpt.py OUTDIR
"""
import collections
import json
import os
import struct
import sys

import torch

out = sys.argv[1]
torch.manual_seed(7)
base = torch.randn(4, 6)
sd = collections.OrderedDict()
sd["backbone.embeddings.word_embeddings.weight"] = torch.randn(5, 3)
sd["t.transposed"] = base.t()                 # strides (1, 6)
sd["t.slice"] = base[1:3, 2:5]                # offset 8, strides (6, 1)
sd["t.half"] = torch.randn(2, 3).half()
sd["t.bf16"] = torch.randn(3).bfloat16()
sd["t.scalar"] = torch.tensor(2.5)
sd["backbone.embeddings.position_ids"] = torch.arange(4).expand(1, -1)
sd["LayerNorm.gamma"] = torch.ones(3)
sd._metadata = collections.OrderedDict([("", {"version": 1})])
torch.save(sd, os.path.join(out, "model.bin"))

# A Parameter, as torch.save(model.state_dict()) of a module holding one
# keeps it when keep_vars=True.
p = collections.OrderedDict(w=torch.nn.Parameter(torch.randn(2, 2)))
torch.save(p, os.path.join(out, "param.bin"))

want = {}
for k, v in list(sd.items()) + list(p.items()):
    if v.is_floating_point():
        want[k] = {"shape": list(v.shape), "data": v.detach().float().reshape(-1).tolist()}
json.dump(want, open(os.path.join(out, "want.json"), "w"))

# safetensors of the float tensors (made contiguous, as the format stores).
header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
codes = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}
for k, v in sd.items():
    v = v.contiguous()
    if v.dtype == torch.bfloat16:
        b = v.view(torch.int16).numpy().tobytes()
    else:
        b = v.numpy().tobytes()
    header[k] = {"dtype": codes[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
