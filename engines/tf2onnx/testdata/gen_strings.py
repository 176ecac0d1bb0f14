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
OUT_DIR/fingerprint.json  also "legacy": {"N": [...]}: StringToHashBucket
                          (tensorflow::Hash64) of the same strings.
OUT_DIR/numbers.json      [{"s": base64, "f32"|"f64"|"i32"|"i64": TensorFlow's
                          StringToNumber (float bits, integers, as decimal
                          strings) or null where it refuses the string}].
OUT_DIR/strops/           every op of tf2onnx's host string stage (StringJoin,
                          hashing, StringToNumber, AsString, regex replace,
                          Substr, case, ReduceJoin, StringSplit/V2) on string,
                          int64, float and string-matrix inputs.
OUT_DIR/sparse/           embedding_lookup_sparse (each combiner, weighted),
                          safe_embedding_lookup_sparse (2-D and 3-D ids),
                          sparse.to_dense, SparseFillEmptyRows, SparseReshape,
                          unique, segment sums over a SparseTensor of inputs.
OUT_DIR/varlen/           serialized tf.Example with VarLen int64, bytes
                          (hashed) and float features -> embeddings, to_dense.
OUT_DIR/fc/               TensorFlow's feature columns in a TF1 graph
                          (SavedModelBuilder): hashed strings and ints, a
                          vocabulary list with OOV buckets, embedding and
                          indicator columns, a bucketized number.
OUT_DIR/fixture.json      with a second argument, a SavedModel directory
                          whose serving_default takes word string [-1]
                          (the conformance StaticHashTableModule): its
                          outputs for a few words, as ref.json's cases.
OUT_DIR/ref.json          {"features"|"strops"|"sparse"|"varlen"|"fc":
                          {"serving_default": {"inputs", "outputs"}}},
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
    name = {"float32": "FP32", "float64": "FP64", "int64": "INT64", "int32": "INT32"}[str(v.dtype)]
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

# The legacy StringToHashBucket (tensorflow::Hash64) of the same strings.
with open(os.path.join(out, "fingerprint.json")) as f:
    fp = json.load(f)
fp["legacy"] = {str(nb): [int(v) for v in tf.raw_ops.StringToHashBucket(string_tensor=strings, num_buckets=nb).numpy()]
                for nb in [2**63 - 1, 1000]}
with open(os.path.join(out, "fingerprint.json"), "w") as f:
    json.dump(fp, f)

# StringToNumber of odd strings, each out_type: TensorFlow's value (as
# bits for floats) or its refusal.
NUMBERS = ["0", "1", "-1", "+1", " 42 ", "\t7\n", "1.5", "-2e3", ".5", "5.", ".", "e5", "1e", "1e+2", "1E-2",
           "0x1A", "0X1a", "-0x10", "0x", "inf", "-INF", "+Inf", "infinity", "nan", "NaN", "-nan", "", " ",
           "1_000", "1,5", "12abc", "abc", "3.4e39", "1e-50", "2147483647", "2147483648", "-2147483648",
           "-2147483649", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "007",
           "0.1", "3.14159265358979323846", "1" * 31, "1" * 32, "  " + "1" * 29, "--1", "- 1", "1 2",
           "0b101", "1e400", "-0", "-0.0", "\v3\f", "\u00a05"]
numbers = []
for s in NUMBERS:
    row = {"s": base64.b64encode(s.encode()).decode()}
    for name, dt in [("f32", tf.float32), ("f64", tf.float64), ("i32", tf.int32), ("i64", tf.int64)]:
        try:
            v = tf.strings.to_number(tf.constant([s.encode()]), dt).numpy()[0]
        except tf.errors.InvalidArgumentError:
            row[name] = None
            continue
        if name == "f32":
            row[name] = str(int(np.float32(v).view(np.uint32)))
        elif name == "f64":
            row[name] = str(int(np.float64(v).view(np.uint64)))
        else:
            row[name] = str(int(v))
    numbers.append(row)
with open(os.path.join(out, "numbers.json"), "w") as f:
    json.dump(numbers, f)


