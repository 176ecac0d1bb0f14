"""tokcost.py TOKENIZER_JSON TEXTS.jsonl: microseconds per text for Hugging
Face tokenizers' encode (one thread, special tokens added), as the
benchmark's model class tokenizes each request."""
import json
import sys
import time

from tokenizers import Tokenizer

tk = Tokenizer.from_file(sys.argv[1])
tk.no_padding()
texts = [json.loads(l)["text"] for l in open(sys.argv[2]) if l.strip()]
best = None
for _ in range(3):
    t = time.perf_counter()
    for _ in range(4):
        for s in texts:
            tk.encode(s)
    d = (time.perf_counter() - t) / (4 * len(texts))
    best = d if best is None else min(best, d)
print(f"{best * 1e6:.1f}")
