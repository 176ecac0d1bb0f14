#!/usr/bin/python3
"""Reference runner for the Caffe translator's tests: OpenCV's DNN Caffe importer.

The Go translator (Caffe -> ONNX) is checked against an independent reader of
the same files: cv2.dnn.readNetFromCaffe (Debian python3-opencv, 4.6). Run it
with /usr/bin/python3 (needs numpy and cv2 only).

  opencv_ref.py run <deploy.prototxt> <weights.caffemodel> <dir>
      Reads <dir>/request.json:
        {"inputs": [{"name": str, "shape": [ints], "file": "in0.f32"}],
         "outputs": [blob names]}
      (input files: raw little-endian float32, row-major, relative to <dir>),
      runs the net on the OpenCV backend / CPU target and writes <dir>/out<i>.f32
      and <dir>/response.json:
        {"outputs": [{"name": str, "shape": [ints], "file": "out0.f32"}]}.

  opencv_ref.py bench <deploy.prototxt> <weights.caffemodel> --input NAME
                --shape C,H,W --batch 1,16 --threads T --seconds S
      Prints one JSON line per batch size:
        {"batch":B,"threads":T,"runs":n,"records_per_s":B*n/elapsed,"ms_per_run":...}
      (random N(0,1) float32 input [B,C,H,W]; 3 warm-up runs, then forward
      repeatedly for S seconds).

Output names are Caffe blob (top) names. OpenCV's forward() takes layer names,
so the script reads the prototxt's layer list (a small text-format parser) and
maps each blob to the last layer writing it (Caffe's in-place semantics) and
that layer's output index; Split tops resolve to their bottom, net inputs are
echoed back.

Failures exit non-zero with a message on stderr. See OPENCV_NOTES.md for the
layers where OpenCV's importer differs from Caffe.
"""

import argparse
import json
import os
import re
import sys
import time

import numpy as np
import cv2


class Failure(Exception):
    pass


_TOKEN = re.compile(r"""\s+|#[^\n]*|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[{}<>\[\]:,;]|[^\s{}<>\[\]:,;"'#]+""")


def _tokens(text):
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise Failure("prototxt: cannot tokenize at offset %d" % pos)
        pos = m.end()
        tok = m.group(0)
        if tok[0].isspace() or tok[0] == "#":
            continue
        yield tok


def _unquote(tok):
    if tok[0] in "\"'":
        return re.sub(r"\\(.)", r"\1", tok[1:-1])
    return tok


def parse_text_proto(text):
    """Protobuf text format -> list of (field, value); value is a str or a nested list."""
    toks = list(_tokens(text))
    pos = 0

    def message(end):
        nonlocal pos
        fields = []
        while pos < len(toks):
            tok = toks[pos]
            if tok == end:
                pos += 1
                return fields
            if tok in ",;":
                pos += 1
                continue
            name = tok
            pos += 1
            if pos < len(toks) and toks[pos] == ":":
                pos += 1
            if pos >= len(toks):
                raise Failure("prototxt: field %s has no value" % name)
            tok = toks[pos]
            if tok in ("{", "<"):
                pos += 1
                fields.append((name, message("}" if tok == "{" else ">")))
            elif tok == "[":
                pos += 1
                while pos < len(toks) and toks[pos] != "]":
                    if toks[pos] != ",":
                        fields.append((name, _unquote(toks[pos])))
                    pos += 1
                pos += 1
            else:
                value = _unquote(tok)
                pos += 1
                # adjacent string literals concatenate
                while tok[0] in "\"'" and pos < len(toks) and toks[pos][0] in "\"'":
                    value += _unquote(toks[pos])
                    pos += 1
                fields.append((name, value))
        if end is not None:
            raise Failure("prototxt: missing %r" % end)
        return fields

    return message(None)


