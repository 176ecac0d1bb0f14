"""Writes the libtensorflow runtime's test SavedModels and their reference
outputs, computed by this TensorFlow in process.

usage: gen_models.py OUT_DIR

OUT_DIR/dense/    a small Keras network (exported by keras.export.ExportArchive) (Dense 5->8 relu, Dense 8->3),
                  signature serving_default: x float32 [-1,5] -> y float32
                  [-1,3]; and signature "mixed": i int64 [-1], b bool [-1],
                  s string [-1] -> i2 = i*3 (int64), nb = !b (bool),
                  up = upper(s) (string), n = len(s) (int32).
OUT_DIR/plain/    the same network with serving_default alone (it translates).
OUT_DIR/table/    what tf2onnx refuses: serving_default looks words up in a
                  tf.lookup.StaticHashTable and doubles x three times in a
                  tf.while_loop that also writes a tf.TensorArray:
                  words string [-1] -> ids int64, x float32 [-1] -> x8 float32.
OUT_DIR/ref.json  {"dense": {"serving_default": {"inputs": {...},
                  "outputs": {...}}, "mixed": ...}, "table": ...}; each
                  tensor {"dtype", "shape", "data"} (strings as UTF-8 text).
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import keras

out = sys.argv[1]
keras.utils.set_random_seed(7)


net = keras.Sequential([
    keras.Input(shape=(5,)),
    keras.layers.Dense(8, activation="relu"),
    keras.layers.Dense(3),
])


def serve(x):
    return {"y": net(x)}


def mixed(i, b, s):
    return {"i2": i * 3, "nb": tf.logical_not(b), "up": tf.strings.upper(s), "n": tf.strings.length(s)}


class Table(tf.Module):
    def __init__(self):
        super().__init__()
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(["apple", "pear", "plum"]), tf.constant([1, 2, 3], tf.int64)),
            default_value=-1)

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="words"),
        tf.TensorSpec([None], tf.float32, name="x"),
    ])
    def serve(self, words, x):
        # The loop also writes each step to a tf.TensorArray (a tensor list
        # carried by the loop), which the translator refuses.
        steps = tf.TensorArray(tf.float32, size=3)
        _, x8, _ = tf.while_loop(lambda k, v, ta: k < 3, lambda k, v, ta: (k + 1, v * 2.0, ta.write(k, v)),
                                 (tf.constant(0), x, steps))
        return {"ids": self.table.lookup(words), "x8": x8}


def enc(v):
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        data = [s.decode() if isinstance(s, bytes) else s for s in v.reshape(-1).tolist()]
        return {"dtype": "BYTES", "shape": list(v.shape), "data": data}
    name = {"float32": "FP32", "int64": "INT64", "int32": "INT32", "bool": "BOOL"}[str(v.dtype)]
    return {"dtype": name, "shape": list(v.shape), "data": v.reshape(-1).tolist()}


def case(fn, **inputs):
    res = fn(**{k: tf.constant(v) for k, v in inputs.items()})
    return {"inputs": {k: enc(v) for k, v in inputs.items()},
            "outputs": {k: enc(t.numpy()) for k, t in res.items()}}


rng = np.random.default_rng(3)
# Keras 3 writes SavedModels through keras.export.ExportArchive (what
# model.export does): tf.saved_model.save of a tf.Module holding a Keras 3
# model writes variables that a TF1-style session load leaves unrestored.
archive = keras.export.ExportArchive()
archive.track(net)
archive.add_endpoint("serving_default", serve, input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x")])
archive.add_endpoint("mixed", mixed, input_signature=[
    tf.TensorSpec([None], tf.int64, name="i"),
    tf.TensorSpec([None], tf.bool, name="b"),
    tf.TensorSpec([None], tf.string, name="s"),
])
archive.write_out(os.path.join(out, "dense"), verbose=False)
plain = keras.export.ExportArchive()
plain.track(net)
plain.add_endpoint("serving_default", serve, input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x")])
plain.write_out(os.path.join(out, "plain"), verbose=False)
table = Table()
tf.saved_model.save(table, os.path.join(out, "table"), signatures={"serving_default": table.serve})

ref = {
    "dense": {
        "serving_default": case(serve, x=rng.standard_normal((4, 5)).astype(np.float32)),
        "mixed": case(mixed, i=np.array([1, -2, 40], np.int64), b=np.array([True, False, True]),
                      s=np.array([b"ab", b"", "h\u00e9llo".encode()], object)),
    },
    "plain": {
        "serving_default": case(serve, x=rng.standard_normal((2, 5)).astype(np.float32)),
    },
    "table": {
        "serving_default": case(table.serve, words=np.array([b"pear", b"kiwi", b"plum", b"apple"], object),
                                x=np.array([0.5, -1.25, 3, 0], np.float32)),
    },
}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)
