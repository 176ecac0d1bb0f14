"""Small tokenizer.json files that exercise what the real ones do not
(Unigram with byte fallback, Metaspace, Whitespace, Digits, Punctuation,
Split behaviours and invert, the Unicode forms, Strip, StripAccents, Replace
by regex, Prepend, BPE's continuing prefix and end-of-word suffix, ByteLevel
with a prefix space, Bert/Roberta/template-string post-processors, added
tokens with lstrip/rstrip/single_word/normalized, padding, truncation),
trained by Hugging Face tokenizers on a corpus written here.

usage: gen_synth.py OUT_DIR   (writes OUT_DIR/NAME.json)
"""
import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
text = ("the quick brown fox jumps over the lazy dog 12345 unbelievable tokenization "
        "résumé naïve café Ünïcödé ﬁﬂ ① ㎏ ½ Ⅻ straße ΟΔΟΣ 北京欢迎你 한국어 😀 "
        "don't e-mail U.S.A. $100 50% a+b=c x^2 ~tilde `tick` {brace} -- ... !!! ??? ")
train = [text, text.lower(), text.upper()] * 5


def save(name, tok):
    tok.save(os.path.join(out, name + ".json"))


# Unigram with byte fallback, sentencepiece-style.
t = Tokenizer(models.Unigram())
t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
t.train_from_iterator(train, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>", "<mask>"], unk_token="<unk>"))
import json
j = json.loads(t.to_str())
pieces = [tuple(p) for p in j["model"]["vocab"]] + [("<0x%02X>" % b, -30.0) for b in range(256)]
t.model = models.Unigram(pieces, unk_id=0, byte_fallback=True)
t.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first"), decoders.ByteFallback(), decoders.Fuse()])
t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                                 special_tokens=[("<s>", 1), ("</s>", 2)])
t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
t.add_tokens([AddedToken("zz", normalized=True), AddedToken("[[", single_word=True), AddedToken("@@", rstrip=True)])
save("unigram", t)

# WordPiece with Whitespace, Digits, Punctuation.
t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=20))
t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True),
                                           pre_tokenizers.Punctuation(behavior="contiguous")])
t.train_from_iterator(train, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
t.decoder = decoders.WordPiece(prefix="##", cleanup=False)
t.enable_padding(direction="left", pad_id=0, pad_token="[PAD]", pad_to_multiple_of=8)
t.enable_truncation(max_length=16, strategy="only_first", direction="left")
save("wordpiece", t)

# BPE with a continuing prefix and an end-of-word suffix.
t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
t.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase(), normalizers.Strip(),
                                     normalizers.Prepend("_"), normalizers.Replace("-", " ")])
t.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.WhitespaceSplit(),
    pre_tokenizers.Split(Regex(r"\d+"), behavior="merged_with_next"),
    pre_tokenizers.Split(".", behavior="merged_with_previous"),
    pre_tokenizers.Split("'", behavior="removed"),
])
t.train_from_iterator(train, trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "<s>", "</s>"],
                                                 continuing_subword_prefix="##", end_of_word_suffix="</w>"))
t.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 1), trim_offsets=False)
t.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Strip(" ", 0, 1)])
save("bpe_suffix", t)

# Byte-level BPE with a prefix space, Roberta's offsets, NFC, split by
# contiguous runs and an inverted split.
t = Tokenizer(models.BPE())
t.normalizer = normalizers.NFC()
t.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(r"[a-z]+"), behavior="contiguous", invert=True),
    pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True),
])
t.train_from_iterator(train, trainers.BpeTrainer(vocab_size=500, special_tokens=["<s>", "</s>", "<pad>"],
                                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
t.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=True),
                                        processors.RobertaProcessing(("</s>", 1), ("<s>", 0), trim_offsets=True, add_prefix_space=True)])
t.decoder = decoders.ByteLevel()
t.add_tokens([AddedToken(" hello", normalized=False), AddedToken("fox", single_word=True, normalized=True)])
save("bytelevel", t)
