"""Writes the model-zoo SavedModels of TestTensorFlowZoo and their reference
outputs (this TensorFlow's own, from the saved signature loaded back), in one
process (importing TensorFlow is the slow part). Seeded random weights,
nothing downloaded.

usage: gen_zoo.py OUT_DIR

OUT_DIR/<model>/   one SavedModel per model family, serving_default only:
  keras_functional   Keras 3 functional model, two inputs (a [-1,6], b [-1,3]),
                     Concatenate, Dense relu, BatchNormalization, Dense softmax;
                     model.export
  keras_subclassed   a keras.Model subclass (Dense, LayerNormalization, a
                     residual, Dropout inactive at inference); model.export
  keras_preprocessing  Keras 3 preprocessing layers in the model: Hashing
                     (plain, salted) of a string input and of an int64
                     one, StringLookup, IntegerLookup -> embeddings ->
                     Dense sigmoid; model.export
  wide_deep          tf.Module taking serialized tf.Example (examples string
                     [-1]) parsed by tf.io.parse_example: user (string,
                     to_hash_bucket_fast -> embedding), country (string,
                     StaticHashTable from a vocabulary file asset ->
                     embedding), age (float); a wide part on the hashed
                     user x country cross; -> logits, probabilities
  deepfm             EasyRec-style DeepFM: one placeholder per feature
                     (user_id, item_id, category string [-1]; price float
                     [-1]; hour int64 [-1]), hashed embeddings, first order,
                     FM second order, a deep MLP -> logits, probs
  sparse_rec         EasyRec-style sparse features over tf.Example: a tag
                     string split at "|" (StringSplit), VarLen clicked
                     items (strings, hashed) and categories (int64), each
                     through safe_embedding_lookup_sparse; price float ->
                     an MLP -> logits, probs
  while_rnn          a tanh RNN unrolled by tf.while_loop over the time axis
                     of x float [-1,-1,4] -> h [-1,8], steps int32
  bert               a BERT-shaped encoder written as a TF1 graph
                     (tf.compat.v1 placeholders input_ids, input_mask,
                     segment_ids int32 [-1,-1]; word/position/type
                     embeddings, 2 layers of 2-head attention, GELU,
                     LayerNorm) saved by SavedModelBuilder ->
                     sequence_output [-1,-1,32], pooled_output [-1,32]
  keras_hub_bert     keras-hub's BertBackbone (2 layers, H=32; token_ids,
                     segment_ids, padding_mask int32 [-1,-1]) with a Dense
                     head on pooled_output; model.export -> logits,
                     sequence_output
OUT_DIR/ref.json   {"<model>": {"inputs": {...}, "outputs": {...}}}; each
                   tensor {"dtype", "shape", "data"}; string data base64.
"""
import base64
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf1bert  # noqa: E402

out = sys.argv[1]
keras.utils.set_random_seed(11)
rng = np.random.default_rng(5)
ref = {}


def enc(v):
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        data = [base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()
                for s in v.reshape(-1).tolist()]
        return {"dtype": "BYTES", "shape": list(v.shape), "data": data}
    name = {"float32": "FP32", "int64": "INT64", "int32": "INT32", "bool": "BOOL"}[str(v.dtype)]
    return {"dtype": name, "shape": list(v.shape), "data": v.reshape(-1).tolist()}


def reference(model, **inputs):
    """Loads the SavedModel back and runs its serving_default on inputs."""
    sig = tf.saved_model.load(os.path.join(out, model)).signatures["serving_default"]
    res = sig(**{k: tf.constant(v) for k, v in inputs.items()})
    ref[model] = {"inputs": {k: enc(v) for k, v in inputs.items()},
                  "outputs": {k: enc(t.numpy()) for k, t in res.items()}}


