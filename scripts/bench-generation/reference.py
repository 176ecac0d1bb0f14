"""reference.py --model HF_DIR --workload W.jsonl [--n 8] [--max-tokens 32] -o REF.json
computes transformers' greedy answers to the first N requests of a generation
workload (issue 39's JSONL: {"prompt": [ids], "max_tokens": N}), each prompt
alone, end-of-text ignored, for the peers' correctness checks
(check_peer.py, ortgenai_run.py --reference). Run it with the llm venv
(scripts/python-venv.sh llm).

Each answer is the plain argmax of the logits, step by step with
transformers' key/value cache (what generate(do_sample=False) computes with no
logits processor), for min(max_tokens, --max-tokens) steps. With each token it
records the gap between the best and second-best logit and the largest
|logit|: a peer may pick another token only where that gap is within float
tolerance (peercheck.py says how much).

REF.json: {"model": HF_DIR, "requests": [{"index", "prompt", "max_tokens",
"tokens", "gaps", "maxabs", "text"}]}, "text" being the tokenizer's decoding of
the tokens (for servers that answer text only)."""

import argparse
import json
import os
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

transformers.logging.set_verbosity_error()


def read_workload(path, n):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
            if len(out) == n:
                break
    return out


def greedy(model, prompt, steps):
    tokens, gaps, maxabs = [], [], []
    x = torch.tensor([prompt], dtype=torch.long)
    past = None
    with torch.no_grad():
        for _ in range(steps):
            out = model(x, past_key_values=past, use_cache=True)
            past = out.past_key_values
            row = out.logits[0, -1].float()
            top = torch.topk(row, 2)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            maxabs.append(float(row.abs().max()))
            x = top.indices[:1].view(1, 1)
    return tokens, gaps, maxabs


def main():
    ap = argparse.ArgumentParser(description="transformers' greedy answers to a workload's first requests")
    ap.add_argument("--model", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32, help="at most this many tokens per answer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32).eval()
    reqs = []
    for i, r in enumerate(read_workload(args.workload, args.n)):
        steps = min(int(r["max_tokens"]), args.max_tokens)
        tokens, gaps, maxabs = greedy(model, r["prompt"], steps)
        reqs.append({"index": i, "prompt": r["prompt"], "max_tokens": steps, "tokens": tokens, "gaps": gaps,
                     "maxabs": maxabs, "text": tok.decode(tokens, skip_special_tokens=False)})
    with open(args.out, "w") as f:
        json.dump({"model": os.path.abspath(args.model), "requests": reqs}, f)
    print(f"reference.py: {len(reqs)} answers of {args.model} in {args.out}")


if __name__ == "__main__":
    main()
