"""Acceptance checks of NVIDIA's tritonclient (HTTP and gRPC, pinned in
scripts/requirements/tritonclient.txt) against a running eas-server.

Usage: triton_check.py GROUP CONFIG.json

e2e/tritonclient_test.go deploys the services and writes CONFIG: the HTTP
and gRPC addresses, the token, the EAS services of the ONNX test models, the
triton service of processors/triton/testdata/model_repository, and where the
reference cases are (processors/onnx/testdata/<model>.json: inputs and
outputs computed by numpy). Each group makes every call of the client that
applies to it and checks the answer's content; every disagreement is
collected, all are printed and the script exits 1.

Groups:
  service       EAS services of ONNX models through the KServe v2 HTTP door
                (/v2/...): health, server and model metadata, inference with
                JSON and binary tensors, compressed bodies, gevent
                async_infer, the asyncio client, and the Triton extensions
                the door refuses (config, statistics, repository, shared
                memory), each with a KServe error body.
  service-grpc  the same services through the gRPC door: infer, async_infer,
                the asyncio client, gzip and deflate messages, health and
                metadata; the Triton-only RPCs answer UNIMPLEMENTED.
  triton        the models of the triton service through the HTTP door:
                versions, model configuration, statistics, Triton's errors.
  triton-eas    the triton service the way EAS documents it for Triton
                clients, the HTTP client's URL being <host>/api/predict/
                <service>: all of the above plus the repository extension
                (index, unload, load).
  triton-grpc   the models of the triton service through the gRPC door.
"""

import asyncio
import json
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from tritonclient.utils import InferenceServerException, triton_to_np_dtype

# Floats must satisfy |got - want| <= ATOL + RTOL * max|want| over each
# tensor: the "float32 accumulated" tolerance of docs/development.md,
# "Comparing floats" (the models are small matrix products and convolutions;
# the references are numpy's, in float64).
RTOL = 1e-5
ATOL = 1e-6

FLOATS = {"FP16", "BF16", "FP32", "FP64"}

failures = []


def fail(what):
    failures.append(what)
    print("FAIL:", what, flush=True)


def expect(cond, what):
    if not cond:
        fail(what)
    return cond


def call(what, fn, *args, **kw):
    """Runs fn; an exception is a failure named what. Returns fn's value or None."""
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - every error is a disagreement here
        fail(f"{what}: {type(e).__name__}: {e}")
        return None


def refused(what, fn, status=None, contains=None):
    """Checks that fn raises InferenceServerException with the given status
    (HTTP code as text, or gRPC StatusCode name) and a message containing
    contains; the message must be the server's, not the client's failure to
    decode the error body."""
    try:
        fn()
    except InferenceServerException as e:
        got = str(e.status() or "")
        if status is not None and status not in got:
            fail(f"{what}: status {got!r}, want {status!r} ({e.message()})")
        msg = e.message() or ""
        if "decoding the response" in msg:
            fail(f"{what}: the error body is not KServe JSON: {msg}")
        if contains is not None and contains not in msg:
            fail(f"{what}: message {msg!r} does not say {contains!r}")
        return
    except Exception as e:  # noqa: BLE001
        fail(f"{what}: raised {type(e).__name__}: {e}, want InferenceServerException")
        return
    fail(f"{what}: succeeded, want a refusal ({status})")


# Reference cases.


class Case:
    def __init__(self, model, raw):
        self.model = model
        self.name = raw["name"]
        self.inputs = [(t["name"], t["datatype"], t["shape"], to_array(t)) for t in raw["inputs"]]
        self.outputs = {t["name"]: (t["datatype"], t["shape"], to_array(t)) for t in raw["outputs"]}

    def rows(self):
        return self.inputs[0][2][0]

    def __str__(self):
        return f"{self.model}/{self.name}"


def to_array(t):
    dt = t["datatype"]
    if dt == "BYTES":
        a = np.array([s.encode() for s in t["data"]], dtype=np.object_)
    elif dt == "BOOL":
        a = np.array(t["data"], dtype=bool)
    else:
        a = np.array(t["data"], dtype=triton_to_np_dtype(dt))
    return a.reshape(t["shape"])


def load_cases(path, model):
    with open(path) as f:
        return [Case(model, c) for c in json.load(f)["cases"]]