# Keras functional.
a = keras.Input(shape=(6,), name="a")
b = keras.Input(shape=(3,), name="b")
h = keras.layers.Concatenate()([a, b])
h = keras.layers.Dense(16, activation="relu")(h)
h = keras.layers.BatchNormalization()(h)
y = keras.layers.Dense(4, activation="softmax", name="probs")(h)
functional = keras.Model([a, b], y)
# Non-trivial BatchNormalization statistics.
bn = functional.layers[-2]
bn.moving_mean.assign(rng.standard_normal(16).astype(np.float32) * 0.1)
bn.moving_variance.assign(rng.uniform(0.5, 2, 16).astype(np.float32))
functional.export(os.path.join(out, "keras_functional"), verbose=False)
reference("keras_functional", a=rng.standard_normal((3, 6)).astype(np.float32),
          b=rng.standard_normal((3, 3)).astype(np.float32))


# Keras subclassed.
class Residual(keras.Model):
    def __init__(self):
        super().__init__()
        self.inp = keras.layers.Dense(12, activation="gelu")
        self.mid = keras.layers.Dense(12, activation="tanh")
        self.norm = keras.layers.LayerNormalization()
        self.drop = keras.layers.Dropout(0.5)
        self.head = keras.layers.Dense(2)

    def call(self, x, training=False):
        h = self.inp(x)
        h = self.norm(h + self.mid(h))
        return self.head(self.drop(h, training=training))


sub = Residual()
sub(np.zeros((1, 7), np.float32))
sub.export(os.path.join(out, "keras_subclassed"), verbose=False,
           input_signature=[tf.TensorSpec([None, 7], tf.float32, name="x")])
reference("keras_subclassed", x=rng.standard_normal((4, 7)).astype(np.float32))


# Keras 3 preprocessing layers: hashing (plain and salted), vocabulary
# lookups of strings and integers, inside the exported model.
pu = keras.Input(shape=(), dtype="string", name="user")
pc = keras.Input(shape=(), dtype="string", name="city")
pk = keras.Input(shape=(), dtype="int64", name="cat")
pe = keras.layers.Concatenate()([
    keras.layers.Embedding(40, 3)(keras.layers.Hashing(num_bins=40)(pu)),
    keras.layers.Embedding(40, 3)(keras.layers.Hashing(num_bins=40, salt=[3, 5])(pu)),
    keras.layers.Embedding(5, 2)(keras.layers.StringLookup(vocabulary=["bj", "sh", "hz"])(pc)),
    keras.layers.Embedding(5, 2)(keras.layers.IntegerLookup(vocabulary=[7, 8, 9])(pk)),
    keras.layers.Embedding(30, 2)(keras.layers.Hashing(num_bins=30)(pk)),
])
preprocessing = keras.Model([pu, pc, pk], keras.layers.Dense(1, activation="sigmoid", name="p")(pe))
preprocessing.export(os.path.join(out, "keras_preprocessing"), verbose=False)
reference("keras_preprocessing",
          user=np.array([b"alice", b"", b"bob", "h\u00e9llo".encode()], object),
          city=np.array([b"sh", b"paris", b"", b"hz"], object),
          cat=np.array([7, 9, 123, -1], np.int64))


# Wide & deep over tf.Example.
COUNTRIES = ["cn", "us", "de", "fr", "jp"]
vocab = os.path.join(out, "countries.txt")
with open(vocab, "w") as f:
    f.write("\n".join(COUNTRIES) + "\n")


