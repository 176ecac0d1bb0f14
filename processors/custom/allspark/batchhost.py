"""allspark.batchhost: serves a batch-inference model class (a class
decorated with batch_inference's @batching) as an eas-server worker.

eas-server runs `python -u -m allspark.batchhost <entry>` for a python
processor whose entry imports batch_inference. The worker says Hello, gets
Init (model_config names the class and its constructor's arguments),
imports the entry as a module (its `if __name__ == "__main__":` block does
not run), constructs the model through the class's host(*init_args,
**init_kwargs) and says Ready with what the server needs to know (JSON:
class, inputs, max_batch_size, wait_ms, batcher, tensor, batch_inference).
Then each Batch frame carries N requests' tensors, in predict_batch's
argument order; the worker applies the class's own batcher (batch, one
predict_batch, or one per group for a MultiBatcher, unbatch) as ModelHost
does, and answers with the N responses' tensors (status 200), or status
500 with the error for the whole batch, as ModelHost fails every request of
a batch whose predict_batch raised.

batch_inference is the one the interpreter finds (the package directory,
then the interpreter's or the service virtualenv's site-packages); only
where there is none does the stand-in eas-server embeds take its place.
"""

import importlib.util
import inspect
import json
import os
import socket
import struct
import sys
import traceback

import allspark

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
BATCH = ord("B")

_NP = {
    "BOOL": "?", "UINT8": "u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8",
    "INT8": "i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8",
    "FP16": "<f2", "FP32": "<f4", "FP64": "<f8",
}
_KS = {
    ("b", 1): "BOOL", ("u", 1): "UINT8", ("u", 2): "UINT16", ("u", 4): "UINT32", ("u", 8): "UINT64",
    ("i", 1): "INT8", ("i", 2): "INT16", ("i", 4): "INT32", ("i", 8): "INT64",
    ("f", 2): "FP16", ("f", 4): "FP32", ("f", 8): "FP64",
}


def _import_batch_inference():
    """Returns (module, how): the interpreter's batch_inference, else the
    stand-in under allspark's directory's batchinference/."""
    try:
        import batch_inference
    except ImportError:
        here = os.path.dirname(os.path.dirname(os.path.abspath(allspark.__file__)))
        sys.path.append(os.path.join(here, "batchinference"))
        import batch_inference
    if getattr(batch_inference, "EAS_SERVER_STANDIN", False):
        return batch_inference, "eas-server's stand-in %s" % batch_inference.__version__
    return batch_inference, "batch-inference %s (%s)" % (
        getattr(batch_inference, "__version__", "?"), os.path.dirname(batch_inference.__file__))


def _decorated(module):
    out = []
    for name, obj in vars(module).items():
        if (inspect.isclass(obj) and obj.__module__ == module.__name__
                and callable(getattr(obj, "predict_batch", None)) and callable(getattr(obj, "host", None))):
            out.append(obj)
    return out


def _tensor_kind(batcher):
    """'pt' when the batcher works on torch tensors, else 'np'."""
    seen = set()
    while batcher is not None and id(batcher) not in seen:
        seen.add(id(batcher))
        t = getattr(batcher, "tensor", None)
        if t in ("np", "pt"):
            return t
        concat = getattr(batcher, "tensor_concat", None)
        if concat is not None:
            mod = getattr(concat, "__module__", "") or ""
            qual = getattr(concat, "__qualname__", "") or ""
            return "pt" if ("tensor_ops_pt" in mod or "Torch" in qual) else "np"
        batcher = getattr(batcher, "seq_batcher", None)
    return "np"


