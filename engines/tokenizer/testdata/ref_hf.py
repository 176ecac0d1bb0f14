"""Reference encodings for engines/tokenizer's tokenizer.json tests, by
Hugging Face tokenizers, on a corpus written here.

usage: ref_hf.py OUT_JSON NAME=SPEC...

SPEC is a tokenizer.json path, or bert-vocab:VOCAB_TXT (BertWordPieceTokenizer,
lower-cased) or gpt2:ENCODER_JSON,VOCAB_BPE (GPT-2's files as the Go side's
NewGPT2Tokenizer builds them). OUT_JSON: {"corpus": [...], "pairs": [[i, j]],
"tokenizers": {NAME: {"cases": [{"text": i, "pair": j or -1, "special":
bool, "trunc": null or {...}, "ids", "tokens", "offsets", "type_ids",
"special_tokens_mask", "decoded", "decoded_skip"}]}}}. Offsets are
tokenizers' Python ones: characters (code points) of the text.
"""
import json
import os
import sys

from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, AddedToken
from tokenizers.implementations import BertWordPieceTokenizer
from tokenizers.models import BPE

# The corpus (ASCII, accents, combining marks, CJK, emoji and other 4-byte
# UTF-8, runs of whitespace and newlines, control and format characters,
# special tokens inside text, empty strings, long inputs) is testdata/corpus.json,
# which the Go benchmarks read too.
corpus = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.json"), encoding="utf-8"))
pairs = [(2, 6), (4, 8), (0, 2), (23, 16), (15, 4)]
truncs = [
    {"max_length": 8, "strategy": "longest_first", "direction": "right"},
    {"max_length": 12, "strategy": "only_first", "direction": "left"},
    {"max_length": 20, "strategy": "only_second", "direction": "right"},
]


def load(spec):
    if spec.startswith("bert-vocab:"):
        return BertWordPieceTokenizer(spec[len("bert-vocab:"):], lowercase=True)._tokenizer
    if spec.startswith("gpt2:"):
        vocab, merges = spec[len("gpt2:"):].split(",")
        t = Tokenizer(BPE.from_file(vocab, merges))
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.post_processor = processors.ByteLevel(trim_offsets=True, add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        if t.token_to_id("<|endoftext|>") is not None:
            t.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
        return t
    return Tokenizer.from_file(spec)


def case(tok, text, pair, special, trunc):
    tok.no_truncation()
    tok.no_padding()
    if trunc:
        tok.enable_truncation(**trunc)
    try:
        e = tok.encode(corpus[text], corpus[pair] if pair >= 0 else None, add_special_tokens=special)
    except Exception as ex:  # a truncation the sequence cannot take
        return {"text": text, "pair": pair, "special": special, "trunc": trunc, "error": str(ex)}
    return {"text": text, "pair": pair, "special": special, "trunc": trunc,
            "ids": e.ids, "tokens": e.tokens, "offsets": e.offsets, "type_ids": e.type_ids,
            "special_tokens_mask": e.special_tokens_mask, "word_ids": [-1 if w is None else w for w in e.word_ids],
            "decoded": tok.decode(e.ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(e.ids, skip_special_tokens=True)}


out = {"corpus": corpus, "pairs": pairs, "tokenizers": {}}
for arg in sys.argv[2:]:
    name, spec = arg.split("=", 1)
    tok = load(spec)
    trunc0 = tok.truncation
    pad0 = tok.padding
    cases = []
    for i in range(len(corpus)):
        for special in (False, True):
            cases.append(case(tok, i, -1, special, None))
    for i, j in pairs:
        cases.append(case(tok, i, j, True, None))
        for t in truncs:
            cases.append(case(tok, i, j, True, t))
    for t in truncs[:2]:
        cases.append(case(tok, 4, -1, True, t))
    # Incremental decoding: the chunks DecodeStream gives id by id.
    from tokenizers.decoders import DecodeStream
    stream = []
    for i in (2, 4, 9, 13, 17):
        tok.no_truncation()
        tok.no_padding()
        ids = tok.encode(corpus[i], add_special_tokens=True).ids
        for skip in (False, True):
            ds = DecodeStream(skip_special_tokens=skip)
            chunks = []
            for id_ in ids:
                c = ds.step(tok, id_)
                chunks.append("" if c is None else c)
            stream.append({"ids": ids, "skip": skip, "chunks": chunks})
    out["tokenizers"][name] = {"cases": cases, "stream": stream}
    # The file's own truncation and padding.
    if trunc0 or pad0:
        tok.no_truncation()
        if trunc0:
            tok.enable_truncation(max_length=trunc0["max_length"], strategy=trunc0["strategy"], direction=trunc0["direction"])
        if pad0:
            tok.enable_padding(**{k: v for k, v in pad0.items() if k in ("direction", "pad_id", "pad_type_id", "pad_token", "length", "pad_to_multiple_of")})
        own = []
        for i in (2, 4, 23):
            e = tok.encode(corpus[i])
            own.append({"text": i, "ids": e.ids, "attention_mask": e.attention_mask})
        out["tokenizers"][name]["own"] = own
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False)