class WideDeep(tf.Module):
    USERS, CROSS = 50, 64

    def __init__(self):
        super().__init__()
        r = np.random.default_rng(1)
        self.vocab = tf.saved_model.Asset(vocab)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(vocab, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                                          tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER),
            default_value=len(COUNTRIES))  # out of vocabulary: the last row
        self.user_emb = tf.Variable(r.standard_normal((self.USERS, 6)).astype(np.float32))
        self.country_emb = tf.Variable(r.standard_normal((len(COUNTRIES) + 1, 4)).astype(np.float32))
        self.wide = tf.Variable(r.standard_normal((self.CROSS, 1)).astype(np.float32) * 0.1)
        self.w1 = tf.Variable(r.standard_normal((11, 8)).astype(np.float32) * 0.3)
        self.b1 = tf.Variable(r.standard_normal(8).astype(np.float32) * 0.1)
        self.w2 = tf.Variable(r.standard_normal((8, 1)).astype(np.float32) * 0.3)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        f = tf.io.parse_example(examples, {
            "user": tf.io.FixedLenFeature([], tf.string, default_value=""),
            "country": tf.io.FixedLenFeature([], tf.string, default_value=""),
            "age": tf.io.FixedLenFeature([1], tf.float32, default_value=[30.0]),
        })
        user = tf.strings.to_hash_bucket_fast(f["user"], self.USERS)
        country = self.table.lookup(f["country"])
        cross = tf.strings.to_hash_bucket_fast(tf.strings.join([f["user"], f["country"]], "_x_"), self.CROSS)
        deep = tf.concat([tf.gather(self.user_emb, user), tf.gather(self.country_emb, country),
                          f["age"] / 100.0], axis=1)
        deep = tf.matmul(tf.nn.relu(tf.matmul(deep, self.w1) + self.b1), self.w2)
        logits = deep + tf.gather(self.wide, cross)
        return {"logits": logits, "probabilities": tf.sigmoid(logits)}


wd = WideDeep()
tf.saved_model.save(wd, os.path.join(out, "wide_deep"), signatures={"serving_default": wd.serve})
os.remove(vocab)  # the SavedModel's assets/ has its copy


def example(user=None, country=None, age=None):
    feat = {}
    if user is not None:
        feat["user"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[user.encode()]))
    if country is not None:
        feat["country"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[country.encode()]))
    if age is not None:
        feat["age"] = tf.train.Feature(float_list=tf.train.FloatList(value=[age]))
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


reference("wide_deep", examples=np.array([
    example("alice", "cn", 23.0), example("bob", "us", 41.5), example("carol", "mars", 35.0),
    example("dave", None, None), example(None, "de", 60.0)], object))


# DeepFM, EasyRec-style: one placeholder per feature.
class DeepFM(tf.Module):
    B, K = 97, 4

    def __init__(self):
        super().__init__()
        r = np.random.default_rng(2)
        self.emb = {n: tf.Variable(r.standard_normal((self.B, self.K)).astype(np.float32) * 0.5, name=n + "_emb")
                    for n in ["user_id", "item_id", "category", "hour"]}
        self.lin = {n: tf.Variable(r.standard_normal((self.B, 1)).astype(np.float32) * 0.1, name=n + "_w")
                    for n in ["user_id", "item_id", "category", "hour"]}
        self.price_v = tf.Variable(r.standard_normal((1, self.K)).astype(np.float32), name="price_v")
        self.price_w = tf.Variable(np.float32(0.2), name="price_w")
        self.w1 = tf.Variable(r.standard_normal((5 * self.K, 16)).astype(np.float32) * 0.3)
        self.b1 = tf.Variable(np.zeros(16, np.float32))
        self.w2 = tf.Variable(r.standard_normal((16, 1)).astype(np.float32) * 0.3)
        self.bias = tf.Variable(np.float32(-0.1))

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="user_id"),
        tf.TensorSpec([None], tf.string, name="item_id"),
        tf.TensorSpec([None], tf.string, name="category"),
        tf.TensorSpec([None], tf.float32, name="price"),
        tf.TensorSpec([None], tf.int64, name="hour"),
    ])
    def serve(self, user_id, item_id, category, price, hour):
        ids = {
            "user_id": tf.strings.to_hash_bucket_fast(user_id, self.B),
            "item_id": tf.strings.to_hash_bucket_fast(item_id, self.B),
            "category": tf.strings.to_hash_bucket_fast(category, self.B),
            "hour": tf.math.floormod(hour, 24),
        }
        names = sorted(ids)
        vs = [tf.gather(self.emb[n], ids[n]) for n in names]
        vs.append(price[:, None] * self.price_v)
        v = tf.stack(vs, axis=1)  # [batch, fields, K]
        first = tf.add_n([tf.gather(self.lin[n], ids[n])[:, 0] for n in names]) + price * self.price_w
        s = tf.reduce_sum(v, axis=1)
        second = 0.5 * tf.reduce_sum(s * s - tf.reduce_sum(v * v, axis=1), axis=1)
        deep = tf.reshape(v, [-1, 5 * self.K])
        deep = tf.matmul(tf.nn.relu(tf.matmul(deep, self.w1) + self.b1), self.w2)[:, 0]
        logits = first + second + deep + self.bias
        return {"logits": logits, "probs": tf.sigmoid(logits)}


