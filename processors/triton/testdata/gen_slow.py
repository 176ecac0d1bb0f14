"""Writes testdata/model_repository/slow/1/model.onnx: a deliberately slow
model (a chain of 400 small MatMul + Tanh layers sharing one weight), so
that concurrent requests queue behind a running one and dynamic batching
can be observed regardless of how fast the machine is.

Run with the Debian interpreter: /usr/bin/python3 testdata/gen_slow.py
(from processors/triton). The output is deterministic.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LAYERS = 400
rng = np.random.default_rng(7)
w0 = (rng.standard_normal((16, 64)) * 0.25).astype(np.float32)
w = (rng.standard_normal((64, 64)) * 0.125).astype(np.float32)
w1 = (rng.standard_normal((64, 8)) * 0.125).astype(np.float32)

nodes = [helper.make_node("MatMul", ["input", "w0"], ["h0"])]
for i in range(LAYERS):
    nodes.append(helper.make_node("MatMul", [f"h{i}", "w"], [f"m{i}"]))
    nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"h{i + 1}"]))
nodes.append(helper.make_node("MatMul", [f"h{LAYERS}", "w1"], ["output"]))

graph = helper.make_graph(
    nodes,
    "slow",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 8])],
    [numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w, "w"), numpy_helper.from_array(w1, "w1")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="eas-server-tests")
model.ir_version = 8
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(__file__), "model_repository", "slow", "1", "model.onnx")
os.makedirs(os.path.dirname(out), exist_ok=True)
onnx.save(model, out)