def same(got, want, datatype):
    """None when got matches want, else why not."""
    if got is None:
        return "missing"
    if list(got.shape) != list(want.shape):
        return f"shape {list(got.shape)}, want {list(want.shape)}"
    if datatype == "BYTES":
        norm = lambda a: [x.encode() if isinstance(x, str) else bytes(x) for x in a.flatten()]  # noqa: E731
        return None if norm(got) == norm(want) else f"{norm(got)}, want {norm(want)}"
    if datatype in FLOATS:
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        bound = ATOL + RTOL * (np.max(np.abs(w)) if w.size else 0)
        err = np.max(np.abs(g - w)) if w.size else 0
        return None if err <= bound else f"max error {err:.3g} over the bound {bound:.3g}"
    return None if np.array_equal(got, want) else f"{got.tolist()}, want {want.tolist()}"


def check_result(what, case, result, names=None, client="http"):
    """Checks the outputs of an InferResult (HTTP or gRPC) against case."""
    if result is None:
        return
    names = list(case.outputs) if names is None else names
    resp = result.get_response(as_json=True) if client == "grpc" else result.get_response()
    got_names = [o["name"] for o in resp.get("outputs", [])]
    expect(sorted(got_names) == sorted(names), f"{what}: outputs {got_names}, want {names}")
    for n in names:
        dt, shape, want = case.outputs[n]
        out = result.get_output(n)
        if not expect(out is not None, f"{what}: output {n} missing"):
            continue
        out_dt = out["datatype"] if isinstance(out, dict) else out.datatype
        out_shape = list(out["shape"]) if isinstance(out, dict) else list(out.shape)
        expect(out_dt == dt, f"{what}: {n} datatype {out_dt}, want {dt}")
        expect([int(d) for d in out_shape] == shape, f"{what}: {n} shape {out_shape}, want {shape}")
        why = same(result.as_numpy(n), want, dt)
        expect(why is None, f"{what}: output {n}: {why}")


def check_metadata(what, md, name, cases, versions=None, platform="onnxruntime_onnx"):
    """Checks model metadata (a dict: HTTP JSON or gRPC as_json) against the
    tensors of a reference case."""
    if md is None:
        return
    expect(md.get("name") == name, f"{what}: name {md.get('name')!r}, want {name!r}")
    if versions is not None:
        expect(md.get("versions") == versions, f"{what}: versions {md.get('versions')}, want {versions}")
    expect(md.get("platform") == platform, f"{what}: platform {md.get('platform')!r}, want {platform!r}")
    c = cases[0]
    for kind, want in (("inputs", {n: (dt, s) for n, dt, s, _ in c.inputs}),
                       ("outputs", {n: (dt, s) for n, (dt, s, _) in c.outputs.items()})):
        got = {t["name"]: (t["datatype"], [int(d) for d in t.get("shape", [])]) for t in md.get(kind, [])}
        expect(sorted(got) == sorted(want), f"{what}: {kind} {sorted(got)}, want {sorted(want)}")
        for n, (dt, shape) in want.items():
            if n not in got:
                continue
            gdt, gshape = got[n]
            expect(gdt == dt, f"{what}: {kind} {n} datatype {gdt}, want {dt}")
            ok = len(gshape) == len(shape) and all(g in (-1, s) for g, s in zip(gshape, shape))
            expect(ok, f"{what}: {kind} {n} shape {gshape} does not admit the case's {shape}")


# HTTP.


class TokenPlugin:
    """Sets the service token on every request, as a Triton client plugin
    (tritonclient.InferenceServerClientPlugin's interface): a headers dict
    passed to the calls would be changed by infer, which adds its
    Inference-Header-Content-Length to it."""

    def __init__(self, token, key="Authorization"):
        self.token, self.key = token, key

    def __call__(self, request):
        request.headers[self.key] = self.token


def http_client(url, token):
    c = httpclient.InferenceServerClient(url, concurrency=4)
    c.register_plugin(TokenPlugin(token))
    return c


def http_inputs(case, binary):
    out = []
    for name, dt, shape, arr in case.inputs:
        i = httpclient.InferInput(name, list(shape), dt)
        i.set_data_from_numpy(arr, binary_data=binary)
        out.append(i)
    return out


def http_outputs(names, binary):
    return [httpclient.InferRequestedOutput(n, binary_data=binary) for n in names]


