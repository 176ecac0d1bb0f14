"""llama_tokens.py GGUF REF.json: llama.cpp's greedy tokens for reference.py's
requests, in-process through llama-cpp-python's Llama (the library the
llama-cpp venv's wheel holds: the same build the server runs), each prompt
alone: evaluate the prompt, take the argmax of the last logits, feed it back.
Compared with transformers' tokens by check_peer.compare (a differing token
within float tolerance is a tie). Exit status 1 on a mismatch."""

import json
import os
import sys

import llama_cpp
import numpy as np
from llama_cpp import Llama

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_peer import compare  # noqa: E402


def last_logits(llm):
    """The logits of the last token evaluated (the context keeps only
    those without logits_all)."""
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))


def main():
    gguf, ref_path = sys.argv[1:3]
    with open(ref_path) as f:
        refs = json.load(f)["requests"]
    n_ctx = max(len(r["prompt"]) + r["max_tokens"] for r in refs)
    threads = int(os.environ.get("THREADS", "2"))
    llm = Llama(model_path=gguf, n_ctx=n_ctx, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
    counts, failures = {}, 0
    for r in refs:
        llm.reset()
        llm.eval(r["prompt"])
        got = []
        for _ in range(r["max_tokens"]):
            t = int(np.argmax(last_logits(llm)))
            got.append(t)
            llm.eval([t])
        status, detail = compare(r, got)
        counts[status] = counts.get(status, 0) + 1
        failures += status == "mismatch"
        print(f"in-process request {r['index']} (prompt {len(r['prompt'])} tokens): {status}: {detail}")
    print(f"llama.cpp in-process: {len(refs)} requests: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print("llama_tokens: " + ("FAILED" if failures else "ok") + f" ({failures} failing answers)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
