"""The reference of processors/llm's acceptance test: transformers' greedy
generate() for each request of a JSON file (the same file openai_client.py
reads), on a model directory's PyTorch weights, with end-of-text not
stopping generation (ignore_eos). Chat requests are rendered by
apply_chat_template(add_generation_prompt=True), completion prompts encoded
with their special tokens, as the server does.

usage: python transformers_greedy.py MODEL_DIR REQUESTS.json > EXPECTED.json
MODEL_DIR holds the transformers checkpoint (config.json and weights) and
the tokenizer files.
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    model_dir, reqs = sys.argv[1], json.load(open(sys.argv[2]))["requests"]
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # ignore_eos: end-of-text does not stop
    out = []
    for r in reqs:
        if r["kind"] == "chat":
            ids = tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=True)
        else:
            ids = tok(r["prompt"]).input_ids
        x = torch.tensor([ids])
        with torch.no_grad():
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=r["max_tokens"],
                               do_sample=False, pad_token_id=0)
        out.append({"prompt_ids": ids, "ids": y[0, len(ids):].tolist()})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
