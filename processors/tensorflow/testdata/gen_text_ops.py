"""Writes a SavedModel that uses TensorFlow Text's custom ops, and its
reference outputs, for TestOpLibraries (libtftest.Generate's format).

usage: gen_text_ops.py OUT_DIR

OUT_DIR/text_ops/  tf.Module, serving_default(s: string [-1]) ->
                   normalized (text.normalize_utf8 NFKC: the NormalizeUTF8
                   op of _normalize_ops.so), tokens (WhitespaceTokenizer:
                   _whitespace_tokenizer_v2.so, padded with ""), count
                   (tokens per string, int64)
OUT_DIR/ref.json   {"text_ops": {"serving_default": {"inputs", "outputs"}}}
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import tensorflow_text as text

out = sys.argv[1]


class TextOps(tf.Module):
    def __init__(self):
        super().__init__()
        self.tok = text.WhitespaceTokenizer()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="s")])
    def serve(self, s):
        norm = text.normalize_utf8(s, "NFKC")
        toks = self.tok.tokenize(norm)
        return {"normalized": norm, "tokens": toks.to_tensor(default_value=""),
                "count": tf.cast(toks.row_lengths(), tf.int64)}


m = TextOps()
path = os.path.join(out, "text_ops")
tf.saved_model.save(m, path, signatures={"serving_default": m.serve})


def enc(v):
    v = np.asarray(v)
    if v.dtype.kind in "SOU":
        return {"dtype": "BYTES", "shape": list(v.shape),
                "data": [s.decode() if isinstance(s, bytes) else s for s in v.reshape(-1).tolist()]}
    return {"dtype": {"int64": "INT64"}[str(v.dtype)], "shape": list(v.shape), "data": v.reshape(-1).tolist()}


inputs = np.array(["Ｈｅｌｌｏ  ｗｏｒｌｄ ①", "ﬁne\tcafé", "", "one"], dtype=object)
sig = tf.saved_model.load(path).signatures["serving_default"]
res = sig(s=tf.constant(inputs))
ref = {"text_ops": {"serving_default": {"inputs": {"s": enc(inputs)},
                                        "outputs": {k: enc(t.numpy()) for k, t in res.items()}}}}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f, ensure_ascii=False)
