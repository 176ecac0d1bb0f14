"""Hugging Face tokenizers' single-thread encoding throughput on
testdata/corpus.json, for scripts/bench-tokenizers.sh.

usage: bench_hf.py NAME=SPEC...   (SPEC as ref_hf.py's)
prints one line per tokenizer: NAME MB/s (MB = 10^6 bytes of UTF-8 text)
"""
import json
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors  # noqa: E402
from tokenizers.implementations import BertWordPieceTokenizer  # noqa: E402
from tokenizers.models import BPE  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
corpus = json.load(open(os.path.join(here, "corpus.json"), encoding="utf-8"))
size = sum(len(s.encode("utf-8")) for s in corpus)


def load(spec):
    if spec.startswith("bert-vocab:"):
        return BertWordPieceTokenizer(spec[len("bert-vocab:"):], lowercase=True)._tokenizer
    if spec.startswith("gpt2:"):
        vocab, merges = spec[len("gpt2:"):].split(",")
        t = Tokenizer(BPE.from_file(vocab, merges))
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.post_processor = processors.ByteLevel(trim_offsets=True, add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        t.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
        return t
    return Tokenizer.from_file(spec)


for arg in sys.argv[1:]:
    name, spec = arg.split("=", 1)
    tok = load(spec)
    tok.no_truncation()
    tok.no_padding()
    for s in corpus:  # warm the caches
        tok.encode(s)
    n, start = 0, time.perf_counter()
    while True:
        for s in corpus:
            tok.encode(s)
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed > 2:
            break
    print(f"{name} {n * size / elapsed / 1e6:.2f}", flush=True)