def read_layers(prototxt):
    """[(name, type, bottoms, tops)] in file order (layer, else V1 layers), and net-level inputs."""
    try:
        with open(prototxt) as f:
            net = parse_text_proto(f.read())
    except OSError as e:
        raise Failure("cannot read %s: %s" % (prototxt, e))
    entries = [v for k, v in net if k == "layer" and isinstance(v, list)]
    if not entries:
        entries = [v for k, v in net if k == "layers" and isinstance(v, list)]
    layers = []
    for fields in entries:
        get = lambda key: [v for k, v in fields if k == key and isinstance(v, str)]
        name = (get("name") or [""])[0]
        ltype = (get("type") or [""])[0]
        layers.append((name, ltype, get("bottom"), get("top")))
    inputs = {v for k, v in net if k == "input" and isinstance(v, str)}
    return layers, inputs


# Layer types whose weights must come from the .caffemodel.
WEIGHTED_TYPES = ("Convolution", "Deconvolution", "InnerProduct",
                  "CONVOLUTION", "DECONVOLUTION", "INNER_PRODUCT")


def check_weights(net, layers, caffemodel):
    """OpenCV loads a layer without weights silently when the .caffemodel has no
    layer of that name; fail early with a clear message instead."""
    for lname, ltype, _, _ in layers:
        if ltype in WEIGHTED_TYPES:
            lid = net.getLayerId(lname)
            if lid >= 0 and not net.getLayer(lid).blobs:
                raise Failure("layer %s (%s) got no weights from %s (no layer of that name there?)"
                              % (lname, ltype, caffemodel))


def resolve_blob(blob, layers, inputs, net, before=None):
    """Blob name -> ("layer", layer name, output index) or ("input", input name)."""
    end = len(layers) if before is None else before
    for i in range(end - 1, -1, -1):
        name, ltype, bottoms, tops = layers[i]
        if blob not in tops:
            continue
        if ltype == "Input":
            return ("input", blob)
        if ltype in ("Split", "SPLIT") and bottoms:
            return resolve_blob(bottoms[0], layers, inputs, net, i)
        if net.getLayerId(name) < 0:
            raise Failure("blob %s: its layer %s (%s) is not in OpenCV's net" % (blob, name, ltype))
        return ("layer", name, tops.index(blob))
    if blob in inputs:
        return ("input", blob)
    raise Failure("no layer in the prototxt produces blob %r" % blob)


def load_net(prototxt, caffemodel):
    for p in (prototxt, caffemodel):
        if not os.path.isfile(p):
            raise Failure("no such file: %s" % p)
    try:
        net = cv2.dnn.readNetFromCaffe(prototxt, caffemodel)
    except cv2.error as e:
        raise Failure("readNetFromCaffe(%s, %s) failed: %s" % (prototxt, caffemodel, e))
    if net.empty():
        raise Failure("readNetFromCaffe(%s, %s) returned an empty net" % (prototxt, caffemodel))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net


