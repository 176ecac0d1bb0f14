"""Writes EasyTransfer-style BERT app exports for processors/easytransfer's
tests, and the answers each should give, in one process. Seeded random
weights; the vocabulary is trained here by Hugging Face tokenizers.

usage: gen_apps.py OUT_DIR

OUT_DIR/<app>/     an export as EasyTransfer leaves it: vocab.txt and
                   train_config.json (json.dump of the app config's
                   attributes, with "_config_json") beside an Estimator-style
                   export directory <timestamp>/saved_model.pb + variables,
                   serving_default taking input_ids, input_mask, segment_ids
                   (int32 [-1,-1]) and answering the app's outputs:
  text_classify    predictions (argmax, int32), probabilities (softmax), logits; labels pos,neg,neutral
  text_multi       multi-label text_classify_bert: probabilities (sigmoid),
                   predictions (probabilities > 0.5, int32), logits
  text_match       text pairs (first_sequence, second_sequence), labels 0,1
  labeling         sequence_labeling_bert: per-piece predictions [-1,-1],
                   labels B-LOC,I-LOC,B-PER,I-PER,O
  vectorization    vectorization_bert: pool_output, first_token_output,
                   all_hidden_outputs
OUT_DIR/ref.json   {"<app>": {"type": ..., "requests": [body...],
                   "answers": [answer...]}}: the answers as EasyTransfer's
                   preprocessors, the SavedModel (run here by TensorFlow) and
                   its postprocessors give them.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.implementations import BertWordPieceTokenizer
from tokenizers.models import WordPiece

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tensorflow", "testdata"))
import tf1bert  # noqa: E402

out = sys.argv[1]
v1 = tf.compat.v1
SEQ = 16

texts = [
    "The movie was great, I loved it!",
    "Terrible service. Never again...",
    "北京欢迎你",
    "Café RÉSUMÉ naïve ΟΔΟΣ",
    "",
    "an unbelievably long review that goes on and on and on well past the sequence length of sixteen pieces",
    "emoji 😀 and tabs\there",
    "[CLS] specials [SEP] inside",
]
pairs = [
    ("How old are you?", "What is your age?"),
    ("北京在哪里", "Where is Beijing?"),
    ("a very long first sentence that will have to lose pieces before the second one does", "short"),
    ("", "only the second"),
]
words = [
    "John lives in New York",
    "Mary  visited   北京 today",      # runs of spaces: empty words
    "unbelievably long sentence with many many words that overflows the sequence length by far",
]

corpus = texts + [a for p in pairs for a in p] + words
trainer = BertWordPieceTokenizer(lowercase=True)
trainer.train_from_iterator([t.lower() for t in corpus] * 3, vocab_size=180, min_frequency=1,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
vocab = sorted(trainer.get_vocab(), key=trainer.get_vocab().get)
ids_of = {t: i for i, t in enumerate(vocab)}

# EasyTransfer's FullTokenizer: Python's lower-casing, accents stripped,
# BERT's pre-tokenization, WordPiece with at most 200 characters a word.
tok = Tokenizer(WordPiece(ids_of, unk_token="[UNK]", max_input_chars_per_word=200))
tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                            strip_accents=True, lowercase=False)
tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()


def pieces(text):
    return tok.encode(text.lower(), add_special_tokens=False).ids


def features(a, b=None):
    """classification_regression_preprocessor's convert_example_to_features."""
    ta = pieces(a)
    tb = pieces(b) if b is not None else None
    if tb is not None:
        while len(ta) + len(tb) > SEQ - 3:
            if len(ta) > len(tb):
                ta.pop()
            else:
                tb.pop()
    else:
        ta = ta[:SEQ - 2]
    ids = [ids_of["[CLS]"]] + ta + [ids_of["[SEP]"]]
    seg = [0] * len(ids)
    if tb is not None:
        ids += tb + [ids_of["[SEP]"]]
        seg += [1] * (len(tb) + 1)
    mask = [1] * len(ids)
    pad = SEQ - len(ids)
    return ids + [0] * pad, mask + [0] * pad, seg + [0] * pad


def labeling_features(text):
    """labeling_preprocessor's convert_example_to_features."""
    ids, origin = [ids_of["[CLS]"]], [-1]
    for i, w in enumerate(text.split(" ")):
        p = pieces(w) or [ids_of["[UNK]"]]
        ids += p
        origin += [i] * len(p)
    ids = ids[:SEQ - 1] + [ids_of["[SEP]"]]
    origin.append(-1)
    mask = [1] * len(ids)
    pad = SEQ - len(ids)
    return (ids + [0] * pad, mask + [0] * pad, [0] * SEQ), origin


