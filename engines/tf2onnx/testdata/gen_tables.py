"""Writes the SavedModels of tf2onnx's mutable-table and ParseSingleExample
tests, and TensorFlow's own outputs for them, computed in process.

usage: gen_tables.py OUT_DIR

OUT_DIR/mutable/    tf.Module (TF2 object graph, restore function), signature
                    serving_default: s string [-1], i int64 [-1] ->
                    ids (MutableHashTable string->int64, default -1),
                    f (MutableHashTable int64->float32, default 0.5),
                    vec (MutableHashTable of tensors string->float32 [2],
                    default [-1, -2]), dense (DenseHashTable int64->int64,
                    empty key 0, deleted key -1, a key removed before
                    saving), n, n_f (the tables' sizes), keys, values
                    (the string table's export: in the order the
                    checkpoint holds, that of the table saved). The contents are
                    inserted before saving: they live in the variables
                    bundle alone.
OUT_DIR/mutable_v1/ the same kind of table in a TF1 graph (SavedModelBuilder,
                    the saver's RestoreV2 -> LookupTableImportV2): s string
                    [-1] -> ids (string->int64), n (its size).
OUT_DIR/writes/     a signature that inserts into a MutableHashTable before
                    looking up (refused: the table is written when served).
OUT_DIR/single/     the ParseSingleExample op of a scalar string: dense
                    float [2] and int64 features with defaults, a required
                    string feature, VarLen int64 and string features.
OUT_DIR/single_v2/  tf.io.parse_single_example of a scalar string
                    (ParseExampleV2 of one example, as TensorFlow 2 writes
                    it): a dense float [2] feature with a default,
                    a VarLen int64 one.
OUT_DIR/ref.json    {"mutable"|"mutable_v1"|"single"|"single_missing"|"single_v2":
                    {"serving_default": {"inputs", "outputs"}}}, tensors as
                    gen_strings.py writes them.
"""
import base64
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

out = sys.argv[1]


def enc(v):
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        return {"dtype": "BYTES", "shape": list(v.shape),
                "b64": [base64.b64encode(s).decode() for s in v.reshape(-1).tolist()]}
    name = {"float32": "FP32", "float64": "FP64", "int64": "INT64", "int32": "INT32"}[str(v.dtype)]
    return {"dtype": name, "shape": list(v.shape), "data": v.reshape(-1).tolist()}


def case(fn, **inputs):
    res = fn(**{k: tf.constant(v) for k, v in inputs.items()})
    return {"inputs": {k: enc(v) for k, v in inputs.items()},
            "outputs": {k: enc(t.numpy()) for k, t in res.items()}}


class Mutable(tf.Module):
    def __init__(self):
        super().__init__()
        self.s2i = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
        self.i2f = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=0.5)
        self.vec = tf.lookup.experimental.MutableHashTable(tf.string, tf.float32, default_value=[-1.0, -2.0])
        self.dense = tf.lookup.experimental.DenseHashTable(tf.int64, tf.int64, default_value=-7, empty_key=0,
                                                           deleted_key=-1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int64)])
    def serve(self, s, i):
        keys, values = self.s2i.export()
        return {"ids": self.s2i.lookup(s), "f": self.i2f.lookup(i), "vec": self.vec.lookup(s),
                "dense": self.dense.lookup(i), "n": self.s2i.size(), "n_f": self.i2f.size(),
                "keys": keys, "values": values}


m = Mutable()
m.s2i.insert(tf.constant(["apple", "pear", "", "h\u00e9llo", "kiwi"]), tf.constant([1, 2, 3, 4, 1 << 40], tf.int64))
m.s2i.remove(tf.constant(["kiwi"]))
m.i2f.insert(tf.constant([10, 20, -3, 1 << 50], tf.int64), tf.constant([1.5, 2.5, -0.25, 1e30], tf.float32))
m.vec.insert(tf.constant(["apple", "pear"]), tf.constant([[1.0, 2.0], [3.0, 4.0]]))
m.dense.insert(tf.constant([10, 20, 30, 7], tf.int64), tf.constant([100, 200, 300, 70], tf.int64))
m.dense.erase(tf.constant([30], tf.int64))
tf.saved_model.save(m, os.path.join(out, "mutable"), signatures={"serving_default": m.serve})
ref = {"mutable": {"serving_default": case(
    m.serve, s=np.array([b"apple", b"kiwi", b"", b"plum", "h\u00e9llo".encode(), b"pear"], object),
    i=np.array([10, 30, 7, 20, -3, 1 << 50, 5], np.int64))}}


