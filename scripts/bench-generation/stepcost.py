#!/usr/bin/env python3
"""stepcost.py MODEL_DIR [BATCHES] [PAST]: what one generation step costs
this CPU, without a server (issue 39's "what is this CPU's limit").

For an optimum text-generation-with-past export (MODEL_DIR/model.onnx, as
scripts/gen-bench-llm-models.py writes it), with ONNX Runtime (the llm
venv's) on ONE intra-op thread so that CPU time is the work done whatever
else runs on the machine:

  - a decode step (one new token per row, a past of PAST tokens, default 192)
    at each batch size of BATCHES (default 1,8,32,64): CPU ms per step, CPU
    ms per token, and the multiply-adds' rate it reaches;
  - a prefill of 256 tokens at batch 1;
  - for each, ONNX Runtime's own profile summed by operator type: the share
    of MatMul/Gemm (the matrix products), and of the last MatMul (the
    output projection to the vocabulary, which the export computes for
    every position, prompt positions included).

Prints one JSON object.
"""

import json
import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

d = sys.argv[1]
batches = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1,8,32,64").split(",")]
past = int(sys.argv[3]) if len(sys.argv) > 3 else 192
cfg = json.load(open(os.path.join(d, "config.json")))
layers = cfg.get("num_hidden_layers", cfg.get("n_layer"))
heads = cfg.get("num_attention_heads", cfg.get("n_head"))
kv = cfg.get("num_key_value_heads", heads)
hidden = cfg.get("hidden_size", cfg.get("n_embd"))
hd = hidden // heads
vocab = cfg["vocab_size"]
model = os.path.join(d, "model.onnx")


def session(profile_dir=None):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if profile_dir:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(profile_dir, "p")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


sess = session()
names = [i.name for i in sess.get_inputs()]


def feeds(b, new, p):
    rng = np.random.default_rng(1)
    f = {"input_ids": rng.integers(0, 50000, (b, new), dtype=np.int64),
         "attention_mask": np.ones((b, p + new), dtype=np.int64)}
    if "position_ids" in names:
        f["position_ids"] = np.tile(np.arange(p, p + new, dtype=np.int64), (b, 1))
    for n in names:
        if n.startswith("past_key_values"):
            f[n] = rng.standard_normal((b, kv, p, hd), dtype=np.float32)
    return f


# Multiply-adds per token of the matrix products by weights (attention's
# products with the cache are counted apart: they grow with the past).
import onnx  # noqa: E402

g = onnx.load(model, load_external_data=False).graph
inits = {i.name: i for i in g.initializer}
weights = 0
for n in g.node:
    if n.op_type in ("MatMul", "Gemm"):
        for x in n.input[1:2]:
            if x in inits:
                weights += int(np.prod(inits[x].dims))
# A tied output projection is a MatMul on the embedding's transpose, which
# the export may compute as a Transpose feeding the MatMul: count it by
# shape when it was not an initializer.
if weights < vocab * hidden:
    weights += vocab * hidden


def timed(f, n):
    sess.run(None, f)  # warm
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        sess.run(None, f)
    return (time.process_time() - c0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3


def op_profile(f):
    with tempfile.TemporaryDirectory() as tmp:
        s = session(tmp)
        s.run(None, f)
        s.run(None, f)
        path = s.end_profiling()
        ev = json.load(open(path))
    by_op, last_mm, total = {}, 0.0, 0.0
    # the second run's node events
    runs = [e for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run"]
    t_from = runs[-1]["ts"] if runs else 0
    mm = []
    for e in ev:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time") or e["ts"] < t_from:
            continue
        op = e["args"].get("op_name", "?")
        by_op[op] = by_op.get(op, 0) + e["dur"]
        total += e["dur"]
        if op in ("MatMul", "Gemm", "FusedMatMul"):
            mm.append(e)
    if mm:
        last_mm = max(mm, key=lambda e: e["ts"])["dur"]
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:6]
    mms = sum(v for k, v in by_op.items() if k in ("MatMul", "Gemm", "FusedMatMul"))
    return {"matmul_share": mms / total if total else None, "output_projection_share": last_mm / total if total else None,
            "top_ops_ms": {k: round(v / 1e3, 2) for k, v in top}}


out = {"model": d, "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv, "vocab": vocab,
       "weight_macs_per_token": weights, "past": past, "threads": 1, "onnxruntime": ort.__version__, "decode": [], "prefill": None}
for b in batches:
    f = feeds(b, 1, past)
    n = max(3, 24 // b)
    cpu, wall = timed(f, n)
    attn = 2 * layers * b * (past + 1) * heads * hd  # q.k and p.v, multiply-adds
    row = {"batch": b, "cpu_ms_per_step": round(cpu, 1), "wall_ms_per_step": round(wall, 1),
           "cpu_ms_per_token": round(cpu / b, 2), "gmacs_per_s": round((weights * b + attn) / (cpu / 1e3) / 1e9, 1)}
    row.update(op_profile(f))
    out["decode"].append(row)
    print(json.dumps(row), file=sys.stderr, flush=True)
f = feeds(1, 256, 0)
cpu, wall = timed(f, 2)
out["prefill"] = {"tokens": 256, "cpu_ms": round(cpu, 1), "cpu_ms_per_token": round(cpu / 256, 2),
                  "gmacs_per_s": round(weights * 256 / (cpu / 1e3) / 1e9, 1)}
out["prefill"].update(op_profile(f))
print(json.dumps(out, indent=1))
