#!/usr/bin/python3
"""gen-test-models.py writes the small ONNX test models of processors/onnx and
their numpy-computed reference outputs.

Run with Debian's interpreter, which sees python3-onnx (scripts/install-test-deps.sh):

    /usr/bin/python3 scripts/gen-test-models.py            # test models + example model
    /usr/bin/python3 scripts/gen-test-models.py --bench-mlp /tmp/mlp2048.onnx

Every model is built with onnx.helper from seeded random weights, so a rerun
writes the same bytes. For each model <name>.onnx a <name>.json holds test
cases: inputs and expected outputs in KServe v2 JSON form (name, datatype,
shape, flat row-major data), computed here with numpy in the model's own
precision. The Go tests run the model through ONNX Runtime and compare.

--bench-mlp PATH writes the benchmark MLP of issue 4 (three 2048x2048 fp32
layers, about 50 MB, input "input" [N,2048]) to PATH; it is never committed.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 7  # ONNX 1.8+; every ONNX Runtime since 1.6 reads it

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(REPO, "processors", "onnx", "testdata")
EXAMPLES = os.path.join(REPO, "examples")

KSERVE = {
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
    np.dtype(np.int64): "INT64",
    np.dtype(np.int32): "INT32",
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.float16): "FP16",
    np.dtype(object): "BYTES",
}


def make_model(name, nodes, inputs, outputs, inits, extra_opsets=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, v) for d, v in extra_opsets],
        producer_name="eas-server gen-test-models.py",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def init(name, arr):
    return numpy_helper.from_array(arr, name)


def tensor_json(name, arr):
    arr = np.asarray(arr)
    data = arr.reshape(-1).tolist()
    if arr.dtype == np.float16:
        data = [float(v) for v in data]  # exact: every fp16 value is a float
    return {
        "name": name,
        "datatype": KSERVE[arr.dtype],
        "shape": list(arr.shape),
        "data": data,
    }


def case(name, inputs, outputs):
    return {
        "name": name,
        "inputs": [tensor_json(k, v) for k, v in inputs],
        "outputs": [tensor_json(k, v) for k, v in outputs],
    }


def save(model, cases, out_dir, name):
    os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, os.path.join(out_dir, name + ".onnx"))
    if cases is not None:
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump({"model": name + ".onnx", "cases": cases}, f, indent=1)
            f.write("\n")


# --- mlp: input [N,16] fp32 -> 32 (relu) -> output [N,8] -------------------


def mlp_weights(rng, sizes):
    ws = []
    for i in range(len(sizes) - 1):
        w = (rng.standard_normal((sizes[i], sizes[i + 1])) / np.sqrt(sizes[i])).astype(np.float32)
        b = (rng.standard_normal(sizes[i + 1]) * 0.1).astype(np.float32)
        ws.append((w, b))
    return ws


def mlp_model(name, sizes, ws):
    nodes, inits = [], []
    prev = "input"
    for i, (w, b) in enumerate(ws):
        inits += [init(f"w{i}", w), init(f"b{i}", b)]
        last = i == len(ws) - 1
        out = "output" if last else f"h{i}"
        gemm_out = out if last else f"g{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [gemm_out], name=f"gemm{i}"))
        if not last:
            nodes.append(helper.make_node("Relu", [gemm_out], [out], name=f"relu{i}"))
        prev = out
    return make_model(
        name,
        nodes,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", sizes[0]])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", sizes[-1]])],
        inits,
    )


def mlp_ref(ws, x):
    # References are computed in float64 and rounded once: float32 BLAS
    # results vary in the last bit with threading and CPU, float64 ones do
    # not survive the final rounding, so reruns write the same file.
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(ws):
        h = h @ w.astype(np.float64) + b
        if i != len(ws) - 1:
            h = np.maximum(h, 0)
    return h.astype(np.float32)


def gen_mlp(rng):
    sizes = [16, 32, 8]
    ws = mlp_weights(rng, sizes)
    model = mlp_model("mlp", sizes, ws)
    cases = []
    for n in (1, 3, 5):
        x = rng.standard_normal((n, 16)).astype(np.float32)
        cases.append(case(f"batch{n}", [("input", x)], [("output", mlp_ref(ws, x))]))
    return model, cases


# --- multi_io: a [N,4] fp32, b [N,4] fp32, w [N,1] fp64 -> sum, prod, total -----


def gen_multi_io(rng):
    nodes = [
        helper.make_node("Add", ["a", "b"], ["sum"]),
        helper.make_node("Mul", ["a", "b"], ["prod"]),
        helper.make_node("Cast", ["sum"], ["sum64"], to=TensorProto.DOUBLE),
        helper.make_node("Mul", ["sum64", "w"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted", "axes"], ["total"], keepdims=1),
    ]
    model = make_model(
        "multi_io",
        nodes,
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("w", TensorProto.DOUBLE, ["batch", 1]),
        ],
        [
            helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("prod", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("total", TensorProto.DOUBLE, ["batch", 1]),
        ],
        [init("axes", np.array([1], dtype=np.int64))],
    )
    cases = []
    for n in (1, 2, 4):
        a = rng.standard_normal((n, 4)).astype(np.float32)
        b = rng.standard_normal((n, 4)).astype(np.float32)
        w = rng.standard_normal((n, 1))
        s = (a + b).astype(np.float32)
        total = (s.astype(np.float64) * w).sum(axis=1, keepdims=True)
        cases.append(
            case(
                f"batch{n}",
                [("a", a), ("b", b), ("w", w)],
                [("sum", s), ("prod", (a * b).astype(np.float32)), ("total", total)],
            )
        )
    return model, cases


# --- seq: tokens [N,T,6] fp32 -> hidden [N,T,5] (per token), pooled [N,5] -----


def gen_seq(rng):
    d, e = 6, 5
    w = (rng.standard_normal((d, e)) / np.sqrt(d)).astype(np.float32)
    b = (rng.standard_normal(e) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["tokens", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["hidden"]),
        helper.make_node("ReduceMean", ["hidden"], ["pooled"], axes=[1], keepdims=0),
    ]
    model = make_model(
        "seq",
        nodes,
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", "time", d])],
        [
            helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "time", e]),
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", e]),
        ],
        [init("w", w), init("b", b)],
    )
    cases = []
    for n, t in ((1, 3), (2, 7), (3, 1)):
        x = rng.standard_normal((n, t, d)).astype(np.float32)
        h = np.tanh(x.astype(np.float64) @ w.astype(np.float64) + b)
        cases.append(
            case(f"n{n}_t{t}", [("tokens", x)], [("hidden", h.astype(np.float32)), ("pooled", h.mean(axis=1).astype(np.float32))])
        )
    return model, cases


# --- int_bool: ids [N,K] int64, mask [N,K] bool -> emb, kept, count -----------


def gen_int_bool(rng):
    vocab, dim = 10, 3
    table = rng.standard_normal((vocab, dim)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
        helper.make_node("Where", ["mask", "ids", "minus_one"], ["kept"]),
        helper.make_node("Cast", ["mask"], ["mask64"], to=TensorProto.INT64),
        helper.make_node("ReduceSum", ["mask64", "axes"], ["count"], keepdims=0),
        helper.make_node("Not", ["mask"], ["inverted"]),
    ]
    model = make_model(
        "int_bool",
        nodes,
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "len"]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", "len"]),
        ],
        [
            helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["batch", "len", dim]),
            helper.make_tensor_value_info("kept", TensorProto.INT64, ["batch", "len"]),
            helper.make_tensor_value_info("count", TensorProto.INT64, ["batch"]),
            helper.make_tensor_value_info("inverted", TensorProto.BOOL, ["batch", "len"]),
        ],
        [
            init("table", table),
            init("minus_one", np.array(-1, dtype=np.int64)),
            init("axes", np.array([1], dtype=np.int64)),
        ],
    )
    cases = []
    for n, k in ((1, 4), (2, 4), (3, 2)):
        ids = rng.integers(0, vocab, size=(n, k)).astype(np.int64)
        mask = rng.random((n, k)) < 0.5
        cases.append(
            case(
                f"n{n}_k{k}",
                [("ids", ids), ("mask", mask)],
                [
                    ("emb", table[ids]),
                    ("kept", np.where(mask, ids, -1).astype(np.int64)),
                    ("count", mask.astype(np.int64).sum(axis=1)),
                    ("inverted", ~mask),
                ],
            )
        )
    return model, cases


# --- conv: image [N,1,8,8] -> conv3x3x4 + relu -> maxpool2 -> gemm -> softmax --


def conv2d(x, w, b):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, f, h, wd), dtype=np.float64)
    for i in range(h):
        for j in range(wd):
            patch = xp[:, :, i : i + kh, j : j + kw]  # n,c,kh,kw
            out[:, :, i, j] = np.einsum("nckl,fckl->nf", patch, w)
    return out + b.reshape(1, f, 1, 1)


def gen_conv(rng):
    f = 4
    cw = (rng.standard_normal((f, 1, 3, 3)) / 3).astype(np.float32)
    cb = (rng.standard_normal(f) * 0.1).astype(np.float32)
    gw = (rng.standard_normal((f * 16, 10)) / 8).astype(np.float32)
    gb = (rng.standard_normal(10) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["image", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "gw", "gb"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    model = make_model(
        "conv",
        nodes,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        [init("cw", cw), init("cb", cb), init("gw", gw), init("gb", gb)],
    )
    cases = []
    for n in (1, 2):
        x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
        x64, gw64 = x.astype(np.float64), gw.astype(np.float64)
        r = np.maximum(conv2d(x64, cw.astype(np.float64), cb), 0)
        p = r.reshape(n, f, 4, 2, 4, 2).max(axis=(3, 5))
        logits = p.reshape(n, -1) @ gw64 + gb
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        cases.append(case(f"batch{n}", [("image", x)], [("probs", probs)]))
    return model, cases


# --- batch_sum: x [N,3] -> doubled [N,3], total [1,1] (sums over the batch) ----


def gen_batch_sum(rng):
    """A model whose output does not follow the batch: merged runs of several
    requests would mix their rows, so the server must run them one by one."""
    nodes = [
        helper.make_node("Add", ["x", "x"], ["doubled"]),
        helper.make_node("ReduceSum", ["x"], ["sum11"], keepdims=1),
        # Reshape to a shape computed from the input's (always [1,1]) so
        # shape inference cannot pin the first dim: only a run can show that
        # "total" does not follow the batch, as with many real exports.
        helper.make_node("Shape", ["x"], ["xshape"]),
        helper.make_node("Gather", ["xshape", "idx1"], ["width"], axis=0),
        helper.make_node("Div", ["width", "width"], ["one"]),
        helper.make_node("Concat", ["one", "one"], ["target"], axis=0),
        helper.make_node("Reshape", ["sum11", "target"], ["total"]),
    ]
    model = make_model(
        "batch_sum",
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [
            helper.make_tensor_value_info("doubled", TensorProto.FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("total", TensorProto.FLOAT, ["k", "l"]),
        ],
        [init("idx1", np.array([1], dtype=np.int64))],
    )
    cases = []
    for n in (1, 2):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        cases.append(case(f"batch{n}", [("x", x)], [("doubled", x + x), ("total", x.sum(dtype=np.float32).reshape(1, 1))]))
    return model, cases


# --- strings: text [N,2] BYTES -> same (Identity), ids (ai.onnx.ml LabelEncoder) --


def gen_strings(rng):
    vocab = ["apple", "banana", "cherry", "durian", "elderberry"]
    nodes = [
        helper.make_node("Identity", ["text"], ["same"]),
        helper.make_node(
            "LabelEncoder",
            ["text"],
            ["ids"],
            domain="ai.onnx.ml",
            keys_strings=vocab,
            values_int64s=list(range(10, 10 + len(vocab))),
            default_int64=-1,
        ),
    ]
    model = make_model(
        "strings",
        nodes,
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch", 2])],
        [
            helper.make_tensor_value_info("same", TensorProto.STRING, ["batch", 2]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 2]),
        ],
        [],
        extra_opsets=[("ai.onnx.ml", 2)],
    )
    words = vocab + ["unknown", "", "h\u00e9llo w\u00f6rld"]
    cases = []
    picks = [rng.integers(0, len(vocab), size=2), [0, 5, 6, 7, 3, 1]]  # words[5:] are not in vocab
    for n, pick in zip((1, 3), picks):
        # The second case covers an unknown word, an empty string and UTF-8.
        text = np.array([words[i] for i in pick], dtype=object).reshape(n, 2)
        lookup = {w: 10 + i for i, w in enumerate(vocab)}
        ids = np.array([lookup.get(w, -1) for w in text.reshape(-1)], dtype=np.int64).reshape(n, 2)
        cases.append(case(f"batch{n}", [("text", text)], [("same", text), ("ids", ids)]))
    return model, cases


# --- half: h [N,4] FP16 -> doubled [N,4] FP32 --------------------------------


def gen_half(rng):
    nodes = [
        helper.make_node("Cast", ["h"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["f", "f"], ["doubled"]),
    ]
    model = make_model(
        "half",
        nodes,
        [helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["batch", 4])],
        [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, ["batch", 4])],
        [],
    )
    cases = []
    for n in (1, 2):
        h = rng.standard_normal((n, 4)).astype(np.float16)
        cases.append(case(f"batch{n}", [("h", h)], [("doubled", h.astype(np.float32) * 2)]))
    return model, cases


# --- the EAS Torch request body for examples/requests ------------------------


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def torch_request(x):
    """Encodes pytorch.eas.PredictRequest{inputs: [ArrayProto(DT_FLOAT, shape, float_val)]}."""
    dims = b"".join(varint(d) for d in x.shape)
    shape = field(1, 2, dims)  # ArrayShape.dim, packed
    floats = struct.pack("<%df" % x.size, *x.reshape(-1).tolist())
    array = field(1, 0, varint(1)) + field(2, 2, shape) + field(3, 2, floats)  # DT_FLOAT=1
    return field(1, 2, array)


def write_bench_mlp(path):
    rng = np.random.default_rng(2048)
    sizes = [2048, 2048, 2048, 2048]
    model = mlp_model("bench_mlp", sizes, mlp_weights(rng, sizes))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save(model, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-mlp", metavar="PATH", help="write only the 3x2048x2048 benchmark MLP to PATH")
    ap.add_argument("--out", default=TESTDATA, help="test model directory (default %(default)s)")
    ap.add_argument("--examples", default=EXAMPLES, help="examples directory (default %(default)s)")
    args = ap.parse_args()
    if args.bench_mlp:
        write_bench_mlp(args.bench_mlp)
        return

    gens = [("mlp", gen_mlp), ("multi_io", gen_multi_io), ("seq", gen_seq), ("int_bool", gen_int_bool), ("conv", gen_conv), ("batch_sum", gen_batch_sum), ("strings", gen_strings), ("half", gen_half)]
    for i, (name, gen) in enumerate(gens):
        model, cases = gen(np.random.default_rng(1000 + i))
        save(model, cases, args.out, name)
        print(f"wrote {os.path.join(args.out, name)}.onnx/.json")
        if name == "mlp":
            # The same MLP with its weights in an external-data file, as
            # torch.onnx.export writes models over 2 GB: a directory model
            # whose .onnx refers to a file beside it.
            ext = onnx.ModelProto()
            ext.CopyFrom(model)
            ext_dir = os.path.join(args.out, "external")
            os.makedirs(ext_dir, exist_ok=True)
            for stale in ("model.onnx", "weights.bin"):  # onnx appends to the data file
                if os.path.exists(os.path.join(ext_dir, stale)):
                    os.remove(os.path.join(ext_dir, stale))
            onnx.save_model(
                ext,
                os.path.join(ext_dir, "model.onnx"),
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location="weights.bin",
                size_threshold=0,
            )
            print(f"wrote {ext_dir}/model.onnx + weights.bin")
            # The example service serves the same tiny MLP; its request body
            # is the first test case as an EAS Torch PredictRequest.
            save(model, None, os.path.join(args.examples, "models"), "mlp")
            x = np.array(cases[0]["inputs"][0]["data"], dtype=np.float32).reshape(cases[0]["inputs"][0]["shape"])
            os.makedirs(os.path.join(args.examples, "requests"), exist_ok=True)
            with open(os.path.join(args.examples, "requests", "pytorch_mlp.pb"), "wb") as f:
                f.write(torch_request(x))
            print(f"wrote {args.examples}/models/mlp.onnx, {args.examples}/requests/pytorch_mlp.pb")


if __name__ == "__main__":
    sys.exit(main())
