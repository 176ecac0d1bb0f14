"""Tokenizes texts with Hugging Face tokenizers, for processors/textencoder's
references: reads a JSON {model: {"tokenizer": path, "max_length": N,
"texts": [...]}} on stdin, writes {model: [[ids...], ...]} (special tokens
added, truncated to max_length, no padding) on stdout."""
import json
import sys

from tokenizers import Tokenizer

out = {}
for name, spec in json.load(sys.stdin).items():
    t = Tokenizer.from_file(spec["tokenizer"])
    t.no_padding()
    t.enable_truncation(max_length=spec["max_length"])
    out[name] = [e.ids for e in t.encode_batch(spec["texts"], add_special_tokens=True)]
json.dump(out, sys.stdout)