class Host(object):
    """The model and its batcher, configured from model_config."""

    def __init__(self, entry, config_text):
        import numpy  # noqa: F401 -- the tensors travel as numpy arrays; without it the load fails here
        self.bi, self.how = _import_batch_inference()
        cfg = {}
        if config_text.strip():
            try:
                cfg = json.loads(config_text)
            except ValueError as e:
                raise ValueError("model_config is not JSON (%s); a batch-inference service takes "
                                 "{\"class\": ..., \"init_args\": [...], \"init_kwargs\": {...}}" % e)
            if not isinstance(cfg, dict):
                raise ValueError("model_config must be a JSON object for a batch-inference service")
        name = os.path.splitext(os.path.basename(entry))[0]
        spec = importlib.util.spec_from_file_location(name, entry)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        found = _decorated(module)
        want = cfg.get("class")
        if want:
            cls = getattr(module, want, None)
            if cls is None or not inspect.isclass(cls):
                raise ValueError("model_config.class %r: %s defines no such class (decorated classes: %s)" % (
                    want, os.path.basename(entry), ", ".join(c.__name__ for c in found) or "none"))
            if not callable(getattr(cls, "host", None)) or not callable(getattr(cls, "predict_batch", None)):
                raise ValueError("model_config.class %r is not decorated with batch_inference's @batching "
                                 "(or has no predict_batch)" % want)
        elif len(found) == 1:
            cls = found[0]
        elif not found:
            raise ValueError("%s defines no class decorated with @batching (with a predict_batch method)" % os.path.basename(entry))
        else:
            raise ValueError("%s defines several @batching classes (%s): name one in model_config.class" % (
                os.path.basename(entry), ", ".join(sorted(c.__name__ for c in found))))
        args = cfg.get("init_args", [])
        kwargs = cfg.get("init_kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError("model_config.init_args must be a list and init_kwargs an object")
        host = cls.host(*args, **kwargs)
        self.cls = cls
        self.model = host.model_obj
        self.batcher = host.batcher
        self.max_batch_size = int(cfg.get("max_batch_size") or host.max_batch_size)
        self.wait_ms = getattr(host, "wait_ms", 5)
        self.tensor = cfg.get("tensor") or _tensor_kind(self.batcher)
        import batch_inference.batcher as b
        self.multi = isinstance(self.batcher, b.MultiBatcher)
        params = list(inspect.signature(cls.predict_batch).parameters.values())[1:]
        self.inputs = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            self.inputs = None  # any number, by position

    def info(self):
        return {
            "class": self.cls.__name__,
            "inputs": self.inputs,
            "max_batch_size": self.max_batch_size,
            "wait_ms": self.wait_ms,
            "batcher": type(self.batcher).__name__,
            "tensor": self.tensor,
            "batch_inference": self.how,
        }

    def run(self, requests):
        batched, ctx = self.batcher.batch(requests)
        if self.multi:
            responses = [self.model.predict_batch(*args) for args in batched]
        else:
            responses = self.model.predict_batch(*batched)
        return self.batcher.unbatch(responses, ctx)


def parse_batch(payload, torch_tensors):
    import numpy as np
    mv = memoryview(payload)
    pos = 0
    (n,) = _U32.unpack_from(mv, pos)
    pos += 4
    reqs = []
    for _ in range(n):
        (m,) = _U32.unpack_from(mv, pos)
        pos += 4
        args = []
        for _ in range(m):
            (ln,) = _U16.unpack_from(mv, pos)
            pos += 2 + ln
            ld = mv[pos]
            dt = bytes(mv[pos + 1:pos + 1 + ld]).decode()
            pos += 1 + ld
            rank = mv[pos]
            pos += 1
            shape = tuple(_I64.unpack_from(mv, pos + 8 * i)[0] for i in range(rank))
            pos += 8 * rank
            (nb,) = _U64.unpack_from(mv, pos)
            pos += 8
            a = np.frombuffer(mv[pos:pos + nb], dtype=np.dtype(_NP[dt])).reshape(shape)
            pos += nb
            if torch_tensors:
                import torch
                a = torch.from_numpy(a.copy())
            args.append(a)
        reqs.append(tuple(args))
    return reqs


def _as_array(x):
    import numpy as np
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def encode_responses(responses, n):
    import numpy as np
    if len(responses) != n:
        raise ValueError("the batcher's unbatch returned %d responses for %d requests" % (len(responses), n))
    parts = [_U32.pack(n)]
    for r in responses:
        if isinstance(r, dict):
            named = list(r.items())
        elif isinstance(r, (tuple, list)):
            named = [("output__%d" % i, o) for i, o in enumerate(r)]
        else:
            named = [("output__0", r)]
        parts.append(_U32.pack(len(named)))
        for name, o in named:
            a = _as_array(o)
            dt = _KS.get((a.dtype.kind, a.dtype.itemsize))
            if dt is None:
                raise TypeError("output %r has dtype %s, which is not a numeric tensor type" % (name, a.dtype))
            a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else np.ascontiguousarray(a)
            data = a.tobytes()
            nb = str(name).encode("utf-8")
            db = dt.encode()
            parts.append(_U16.pack(len(nb)) + nb + bytes((len(db),)) + db + bytes((a.ndim,)))
            parts.append(b"".join(_I64.pack(d) for d in a.shape))
            parts.append(_U64.pack(len(data)))
            parts.append(data)
    return b"".join(parts)


class _BatchWorker(allspark._Worker):
    def serve(self, entry):
        hello = {"pid": os.getpid(), "runtime": "python %d.%d.%d batch-inference" % sys.version_info[:3],
                 "worker_processes": 1, "worker_threads": 1}
        self.send(allspark._frame(allspark.HELLO, 0, json.dumps(hello).encode()))
        f = self.next_frame()
        if f is None:
            return
        kind, _, payload = f
        if kind != allspark.INIT:
            raise ValueError("allspark.batchhost: expected an init frame, got %r" % chr(kind))
        info = json.loads(payload.decode("utf-8"))
        try:
            host = Host(entry, info.get("model_config", ""))
        except BaseException:
            self.send(allspark._frame(allspark.FAIL, 0, traceback.format_exc().encode("utf-8", "replace")))
            return
        self.send(allspark._frame(allspark.READY, 0, json.dumps(host.info()).encode()))
        torch_tensors = host.tensor == "pt"
        out = bytearray()
        while True:
            f = self.next_frame(out)
            if f is None:
                return
            kind, ident, payload = f
            if kind == allspark.REQUEST:
                status, body = 400, b"this service serves a batch-inference model class: send tensors (KServe v2 or the EAS TensorFlow protobuf)"
            elif kind == BATCH:
                try:
                    reqs = parse_batch(payload, torch_tensors)
                    body = encode_responses(host.run(reqs), len(reqs))
                    status = 200
                except Exception as e:
                    traceback.print_exc(file=sys.stderr)
                    status, body = 500, ("%s raised %s: %s" % (host.cls.__name__, type(e).__name__, e)).encode("utf-8", "replace")
            else:
                raise ValueError("allspark.batchhost: unexpected frame %r" % chr(kind))
            out += allspark._HEADER.pack(allspark._MIN_LENGTH + 4 + len(body), allspark.ANSWER, ident)
            out += allspark._STATUS.pack(status)
            out += body


def main():
    allspark._run_called = True  # this driver serves; the user's module never calls run()
    if len(sys.argv) != 2:
        sys.exit("usage: python -m allspark.batchhost ENTRY.py")
    fd = os.environ.get("EAS_WORKER_FD")
    if fd is None:
        sys.exit("allspark.batchhost: run by eas-server (EAS_WORKER_FD is not set)")
    sock = socket.socket(fileno=int(fd))
    try:
        _BatchWorker(None, sock).serve(os.path.abspath(sys.argv[1]))
    finally:
        sock.close()


if __name__ == "__main__":
    main()
