#!/usr/bin/python3
"""Helper of scripts/bench-torchscript.sh (Debian's python3-torch 1.13,
python3-torchvision 0.14, python3-onnx).

  gen DIR      writes DIR/resnet18.pt (torch.jit.trace, eval mode) and
               DIR/resnet18.onnx (torch.onnx.export, dynamic batch axis) of
               torchvision's ResNet-18 with random, seeded weights; prints one
               JSON object (files, and the ONNX export's error if it failed).
  inproc MODEL BATCH THREADS SECONDS WARMUP
               runs the TorchScript module in a loop in this process
               (torch.set_num_threads, torch.inference_mode) on a random
               BATCHx3x224x224 float32 input; prints one JSON object with
               images/s, ms per run and the CPU cores it used.
  check MODEL TOKEN URL INPUT [URL INPUT ...]
               sends one random 1x3x224x224 image as KServe v2 JSON to each
               URL (/v2/models/NAME/infer) as input INPUT and compares the
               answer with the TorchScript module run here by the rule of
               tensor.Close (tensor/close.go): every |got - want| within
               ATOL + RTOL * max|want|, tensor.F32Reformulated's numbers (the
               ONNX service is another runtime).
"""
import json
import os
import sys
import time

import torch

# tensor.F32Reformulated (tensor/close.go); a tensor test keeps them equal.
RTOL, ATOL = 1e-4, 1e-5


def gen(out):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    example = torch.randn(1, 3, 224, 224)
    res = {"torchscript": os.path.join(out, "resnet18.pt"), "onnx": os.path.join(out, "resnet18.onnx")}
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
        traced.save(res["torchscript"])
        x = torch.randn(2, 3, 224, 224)
        torch.testing.assert_close(torch.jit.load(res["torchscript"])(x), model(x))
        try:
            torch.onnx.export(model, example, res["onnx"], input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=13)
            import onnx

            onnx.checker.check_model(onnx.load(res["onnx"]))
            # ONNX Runtime is not importable here: the ONNX graph is checked
            # structurally; the script compares both services' answers.
        except Exception as e:  # reported, not fatal: the TorchScript points still run
            res["onnx_error"] = f"{type(e).__name__}: {e}"
            res["onnx"] = ""
    print(json.dumps(res))


def inproc(path, batch, threads, seconds, warmup):
    torch.set_num_threads(threads)
    m = torch.jit.load(path).eval()
    if os.environ.get("EAS_BENCH_OPTIMIZE") == "inference":
        # What model_config.torchscript_optimize "inference" does at load.
        m = torch.jit.optimize_for_inference(torch.jit.freeze(m))
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            m(x)
        runs = 0
        cpu0 = time.process_time()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            m(x)
            runs += 1
        el = time.perf_counter() - start
        cpu = time.process_time() - cpu0
    print(json.dumps({"batch": batch, "threads": torch.get_num_threads(), "runs": runs, "seconds": el,
                      "rows_per_second": runs * batch / el, "mean_run_ms": 1000 * el / runs,
                      "cores": cpu / el}))


def check(model, token, targets):
    import urllib.request

    torch.manual_seed(2)
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        ref = torch.jit.load(model)(x).flatten()
    for url, name in zip(targets[::2], targets[1::2]):
        body = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                                       "data": x.flatten().tolist()}]}).encode()
        req = urllib.request.Request(url, data=body, headers={"Authorization": token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            out = json.load(r)["outputs"][0]
        got = torch.tensor(out["data"], dtype=torch.float32)
        if got.shape != ref.shape:
            sys.exit(f"{url}: answer has shape {list(got.shape)}, python3-torch's {list(ref.shape)}")
        err = (got - ref).abs().max().item()
        bound = ATOL + RTOL * ref.abs().max().item()
        if err > bound:
            sys.exit(f"{url}: answer differs from python3-torch's (max abs error {err:g} > {bound:g})")
        print(f"{url}: {out['name']} {out['shape']} matches python3-torch (max abs error {err:.2g}, {err / bound:.2g} of the bound)",
              file=sys.stderr)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "inproc":
        inproc(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
    elif len(sys.argv) >= 6 and sys.argv[1] == "check" and len(sys.argv) % 2 == 0:
        check(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
