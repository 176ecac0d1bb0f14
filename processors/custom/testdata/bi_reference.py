"""Answers what batch_inference's ModelHost answers in process, for the
acceptance test: stdin is JSON {"module": path, "class": name, "init_args":
[...], "init_kwargs": {...}, "requests": [[{"shape", "datatype", "data"}, ...], ...]};
each request goes through host.predict in turn, and stdout is JSON: per
request, its outputs (name, shape, datatype, data) or {"error": message}.
With "together": true the requests are sent at once from threads, and the
host waits for all of them (wait_n, a long wait_ms), so that ModelHost runs
them as one batch.
"""

import importlib.util
import json
import sys
import threading

import numpy as np

NP = {"FP32": "float32", "FP64": "float64", "INT64": "int64", "INT32": "int32", "UINT8": "uint8", "BOOL": "bool"}
KS = {v: k for k, v in NP.items()}


def main():
    job = json.load(sys.stdin)
    spec = importlib.util.spec_from_file_location("bi_module", job["module"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cls = getattr(mod, job["class"])
    host = cls.host(*job.get("init_args", []), **job.get("init_kwargs", {}))
    reqs = [[np.array(t["data"], dtype=NP[t["datatype"]]).reshape(t["shape"]) for t in req] for req in job["requests"]]
    if job.get("tensor") == "pt":  # the class's batcher works on torch tensors
        import torch
        reqs = [[torch.from_numpy(a) for a in req] for req in reqs]
    answers = [None] * len(reqs)

    def one(i):
        try:
            answers[i] = host.predict(*reqs[i])
        except Exception as e:
            answers[i] = e

    if job.get("together"):
        host.wait_n, host.wait_ms = len(reqs), 10000
    out = []
    with host:
        if job.get("together"):
            threads = [threading.Thread(target=one, args=(i,)) for i in range(len(reqs))]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        else:
            for i in range(len(reqs)):
                one(i)
    for r in answers:
        if isinstance(r, Exception):
            out.append({"error": "%s: %s" % (type(r).__name__, r)})
            continue
        if isinstance(r, (tuple, list)):
            named = [("output__%d" % i, o) for i, o in enumerate(r)]
        else:
            named = [("output__0", r)]
        named = [(n, o.numpy() if hasattr(o, "numpy") and not isinstance(o, np.ndarray) else np.asarray(o)) for n, o in named]
        out.append([{"name": n, "shape": list(o.shape), "datatype": KS[str(o.dtype)],
                     "data": o.reshape(-1).tolist()} for n, o in named])
    json.dump(out, sys.stdout)
    try:
        import batch_inference
        sys.stderr.write("reference batch_inference: %s\n" % batch_inference.__file__)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