fm = DeepFM()
tf.saved_model.save(fm, os.path.join(out, "deepfm"), signatures={"serving_default": fm.serve})
reference("deepfm",
          user_id=np.array([b"u1", b"u2", b"u3", b""], object),
          item_id=np.array([b"i9", b"i9", b"i4", b"i1"], object),
          category=np.array([b"shoes", b"books", b"shoes", b"toys"], object),
          price=np.array([9.5, 120.0, 0.0, 3.25], np.float32),
          hour=np.array([0, 13, 23, 47], np.int64))


# EasyRec-style sparse features over tf.Example: a tag string split at
# "|", a VarLen list of clicked items (strings) and one of categories
# (int64), hashed and looked up by safe_embedding_lookup_sparse.
class SparseRec(tf.Module):
    B, K = 64, 4

    def __init__(self):
        super().__init__()
        r = np.random.default_rng(6)
        self.tag_emb = tf.Variable(r.standard_normal((self.B, self.K)).astype(np.float32), name="tag_emb")
        self.hist_emb = tf.Variable(r.standard_normal((self.B, self.K)).astype(np.float32), name="hist_emb")
        self.cat_emb = tf.Variable(r.standard_normal((10, self.K)).astype(np.float32), name="cat_emb")
        self.w1 = tf.Variable(r.standard_normal((3 * self.K + 1, 8)).astype(np.float32) * 0.3)
        self.b1 = tf.Variable(np.zeros(8, np.float32))
        self.w2 = tf.Variable(r.standard_normal((8, 1)).astype(np.float32) * 0.3)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        f = tf.io.parse_example(examples, {
            "tags": tf.io.FixedLenFeature([], tf.string, default_value=""),
            "hist": tf.io.VarLenFeature(tf.string),
            "cats": tf.io.VarLenFeature(tf.int64),
            "price": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
        })

        def hashed(sp):
            return tf.sparse.SparseTensor(sp.indices, tf.strings.to_hash_bucket_fast(sp.values, self.B), sp.dense_shape)

        tags = tf.compat.v1.string_split(f["tags"], "|")
        tag = tf.nn.safe_embedding_lookup_sparse(self.tag_emb, hashed(tags), None, combiner="mean")
        hist = tf.nn.safe_embedding_lookup_sparse(self.hist_emb, hashed(f["hist"]), None, combiner="sqrtn")
        cat = tf.nn.safe_embedding_lookup_sparse(self.cat_emb, f["cats"], None, combiner="sum")
        deep = tf.concat([tag, hist, cat, tf.math.log1p(f["price"])], axis=1)
        logits = tf.matmul(tf.nn.relu(tf.matmul(deep, self.w1) + self.b1), self.w2)
        return {"logits": logits, "probs": tf.sigmoid(logits)}


sr = SparseRec()
tf.saved_model.save(sr, os.path.join(out, "sparse_rec"), signatures={"serving_default": sr.serve})


def rec_example(tags=None, hist=None, cats=None, price=None):
    feat = {}
    if tags is not None:
        feat["tags"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[tags.encode()]))
    if hist is not None:
        feat["hist"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[h.encode() for h in hist]))
    if cats is not None:
        feat["cats"] = tf.train.Feature(int64_list=tf.train.Int64List(value=cats))
    if price is not None:
        feat["price"] = tf.train.Feature(float_list=tf.train.FloatList(value=[price]))
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


