"""Reference BERT tokenization for engines/tokenizer's tests, by Hugging
Face tokenizers (its BertNormalizer, BertPreTokenizer and WordPiece: the
pipeline of google-research/bert's FullTokenizer), on a corpus written here.

usage: ref_bert.py OUT_DIR

OUT_DIR/vocab.txt  a WordPiece vocabulary trained by tokenizers on the corpus
                   (so that words split into several "##" pieces), with the
                   special tokens first
OUT_DIR/ref.json   {"corpus": [...], "cases": [{"lower": bool, "python_lower":
                   bool, "max_chars": int, "tokens": [[...] per text]}]}
"""
import json
import os
import sys

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.implementations import BertWordPieceTokenizer
from tokenizers.models import WordPiece

out = sys.argv[1]

words = ("the quick brown fox jumps over the lazy dog unbelievable tokenization "
         "résumé naïve café Ünïcödé straße ΟΔΟΣ σοφός ΣΊΣΥΦΟΣ İstanbul ıi "
         "北京欢迎你 東京都 한국어 ひらがな カタカナ العربية हिन्दी ไทย "
         "don't e-mail U.S.A. $100 50% a+b=c x^2 ~tilde `tick` {brace} [CLS] [SEP] [MASK]")
corpus = [
    "",
    " ",
    "Hello, World!",
    "hello   world\n\nnew\tline\r\nwindows",
    words,
    words.upper(),
    "Résumé naïve Café",
    "e\u0301cole a\u0308 n\u0303",           # combining marks
    "ΟΔΟΣ ΟΔΟΣ. ΑΣ.Β Σ ΣΑ",                   # final sigma in context
    "İSTANBUL İi",
    "北京欢迎你abc東京",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇯🇵",
    "zero\u200bwidth joiner\u200dx soft\u00adhyphen bom\ufeffhere",
    "ctrl\x00null\x01soh\x07bell\x1bescape\x7fdel\x85nel",
    "nbsp\u00a0here ideographic\u3000space em\u2003space line\u2028sep para\u2029sep",
    "full-width！？（括号）「引号」",
    "[CLS] text with [SEP] specials [MASK] [UNK] [PAD]",
    "a" * 150 + " " + "b" * 250,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "tab\tseparated\tvalues and\u000bvertical\u000cform",
    "private\ue000use and\ufffdreplacement",
    " leading and trailing ",
    "mixed日本語English한국어 text",
    "numbers 3.14159 1,000,000 2026-12-03",
    "quotes \u2018single\u2019 \u201cdouble\u201d «guillemets»",
    "math ∑ ∫ ≤ ≥ ≠ ∞ √ symbols © ® ™ °",
    ("long input " * 400).strip(),
]

trainer_text = corpus + [words.lower(), words] * 3
bert = BertWordPieceTokenizer(lowercase=True)
bert.train_from_iterator(trainer_text, vocab_size=400, min_frequency=1,
                         special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
vocab = bert.get_vocab()
cased = BertWordPieceTokenizer(lowercase=False)
cased.train_from_iterator(trainer_text, vocab_size=400, min_frequency=1,
                          special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
for tok in cased.get_vocab():
    if tok not in vocab:
        vocab[tok] = len(vocab)
ordered = sorted(vocab, key=vocab.get)
with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(ordered) + "\n")
ids = {t: i for i, t in enumerate(ordered)}

cases = []
for lower in (True, False):
    for max_chars in (100, 200):
        tok = Tokenizer(WordPiece(ids, unk_token="[UNK]", max_input_chars_per_word=max_chars))
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                    strip_accents=lower, lowercase=lower)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        cases.append({"lower": lower, "max_chars": max_chars,
                      "tokens": [tok.encode(t, add_special_tokens=False).tokens for t in corpus]})
# tokenization.py lower-cases with Python's str.lower (a final capital sigma
# becomes a final sigma); tokenizers lower-cases each character alone. The
# same pipeline on text Python lower-cased first is tokenization.py's.
tok = Tokenizer(WordPiece(ids, unk_token="[UNK]", max_input_chars_per_word=200))
tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                            strip_accents=True, lowercase=False)
tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
cases.append({"lower": True, "python_lower": True, "max_chars": 200,
              "tokens": [tok.encode(t.lower(), add_special_tokens=False).tokens for t in corpus]})

with open(os.path.join(out, "ref.json"), "w", encoding="utf-8") as f:
    json.dump({"corpus": corpus, "cases": cases}, f, ensure_ascii=False)
