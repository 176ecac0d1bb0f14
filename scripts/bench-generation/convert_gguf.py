"""convert_gguf.py CONVERT_HF_TO_GGUF HF_DIR OUT.gguf converts a transformers
checkpoint to GGUF at fp32 with llama.cpp's own convert_hf_to_gguf.py (the one
vendored in llama-cpp-python's sdist, whose path is the first argument), for
issue 39's llama.cpp peer (scripts/bench-generation/llama-cpp.sh). Run it with
the gguf-convert venv (scripts/python-venv.sh gguf-convert).

Two adaptations, neither touching a weight:
  - The converter names torch's float8 dtypes (torch.float8_e4m3fn, ...) in
    its dtype tables, which Debian's torch 1.13 does not have: each missing
    one is given a placeholder object before the converter is imported. They
    are only looked up for checkpoints stored in float8; these are float32.
  - Its GPT-2 converter reads the context length from config.json's "n_ctx",
    which transformers' GPT2Config no longer writes (it writes n_positions,
    the same number): the converter is given a copy of the directory (the
    other files linked) whose config.json also has n_ctx = n_positions."""

import json
import os
import runpy
import sys
import tempfile

import torch


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[0])
    script, hf_dir, out = sys.argv[1:]
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {"__repr__": lambda self, n=name: "torch." + n})())
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        src = hf_dir
        if "n_positions" in cfg and "n_ctx" not in cfg:
            src = os.path.join(tmp, "model")
            os.makedirs(src)
            for entry in os.listdir(hf_dir):
                if entry != "config.json":
                    os.symlink(os.path.abspath(os.path.join(hf_dir, entry)), os.path.join(src, entry))
            with open(os.path.join(src, "config.json"), "w") as f:
                json.dump(dict(cfg, n_ctx=cfg["n_positions"]), f, indent=1)
        sys.argv = [script, "--outtype", "f32", "--outfile", out, src]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