reference("sparse_rec", examples=np.array([
    rec_example("sports|news|sports", ["i1", "i9", "i3"], [1, 4], 9.9),
    rec_example("", None, [7], 120.0),
    rec_example("music", ["i2"], None, None),
    rec_example(None, ["i5", "i5", "i6", "i1"], [0, 0, 9], 0.5),
], object))


# A tanh RNN over tf.while_loop.
class WhileRNN(tf.Module):
    def __init__(self):
        super().__init__()
        r = np.random.default_rng(4)
        self.wx = tf.Variable(r.standard_normal((4, 8)).astype(np.float32) * 0.5)
        self.wh = tf.Variable(r.standard_normal((8, 8)).astype(np.float32) * 0.3)
        self.b = tf.Variable(r.standard_normal(8).astype(np.float32) * 0.1)

    @tf.function(input_signature=[tf.TensorSpec([None, None, 4], tf.float32, name="x")])
    def serve(self, x):
        steps = tf.shape(x)[1]
        h0 = tf.zeros([tf.shape(x)[0], 8])

        def body(t, h):
            return t + 1, tf.tanh(tf.matmul(x[:, t], self.wx) + tf.matmul(h, self.wh) + self.b)

        t, h = tf.while_loop(lambda t, h: t < steps, body, (tf.constant(0), h0))
        return {"h": h, "steps": t}


rnn = WhileRNN()
tf.saved_model.save(rnn, os.path.join(out, "while_rnn"), signatures={"serving_default": rnn.serve})
reference("while_rnn", x=rng.standard_normal((3, 5, 4)).astype(np.float32))


# A BERT-shaped encoder as a TF1 graph (tf1bert.py).
def bert(path):
    g = tf.Graph()
    with g.as_default():
        v1 = tf.compat.v1
        v1.set_random_seed(3)
        ids = v1.placeholder(tf.int32, [None, None], name="input_ids")
        mask = v1.placeholder(tf.int32, [None, None], name="input_mask")
        seg = v1.placeholder(tf.int32, [None, None], name="segment_ids")
        x, pooled, _ = tf1bert.encoder(ids, mask, seg)
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(path)
            sig = v1.saved_model.predict_signature_def(
                {"input_ids": ids, "input_mask": mask, "segment_ids": seg},
                {"sequence_output": x, "pooled_output": pooled})
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
            builder.save()


bert(os.path.join(out, "bert"))
reference("bert",
          input_ids=np.array([[5, 17, 42, 99, 3, 0], [7, 7, 1, 0, 0, 0]], np.int32),
          input_mask=np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], np.int32),
          segment_ids=np.array([[0, 0, 0, 1, 1, 0], [0, 1, 1, 0, 0, 0]], np.int32))


# keras-hub's BERT: BertBackbone built from its config (random weights,
# nothing downloaded) with a classifier head on the pooled output.
import keras_hub  # noqa: E402

backbone = keras_hub.models.BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=32,
                                         intermediate_dim=64, max_sequence_length=16)
hub_in = {k: keras.Input((None,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
hub_out = backbone(hub_in)
hub = keras.Model(hub_in, {"logits": keras.layers.Dense(3, name="logits")(hub_out["pooled_output"]),
                           "sequence_output": hub_out["sequence_output"]})
hub.export(os.path.join(out, "keras_hub_bert"), format="tf_saved_model")
reference("keras_hub_bert",
          token_ids=np.array([[2, 17, 42, 99, 3, 0], [2, 7, 1, 3, 0, 0]], np.int32),
          segment_ids=np.array([[0, 0, 0, 1, 1, 0], [0, 1, 1, 1, 0, 0]], np.int32),
          padding_mask=np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]], np.int32))

with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)
