"""PyTorch reference for engines/decoding's logits processors.

Reads JSON cases from stdin ({"logits": [...], "prompt": [...], "output": [...],
params...}) and writes, per case, the processed distribution's probabilities,
computed as the documented semantics say: Hugging Face's
RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper and MinPLogitsWarper (min_tokens_to_keep=1), and OpenAI's
presence/frequency penalties, in vLLM's order. Written from those semantics,
not with transformers.
"""
import json
import sys

import torch


def process(c):
    x = torch.tensor(c["logits"], dtype=torch.float32)
    rp = c.get("repetition_penalty", 1.0)
    if rp != 1.0:
        ids = torch.tensor(sorted(set(c["prompt"] + c["output"])), dtype=torch.long)
        s = x[ids]
        x[ids] = torch.where(s < 0, s * rp, s / rp)
    fp, pp = c.get("frequency_penalty", 0.0), c.get("presence_penalty", 0.0)
    if fp or pp:
        counts = torch.bincount(torch.tensor(c["output"], dtype=torch.long), minlength=x.numel()).to(torch.float32)
        x = x - fp * counts - pp * (counts > 0).to(torch.float32)
    t = c.get("temperature", 1.0)
    if t != 1.0:
        x = x / t
    k = c.get("top_k", 0)
    if 0 < k < x.numel():
        kth = torch.topk(x, k)[0][-1]
        x = x.masked_fill(x < kth, float("-inf"))
    p = c.get("top_p", 1.0)
    if p < 1.0:
        sl, si = torch.sort(x, descending=False)
        cum = sl.softmax(-1).cumsum(-1)
        remove = cum <= (1 - p)
        remove[-1] = False  # keep at least one
        x = x.masked_fill(remove.scatter(0, si, remove), float("-inf"))
    mp = c.get("min_p", 0.0)
    if mp > 0:
        probs = x.softmax(-1)
        remove = probs < mp * probs.max()
        x = x.masked_fill(remove, float("-inf"))
    return x.softmax(-1).tolist()


def main():
    cases = json.load(sys.stdin)
    json.dump([process(c) for c in cases], sys.stdout)


if __name__ == "__main__":
    main()
