"""Writes EasyNLP-layout model directories for the easynlp processor's
tests, and the answers EasyNLP's predictors give for the test requests.

Each app's directory holds what EasyNLP's save leaves: config.json,
pytorch_model.bin (a torch.save'd state_dict with EasyNLP's keys:
backbone.embeddings..., classifier.*; one with LayerNorm gamma/beta, one in
float16, one in bfloat16) or model.safetensors (written by hand: a length,
a JSON header, the bytes), vocab.txt and label_mapping.json. The weights are
random (seeded), the encoders tiny (2 layers, hidden 32).

The reference pipeline is written here, independent of the Go code:
tokenization is Hugging Face's slow BertTokenizer's algorithm (special
tokens kept whole, clean, CJK spaced, lower-cased with accents stripped,
punctuation split, greedy WordPiece with 100 characters a word at most) in
plain Python; the encoder is BERT/RoBERTa in plain torch (RoBERTa's
positions from padding_idx+1); post-processing is that of EasyNLP's appzoo
predictors (sequence_classification, text_match, sequence_labeling,
feature_vectorization), numpy float32 strings included.

usage: /usr/bin/python3 gen_apps.py OUTDIR   (writes OUTDIR/<app>/ and OUTDIR/ref.json)
"""
import collections
import json
import math
import os
import struct
import sys
import unicodedata

import numpy as np
import torch

OUT = sys.argv[1]
torch.manual_seed(20240601)

# ---------------------------------------------------------------- vocabulary
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "movie", "was", "great", "hello", "good", "bad", "day", "caf", "de", "vu", "a", "b", "x",
         "new", "line", "tab", "is", "not", "what", "this", "film", "really", "awful", "fun", "play", "##s",
         "##ing", "##e", "##ja", "##ed", "##ly", "alibaba", "hang", "##zhou", "li", "lei", "lives", "in",
         "我", "爱", "北", "京", "天", "安", "门", "杭", "州", "马", "云", "在", "工", "作"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
VOCAB = SPECIAL + PUNCT + LETTERS + ["##" + c for c in LETTERS] + WORDS
VOCAB = list(dict.fromkeys(VOCAB))
IDS = {t: i for i, t in enumerate(VOCAB)}


def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c).startswith("C")