def mutable_v1(path):
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1, name="vocab")
        s = v1.placeholder(tf.string, [None], name="s")
        ins = table.insert(tf.constant(["a", "b", "c"]), tf.constant([7, 8, 9], tf.int64))
        outs = {"ids": table.lookup(s), "n": table.size()}
        with v1.Session(graph=g) as sess:
            sess.run(ins)
            b = v1.saved_model.Builder(path)
            b.add_meta_graph_and_variables(
                sess, ["serve"], saver=v1.train.Saver(sharded=True),
                signature_def_map={"serving_default": v1.saved_model.predict_signature_def({"s": s}, outs)})
            b.save()
            inputs = {"s": np.array([b"a", b"z", b"c", b""], object)}
            res = sess.run(outs, {s: inputs["s"]})
    return {"inputs": {k: enc(v) for k, v in inputs.items()}, "outputs": {k: enc(v) for k, v in res.items()}}


ref["mutable_v1"] = {"serving_default": mutable_v1(os.path.join(out, "mutable_v1"))}


class Writes(tf.Module):
    def __init__(self):
        super().__init__()
        self.t = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, s):
        self.t.insert(s, tf.ones_like(s, tf.int64))
        return {"ids": self.t.lookup(s)}


w = Writes()
tf.saved_model.save(w, os.path.join(out, "writes"), signatures={"serving_default": w.serve})


class Single(tf.Module):
    """The ParseSingleExample op (tf.raw_ops: TensorFlow 2's
    tf.io.parse_single_example writes ParseExampleV2 of a scalar, TF 1.x's
    wrote this op)."""

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="example")])
    def serve(self, example):
        sp_idx, sp_vals, sp_shapes, dense = tf.raw_ops.ParseSingleExample(
            serialized=example,
            dense_defaults=[tf.constant(-1, tf.int64), tf.constant([], tf.string), tf.constant([0.5, -0.5])],
            num_sparse=2, sparse_keys=["ids", "tags"], dense_keys=["age", "name", "x"],
            sparse_types=[tf.int64, tf.string], dense_shapes=[[], [], [2]])
        ids = tf.sparse.SparseTensor(sp_idx[0], sp_vals[0], sp_shapes[0])
        tags = tf.sparse.SparseTensor(sp_idx[1], sp_vals[1], sp_shapes[1])
        age, name, x = dense
        return {"x": x * 2.0, "age": age, "name": name,
                "ids": tf.sparse.to_dense(ids), "ids_shape": ids.dense_shape, "ids_indices": ids.indices,
                "tags": tf.sparse.to_dense(tags, default_value="?")}


def example(**feats):
    fs = {}
    for k, v in feats.items():
        if k in ("tags", "name"):
            fs[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[s.encode() for s in v]))
        elif k == "x":
            fs[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        else:
            fs[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    return tf.train.Example(features=tf.train.Features(feature=fs)).SerializeToString()


sg = Single()
tf.saved_model.save(sg, os.path.join(out, "single"), signatures={"serving_default": sg.serve})
ref["single"] = {"serving_default": case(
    sg.serve, example=np.array(example(x=[1.0, 2.5], age=[41], name=["h\u00e9llo"], ids=[3, 1, 4], tags=["a", "b"]), object))}
# Missing features: x and age take their defaults, ids and tags are empty.
ref["single_missing"] = {"serving_default": case(sg.serve, example=np.array(example(name=["n"]), object))}


class SingleV2(tf.Module):
    """tf.io.parse_single_example: ParseExampleV2 of a scalar."""

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="example")])
    def serve(self, example):
        f = tf.io.parse_single_example(example, {
            "x": tf.io.FixedLenFeature([2], tf.float32, default_value=[0.5, -0.5]),
            "ids": tf.io.VarLenFeature(tf.int64),
        })
        return {"x": f["x"], "ids": tf.sparse.to_dense(f["ids"]), "ids_indices": f["ids"].indices,
                "ids_shape": f["ids"].dense_shape}


sv2 = SingleV2()
tf.saved_model.save(sv2, os.path.join(out, "single_v2"), signatures={"serving_default": sv2.serve})
ref["single_v2"] = {"serving_default": case(sv2.serve, example=np.array(example(ids=[5, 6]), object))}
# A missing required feature is TensorFlow's error.
try:
    sg.serve(tf.constant(example(x=[1.0, 2.0])))
    ref["single_required"] = "no error"
except tf.errors.InvalidArgumentError as e:
    ref["single_required"] = e.message
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)