def http_infer_all(c, model, cases, version=""):
    """Every way the HTTP client sends a request and asks for outputs."""
    for case in cases:
        names = list(case.outputs)
        w = f"http {model} {case.name}"
        for bin_in, bin_out in ((False, False), (True, True), (True, False), (False, True)):
            r = call(f"{w} infer (binary inputs {bin_in}, outputs {bin_out})", c.infer, model,
                     http_inputs(case, bin_in), model_version=version, outputs=http_outputs(names, bin_out))
            check_result(f"{w} infer (binary inputs {bin_in}, outputs {bin_out})", case, r)
        # No outputs named: the client asks for all of them in binary.
        r = call(f"{w} infer (all outputs)", c.infer, model, http_inputs(case, True), model_version=version)
        check_result(f"{w} infer (all outputs)", case, r)
        # One output, a request id, Triton's request parameters.
        r = call(f"{w} infer (one output)", c.infer, model, http_inputs(case, False), model_version=version,
                 outputs=http_outputs(names[:1], True), request_id="req-42", timeout=30_000_000,
                 parameters={"eas_acceptance": "1"})
        check_result(f"{w} infer (one output)", case, r, names=names[:1])
        if r is not None:
            expect(r.get_response().get("id") == "req-42", f"{w} infer: id {r.get_response().get('id')!r}, want 'req-42'")
            expect(r.get_response().get("model_name") == model, f"{w} infer: model_name {r.get_response().get('model_name')!r}")
        for alg in ("gzip", "deflate"):
            r = call(f"{w} infer ({alg} request, {alg} answer accepted)", c.infer, model, http_inputs(case, True),
                     model_version=version, outputs=http_outputs(names, True),
                     request_compression_algorithm=alg, response_compression_algorithm=alg)
            check_result(f"{w} infer ({alg})", case, r)
        # async_infer: all in flight at once on the client's greenlets.
        reqs = [(call(f"{w} async_infer {k}", c.async_infer, model, http_inputs(case, k % 2 == 0),
                      model_version=version, outputs=http_outputs(names, k % 2 == 1)), k) for k in range(4)]
        for h, k in reqs:
            if h is not None:
                check_result(f"{w} async_infer {k}", case, call(f"{w} async_infer {k} result", h.get_result, timeout=60))


def http_aio_checks(url, token, model, cases, version=""):
    async def run():
        async with httpaio.InferenceServerClient(url) as c:
            hdr = lambda: {"Authorization": token}  # noqa: E731 - infer adds to the dict it gets
            expect(await c.is_server_live(headers=hdr()), "http.aio is_server_live")
            expect(await c.is_model_ready(model, version, headers=hdr()), f"http.aio is_model_ready {model}")
            md = await c.get_model_metadata(model, version, headers=hdr())
            expect(md.get("name") == model, f"http.aio metadata name {md.get('name')!r}")
            tasks = []
            for case in cases:
                for binary in (False, True):
                    ins = http_inputs(case, binary)
                    outs = http_outputs(list(case.outputs), binary)
                    tasks.append((case, binary, c.infer(model, ins, model_version=version, outputs=outs, headers=hdr())))
            results = await asyncio.gather(*(t for _, _, t in tasks), return_exceptions=True)
            for (case, binary, _), r in zip(tasks, results):
                w = f"http.aio {model} {case.name} infer (binary {binary})"
                if isinstance(r, Exception):
                    fail(f"{w}: {type(r).__name__}: {r}")
                else:
                    check_result(w, case, r)

    call(f"http.aio {model}", asyncio.run, run())


def http_health(c, what):
    expect(call(f"{what} is_server_live", c.is_server_live) is True, f"{what}: server not live")
    expect(call(f"{what} is_server_ready", c.is_server_ready) is True, f"{what}: server not ready")
    md = call(f"{what} get_server_metadata", c.get_server_metadata)
    if md is not None:
        expect(md.get("name") == "eas-server", f"{what}: server metadata name {md.get('name')!r}, want 'eas-server'")
        expect(bool(md.get("version")), f"{what}: server metadata has no version")
        expect("binary_tensor_data" in md.get("extensions", []),
               f"{what}: server metadata extensions {md.get('extensions')} lack binary_tensor_data")


def http_wrong_token(url, model):
    bad = http_client(url, "not-the-token")
    refused(f"http {url} wrong token: model metadata", lambda: bad.get_model_metadata(model), "401")
    case_in = [httpclient.InferInput("x", [1], "FP32").set_data_from_numpy(np.zeros(1, np.float32))]
    refused(f"http {url} wrong token: infer", lambda: bad.infer(model, case_in), "401")
    bad.close()


