"""Models and PyTorch references for processors/textencoder's tests.

  /usr/bin/python3 gen_models.py write OUTDIR
      OUTDIR/bert/            a random tiny BERT as a Hugging Face directory:
                              config.json, model.safetensors, tokenizer.json
      OUTDIR/onnx/            the same encoder exported by torch.onnx.export
                              (model.onnx: input_ids, attention_mask,
                              token_type_ids -> last_hidden_state) beside the
                              same tokenizer.json and config.json, as optimum
                              exports
      OUTDIR/classifier/      a BertForSequenceClassification-keyed
                              checkpoint (bert.*, classifier.*) with id2label
  /usr/bin/python3 gen_models.py ref OUTDIR [MINILM_DIR]
      reads OUTDIR/ids.json ({model: [[ids...], ...]}: the texts tokenized by
      Hugging Face tokenizers, each alone) and writes OUTDIR/ref.json: per
      model and text, the embedding (mean pooling over the text's tokens, L2
      normalized, as sentence-transformers' Pooling + Normalize) or the
      classifier's softmax probabilities.

The encoder is BERT in plain torch (no transformers), weights read from
model.safetensors by hand (8-byte header length, JSON header, raw data).
"""
import json
import math
import os
import struct
import sys

import torch

torch.manual_seed(20240917)
H, LAYERS, HEADS, INTER = 32, 2, 4, 64
LABELS = ["negative", "neutral", "positive"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + \
    [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)] + \
    ["the", "movie", "was", "great", "hello", "world", "good", "bad", "day", "cafe", "is", "not", "fun",
     "##s", "##ing", "##ed", "我", "爱", "北", "京"]


def config(extra=None):
    c = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": H, "num_hidden_layers": LAYERS,
         "num_attention_heads": HEADS, "intermediate_size": INTER, "vocab_size": len(VOCAB),
         "max_position_embeddings": 64, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
         "pad_token_id": 0}
    c.update(extra or {})
    return c


def tokenizer_json():
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(VOCAB[:5])],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(VOCAB)}},
    }


def rnd(*shape, s=0.2):
    return (torch.randn(*shape) * s).float()


def bert_weights(prefix):
    sd = {}
    sd[prefix + "embeddings.word_embeddings.weight"] = rnd(len(VOCAB), H)
    sd[prefix + "embeddings.position_embeddings.weight"] = rnd(64, H)
    sd[prefix + "embeddings.token_type_embeddings.weight"] = rnd(2, H)

    def ln(n):
        sd[n + ".weight"] = 1 + rnd(H, s=0.1)
        sd[n + ".bias"] = rnd(H, s=0.1)

    def lin(n, i, o):
        sd[n + ".weight"] = rnd(o, i, s=1 / math.sqrt(i))
        sd[n + ".bias"] = rnd(o, s=0.1)

    ln(prefix + "embeddings.LayerNorm")
    for l in range(LAYERS):
        p = "%sencoder.layer.%d." % (prefix, l)
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, H, H)
        lin(p + "attention.output.dense", H, H)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", H, INTER)
        lin(p + "output.dense", INTER, H)
        ln(p + "output.LayerNorm")
    lin(prefix + "pooler.dense", H, H)
    return sd


def save_safetensors(sd, path):
    header, blobs, off = {}, [], 0
    for k, v in sd.items():
        b = v.contiguous().numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    dt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    sd = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dt[v["dtype"]]).reshape(v["shape"])
        sd[k] = t.float() if t.is_floating_point() else t
    return sd