class StrOps(tf.Module):
    """The host string stage's ops, as feature pipelines use them."""

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="s"),
        tf.TensorSpec([None], tf.string, name="t"),
        tf.TensorSpec([None], tf.string, name="num"),
        tf.TensorSpec([None], tf.string, name="inum"),
        tf.TensorSpec([None], tf.int64, name="k"),
        tf.TensorSpec([None], tf.float32, name="f"),
        tf.TensorSpec([None, 3], tf.string, name="m"),
        tf.TensorSpec([None], tf.string, name="u"),
        tf.TensorSpec([None], tf.string, name="line"),
    ])
    def serve(self, s, t, num, inum, k, f, m, u, line):
        out = {
            "join": tf.strings.join([s, t], "_x_"),
            "join_scalar": tf.strings.join(["pre", s, t]),
            "legacy": tf.raw_ops.StringToHashBucket(string_tensor=s, num_buckets=1000),
            "join_hash": tf.strings.to_hash_bucket_fast(tf.strings.join([s, t], "|"), 50),
            "to_f32": tf.strings.to_number(num, tf.float32),
            "to_f64": tf.strings.to_number(num, tf.float64),
            "to_i32": tf.strings.to_number(inum, tf.int32),
            "to_i64": tf.strings.to_number(inum, tf.int64),
            "as_i": tf.strings.as_string(k),
            "as_iw": tf.strings.as_string(k, width=5, fill="0"),
            "as_f": tf.strings.as_string(f),
            "as_fp": tf.strings.as_string(f, precision=3),
            "as_fe": tf.strings.as_string(f, scientific=True),
            "as_fg": tf.strings.as_string(f, shortest=True),
            "hash_int": tf.strings.to_hash_bucket_fast(tf.strings.as_string(k), 100),
            "re_global": tf.strings.regex_replace(s, "a+", "<\\0>"),
            "re_first": tf.strings.regex_replace(s, "[aeiou]", "_", replace_global=False),
            "re_empty": tf.strings.regex_replace(s, "x*", "-"),
            "re_group": tf.strings.regex_replace(s, "(\\w)(\\w)", "\\2\\1\\\\"),
            "re_dyn": tf.raw_ops.RegexReplace(input=s, pattern=tf.constant("l+"), rewrite=tf.constant("L")),
            "sub_b": tf.strings.substr(u, 1, 2),
            "sub_neg": tf.strings.substr(u, -2, 5),
            "sub_u": tf.strings.substr(u, 1, 2, unit="UTF8_CHAR"),
            "sub_uneg": tf.strings.substr(u, -2, 1, unit="UTF8_CHAR"),
            "sub_neglen": tf.strings.substr(u, 1, -1),
            # pos and len of the input's shape (u has 4 strings).
            "sub_vec": tf.strings.substr(u, tf.constant([1, 0, -3, 2]), tf.constant([2, 1, 2, 0]), unit="UTF8_CHAR"),
            "sub_uneglen": tf.strings.substr(u, 1, -1, unit="UTF8_CHAR"),
            "lower": tf.strings.lower(s),
            "upper": tf.strings.upper(s),
            "rj_all": tf.strings.reduce_join(m),
            "rj_1": tf.strings.reduce_join(m, axis=1, separator=","),
            "rj_0": tf.strings.reduce_join(m, axis=0, keepdims=True, separator="+"),
            "rj_10": tf.strings.reduce_join(m, axis=[1, 0], separator="."),
            "rj_01": tf.strings.reduce_join(m, axis=[0, -1], separator="."),
            "moved": tf.strings.to_hash_bucket_fast(tf.reshape(tf.expand_dims(s, 1), [-1]), 20),
        }
        for name, sp in [("ws", tf.raw_ops.StringSplitV2(input=line, sep="")),
                         ("sep", tf.raw_ops.StringSplitV2(input=line, sep=" ", maxsplit=1)),
                         ("wsmax", tf.raw_ops.StringSplitV2(input=line, sep="", maxsplit=1)),
                         ("any", tf.raw_ops.StringSplit(input=line, delimiter=" ,", skip_empty=True)),
                         ("anye", tf.raw_ops.StringSplit(input=line, delimiter=" ,", skip_empty=False)),
                         ("bytes", tf.raw_ops.StringSplit(input=line, delimiter=""))]:
            out[name + "_i"], out[name + "_v"], out[name + "_s"] = sp
        out["split_hash"] = tf.strings.to_hash_bucket_fast(tf.raw_ops.StringSplitV2(input=line, sep="").values, 10)
        return out


so = StrOps()
tf.saved_model.save(so, os.path.join(out, "strops"), signatures={"serving_default": so.serve})
ref["strops"] = {"serving_default": case(
    so.serve,
    s=np.array([b"banana", b"apple", b"", b"xaax", b"Hello World", "h\u00e9llo".encode()], object),
    t=np.array([b"x", b"", b"yy", b"z", b"!", b"\xff"], object),
    num=np.array([b"1.5", b" -2e3 ", b"0x1A", b".5", b"5.", b"1e-50", b"0.1", b"-0", b"007", b"3.14159265358979"], object),
    inum=np.array([b"0", b"-17", b" 42 ", b"2147483647", b"-2147483648"], object),
    k=np.array([0, -5, 123456, 7], np.int64),
    f=np.array([0.0, -1.5, 3.14159, 1e10, 1e-7, 123456.789], np.float32),
    m=np.array([[b"a", b"b", b"c"], [b"d", b"", b"f"]], object),
    u=np.array(["h\u00e9llo".encode(), "\u65e5\u672c\u8a9e".encode(), b"abcdef", b"xy"], object),
    line=np.array([b"the quick  brown fox", b"", b"  lead, trail  ", b"a,b,,c", b"one"], object),
)}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)