def http_triton_errors(c, what):
    """Triton's wording for requests its servers refuse."""
    x = np.zeros((9, 16), np.float32)
    i = httpclient.InferInput("input", [9, 16], "FP32").set_data_from_numpy(x)
    refused(f"{what}: 9 rows to max_batch_size 8", lambda: c.infer("mlp", [i]), "400",
            "inference request batch-size must be <= 8 for 'mlp'")
    i = httpclient.InferInput("input", [1, 16], "FP64").set_data_from_numpy(np.zeros((1, 16)))
    refused(f"{what}: FP64 to an FP32 input", lambda: c.infer("mlp", [i]), "400", "data-type is 'FP64'")
    i = httpclient.InferInput("input", [1, 16], "FP32").set_data_from_numpy(np.zeros((1, 16), np.float32))
    refused(f"{what}: infer of an unknown model", lambda: c.infer("nope", [i]), "404", "nope")
    refused(f"{what}: infer of an unknown version", lambda: c.infer("mlp", [i], model_version="9"), "404")


# gRPC.


def grpc_client(addr):
    return grpcclient.InferenceServerClient(addr)


def grpc_inputs(case):
    out = []
    for name, dt, shape, arr in case.inputs:
        i = grpcclient.InferInput(name, list(shape), dt)
        i.set_data_from_numpy(arr)
        out.append(i)
    return out


def grpc_outputs(names):
    return [grpcclient.InferRequestedOutput(n) for n in names]


def grpc_infer_all(c, token, model, cases, version=""):
    hdr = {"authorization": token}  # gRPC metadata keys are lower case
    for case in cases:
        names = list(case.outputs)
        w = f"grpc {model} {case.name}"
        r = call(f"{w} infer", c.infer, model, grpc_inputs(case), model_version=version,
                 outputs=grpc_outputs(names), headers=hdr)
        check_result(f"{w} infer", case, r, client="grpc")
        r = call(f"{w} infer (all outputs)", c.infer, model, grpc_inputs(case), model_version=version, headers=hdr)
        check_result(f"{w} infer (all outputs)", case, r, client="grpc")
        r = call(f"{w} infer (one output)", c.infer, model, grpc_inputs(case), model_version=version,
                 outputs=grpc_outputs(names[:1]), request_id="req-7", headers=hdr, client_timeout=60,
                 timeout=30_000_000, parameters={"eas_acceptance": "1"})
        check_result(f"{w} infer (one output)", case, r, names=names[:1], client="grpc")
        if r is not None:
            resp = r.get_response()
            expect(resp.id == "req-7", f"{w} infer: id {resp.id!r}, want 'req-7'")
            expect(resp.model_name == model, f"{w} infer: model_name {resp.model_name!r}")
        for alg in ("gzip", "deflate"):
            r = call(f"{w} infer ({alg})", c.infer, model, grpc_inputs(case), model_version=version,
                     outputs=grpc_outputs(names), headers=hdr, compression_algorithm=alg)
            check_result(f"{w} infer ({alg})", case, r, client="grpc")
        # async_infer: callbacks on the client's threads.
        done = queue.Queue()
        n = 4
        for k in range(n):
            call(f"{w} async_infer {k}", c.async_infer, model, grpc_inputs(case),
                 lambda result, error, k=k: done.put((k, result, error)), model_version=version,
                 outputs=grpc_outputs(names), headers=hdr)
        for _ in range(n):
            try:
                k, res, err = done.get(timeout=60)
            except queue.Empty:
                fail(f"{w} async_infer: no callback within 60 s")
                break
            if err is not None:
                fail(f"{w} async_infer {k}: {err}")
            else:
                check_result(f"{w} async_infer {k}", case, res, client="grpc")


def grpc_aio_checks(addr, token, model, cases, version=""):
    async def run():
        c = grpcaio.InferenceServerClient(addr)
        try:
            hdr = {"authorization": token}
            expect(await c.is_server_live(headers=hdr), "grpc.aio is_server_live")
            expect(await c.is_model_ready(model, version, headers=hdr), f"grpc.aio is_model_ready {model}")
            md = await c.get_model_metadata(model, version, headers=hdr, as_json=True)
            expect(md.get("name") == model, f"grpc.aio metadata name {md.get('name')!r}")
            jobs = [(case, c.infer(model, grpc_inputs(case), model_version=version,
                                   outputs=grpc_outputs(list(case.outputs)), headers=hdr))
                    for case in cases for _ in range(2)]
            results = await asyncio.gather(*(j for _, j in jobs), return_exceptions=True)
            for (case, _), r in zip(jobs, results):
                w = f"grpc.aio {model} {case.name} infer"
                if isinstance(r, Exception):
                    fail(f"{w}: {type(r).__name__}: {r}")
                else:
                    check_result(w, case, r, client="grpc")
        finally:
            await c.close()

    call(f"grpc.aio {model}", asyncio.run, run())


