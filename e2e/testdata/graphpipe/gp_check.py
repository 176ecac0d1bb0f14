"""Acceptance checks of Oracle's GraphPipe Python client (PyPI graphpipe,
pinned in scripts/requirements/graphpipe.txt) against a running eas-server.

Usage: gp_check.py GROUP CONFIG.json

e2e/graphpipe_test.go deploys the services and writes CONFIG: the door's
URLs (with the token as the URL's userinfo, and without), where the
reference cases are (processors/onnx/testdata/<model>.json) and each
model's URL, and the file
this script writes the client's answers to. The script only calls the
client, unchanged, and records what it returns; the Go test compares the
numbers with tensor.Close (docs/development.md, "Comparing floats").
Failures of the client's calls (an exception where none is expected, or
none where one is) are printed and the script exits 1.

Groups:
  infer     remote.execute and remote.execute_multi on every reference case
            of the ONNX test models (FP32, FP64, FP16, INT64, BYTES, and
            BOOL sent as uint8), named inputs and defaults, outputs asked
            for by name and by default.
  metadata  remote.metadata and the get_input_*/get_output_* helpers.
  netrc     the token from ~/.netrc (HOME is set by the test), URL without
            userinfo.
  errors    a wrong token (401) and a bad request (400) raise requests'
            HTTPError with the server's status and text.
  chexnet   the GraphPipe article's ChexNet flow (chexnet.py makes the
            model): each TenCrop batch of ten 224x224 crops in one call,
            the ten crops' probabilities back, averaged as ChexNet does.
"""

import json
import sys

import numpy as np
import requests
from graphpipe import remote

failures = []


def fail(what):
    failures.append(what)
    print("FAIL:", what, flush=True)


NP = {"FP32": np.float32, "FP64": np.float64, "FP16": np.float16,
      "INT64": np.int64, "INT32": np.int32, "BOOL": np.uint8}


def to_np(t):
    if t["datatype"] == "BYTES":
        a = np.array([s.encode() for s in t["data"]], dtype=object)
    else:
        # GraphPipe has no bool: numpy bool arrays go as uint8.
        a = np.array(t["data"], dtype=NP[t["datatype"]])
    return a.reshape(t["shape"])


def record(a):
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind in "SU":
        data = [x.decode() if isinstance(x, bytes) else str(x) for x in a.flat]
        return {"dtype": "bytes", "shape": list(a.shape), "data": data}
    if a.dtype.kind == "f":
        data = [float(x) for x in a.flat]
    else:
        data = [int(x) for x in a.flat]
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": data}


def infer(cfg, out):
    for model, path in sorted(cfg["refs"].items()):
        url = cfg["urls"][model]
        with open(path) as f:
            ref = json.load(f)
        for case in ref["cases"]:
            key = f"{model}/{case['name']}"
            inputs = [to_np(t) for t in case["inputs"]]
            names = [t["name"] for t in case["inputs"]]
            outs = [t["name"] for t in case["outputs"]]
            try:
                if len(inputs) == 1 and len(outs) == 1:
                    # The one-tensor form: no names, the model's defaults.
                    got = [remote.execute(url, inputs[0])]
                elif case is ref["cases"][0]:
                    # Named inputs, outputs asked for by name.
                    got = remote.execute_multi(url, inputs, names, outs)
                else:
                    # No names: inputs by position, every output.
                    got = remote.execute_multi(url, inputs, None, None)
            except Exception as e:  # noqa: BLE001 - every error is a disagreement here
                fail(f"{key}: {type(e).__name__}: {e}")
                continue
            out[key] = [record(g) for g in got]


def metadata(cfg, out):
    url = cfg["url"]
    try:
        m = remote.metadata(url)
        out["metadata"] = {
            "name": m.Name().decode(),
            "server": m.Server().decode(),
            "version": m.Version().decode(),
            "input_names": remote.get_input_names(url),
            "output_names": remote.get_output_names(url),
            "input_shapes": remote.get_input_shapes(url),
            "output_shapes": remote.get_output_shapes(url),
            "input_types": [str(t) for t in remote.get_input_types(url)],
            "output_types": [str(t) for t in remote.get_output_types(url)],
        }
    except Exception as e:  # noqa: BLE001
        fail(f"metadata: {type(e).__name__}: {e}")


def netrc(cfg, out):
    x = np.zeros((2, 16), dtype=np.float32)
    try:
        out["netrc"] = [record(remote.execute(cfg["url_plain"], x))]
    except Exception as e:  # noqa: BLE001
        fail(f"netrc: {type(e).__name__}: {e}")


def expect_http_error(what, status, fn):
    try:
        fn()
    except requests.HTTPError as e:
        if e.response is None or e.response.status_code != status:
            fail(f"{what}: {e}, want HTTP {status}")
        return
    except Exception as e:  # noqa: BLE001
        fail(f"{what}: {type(e).__name__}: {e}, want requests.HTTPError {status}")
        return
    fail(f"{what}: no error, want HTTP {status}")


def errors(cfg, out):
    x = np.zeros((1, 16), dtype=np.float32)
    expect_http_error("wrong token", 401, lambda: remote.execute(cfg["url_wrong"], x))
    expect_http_error("wrong shape", 400, lambda: remote.execute(cfg["url"], np.zeros((1, 3), dtype=np.float32)))
    expect_http_error("wrong dtype", 400, lambda: remote.execute(cfg["url"], np.zeros((1, 16), dtype=np.int32)))
    out["errors"] = "checked"


def chexnet(cfg, out):
    with open(cfg["chexnet_refs"]) as f:
        ref = json.load(f)
    for case in ref["cases"]:
        x = to_np(case["inputs"][0])
        try:
            probs = remote.execute(cfg["chexnet_url"], x)
        except Exception as e:  # noqa: BLE001
            fail(f"chexnet {case['name']}: {type(e).__name__}: {e}")
            continue
        out["chexnet/" + case["name"]] = [record(probs), record(probs.mean(axis=0))]


def main():
    group, path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        cfg = json.load(f)
    out = {}
    {"infer": infer, "metadata": metadata, "netrc": netrc, "errors": errors, "chexnet": chexnet}[group](cfg, out)
    with open(cfg["out"], "w") as f:
        json.dump(out, f)
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print(f"{group}: ok")


if __name__ == "__main__":
    main()