def is_punct(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic(text):
    text = "".join(" " if is_whitespace(c) else c for c in text
                   if not (ord(c) == 0 or ord(c) == 0xFFFD or is_control(c)))
    text = "".join(" %s " % c if is_cjk(ord(c)) else c for c in text)
    out = []
    for tok in text.split():
        tok = tok.lower()
        tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        cur = []
        for c in tok:
            if is_punct(c):
                if cur:
                    out.append("".join(cur))
                    cur = []
                out.append(c)
            else:
                cur.append(c)
        if cur:
            out.append("".join(cur))
    return out


def wordpiece(word):
    if len(word) > 100:
        return ["[UNK]"]
    out, start = [], 0
    while start < len(word):
        end, cur = len(word), None
        while start < end:
            sub = word[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in IDS:
                cur = sub
                break
            end -= 1
        if cur is None:
            return ["[UNK]"]
        out.append(cur)
        start = end
    return out


def tokenize(text):
    """BertTokenizer.tokenize: special tokens kept whole, the rest basic + WordPiece."""
    parts, i, start = [], 0, 0
    while i < len(text):
        hit = next((s for s in sorted(SPECIAL, key=len, reverse=True) if text.startswith(s, i)), None)
        if hit:
            parts.append((text[start:i], False))
            parts.append((hit, True))
            i += len(hit)
            start = i
        else:
            i += 1
    parts.append((text[start:], False))
    toks = []
    for p, sp in parts:
        if sp:
            toks.append(p)
        else:
            for w in basic(p):
                toks.extend(wordpiece(w))
    return toks


def encode(a, b, max_len):
    """tokenizer(a, b, padding='max_length', truncation=True, max_length=max_len)."""
    ia = [IDS[t] for t in tokenize(a)]
    ib = [IDS[t] for t in tokenize(b)] if b is not None else None
    if ib is None:
        ia = ia[:max_len - 2]
        ids = [IDS["[CLS]"]] + ia + [IDS["[SEP]"]]
        types = [0] * len(ids)
    else:
        while len(ia) + len(ib) > max_len - 3:
            if len(ia) > len(ib):
                ia = ia[:-1]
            else:
                ib = ib[:-1]
        ids = [IDS["[CLS]"]] + ia + [IDS["[SEP]"]] + ib + [IDS["[SEP]"]]
        types = [0] * (len(ia) + 2) + [1] * (len(ib) + 1)
    mask = [1] * len(ids)
    pad = max_len - len(ids)
    return ids + [IDS["[PAD]"]] * pad, mask + [0] * pad, types + [0] * pad


# ---------------------------------------------------------------- the model
H, LAYERS, HEADS, INTER = 32, 2, 4, 64


def config(model_type):
    c = {"model_type": model_type, "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
         "intermediate_size": INTER, "vocab_size": len(VOCAB) + 3, "hidden_act": "gelu",
         "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
         "architectures": ["BertModel" if model_type == "bert" else "RobertaModel"]}
    if model_type == "bert":
        c.update(max_position_embeddings=128, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0)
    else:
        c.update(max_position_embeddings=66, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)
    return c


def rnd(*shape, s=0.2):
    return torch.randn(*shape) * s


def backbone(cfg):
    sd = collections.OrderedDict()
    p = "backbone."
    sd[p + "embeddings.word_embeddings.weight"] = rnd(cfg["vocab_size"], H, s=0.5)
    sd[p + "embeddings.position_embeddings.weight"] = rnd(cfg["max_position_embeddings"], H, s=0.5)
    sd[p + "embeddings.token_type_embeddings.weight"] = rnd(cfg["type_vocab_size"], H, s=0.5)
    sd[p + "embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"]).expand(1, -1)

    def ln(name):
        sd[name + ".weight"] = 1 + rnd(H, s=0.1)
        sd[name + ".bias"] = rnd(H, s=0.1)

    def lin(name, i, o):
        sd[name + ".weight"] = rnd(o, i, s=1 / math.sqrt(i))
        sd[name + ".bias"] = rnd(o, s=0.1)

    ln(p + "embeddings.LayerNorm")
    for l in range(LAYERS):
        q = p + "encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            lin(q + "attention.self." + n, H, H)
        lin(q + "attention.output.dense", H, H)
        ln(q + "attention.output.LayerNorm")
        lin(q + "intermediate.dense", H, INTER)
        lin(q + "output.dense", INTER, H)
        ln(q + "output.LayerNorm")
    lin(p + "pooler.dense", H, H)
    return sd


def forward(sd, cfg, ids, mask, types):
    """The encoder: (sequence_output, pooler_output)."""
    p = "backbone."
    g = lambda n: sd[n].float()
    ids, mask, types = torch.tensor(ids), torch.tensor(mask), torch.tensor(types)
    if cfg["model_type"] == "roberta":
        pos = torch.cumsum(mask, 1) * mask + cfg["pad_token_id"]
    else:
        pos = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids)
    eps = cfg["layer_norm_eps"]
    lnf = lambda x, n: torch.nn.functional.layer_norm(x, (H,), g(n + ".weight"), g(n + ".bias"), eps)
    lin = lambda x, n: torch.nn.functional.linear(x, g(n + ".weight"), g(n + ".bias"))
    h = g(p + "embeddings.word_embeddings.weight")[ids] + g(p + "embeddings.position_embeddings.weight")[pos] \
        + g(p + "embeddings.token_type_embeddings.weight")[types]
    h = lnf(h, p + "embeddings.LayerNorm")
    ext = (1.0 - mask[:, None, None, :].float()) * -10000.0
    B, S = ids.shape
    dh = H // HEADS
    for l in range(LAYERS):
        q = p + "encoder.layer.%d." % l
        split = lambda x: x.view(B, S, HEADS, dh).permute(0, 2, 1, 3)
        Q, K, V = (split(lin(h, q + "attention.self." + n)) for n in ("query", "key", "value"))
        sc = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(dh) + ext
        ctx = torch.matmul(torch.softmax(sc, -1), V).permute(0, 2, 1, 3).reshape(B, S, H)
        attn = lnf(lin(ctx, q + "attention.output.dense") + h, q + "attention.output.LayerNorm")
        inter = torch.nn.functional.gelu(lin(attn, q + "intermediate.dense"))
        h = lnf(lin(inter, q + "output.dense") + attn, q + "output.LayerNorm")
    pooled = torch.tanh(lin(h[:, 0], p + "pooler.dense"))
    return h, pooled