def grpc_health(c, token):
    hdr = {"authorization": token}
    expect(call("grpc is_server_live", c.is_server_live, headers=hdr) is True, "grpc: server not live")
    expect(call("grpc is_server_ready", c.is_server_ready, headers=hdr) is True, "grpc: server not ready")
    md = call("grpc get_server_metadata", c.get_server_metadata, headers=hdr, as_json=True)
    if md is not None:
        expect(md.get("name") == "eas-server", f"grpc server metadata name {md.get('name')!r}")
        expect("binary_tensor_data" in md.get("extensions", []), f"grpc server extensions {md.get('extensions')}")


def grpc_refusals(c, token, model):
    """The Triton extensions that are not KServe v2's (model configuration,
    statistics, the repository, shared memory) are not offered over gRPC:
    processors/triton/README.md, "Triton clients"."""
    hdr = {"authorization": token}
    for name, fn in (
        ("get_model_config", lambda: c.get_model_config(model, headers=hdr)),
        ("get_inference_statistics", lambda: c.get_inference_statistics(model, headers=hdr)),
        ("get_model_repository_index", lambda: c.get_model_repository_index(headers=hdr)),
        ("load_model", lambda: c.load_model(model, headers=hdr)),
        ("unload_model", lambda: c.unload_model(model, headers=hdr)),
        ("get_system_shared_memory_status", lambda: c.get_system_shared_memory_status(headers=hdr)),
    ):
        refused(f"grpc {name}", fn, "UNIMPLEMENTED")
    bad = {"authorization": "not-the-token"}
    refused("grpc wrong token: model metadata", lambda: c.get_model_metadata(model, headers=bad), "UNAUTHENTICATED")
    expect(call("grpc is_model_ready of an unknown model", c.is_model_ready, "nope", headers=hdr) is False,
           "grpc is_model_ready of an unknown model is not False")


# Groups.


def group_service(cfg):
    url, token = cfg["http"], cfg["token"]
    c = http_client(url, token)
    http_health(c, "http")
    for model, svc in cfg["services"].items():
        cases = load_cases(cfg["refs"][model], model)
        w = f"http {svc}"
        expect(call(f"{w} is_model_ready", c.is_model_ready, svc) is True, f"{w}: not ready")
        expect(call(f"{w} is_model_ready version 1", c.is_model_ready, svc, "1") is True, f"{w}: version 1 not ready")
        check_metadata(f"{w} metadata", call(f"{w} get_model_metadata", c.get_model_metadata, svc), svc, cases, ["1"])
        http_infer_all(c, svc, cases)
        # The Triton extensions of a model that is not a Triton one.
        refused(f"{w} get_model_config", lambda: c.get_model_config(svc), "501", "no Triton model configuration")
        refused(f"{w} get_inference_statistics", lambda: c.get_inference_statistics(svc), "404", "keeps no statistics")
    svc = cfg["services"]["mlp"]
    http_aio_checks(url, token, svc, load_cases(cfg["refs"]["mlp"], "mlp"))
    expect(call("http is_model_ready of an unknown model", c.is_model_ready, "nope") is False,
           "http is_model_ready of an unknown model is not False")
    refused("http get_model_metadata of an unknown model", lambda: c.get_model_metadata("nope"), "404", "nope")
    # Every model's statistics: only triton models keep them.
    st = call("http get_inference_statistics()", c.get_inference_statistics)
    if st is not None:
        names = {m["name"] for m in st.get("model_stats", [])}
        expect(not names & set(cfg["services"].values()), f"http statistics of every model list EAS services: {names}")
    # Server-wide Triton extensions the KServe door does not serve.
    refused("http get_model_repository_index", c.get_model_repository_index, "404", "/api/predict/<service>")
    refused("http load_model", lambda: c.load_model(svc), "404", "/api/predict/<service>")
    refused("http unload_model", lambda: c.unload_model(svc), "404", "/api/predict/<service>")
    refused("http get_system_shared_memory_status", c.get_system_shared_memory_status, "404")
    refused("http get_trace_settings", c.get_trace_settings, "404")
    http_wrong_token(url, svc)
    c.close()