class Sparse(tf.Module):
    """Embedding lookups over a SparseTensor of signature inputs."""

    def __init__(self):
        super().__init__()
        r = np.random.default_rng(3)
        self.emb = tf.Variable(r.standard_normal((10, 4)).astype(np.float32))

    @tf.function(input_signature=[
        tf.TensorSpec([None, 2], tf.int64, name="indices"),
        tf.TensorSpec([None], tf.int64, name="ids"),
        tf.TensorSpec([2], tf.int64, name="dense_shape"),
        tf.TensorSpec([None], tf.float32, name="weights"),
        tf.TensorSpec([None, 3], tf.int64, name="indices3"),
        tf.TensorSpec([3], tf.int64, name="dense_shape3"),
    ])
    def serve(self, indices, ids, dense_shape, weights, indices3, dense_shape3):
        sp = tf.sparse.SparseTensor(indices, ids, dense_shape)
        spw = tf.sparse.SparseTensor(indices, weights, dense_shape)
        sp3 = tf.sparse.SparseTensor(indices3, ids, dense_shape3)
        filled = tf.raw_ops.SparseFillEmptyRows(indices=indices, values=ids, dense_shape=dense_shape,
                                                default_value=tf.constant(-1, tf.int64))
        reshaped = tf.raw_ops.SparseReshape(input_indices=indices3, input_shape=dense_shape3,
                                            new_shape=tf.constant([-1, 2], tf.int64))
        u, ui = tf.unique(ids)
        return {
            "sum": tf.nn.embedding_lookup_sparse(self.emb, sp, None, combiner="sum"),
            "mean": tf.nn.embedding_lookup_sparse(self.emb, sp, None, combiner="mean"),
            "sqrtn": tf.nn.embedding_lookup_sparse(self.emb, sp, None, combiner="sqrtn"),
            "weighted": tf.nn.embedding_lookup_sparse(self.emb, sp, spw, combiner="mean"),
            "safe": tf.nn.safe_embedding_lookup_sparse(self.emb, sp, None, combiner="sqrtn"),
            "safe3": tf.nn.safe_embedding_lookup_sparse(self.emb, sp3, None, combiner="sum"),
            "dense": tf.sparse.to_dense(sp, default_value=-7),
            "fill_i": filled[0], "fill_v": filled[1], "fill_e": tf.cast(filled[2], tf.int32), "fill_r": filled[3],
            "re_i": reshaped[0], "re_s": reshaped[1],
            "unique": u, "unique_idx": ui,
            "seg_n": tf.sparse.segment_sum(self.emb, ids, indices[:, 0], num_segments=6),
            "seg_mean_n": tf.sparse.segment_mean(self.emb, ids, indices[:, 0], num_segments=6),
            "unsorted": tf.math.unsorted_segment_sum(weights, indices[:, 0], 5),
        }


sm = Sparse()
tf.saved_model.save(sm, os.path.join(out, "sparse"), signatures={"serving_default": sm.serve})
ref["sparse"] = {"serving_default": case(
    sm.serve,
    # Rows 1 and 4 are empty; row 3 holds an id twice.
    indices=np.array([[0, 0], [0, 2], [2, 1], [3, 0], [3, 1], [3, 4]], np.int64),
    ids=np.array([3, 9, 0, 5, 5, 2], np.int64),
    dense_shape=np.array([5, 6], np.int64),
    weights=np.array([1.0, 0.5, 2.0, -1.0, 0.25, 3.0], np.float32),
    indices3=np.array([[0, 0, 0], [0, 1, 1], [2, 0, 1], [3, 1, 0], [3, 1, 1], [4, 0, 0]], np.int64),
    dense_shape3=np.array([5, 2, 2], np.int64),
)}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)


