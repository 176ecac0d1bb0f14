"""batch-inference's own way to serve the benchmark's model: a minimal
threaded HTTP server (http.server) taking KServe v2 JSON, calling
ModelHost.predict (batching on: ModelHost(max_batch_size=32, wait_ms=5),
the decorator's) or the model's predict_batch directly (off).
Usage: modelhost_server.py PORT on|off [torch]: torch serves model_torch.py's FC
(torch tensors in and out) instead of model.py's MLP."""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import MLP  # noqa: E402

port, mode = int(sys.argv[1]), sys.argv[2]
torch_model = len(sys.argv) > 3 and sys.argv[3] == "torch"
if torch_model:
    import torch
    from model_torch import FC as MLP  # noqa: F811
if mode == "on":
    host = MLP.host()
    host.start()
    predict = host.predict
else:
    model = MLP.host().model_obj
    predict = model.predict_batch


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave without waiting for an ACK

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        t = req["inputs"][0]
        x = np.asarray(t["data"], dtype=np.float32).reshape(t["shape"])
        if torch_model:
            x = torch.from_numpy(x)
        y = predict(x)
        if torch_model:
            y = y.numpy()
        body = json.dumps({"outputs": [{"name": "output__0", "datatype": "FP32", "shape": list(y.shape),
                                        "data": y.reshape(-1).tolist()}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
