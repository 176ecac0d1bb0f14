"""Answers what batch_inference's ModelHost answers in process, for the
acceptance test: stdin is JSON {"module": path, "class": name, "init_args":
[...], "init_kwargs": {...}, "requests": [[{"shape", "datatype", "data"}, ...], ...]};
each request goes through host.predict in turn, and stdout is JSON: per
request, its outputs (name, shape, datatype, data) or {"error": message}.
"""

import importlib.util
import json
import sys

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
    out = []
    with host:
        for req in job["requests"]:
            args = [np.array(t["data"], dtype=NP[t["datatype"]]).reshape(t["shape"]) for t in req]
            try:
                r = host.predict(*args)
            except Exception as e:
                out.append({"error": "%s: %s" % (type(e).__name__, e)})
                continue
            if isinstance(r, (tuple, list)):
                named = [("output__%d" % i, o) for i, o in enumerate(r)]
            else:
                named = [("output__0", r)]
            out.append([{"name": n, "shape": list(np.asarray(o).shape), "datatype": KS[str(np.asarray(o).dtype)],
                         "data": np.asarray(o).reshape(-1).tolist()} for n, o in named])
    json.dump(out, sys.stdout)
    try:
        import batch_inference
        sys.stderr.write("reference batch_inference: %s\n" % batch_inference.__file__)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