class VarLen(tf.Module):
    """tf.Example VarLen features (int64 ids, strings hashed, floats)."""

    def __init__(self):
        super().__init__()
        r = np.random.default_rng(4)
        self.item_emb = tf.Variable(r.standard_normal((20, 3)).astype(np.float32))
        self.tag_emb = tf.Variable(r.standard_normal((16, 3)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        f = tf.io.parse_example(examples, {
            "items": tf.io.VarLenFeature(tf.int64),
            "tags": tf.io.VarLenFeature(tf.string),
            "scores": tf.io.VarLenFeature(tf.float32),
            "age": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0]),
        })
        tags = tf.sparse.SparseTensor(f["tags"].indices, tf.strings.to_hash_bucket_fast(f["tags"].values, 16),
                                      f["tags"].dense_shape)
        return {
            "items": tf.nn.safe_embedding_lookup_sparse(self.item_emb, f["items"], None, combiner="mean"),
            "tags": tf.nn.safe_embedding_lookup_sparse(self.tag_emb, tags, None, combiner="sum"),
            "scores": tf.sparse.to_dense(f["scores"]),
            "items_shape": f["items"].dense_shape,
            # Strings made dense on the host, then hashed and looked up.
            "tags_dense": tf.strings.to_hash_bucket_fast(tf.sparse.to_dense(f["tags"], default_value="?"), 16),
            "tags_text": tf.sparse.to_dense(f["tags"], default_value="?"),
            "age": f["age"],
        }


def example(**feats):
    fs = {}
    for k, v in feats.items():
        if k == "tags":
            fs[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[s.encode() for s in v]))
        elif k in ("scores", "age"):
            fs[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        else:
            fs[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    return tf.train.Example(features=tf.train.Features(feature=fs)).SerializeToString()


vl = VarLen()
tf.saved_model.save(vl, os.path.join(out, "varlen"), signatures={"serving_default": vl.serve})
ref["varlen"] = {"serving_default": case(vl.serve, examples=np.array([
    example(items=[3, 7, 3], tags=["red", "big"], scores=[0.5, 1.5], age=[31.0]),
    example(),
    example(items=[19], tags=["", "h\u00e9llo", "red"], scores=[2.0, -1.0, 4.0, 8.0]),
    example(tags=["blue"], age=[60.0]),
], object))}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)


def feature_columns(path):
    """TensorFlow's feature columns in a TF1 graph (as estimators export
    them): hashed strings and ints, a vocabulary list, embeddings with
    each combiner, an indicator, a bucketized number."""
    v1 = tf.compat.v1
    fc = v1.feature_column
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(7)
        user = v1.placeholder(tf.string, [None], name="user")
        cat = v1.placeholder(tf.int64, [None], name="cat")
        color = v1.placeholder(tf.string, [None], name="color")
        age = v1.placeholder(tf.float32, [None, 1], name="age")
        colors = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"], num_oov_buckets=2)
        cols = [fc.embedding_column(fc.categorical_column_with_hash_bucket("user", 50), 4, combiner="sqrtn"),
                fc.embedding_column(fc.categorical_column_with_hash_bucket("cat", 20, dtype=tf.int64), 3),
                fc.embedding_column(colors, 2, combiner="sum"),
                fc.indicator_column(colors),
                fc.bucketized_column(fc.numeric_column("age"), [18.0, 30.0, 65.0]),
                fc.numeric_column("age")]
        feeds = {"user": user, "cat": cat, "color": color, "age": age}
        out = fc.input_layer(feeds, cols)
        with v1.Session(graph=g) as sess:
            sess.run([v1.global_variables_initializer(), v1.tables_initializer()])
            b = v1.saved_model.Builder(path)
            b.add_meta_graph_and_variables(
                sess, ["serve"], main_op=v1.tables_initializer(),
                signature_def_map={"serving_default": v1.saved_model.predict_signature_def(feeds, {"out": out})})
            b.save()
            inputs = {"user": np.array([b"alice", b"", b"bob", "h\u00e9llo".encode()], object),
                      "cat": np.array([7, -1, 123456789, 0], np.int64),
                      "color": np.array([b"red", b"purple", b"", b"blue"], object),
                      "age": np.array([[17.0], [30.0], [64.5], [99.0]], np.float32)}
            res = sess.run(out, {feeds[k]: v for k, v in inputs.items()})
    return {"inputs": {k: enc(v) for k, v in inputs.items()}, "outputs": {"out": enc(res)}}


ref["fc"] = {"serving_default": feature_columns(os.path.join(out, "fc"))}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)

# The VarLen model on examples without any VarLen value: empty sparse
# tensors (the model takes them padded, see tf2onnx.HostOutput).
ref["varlen_empty"] = {"serving_default": case(vl.serve, examples=np.array([example(age=[5.0]), example()], object))}
with open(os.path.join(out, "ref.json"), "w") as f:
    json.dump(ref, f)