def export(name, app_type, heads, labels, second=None, multi=False):
    """Builds the encoder with heads(seq_out, pooled, dense) -> outputs and
    writes the export; returns a function running it on features."""
    root = os.path.join(out, name)
    path = os.path.join(root, "1606212345")
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(sum(map(ord, name)))  # hash() of a str differs per process
        ids = v1.placeholder(tf.int32, [None, None], name="input_ids")
        mask = v1.placeholder(tf.int32, [None, None], name="input_mask")
        seg = v1.placeholder(tf.int32, [None, None], name="segment_ids")
        seq_out, pooled, dense = tf1bert.encoder(ids, mask, seg, VOCAB=len(vocab), MAXPOS=SEQ)
        outputs = heads(seq_out, pooled, dense)
        sess = v1.Session(graph=g)
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(path)
        sig = v1.saved_model.predict_signature_def(
            {"input_ids": ids, "input_mask": mask, "segment_ids": seg}, outputs)
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        builder.save()
    with open(os.path.join(root, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    preprocess = {"input_schema": "content:str:1,label:str:1", "first_sequence": "content",
                  "second_sequence": second, "sequence_length": SEQ, "label_name": "label",
                  "label_enumerate_values": labels}
    model_config = {"model_name": app_type, "pretrain_model_name_or_path": "pai-bert-tiny-en",
                    "num_labels": len(labels.split(",")) if labels else 1, "multi_label": multi}
    cfg = {"_config_json": {"preprocess_config": preprocess, "model_config": model_config},
           "mode": "train_and_evaluate", "model_name": app_type, "sequence_length": SEQ,
           "first_sequence": "content", "second_sequence": second, "label_enumerate_values": labels}
    with open(os.path.join(root, "train_config.json"), "w") as f:
        json.dump(cfg, f)

    def run(feats):
        feed = {ids: [f[0] for f in feats], mask: [f[1] for f in feats], seg: [f[2] for f in feats]}
        return {k: np.asarray(v) for k, v in sess.run(outputs, feed).items()}
    return run


def classify_heads(n, multi=False):
    def heads(seq_out, pooled, dense):
        logits = dense(pooled, n, "app/ez_dense")
        if multi:
            probs = tf.sigmoid(logits)
            preds = tf.cast(probs > 0.5, tf.int32)
        else:
            probs = tf.nn.softmax(logits, axis=1)
            preds = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"predictions": preds, "probabilities": probs, "logits": logits}
    return heads


def floats(a):
    return [float(x) for x in np.asarray(a, np.float32).reshape(-1)]


ref = {}

# text_classify_bert
labels = "pos,neg,neutral"
run = export("text_classify", "text_classify_bert", classify_heads(3), labels)
res = run([features(t) for t in texts])
ref["text_classify"] = {"type": "text_classify_bert", "requests": [{"first_sequence": t} for t in texts],
                        "answers": [{"predictions": labels.split(",")[res["predictions"][i]],
                                     "probabilities": floats(res["probabilities"][i]),
                                     "logits": floats(res["logits"][i])} for i in range(len(texts))]}

# multi-label text_classify_bert (a fixed bias so that some labels are on)
labels_m = "sports,politics,tech,arts"
run = export("text_multi", "text_classify_bert", classify_heads(4, multi=True), labels_m, multi=True)
res = run([features(t) for t in texts])
ref["text_multi"] = {"type": "text_classify_bert", "requests": [{"content": t} for t in texts],
                     "answers": [{"predictions": ",".join(l for l, on in zip(labels_m.split(","), res["predictions"][i]) if on == 1),
                                  "probabilities": floats(res["probabilities"][i]),
                                  "logits": floats(res["logits"][i])} for i in range(len(texts))]}

# text_match_bert on pairs
run = export("text_match", "text_match_bert", classify_heads(2), "0,1", second="query")
res = run([features(a, b) for a, b in pairs])
ref["text_match"] = {"type": "text_match_bert",
                     "requests": [{"first_sequence": a, "second_sequence": b} for a, b in pairs],
                     "answers": [{"predictions": "01"[res["predictions"][i]],
                                  "probabilities": floats(res["probabilities"][i]),
                                  "logits": floats(res["logits"][i])} for i in range(len(pairs))]}

# sequence_labeling_bert
tags = "B-LOC,I-LOC,B-PER,I-PER,O".split(",")


def labeling_heads(seq_out, pooled, dense):
    logits = dense(seq_out, len(tags), "app/ez_dense")
    return {"predictions": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits}


run = export("labeling", "sequence_labeling_bert", labeling_heads, ",".join(tags))
feats = [labeling_features(w) for w in words]
res = run([f for f, _ in feats])


def word_tags(pred, origin):
    """labeling_postprocessors.LabelingPostprocessor."""
    final, prev = [], -1
    for k in range(min(len(pred), len(origin))):
        o = origin[k]
        if o == -1 or o == prev:
            continue
        p = int(pred[k])
        if p == -1 or p >= len(tags):
            p = len(tags) - 1
        if tags[p] in ("[CLS]", "[SEP]"):
            p = len(tags) - 1
        final.append(tags[p])
        prev = o
    while len(final) < max(origin) + 1:
        final.append(tags[-1])
    return " ".join(final)


ref["labeling"] = {"type": "sequence_labeling_bert", "requests": [{"first_sequence": w} for w in words],
                   "answers": [{"predictions": word_tags(res["predictions"][i], feats[i][1])} for i in range(len(words))]}


# vectorization_bert
def vector_heads(seq_out, pooled, dense):
    return {"pool_output": pooled, "first_token_output": seq_out[:, 0, :], "all_hidden_outputs": seq_out}


run = export("vectorization", "vectorization_bert", vector_heads, None)
res = run([features(t) for t in texts])
ref["vectorization"] = {"type": "vectorization_bert", "requests": [{"first_sequence": t} for t in texts],
                        "answers": [{"pool_output": floats(res["pool_output"][i]),
                                     "first_token_output": floats(res["first_token_output"][i]),
                                     "all_hidden_outputs": np.asarray(res["all_hidden_outputs"][i], np.float32).tolist()}
                                    for i in range(len(texts))]}

with open(os.path.join(out, "ref.json"), "w", encoding="utf-8") as f:
    json.dump(ref, f, ensure_ascii=False)