def cmd_run(prototxt, caffemodel, workdir):
    req_path = os.path.join(workdir, "request.json")
    try:
        with open(req_path) as f:
            req = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure("cannot read %s: %s" % (req_path, e))
    inputs = req.get("inputs")
    outputs = req.get("outputs")
    if not isinstance(inputs, list) or not inputs:
        raise Failure("%s: \"inputs\" must be a non-empty list" % req_path)
    if not isinstance(outputs, list) or not outputs or not all(isinstance(o, str) for o in outputs):
        raise Failure("%s: \"outputs\" must be a non-empty list of blob names" % req_path)

    net = load_net(prototxt, caffemodel)
    layers, net_inputs = read_layers(prototxt)
    check_weights(net, layers, caffemodel)
    fed = {}

    for inp in inputs:
        try:
            name, shape, fname = inp["name"], [int(d) for d in inp["shape"]], inp["file"]
        except (KeyError, TypeError, ValueError) as e:
            raise Failure("%s: bad input entry %r: %s" % (req_path, inp, e))
        path = os.path.join(workdir, fname)
        try:
            data = np.fromfile(path, dtype="<f4")
        except OSError as e:
            raise Failure("cannot read input %s: %s" % (path, e))
        want = int(np.prod(shape)) if shape else 1
        if data.size != want:
            raise Failure("input %s: %s holds %d float32 values, shape %s needs %d"
                          % (name, path, data.size, shape, want))
        arr = np.ascontiguousarray(data.reshape(shape).astype(np.float32))
        fed[name] = arr
        try:
            net.setInput(arr, name)
        except cv2.error as e:
            raise Failure("setInput(%s, shape %s) failed: %s" % (name, shape, e))

    pins = [resolve_blob(o, layers, net_inputs, net) for o in outputs]
    for o, pin in zip(outputs, pins):
        if pin[0] == "input" and pin[1] not in fed:
            raise Failure("output %s is net input %s, which the request does not give" % (o, pin[1]))
    # forward(list) gives the first output of each named layer; layers whose
    # later outputs are wanted are run with forward(outputName=...), which
    # returns all of that layer's outputs.
    first = []
    for pin in pins:
        if pin[0] == "layer" and pin[2] == 0 and pin[1] not in first:
            first.append(pin[1])
    got = {}
    try:
        if first:
            for lname, blob in zip(first, net.forward(first)):
                got[(lname, 0)] = blob
        for pin in pins:
            if pin[0] == "layer" and (pin[1], pin[2]) not in got:
                outs = net.forward(outputBlobs=None, outputName=pin[1])
                for k, blob in enumerate(outs):
                    got[(pin[1], k)] = blob
    except cv2.error as e:
        raise Failure("forward(%s) failed: %s" % (outputs, e))
    results = []
    for o, pin in zip(outputs, pins):
        if pin[0] == "input":
            results.append(fed[pin[1]])
        elif (pin[1], pin[2]) in got:
            results.append(got[(pin[1], pin[2])])
        else:
            raise Failure("OpenCV layer %s has no output %d (for blob %s)" % (pin[1], pin[2], o))

    resp = {"outputs": []}
    for i, (name, out) in enumerate(zip(outputs, results)):
        out = np.ascontiguousarray(np.asarray(out, dtype="<f4"))
        fname = "out%d.f32" % i
        out.tofile(os.path.join(workdir, fname))
        resp["outputs"].append({"name": name, "shape": [int(d) for d in out.shape], "file": fname})
    with open(os.path.join(workdir, "response.json"), "w") as f:
        json.dump(resp, f)
        f.write("\n")


def int_list(s):
    try:
        vals = [int(v) for v in s.split(",") if v.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, got %r" % s)
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError("expected positive integers, got %r" % s)
    return vals


def cmd_bench(args):
    cv2.setNumThreads(args.threads)
    net = load_net(args.prototxt, args.caffemodel)
    check_weights(net, read_layers(args.prototxt)[0], args.caffemodel)
    rng = np.random.default_rng(0)
    for b in args.batch:
        x = rng.standard_normal([b] + args.shape).astype(np.float32)
        try:
            net.setInput(x, args.input)
            for _ in range(3):
                net.forward()
            runs = 0
            start = time.perf_counter()
            while True:
                net.forward()
                runs += 1
                elapsed = time.perf_counter() - start
                if elapsed >= args.seconds:
                    break
        except cv2.error as e:
            raise Failure("forward (batch %d) failed: %s" % (b, e))
        print(json.dumps({"batch": b, "threads": args.threads, "runs": runs,
                          "records_per_s": b * runs / elapsed,
                          "ms_per_run": 1000.0 * elapsed / runs},
                         separators=(",", ":")), flush=True)


def main(argv):
    p = argparse.ArgumentParser(description="OpenCV DNN reference runner for Caffe nets")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a net on inputs given in <dir>/request.json")
    r.add_argument("prototxt")
    r.add_argument("caffemodel")
    r.add_argument("dir")
    b = sub.add_parser("bench", help="time forward passes")
    b.add_argument("prototxt")
    b.add_argument("caffemodel")
    b.add_argument("--input", required=True, help="input blob name")
    b.add_argument("--shape", required=True, type=int_list, help="C,H,W (without batch)")
    b.add_argument("--batch", default=[1], type=int_list, help="batch sizes, e.g. 1,16")
    b.add_argument("--threads", default=1, type=int)
    b.add_argument("--seconds", default=5.0, type=float)
    args = p.parse_args(argv)
    try:
        if args.cmd == "run":
            cmd_run(args.prototxt, args.caffemodel, args.dir)
        else:
            if args.threads <= 0 or args.seconds <= 0:
                raise Failure("--threads and --seconds must be positive")
            cmd_bench(args)
    except Failure as e:
        print("opencv_ref.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