def encoder(sd, cfg, prefix, ids, mask, types):
    """BERT's encoder: [B, S] int64 in, the last hidden state [B, S, H] out."""
    Hs, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = Hs // heads
    eps = cfg.get("layer_norm_eps", 1e-12)
    g = lambda n: sd[prefix + n]
    lin = lambda x, n: x @ g(n + ".weight").t() + g(n + ".bias")
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (Hs,), g(n + ".weight"), g(n + ".bias"), eps)
    B, S = ids.shape
    pos = torch.arange(S).unsqueeze(0)
    x = g("embeddings.word_embeddings.weight")[ids] + g("embeddings.position_embeddings.weight")[pos] + \
        g("embeddings.token_type_embeddings.weight")[types]
    x = ln(x, "embeddings.LayerNorm")
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for l in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % l
        split = lambda t: t.view(B, S, heads, dh).permute(0, 2, 1, 3)
        q, k, v = (split(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + ext, dim=-1)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(B, S, Hs)
        a = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        i = torch.nn.functional.gelu(lin(a, p + "intermediate.dense"))
        x = ln(lin(i, p + "output.dense") + a, p + "output.LayerNorm")
    return x


class Exported(torch.nn.Module):
    def __init__(self, sd, cfg):
        super().__init__()
        self.cfg = cfg
        self.names = list(sd)
        for i, k in enumerate(self.names):
            self.register_buffer("w%d" % i, sd[k])

    def forward(self, input_ids, attention_mask, token_type_ids):
        sd = {k: getattr(self, "w%d" % i) for i, k in enumerate(self.names)}
        return encoder(sd, self.cfg, "", input_ids, attention_mask, token_type_ids)


def write(out):
    cfg = config()
    sd = bert_weights("")
    tj = json.dumps(tokenizer_json(), ensure_ascii=False, indent=1)
    for d in ("bert", "onnx", "classifier"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
        open(os.path.join(out, d, "tokenizer.json"), "w").write(tj)
    for d in ("bert", "onnx"):  # optimum writes config.json beside model.onnx
        json.dump(cfg, open(os.path.join(out, d, "config.json"), "w"), indent=1)
    save_safetensors(sd, os.path.join(out, "bert", "model.safetensors"))
    torch.save(sd, os.path.join(out, "sd.pt"))

    m = Exported({k: v for k, v in sd.items() if not k.startswith("pooler")}, cfg).eval()
    ex = torch.tensor([[2, 40, 41, 3], [2, 42, 3, 0]])
    torch.onnx.export(m, (ex, (ex > 0).long(), torch.zeros_like(ex)), os.path.join(out, "onnx", "model.onnx"),
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")},
                      opset_version=14)

    csd = {"bert." + k: v for k, v in bert_weights("").items()}
    csd["classifier.weight"] = rnd(len(LABELS), H, s=1.0)
    csd["classifier.bias"] = rnd(len(LABELS), s=0.1)
    ccfg = config({"architectures": ["BertForSequenceClassification"],
                   "id2label": {str(i): l for i, l in enumerate(LABELS)},
                   "label2id": {l: i for i, l in enumerate(LABELS)}})
    json.dump(ccfg, open(os.path.join(out, "classifier", "config.json"), "w"), indent=1)
    save_safetensors(csd, os.path.join(out, "classifier", "model.safetensors"))


def embed(sd, cfg, prefix, ids):
    t = torch.tensor([ids])
    h = encoder(sd, cfg, prefix, t, torch.ones_like(t), torch.zeros_like(t))
    return torch.nn.functional.normalize(h.mean(dim=1), p=2, dim=1)[0].tolist()


def classify(sd, cfg, ids):
    t = torch.tensor([ids])
    h = encoder(sd, cfg, "bert.", t, torch.ones_like(t), torch.zeros_like(t))
    pooled = torch.tanh(h[:, 0] @ sd["bert.pooler.dense.weight"].t() + sd["bert.pooler.dense.bias"])
    logits = pooled @ sd["classifier.weight"].t() + sd["classifier.bias"]
    return torch.softmax(logits, dim=-1)[0].tolist()


def ref(out, minilm):
    ids = json.load(open(os.path.join(out, "ids.json")))
    res = {}
    with torch.no_grad():
        for name, lists in ids.items():
            if name == "minilm":
                d = minilm
                cfg = json.load(open(os.path.join(d, "config.json")))
                sd = load_safetensors(os.path.join(d, "model.safetensors"))
                res[name] = [embed(sd, cfg, "", x) for x in lists]
            elif name == "classifier":
                d = os.path.join(out, name)
                res[name] = [classify(load_safetensors(os.path.join(d, "model.safetensors")),
                                      json.load(open(os.path.join(d, "config.json"))), x) for x in lists]
            else:
                sd = torch.load(os.path.join(out, "sd.pt"))
                res[name] = [embed(sd, config(), "", x) for x in lists]
    json.dump(res, open(os.path.join(out, "ref.json"), "w"))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        ref(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