def group_service_grpc(cfg):
    addr, token = cfg["grpc"], cfg["token"]
    c = grpc_client(addr)
    grpc_health(c, token)
    hdr = {"authorization": token}
    for model, svc in cfg["services"].items():
        cases = load_cases(cfg["refs"][model], model)
        w = f"grpc {svc}"
        expect(call(f"{w} is_model_ready", c.is_model_ready, svc, headers=hdr) is True, f"{w}: not ready")
        md = call(f"{w} get_model_metadata", c.get_model_metadata, svc, headers=hdr, as_json=True)
        check_metadata(f"{w} metadata", md, svc, cases, ["1"])
        grpc_infer_all(c, token, svc, cases)
    svc = cfg["services"]["mlp"]
    grpc_aio_checks(addr, token, svc, load_cases(cfg["refs"]["mlp"], "mlp"))
    grpc_refusals(c, token, svc)
    c.close()


def triton_model_checks(c, what, cfg):
    """The calls on the triton service's models, through either HTTP URL."""
    refs = cfg["refs"]
    mlp, multi, conv = (load_cases(refs[m], m) for m in ("mlp", "multi_io", "conv"))
    for model, versions in (("mlp", ["1"]), ("multi_io", ["1", "2"]), ("conv", ["1"])):
        expect(call(f"{what} is_model_ready {model}", c.is_model_ready, model) is True, f"{what}: {model} not ready")
        check_metadata(f"{what} {model} metadata", call(f"{what} get_model_metadata {model}", c.get_model_metadata, model),
                       model, load_cases(refs[model], model), versions)
    expect(call(f"{what} is_model_ready multi_io 2", c.is_model_ready, "multi_io", "2") is True, f"{what}: multi_io 2 not ready")
    expect(call(f"{what} is_model_ready multi_io 3", c.is_model_ready, "multi_io", "3") is False, f"{what}: multi_io 3 ready")
    expect(call(f"{what} is_model_ready nope", c.is_model_ready, "nope") is False, f"{what}: an unknown model is ready")
    md = call(f"{what} get_model_metadata multi_io 1", c.get_model_metadata, "multi_io", "1")
    expect(md is not None and md.get("name") == "multi_io", f"{what}: metadata of multi_io version 1: {md}")
    refused(f"{what} get_model_metadata nope", lambda: c.get_model_metadata("nope"), "404", "nope")

    # Model configuration: config.pbtxt as served, auto-complete included.
    cfgm = call(f"{what} get_model_config mlp", c.get_model_config, "mlp")
    if cfgm is not None:
        expect(cfgm.get("name") == "mlp" and cfgm.get("max_batch_size") == 8, f"{what}: mlp config {cfgm}")
        expect(cfgm.get("platform") == "onnxruntime_onnx", f"{what}: mlp config platform {cfgm.get('platform')}")
        ins = cfgm.get("input", [])
        expect(len(ins) == 1 and ins[0].get("name") == "input" and ins[0].get("data_type") == "TYPE_FP32"
               and ins[0].get("dims") == [16], f"{what}: mlp config input {ins}")
        outs = cfgm.get("output", [])
        expect(len(outs) == 1 and outs[0].get("dims") == [8], f"{what}: mlp config output {outs}")
        db = cfgm.get("dynamic_batching") or {}
        expect(db.get("preferred_batch_size") == [4, 8] and db.get("max_queue_delay_microseconds") == 20000,
               f"{what}: mlp dynamic_batching {db}")
        ig = cfgm.get("instance_group", [])
        expect(len(ig) == 1 and ig[0].get("count") == 1 and ig[0].get("kind") == "KIND_CPU", f"{what}: mlp instance_group {ig}")
    cfgc = call(f"{what} get_model_config conv", c.get_model_config, "conv")
    if cfgc is not None:  # no config.pbtxt: Triton's auto-complete for ONNX
        expect(cfgc.get("max_batch_size") == 4 and "dynamic_batching" in cfgc, f"{what}: conv auto-completed config {cfgc}")
        ins = cfgc.get("input", [])
        expect(len(ins) == 1 and ins[0].get("name") == "image" and ins[0].get("dims") == [1, 8, 8], f"{what}: conv config input {ins}")
    cfgv = call(f"{what} get_model_config multi_io 1", c.get_model_config, "multi_io", "1")
    if cfgv is not None:
        expect(cfgv.get("version_policy") == {"all": {}}, f"{what}: multi_io version_policy {cfgv.get('version_policy')}")
    refused(f"{what} get_model_config nope", lambda: c.get_model_config("nope"), "404")

    # Inference, with statistics counted around it.
    before = call(f"{what} get_inference_statistics mlp", c.get_inference_statistics, "mlp")
    c1 = mlp[0]
    for k in range(3):
        check_result(f"{what} mlp {c1.name} infer {k}", c1, call(f"{what} mlp infer {k}", c.infer, "mlp", http_inputs(c1, True)))
    after = call(f"{what} get_inference_statistics mlp", c.get_inference_statistics, "mlp")
    if before is not None and after is not None:
        b, a = before["model_stats"], after["model_stats"]
        if expect(len(a) == 1 and a[0].get("name") == "mlp" and a[0].get("version") == "1", f"{what}: mlp stats {a}"):
            rows = 3 * c1.rows()
            got = a[0]["inference_count"] - b[0]["inference_count"]
            expect(got == rows, f"{what}: mlp inference_count grew by {got}, want {rows}")
            got = a[0]["inference_stats"]["success"]["count"] - b[0]["inference_stats"]["success"]["count"]
            expect(got == 3, f"{what}: mlp success count grew by {got}, want 3")
            expect(a[0]["execution_count"] > b[0]["execution_count"], f"{what}: mlp execution_count did not grow")
            expect(a[0]["last_inference"] > 0, f"{what}: mlp last_inference is 0")
    st = call(f"{what} get_inference_statistics multi_io", c.get_inference_statistics, "multi_io")
    if st is not None:
        got = sorted((m["name"], m["version"]) for m in st.get("model_stats", []))
        expect(got == [("multi_io", "1"), ("multi_io", "2")], f"{what}: statistics of multi_io are of {got}, want both versions")
    st = call(f"{what} get_inference_statistics multi_io 2", c.get_inference_statistics, "multi_io", "2")
    if st is not None:
        got = [(m["name"], m["version"]) for m in st.get("model_stats", [])]
        expect(got == [("multi_io", "2")], f"{what}: statistics of multi_io version 2 are of {got}")
    st = call(f"{what} get_inference_statistics()", c.get_inference_statistics)
    if st is not None:
        got = {(m["name"], m["version"]) for m in st.get("model_stats", [])}
        want = {("mlp", "1"), ("multi_io", "1"), ("multi_io", "2"), ("conv", "1")}
        expect(want <= got, f"{what}: statistics of every model are of {sorted(got)}, want {sorted(want)} among them")
    refused(f"{what} get_inference_statistics nope", lambda: c.get_inference_statistics("nope"), "404")

    http_infer_all(c, "mlp", mlp)
    http_infer_all(c, "multi_io", multi, version="1")
    http_infer_all(c, "multi_io", multi[:1], version="2")
    http_infer_all(c, "conv", conv)
    http_triton_errors(c, what)


