"""Writes the SavedModels of tf2onnx's string-feature and lookup-table tests,
and TensorFlow's own outputs for them, computed in process.

usage: gen_strings.py OUT_DIR [FIXTURE_DIR]

OUT_DIR/fingerprint.json  {"strings": [base64...], "buckets": {"N": [...]}}:
                          tf.strings.to_hash_bucket_fast of each string for
                          several bucket counts (2**63-1 keeps almost all of
                          the 64-bit Fingerprint64).
OUT_DIR/features/         tf.Module, signature serving_default:
                          words string [-1], ids int64 [-1], w string [] ->
                          hashed (to_hash_bucket_fast(words, 1000)),
                          word_id (string->int64 StaticHashTable),
                          id_id (int64->int64 StaticHashTable),
                          size (the string table's size), emb (an embedding
                          row sum picked by the hashed words, float32),
                          w_hash (a scalar's bucket), w_id (a scalar's id),
                          strong (to_hash_bucket_strong(words, 97, key)),
                          x_bucket, id_bucket (Bucketize of x float32 [-1]
                          and of ids; nan_bucket: x's largest element made
                          NaN), vocab_line, vocab_col, vocab_oov
                          (tables from a vocabulary asset file: line
                          numbers, a column, a vocabulary with OOV buckets).
OUT_DIR/fixture.json      with a second argument, a SavedModel directory
                          whose serving_default takes word string [-1]
                          (the conformance StaticHashTableModule): its
                          outputs for a few words, as ref.json's cases.
OUT_DIR/ref.json          {"features": {"serving_default": {"inputs", "outputs"}}},
                          tensors as {"dtype", "shape", "data"} (strings as
                          base64 in "b64").
"""
import base64
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(5)

strings = [b"", b"a", b"ab", b"abc", b"abcd", "h\u00e9llo".encode(), "\u65e5\u672c\u8a9e".encode(),
           b"\x00", b"\xff\xfe\x00\x01", b"user_id=12345"]
for n in list(range(1, 140)) + [255, 256, 1000, 4097]:
    strings.append(bytes(rng.integers(0, 256, n, dtype=np.uint8)))
buckets = {}
for nb in [2**63 - 1, 1000, 7, 1]:
    buckets[str(nb)] = [int(v) for v in tf.strings.to_hash_bucket_fast(strings, nb).numpy()]
with open(os.path.join(out, "fingerprint.json"), "w") as f:
    json.dump({"strings": [base64.b64encode(s).decode() for s in strings], "buckets": buckets}, f)


class Features(tf.Module):
    def __init__(self):
        super().__init__()
        self.words = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(["apple", "pear", "plum", "", "h\u00e9llo"]), tf.constant([10, 20, 30, 40, 50], tf.int64)),
            default_value=-1)
        self.ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([7, -3, 1 << 40], tf.int64), tf.constant([1, 2, 3], tf.int64)),
            default_value=0)
        self.emb = tf.Variable(rng.standard_normal((1000, 4)).astype(np.float32))
        vocab = os.path.join(out, "vocab.txt")
        with open(vocab, "wb") as f:
            f.write("apple\t5\npear\t6\r\nh\u00e9llo\t7\nkiwi\t8\n".encode())
        # A vocabulary file: the word (column 0) -> its line number, and
        # the word -> column 1; a vocabulary table with hashed OOV buckets.
        self.vocab = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(vocab, tf.string, 0, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                                          delimiter="\t"), default_value=-7)
        self.column = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(vocab, tf.string, 0, tf.int64, 1, delimiter="\t"), default_value=0)
        self.oov = tf.lookup.StaticVocabularyTable(
            tf.lookup.TextFileInitializer(vocab, tf.string, 0, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                                          delimiter="\t"), num_oov_buckets=3)

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="words"),
        tf.TensorSpec([None], tf.int64, name="ids"),
        tf.TensorSpec([], tf.string, name="w"),
        tf.TensorSpec([None], tf.float32, name="x"),
    ])
    def serve(self, words, ids, w, x):
        hashed = tf.strings.to_hash_bucket_fast(words, 1000)
        return {
            "hashed": hashed,
            "word_id": self.words.lookup(words),
            "id_id": self.ids.lookup(ids),
            "size": self.words.size(),
            "emb": tf.reduce_sum(tf.gather(self.emb, hashed), axis=1),
            "w_hash": tf.strings.to_hash_bucket_fast(w, 50),
            "w_id": self.words.lookup(w),
            "strong": tf.strings.to_hash_bucket_strong(words, 97, [3, 1 << 60]),
            "x_bucket": tf.raw_ops.Bucketize(input=x, boundaries=[-1.0, 0.0, 0.5, 2.0]),
            "id_bucket": tf.raw_ops.Bucketize(input=ids, boundaries=[0.0, 7.5, 1e12]),
            # NaN made in the graph (JSON carries no NaN): it is below no
            # boundary, so TensorFlow's upper_bound puts it last.
            "nan_bucket": tf.raw_ops.Bucketize(input=tf.where(x > 1e29, tf.constant(float("nan")), x),
                                               boundaries=[-1.0, 0.0, 0.5, 2.0]),
            "vocab_line": self.vocab.lookup(words),
            "vocab_col": self.column.lookup(words),
            "vocab_oov": self.oov.lookup(words),
        }


def enc(v):
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        return {"dtype": "BYTES", "shape": list(v.shape),
                "b64": [base64.b64encode(s).decode() for s in v.reshape(-1).tolist()]}
    name = {"float32": "FP32", "int64": "INT64", "int32": "INT32"}[str(v.dtype)]
    return {"dtype": name, "shape": list(v.shape), "data": v.reshape(-1).tolist()}


def case(fn, **inputs):
    res = fn(**{k: tf.constant(v) for k, v in inputs.items()})
    return {"inputs": {k: enc(v) for k, v in inputs.items()},
            "outputs": {k: enc(t.numpy()) for k, t in res.items()}}


m = Features()
tf.saved_model.save(m, os.path.join(out, "features"), signatures={"serving_default": m.serve})
words = np.array([b"pear", b"kiwi", b"", "h\u00e9llo".encode(), b"apple", b"\xff"], object)
ref = {"features": {"serving_default": case(
    m.serve, words=words, ids=np.array([7, 8, 1 << 40, -3, 0], np.int64), w=np.array(b"plum", object),
    x=np.array([-3, -1, -0.5, 0, 0.25, 0.5, 1.5, 2, 1e30], np.float32))}}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)

if len(sys.argv) > 2:
    fixture = tf.saved_model.load(sys.argv[2]).signatures["serving_default"]
    word = np.array([b"foo", b"bar", b"baz", b"wombat", b"kiwi", b""], object)
    res = fixture(word=tf.constant(word))
    with open(os.path.join(out, "fixture.json"), "w") as f:
        json.dump({"inputs": {"word": enc(word)}, "outputs": {k: enc(t.numpy()) for k, t in res.items()}}, f)
