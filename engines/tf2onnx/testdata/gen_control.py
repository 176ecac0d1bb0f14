"""Writes the SavedModels of tf2onnx's control-flow tests (TF2 While and
If, from tf.while_loop and tf.cond inside tf.function) and TensorFlow's own
outputs for them, from each saved signature loaded back.

usage: gen_control.py OUT_DIR

OUT_DIR/loops/     tf.Module, serving_default(x float [-1,3], n int32 []):
                   a while loop with four loop variables (a counter, a
                   float state updated through a variable, a float matrix
                   that grows by a column each iteration under a
                   [None, None] shape invariant, an int64 doubling) and a
                   trip count n from the input -> acc, grown, steps, pow2;
                   a second loop capped by maximum_iterations -> capped.
OUT_DIR/nested/    serving_default(x float [-1], n int32 []): a while loop
                   over i < n holding one over j < i, and a tf.cond on i's
                   parity in the outer body -> total, count.
OUT_DIR/cond/      serving_default(x float [-1,3]): tf.cond on
                   reduce_sum(x) > 0 reading a variable (If) -> y, and a
                   tf.cond without variables with two outputs, one a
                   scalar (StatelessIf) -> z, k.
OUT_DIR/switch/   serving_default(x float [-1], i int32 []): tf.switch_case
                   over three branches (one reading a variable), i out of
                   range too -> s.
OUT_DIR/tf1_loops/ a TF1 graph (SavedModelBuilder) with control flow v1
                   frames (Enter, Merge, Switch, LoopCond, NextIteration,
                   Exit): x float [-1], n int32 [] -> a loop over i < n
                   holding one over j < i, reading x and a variable ->
                   acc, steps.
OUT_DIR/ref.json   {"<model>": [{"inputs": {...}, "outputs": {...}}, ...]};
                   tensors as {"dtype", "shape", "data"}.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(7)
ref = {}


def enc(v):
    v = np.asarray(v)
    name = {"float32": "FP32", "int64": "INT64", "int32": "INT32"}[str(v.dtype)]
    return {"dtype": name, "shape": list(v.shape), "data": v.reshape(-1).tolist()}


def save(name, module):
    tf.saved_model.save(module, os.path.join(out, name), signatures={"serving_default": module.serve})


def reference(name, cases):
    sig = tf.saved_model.load(os.path.join(out, name)).signatures["serving_default"]
    ref[name] = []
    for inputs in cases:
        res = sig(**{k: tf.constant(v) for k, v in inputs.items()})
        ref[name].append({"inputs": {k: enc(v) for k, v in inputs.items()},
                          "outputs": {k: enc(t.numpy()) for k, t in res.items()}})


class Loops(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(rng.standard_normal((3, 3)).astype(np.float32) * 0.5)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="n")])
    def serve(self, x, n):
        def body(i, acc, grown, p):
            acc = tf.tanh(tf.matmul(acc, self.w) + x)
            return i + 1, acc, tf.concat([grown, acc[:, :1] * tf.cast(i, tf.float32)], axis=1), p * 2

        init = (tf.constant(0), tf.zeros_like(x), tf.zeros([tf.shape(x)[0], 0]), tf.constant(1, tf.int64))
        i, acc, grown, p = tf.while_loop(
            lambda i, acc, grown, p: i < n, body, init,
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, 3]), tf.TensorShape([None, None]),
                              tf.TensorShape([])))
        capped = tf.while_loop(lambda j: j < n * 2, lambda j: j + 1, [tf.constant(0)], maximum_iterations=5)
        return {"acc": acc, "grown": grown, "steps": i, "pow2": p, "capped": capped[0]}


class Nested(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="n")])
    def serve(self, x, n):
        def outer(i, total, count):
            def inner(j, t, c):
                return j + 1, t + tf.cast(j, tf.float32) * x, c + 1

            _, total, count = tf.while_loop(lambda j, t, c: j < i, inner, (tf.constant(0), total, count))
            total = tf.cond(tf.math.floormod(i, 2) == 0, lambda: total + 1.0, lambda: total * 0.5)
            return i + 1, total, count

        _, total, count = tf.while_loop(lambda i, t, c: i < n, outer, (tf.constant(0), tf.zeros_like(x), tf.constant(0)))
        return {"total": total, "count": count}


class Cond(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(rng.standard_normal((3, 2)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def serve(self, x):
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.matmul(x, self.w) * 2.0, lambda: x[:, :2] - 1.0)
        z, k = tf.cond(x[0, 0] > x[0, 1], lambda: (tf.reduce_max(x, axis=1), tf.constant(1, tf.int64)),
                       lambda: (tf.reduce_min(x, axis=1), tf.shape(x, out_type=tf.int64)[0]))
        return {"y": y, "z": z, "k": k}


class Switch(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(np.float32(0.25))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x"),
                                  tf.TensorSpec([], tf.int32, name="i")])
    def serve(self, x, i):
        s = tf.switch_case(i, [lambda: x * 2.0, lambda: x - self.v, lambda: tf.sin(x)])
        return {"s": s}


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


save("loops", Loops())
reference("loops", [{"x": f32(2, 3), "n": np.int32(4)}, {"x": f32(3, 3), "n": np.int32(1)},
                    {"x": f32(1, 3), "n": np.int32(9)}])
save("nested", Nested())
reference("nested", [{"x": f32(4), "n": np.int32(5)}, {"x": f32(2), "n": np.int32(1)}, {"x": f32(3), "n": np.int32(0)}])
save("cond", Cond())
reference("cond", [{"x": np.abs(f32(2, 3)) * np.array([[1, -1, 1]], np.float32)},
                   {"x": -np.abs(f32(3, 3))}, {"x": np.abs(f32(1, 3))}])

save("switch", Switch())
reference("switch", [{"x": f32(3), "i": np.int32(k)} for k in (0, 1, 2, 7, -1)])


def tf1_loops(path):
    """A TF1 graph with control flow v1 frames: a while loop over i < n
    holding a nested one, reading x and a variable from outside."""
    v1 = tf.compat.v1
    v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None], name="x")
        n = v1.placeholder(tf.int32, [], name="n")
        w = v1.get_variable("w", initializer=np.float32(0.5))

        def outer(i, acc):
            _, acc = v1.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a * w + x), (tf.constant(0), acc))
            return i + 1, acc + tf.cast(i, tf.float32)

        steps, acc = v1.while_loop(lambda i, a: i < n, outer, (tf.constant(0), tf.zeros_like(x)))
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(path)
            sig = v1.saved_model.predict_signature_def({"x": x, "n": n}, {"acc": acc, "steps": steps})
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
            builder.save()
    v1.enable_control_flow_v2()


tf1_loops(os.path.join(out, "tf1_loops"))
reference("tf1_loops", [{"x": f32(3), "n": np.int32(4)}, {"x": f32(2), "n": np.int32(0)}])

with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)