def group_triton(cfg):
    url, token = cfg["http"], cfg["token"]
    c = http_client(url, token)
    http_health(c, "http")
    triton_model_checks(c, "http", cfg)
    http_aio_checks(url, token, "multi_io", load_cases(cfg["refs"]["multi_io"], "multi_io"), version="2")
    refused("http get_model_repository_index", c.get_model_repository_index, "404", "/api/predict/<service>")
    http_wrong_token(url, "mlp")
    c.close()


def group_triton_eas(cfg):
    url = cfg["http"] + "/api/predict/" + cfg["triton_service"]
    token = cfg["token"]
    c = http_client(url, token)
    w = "http " + url
    http_health(c, w)
    triton_model_checks(c, w, cfg)
    http_aio_checks(url, token, "mlp", load_cases(cfg["refs"]["mlp"], "mlp"))
    refused(f"{w} get_trace_settings", c.get_trace_settings, "404")

    # The repository extension: index, unload, load.
    def index():
        idx = call(f"{w} get_model_repository_index", c.get_model_repository_index) or []
        return {(m.get("name"), m.get("version", "")): m.get("state", "") for m in idx}

    idx = index()
    for key in (("mlp", "1"), ("multi_io", "1"), ("multi_io", "2"), ("conv", "1")):
        expect(idx.get(key) == "READY", f"{w} repository index: {key} is {idx.get(key)!r}, want READY ({idx})")
    expect(any(n == "slow" and s != "READY" for (n, _), s in idx.items()),
           f"{w} repository index does not list the model directory not loaded (slow): {idx}")
    call(f"{w} unload_model mlp", c.unload_model, "mlp")
    expect(call(f"{w} is_model_ready mlp after unload", c.is_model_ready, "mlp") is False, f"{w}: mlp ready after unload")
    expect(call("http is_model_ready mlp after unload (KServe door)", http_client(cfg["http"], token).is_model_ready, "mlp") is False,
           "the KServe door still sees mlp after its unload")
    mlp = load_cases(cfg["refs"]["mlp"], "mlp")
    refused(f"{w} infer of an unloaded model", lambda: c.infer("mlp", http_inputs(mlp[0], True)), "404", "mlp")
    expect(any(n == "mlp" and s == "UNLOADED" for (n, _), s in index().items()), f"{w} repository index: mlp not UNLOADED")
    refused(f"{w} unload_model of a model not loaded", lambda: c.unload_model("mlp"), "404")
    call(f"{w} load_model mlp", c.load_model, "mlp")
    expect(call(f"{w} is_model_ready mlp after load", c.is_model_ready, "mlp") is True, f"{w}: mlp not ready after load")
    check_result(f"{w} mlp infer after load", mlp[0], call(f"{w} infer after load", c.infer, "mlp", http_inputs(mlp[0], True)))
    expect(index().get(("mlp", "1")) == "READY", f"{w} repository index: mlp not READY after load")
    refused(f"{w} load_model of no model directory", lambda: c.load_model("nope"), "400", "nope")
    http_wrong_token(url, "mlp")
    c.close()