# ---------------------------------------------------------------- saving
def save_bin(sd, path, dtype=None, gamma=False):
    out = collections.OrderedDict()
    for k, v in sd.items():
        if dtype is not None and v.is_floating_point():
            v = v.to(dtype)
        if gamma and "LayerNorm" in k:
            k = k.replace(".weight", ".gamma").replace(".bias", ".beta")
        out[k] = v
    torch.save(out, path)
    # The reference runs the weights as saved (rounded to dtype).
    for k in sd:
        if dtype is not None and sd[k].is_floating_point():
            sd[k] = sd[k].to(dtype).float()


def save_safetensors(sd, path):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    codes = {torch.float32: "F32", torch.int64: "I64"}
    for k, v in sd.items():
        b = v.contiguous().numpy().tobytes()
        header[k] = {"dtype": codes[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---------------------------------------------------------------- EasyNLP's predictors
def max_seq_length(records, default):
    m = -1
    for r in records:
        if "sequence_length" not in r:
            break
        m = max(m, r["sequence_length"])
    return default if m == -1 else m


def one_or_list(results):
    return results[0] if len(results) == 1 else results


def classify(app, records, default_len, multi=False, threshold=0.5):
    L = max_seq_length(records, default_len)
    feats = [encode(r["first_sequence"], r.get("second_sequence"), L) for r in records]
    h, pooled = forward(app["sd"], app["cfg"], *[[f[i] for f in feats] for i in range(3)])
    logits = torch.nn.functional.linear(pooled, app["sd"]["classifier.weight"].float(), app["sd"]["classifier.bias"].float())
    probs = torch.sigmoid(logits) if multi else torch.softmax(logits, -1)
    probs, logits = probs.detach().numpy(), logits.detach().numpy()
    labels = app["labels"]
    out = []
    for b, preds in enumerate(np.argsort(-probs, axis=-1, kind="stable")):
        o = [{"pred": labels[p], "prob": float(probs[b][p]), "logit": float(logits[b][p])} for p in preds]
        pred = o[0]["pred"]
        if multi:
            pred = ",".join(labels[p] for p in preds if probs[b][p] > threshold)
        out.append({"id": records[b].get("id"), "output": o, "predictions": pred,
                    "probabilities": ",".join(str(t) for t in probs[b]),
                    "logits": ",".join(str(t) for t in logits[b])})
    return one_or_list(out)


def two_tower(app, records, default_len):
    L = max_seq_length(records, default_len)
    feats = [encode(r["first_sequence"], r.get("second_sequence"), L) for r in records]
    h, pooled = forward(app["sd"], app["cfg"], *[[f[i] for f in feats] for i in range(3)])
    emb = torch.nn.functional.linear(pooled, app["sd"]["emb_layer.weight"], app["sd"]["emb_layer.bias"]).detach().numpy()
    return one_or_list([{"emb_output": ",".join(str(t) for t in e)} for e in emb])


def vectorize(app, records, default_len):
    L = max_seq_length(records, default_len)
    feats = [encode(r["first_sequence"], r.get("second_sequence"), L) for r in records]
    h, pooled = forward(app["sd"], app["cfg"], *[[f[i] for f in feats] for i in range(3)])
    h, pooled = h.detach().numpy(), pooled.detach().numpy()
    out = []
    for b in range(len(records)):
        out.append({"id": records[b].get("id"),
                    "pooler_output": ",".join(str(t) for t in pooled[b]),
                    "first_token_output": ",".join(str(t) for t in h[b, 0]),
                    "all_hidden_outputs": ";".join(",".join(str(t) for t in item) for item in h[b, 1:])})
    return one_or_list(out)


def labeling(app, records, default_len):
    L = max_seq_length(records, default_len)
    rows, all_tokens = [], []
    for r in records:
        content = " ".join(r["first_sequence"]).split(" ")
        toks = ["[CLS]"]
        for t in content:
            sub = tokenize(t) or ["[UNK]"]
            toks.extend(sub)
        toks = toks[:L - 1] + ["[SEP]"]
        ids = [IDS[t] for t in toks]
        n = len(ids)
        rows.append((ids + [0] * (L - n), [1] * n + [0] * (L - n), [0] * L))
        all_tokens.append(toks)
    h, _ = forward(app["sd"], app["cfg"], *[[f[i] for f in rows] for i in range(3)])
    logits = torch.nn.functional.linear(h, app["sd"]["classifier.weight"].float(), app["sd"]["classifier.bias"].float())
    preds = torch.argmax(logits, -1).numpy()
    out = []
    for b, (raw, tokens) in enumerate(zip(preds, all_tokens)):
        tags = [app["labels"][t] for t in raw]
        words, i = [], 0
        while i < len(tokens):
            if tags[i].startswith("B") and tokens[i] not in ["[CLS]", "[SEP]"]:
                typ = tags[i].split("-")[-1]
                st = i
                i += 1
                while i < len(tokens) and tags[i] == "I-" + typ and tokens[i] != "[SEP]":
                    i += 1
                words.append({"word": "".join(tokens[st:i]), "tag": typ, "start": st - 1, "end": i - 1})
            else:
                i += 1
        out.append({"id": records[b].get("id"), "output": words, "predictions": " ".join(tags)})
    return one_or_list(out)


# ---------------------------------------------------------------- the apps
TEXTS = ["hello", "The movie was GREAT!", "Café déjà vu", "我爱北京天安门", "good 😀 day", "a [SEP] b [MASK] [cls]",
         "", "tab\tnew\nline\u0000x\u200bend", "this film is really really really awful, not fun at all; what a day " * 3,
         "Ma Yun lives in Hangzhou and works at Alibaba", "马云在杭州工作"]


def app_dir(name, model_type, labels, head, save):
    cfg = config(model_type)
    sd = backbone(cfg)
    if head == "classifier":
        sd["classifier.weight"] = rnd(len(labels), H, s=0.5)
        sd["classifier.bias"] = rnd(len(labels), s=0.3)
    elif head == "emb":
        sd["emb_layer.weight"] = rnd(24, H, s=0.3)
        sd["emb_layer.bias"] = rnd(24, s=0.1)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    if labels:
        json.dump({l: i for i, l in enumerate(labels)}, open(os.path.join(d, "label_mapping.json"), "w"))
    save(sd, d)
    return {"sd": sd, "cfg": cfg, "labels": labels}


ref = collections.OrderedDict()


def add(name, mc, app, fn, records_list, lists):
    ref[name] = {"model_config": mc, "requests": [], "answers": []}
    for records in records_list + lists:
        ref[name]["requests"].append(records if isinstance(records, list) and len(records) > 1 else records[0])
        ref[name]["answers"].append(fn(app, records))


singles = [[{"first_sequence": t}] for t in TEXTS]
singles[1][0]["id"] = "review-1"
singles[3][0]["sequence_length"] = 8
singles[9][0]["id"] = 42
mixed = [{"first_sequence": t, "sequence_length": 12 + i} for i, t in enumerate(TEXTS[:4])] + [{"first_sequence": "no length"}]

tc = app_dir("text_classify", "bert", ["negative", "positive", "neutral"], "classifier",
             lambda sd, d: save_bin(sd, os.path.join(d, "pytorch_model.bin"), gamma=True))
add("text_classify", {"app_name": "text_classify", "type": "text_classify"}, tc,
    lambda a, r: classify(a, r, 128), singles, [mixed, [{"first_sequence": t} for t in TEXTS]])

tm = app_dir("text_classify_multi", "bert", ["sports", "tech", "food", "travel"], "classifier",
             lambda sd, d: save_safetensors(sd, os.path.join(d, "model.safetensors")))
add("text_classify_multi", {"type": "text_classify_multi", "sequence_length": 32}, tm,
    lambda a, r: classify(a, r, 32, multi=True), singles, [[{"first_sequence": t} for t in TEXTS[:5]]])

pairs = [[{"first_sequence": a, "second_sequence": b}] for a, b in zip(TEXTS, TEXTS[1:] + TEXTS[:1])]
pairs.append([{"first_sequence": "only one text"}])
pairs.append([{"first_sequence": TEXTS[8], "second_sequence": "short", "sequence_length": 20}])
mt = app_dir("text_match", "bert", ["0", "1"], "classifier",
             lambda sd, d: save_bin(sd, os.path.join(d, "pytorch_model.bin"), dtype=torch.float16))
add("text_match", {"app_name": "text_match", "type": "text_match", "sequence_length": 32}, mt,
    lambda a, r: classify(a, r, 32), pairs, [[p[0] for p in pairs[:6]]])

tt = app_dir("text_match_two_tower", "bert", ["0", "1"], "emb",
             lambda sd, d: save_bin(sd, os.path.join(d, "pytorch_model.bin")))
add("text_match_two_tower", {"type": "text_match", "sequence_length": 32}, tt,
    lambda a, r: two_tower(a, r, 32), singles[:6], [[s[0] for s in singles[:4]]])

sl = app_dir("sequence_labeling", "bert", ["O", "B-LOC", "I-LOC", "B-PER", "I-PER", "B-ORG", "I-ORG"], "classifier",
             lambda sd, d: save_bin(sd, os.path.join(d, "pytorch_model.bin")))
# Bias the head towards B-/I- tags so that entities appear.
sl["sd"]["classifier.bias"] = torch.tensor([0.0, 0.6, 0.9, 0.5, 0.8, 0.4, 0.7])
save_bin(sl["sd"], os.path.join(OUT, "sequence_labeling", "pytorch_model.bin"))
add("sequence_labeling", {"type": "sequence_labeling", "sequence_length": 24}, sl,
    lambda a, r: labeling(a, r, 24), singles, [mixed])

vr = app_dir("vectorization_roberta", "roberta", None, None,
             lambda sd, d: save_bin(sd, os.path.join(d, "pytorch_model.bin"), dtype=torch.bfloat16))
add("vectorization_roberta", {"type": "vectorization", "sequence_length": 12}, vr,
    lambda a, r: vectorize(a, r, 12), singles, [mixed])

rc = app_dir("text_classify_roberta", "roberta", ["a", "b", "c", "d", "e"], "classifier",
             lambda sd, d: save_bin(sd, os.path.join(d, "pytorch_model.bin")))
json.dump({"sequence_length": 40}, open(os.path.join(OUT, "text_classify_roberta", "train_config.json"), "w"))
add("text_classify_roberta", {"app_name": "text_classify", "type": "text_classify"}, rc,
    lambda a, r: classify(a, r, 40), singles, [[{"first_sequence": t} for t in TEXTS]])

json.dump(ref, open(os.path.join(OUT, "ref.json"), "w"), ensure_ascii=False, indent=1)