def group_triton_grpc(cfg):
    addr, token = cfg["grpc"], cfg["token"]
    hdr = {"authorization": token}
    c = grpc_client(addr)
    grpc_health(c, token)
    refs = cfg["refs"]
    for model, versions in (("mlp", ["1"]), ("multi_io", ["1", "2"]), ("conv", ["1"])):
        cases = load_cases(refs[model], model)
        expect(call(f"grpc is_model_ready {model}", c.is_model_ready, model, headers=hdr) is True, f"grpc: {model} not ready")
        md = call(f"grpc get_model_metadata {model}", c.get_model_metadata, model, headers=hdr, as_json=True)
        check_metadata(f"grpc {model} metadata", md, model, cases, versions)
        grpc_infer_all(c, token, model, cases)
    expect(call("grpc is_model_ready multi_io 1", c.is_model_ready, "multi_io", "1", headers=hdr) is True, "grpc: multi_io 1 not ready")
    expect(call("grpc is_model_ready multi_io 3", c.is_model_ready, "multi_io", "3", headers=hdr) is False, "grpc: multi_io 3 ready")
    grpc_infer_all(c, token, "multi_io", load_cases(refs["multi_io"], "multi_io")[:1], version="2")
    grpc_aio_checks(addr, token, "conv", load_cases(refs["conv"], "conv"))
    x = np.zeros((9, 16), np.float32)
    i = grpcclient.InferInput("input", [9, 16], "FP32").set_data_from_numpy(x)
    refused("grpc 9 rows to max_batch_size 8", lambda: c.infer("mlp", [i], headers=hdr), "INVALID_ARGUMENT",
            "inference request batch-size must be <= 8 for 'mlp'")
    refused("grpc infer of an unknown model", lambda: c.infer("nope", [i], headers=hdr), "NOT_FOUND", "nope")
    grpc_refusals(c, token, "mlp")
    c.close()


GROUPS = {
    "service": group_service,
    "service-grpc": group_service_grpc,
    "triton": group_triton,
    "triton-eas": group_triton_eas,
    "triton-grpc": group_triton_grpc,
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in GROUPS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(GROUPS)}}} CONFIG.json")
    with open(sys.argv[2]) as f:
        cfg = json.load(f)
    GROUPS[sys.argv[1]](cfg)
    if failures:
        print(f"\n{len(failures)} disagreement(s) between tritonclient and the server in group {sys.argv[1]}:", file=sys.stderr)
        for f in failures:
            print("  -", f, file=sys.stderr)
        sys.exit(1)
    print(f"group {sys.argv[1]}: every check passed")


if __name__ == "__main__":
    main()
