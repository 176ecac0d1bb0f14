#!/usr/bin/env python
"""Drives the official EAS Python SDK (eas-prediction) against an eas-server.

Run by e2e/eassdk_test.go with the interpreter of the eas-sdk virtual
environment (scripts/python-venv.sh eas-sdk):

    python sdk_check.py GROUP CONFIG.json

GROUP is one of:
  predict  every request kind of PredictClient: StringRequest (signed, raw
           token, custom content type, the DIRECT endpoint type through the
           service discovery, a wrong token), TFRequest,
           TorchRequest (positional, by name, output filter, snappy),
           OnnxRequest, and the framework kinds with no processor here
           (Blade, EasyRec, TorchRec) through an echo service
  signed   a signed StringRequest only: run under other time zones (TZ)
  queue    every call of QueueClient: attributes (also of a queue named by
           path_suffix), put, get (by request id, by index, auto delete),
           watch (auto commit, manual commit, tag filter, window), commit,
           delete, truncate, search (waiting, held, given back, absent)

Each case checks the answer's content. The first disagreement ends the run
with exit status 1 and a message naming the case, what was expected and what
came back; success prints one "ok" line per case.
"""

import json
import os
import sys
import time
import traceback

import numpy as np

from eas_prediction import (ENDPOINT_TYPE_DIRECT, OnnxDataHelper, OnnxRequest, PredictClient,
                            PredictException, QueueClient, StringRequest,
                            TFRequest, TorchRequest)
from eas_prediction.blade_request import BladeRequest
from eas_prediction.easyrec_request import EasyRecRequest
from eas_prediction.torchrec_request import TorchRecRequest


class Disagreement(Exception):
    pass


def expect(cond, what, *detail):
    if not cond:
        raise Disagreement(what + ("" if not detail else ": " + " ".join(str(d) for d in detail)))


def client(cfg, service, token=None, **kw):
    c = PredictClient(cfg["url"], service, **kw)
    if token is None:
        token = cfg["token"]
    if token:
        c.set_token(token)
    c.set_retry_count(1)  # a refusal is an answer to check, not to retry
    c.set_timeout(30000)
    c.init()
    return c


# Floats must satisfy |got - want| <= ATOL + RTOL * max|want| over each
# tensor: the "float32 accumulated" tolerance of docs/development.md,
# "Comparing floats" (whole networks; the references are PyTorch's).
RTOL = 1e-5
ATOL = 1e-6


def allclose(name, got, want):
    got = np.asarray(got, dtype=np.float64).ravel()
    want = np.asarray(want, dtype=np.float64).ravel()
    expect(got.shape == want.shape, name + ": element count", got.shape, "want", want.shape)
    bad = np.abs(got - want) > ATOL + RTOL * (np.max(np.abs(want)) if want.size else 0)
    expect(not bad.any(), name + ": values differ from the reference", "first at", int(np.argmax(bad)) if bad.any() else -1,
           "got", got[bad][:3], "want", want[bad][:3])


def ref_cases(path):
    with open(path) as f:
        return json.load(f)["cases"]


def by_name(tensors):
    return {t["name"]: t for t in tensors}


# --- PredictClient -----------------------------------------------------------

def string_signed(cfg):
    body = "signed from TZ=%s" % os.environ.get("TZ", "")
    resp = client(cfg, cfg["echo"]).predict(StringRequest(body))
    expect(resp.response_data == body.encode(), "signed StringRequest: echo answer", resp.response_data)


def string_content_type(cfg):
    c = client(cfg, cfg["echo"])
    c.set_content_type("application/json")  # signed as sent
    body = '[{"x": 1}]'
    resp = c.predict(StringRequest(body))
    expect(resp.response_data == body.encode(), "signed StringRequest with Content-Type application/json", resp.response_data)


def string_raw_token(cfg):
    # custom_url mode: the SDK sends the token raw, with no signature.
    c = client(cfg, cfg["echo"], custom_url=cfg["url"] + "/api/predict/" + cfg["echo"])
    resp = c.predict(StringRequest("raw"))
    expect(resp.response_data == b"raw", "raw-token StringRequest (custom_url)", resp.response_data)
    # A token added as a header, no set_token: also sent raw.
    c = client(cfg, cfg["echo"], token="")
    c.add_extra_headers({"Authorization": cfg["token"]})
    resp = c.predict(StringRequest("raw header"))
    expect(resp.response_data == b"raw header", "raw token in add_extra_headers", resp.response_data)


def string_direct(cfg):
    # The DIRECT endpoint type asks the service discovery for the
    # instances' ip:port and sends to them itself.
    c = PredictClient(cfg["url"], cfg["echo"])
    c.set_endpoint_type(ENDPOINT_TYPE_DIRECT)
    c.set_token(cfg["token"])
    c.set_retry_count(1)
    c.init()
    resp = c.predict(StringRequest("direct"))
    expect(resp.response_data == b"direct", "DIRECT endpoint type: echo answer", resp.response_data)


def string_wrong_token(cfg):
    for name, c in [("signed", client(cfg, cfg["echo"], token="wrong-token")),
                    ("raw", client(cfg, cfg["echo"], token="wrong-token", custom_url=cfg["url"] + "/api/predict/" + cfg["echo"]))]:
        try:
            c.predict(StringRequest("x"))
        except PredictException as e:
            expect(e.code == 401, name + " wrong token: status", e.code, e.message)
            continue
        raise Disagreement(name + " wrong token: the request was served")


def tf_request(cfg):
    case = ref_cases(cfg["multi_io_ref"])[1]
    ins, outs = by_name(case["inputs"]), by_name(case["outputs"])
    c = client(cfg, cfg["tf_multi"])
    req = TFRequest("serving_default")
    req.add_feed("a", ins["a"]["shape"], TFRequest.DT_FLOAT, ins["a"]["data"])
    req.add_feed("b", ins["b"]["shape"], TFRequest.DT_FLOAT, ins["b"]["data"])
    req.add_feed("w", ins["w"]["shape"], TFRequest.DT_DOUBLE, ins["w"]["data"])
    resp = c.predict(req)
    for name in ("sum", "prod", "total"):
        expect(resp.get_tensor_shape(name) == outs[name]["shape"], "TFRequest: shape of " + name, resp.get_tensor_shape(name))
        allclose("TFRequest " + name, resp.get_values(name), outs[name]["data"])
    # add_fetch: only the outputs asked for.
    req.add_fetch("prod")
    resp = c.predict(req)
    expect(list(resp.response.outputs.keys()) == ["prod"], "TFRequest add_fetch: outputs", list(resp.response.outputs.keys()))
    allclose("TFRequest add_fetch prod", resp.get_values("prod"), outs["prod"]["data"])

    # DT_INT64 and DT_BOOL inputs (int64_val, bool_val).
    case = ref_cases(cfg["int_bool_ref"])[0]
    ins, outs = by_name(case["inputs"]), by_name(case["outputs"])
    req = TFRequest("")  # the default signature (TFRequest() cannot add a feed: it sets signature_name None)
    req.add_feed("ids", ins["ids"]["shape"], TFRequest.DT_INT64, ins["ids"]["data"])
    req.add_feed("mask", ins["mask"]["shape"], TFRequest.DT_BOOL, ins["mask"]["data"])
    resp = client(cfg, cfg["tf_int_bool"]).predict(req)
    for name, want in outs.items():
        expect(resp.get_tensor_shape(name) == want["shape"], "TFRequest int64/bool: shape of " + name, resp.get_tensor_shape(name))
        allclose("TFRequest int64/bool " + name, resp.get_values(name), want["data"])


def torch_feeds(req, ins, by_index):
    for i, (name, dt) in enumerate([("a", TorchRequest.DT_FLOAT), ("b", TorchRequest.DT_FLOAT), ("w", TorchRequest.DT_DOUBLE)]):
        if by_index:
            req.add_feed(i, ins[name]["shape"], dt, ins[name]["data"])
        else:
            req.add_feed_map(name, ins[name]["shape"], dt, ins[name]["data"])


def torch_request(cfg):
    case = ref_cases(cfg["multi_io_ref"])[1]
    ins, outs = by_name(case["inputs"]), by_name(case["outputs"])
    order = ["sum", "prod", "total"]
    for label, service, flag in [("TorchRequest", cfg["torch_multi"], False), ("TorchRequest snappy", cfg["torch_snappy"], True)]:
        c = client(cfg, service)
        for by_index in (True, False):
            kind = label + (" inputs" if by_index else " map_inputs")
            req = TorchRequest(flag)
            torch_feeds(req, ins, by_index)
            resp = c.predict(req)
            expect(len(resp.response.outputs) == 3, kind + ": outputs", len(resp.response.outputs))
            for i, name in enumerate(order):
                expect(resp.get_tensor_shape(i) == outs[name]["shape"], kind + ": shape of output %d" % i, resp.get_tensor_shape(i))
                allclose("%s output %d (%s)" % (kind, i, name), resp.get_values(i), outs[name]["data"])
        req = TorchRequest(flag)
        torch_feeds(req, ins, True)
        req.add_fetch(2)
        resp = c.predict(req)
        expect(len(resp.response.outputs) == 1, label + " add_fetch(2): outputs", len(resp.response.outputs))
        allclose(label + " add_fetch(2)", resp.get_values(0), outs["total"]["data"])

    # A TorchScript file on libtorch, against PyTorch's own answer.
    with open(cfg["torchscript_ref"]) as f:
        ref = json.load(f)
    req = TorchRequest()
    req.add_feed(0, ref["input"]["shape"], TorchRequest.DT_FLOAT, ref["input"]["data"])
    req.add_fetch(0)
    resp = client(cfg, cfg["torchscript"]).predict(req)
    expect(resp.get_tensor_shape(0) == ref["output"]["shape"], "TorchRequest TorchScript: shape", resp.get_tensor_shape(0))
    allclose("TorchRequest TorchScript output", resp.get_values(0), ref["output"]["data"])


def onnx_request(cfg):
    for ref_path, service in [(cfg["multi_io_ref"], cfg["onnx_multi"]), (cfg["mlp_ref"], cfg["onnx_mlp"])]:
        case = ref_cases(ref_path)[-1]
        req = OnnxRequest()
        np_types = {"FP32": np.float32, "FP64": np.float64, "INT64": np.int64}
        for t in case["inputs"]:
            arr = np.asarray(t["data"], dtype=np_types[t["datatype"]]).reshape(t["shape"])
            req.add_tensor(OnnxDataHelper.from_array(arr, t["name"]))
        resp = client(cfg, service).predict(req)
        outs = by_name(case["outputs"])
        expect(resp.get_size() == len(outs), "OnnxRequest %s: output count" % service, resp.get_size())
        for i in range(resp.get_size()):
            name = resp.get_name(i)
            expect(name in outs, "OnnxRequest %s: unknown output" % service, name)
            arr = OnnxDataHelper.to_array(resp.get_tensor(i))
            expect(list(arr.shape) == outs[name]["shape"], "OnnxRequest %s: shape of %s" % (service, name), arr.shape)
            allclose("OnnxRequest %s %s" % (service, name), arr, outs[name]["data"])


def framework_requests(cfg):
    # Blade, EasyRec and TorchRec models have no processor in eas-server (they
    # are refused at deploy); what the SDK sends must still reach a service
    # signed and byte for byte, which an echo service shows.
    blade = BladeRequest("serving_default")
    blade.add_feed("input", 1, [1, 2], BladeRequest.DT_FLOAT, [0.5, 1.5])
    blade.add_fetch("output", BladeRequest.DT_FLOAT)
    easyrec = EasyRecRequest()
    easyrec.add_user_fea_flt("age", 31.5)
    easyrec.request_data.item_ids.append("item-7")
    torchrec = TorchRecRequest()
    torchrec.add_user_fea("age", 31, "INT")
    torchrec.add_item_id("item-7")
    c = client(cfg, cfg["echo"])
    for name, req in [("BladeRequest", blade), ("EasyRecRequest", easyrec), ("TorchRecRequest", torchrec)]:
        body = req.to_string()
        resp = c.predict(StringRequest(body))
        expect(resp.response_data == bytes(body), name + ": bytes through a signed request", len(resp.response_data), "want", len(body))


# --- QueueClient -------------------------------------------------------------

def queue_clients(cfg, uid):
    qs = []
    for suffix in ("", "/sink"):
        q = QueueClient(cfg["url"], cfg["async"] + suffix)
        q.set_token(cfg["token"])
        q.set_retry_count(1)
        q.set_timeout(30000)
        q.init(uid=uid)
        q.set_logger(None)
        qs.append(q)
    return qs


def attrs_of(q, what):
    a = q.attributes()
    expect(isinstance(a, dict) and a, what + ": attributes() is empty (the answer was not JSON)", a)
    for k in ("meta.name", "meta.backend", "meta.state", "meta.maxPayloadBytes", "meta.header.user",
              "meta.header.group", "meta.header.priority", "stream.length", "stream.approxMaxLength", "stream.lastEntry"):
        expect(k in a, what + ": attribute " + k + " missing", sorted(a))
    return a


def watch_n(q, n, **kw):
    w = q.watch(0, kw.pop("window", 5), **kw)
    got = []
    deadline = time.time() + 30
    for df in w.run():
        got.append(df)
        if len(got) == n or time.time() > deadline:
            break
    return w, got


def queue_calls(cfg):
    svc = cfg["async"]
    inq, sink = queue_clients(cfg, "sdk-uid")

    a = attrs_of(inq, "input queue")
    expect(a["meta.name"] == svc and a["meta.state"] == "Normal", "input attributes", a["meta.name"], a["meta.state"])
    a = attrs_of(sink, "sink")
    expect(a["meta.name"] == svc + "/sink", "sink attributes: meta.name", a["meta.name"])
    # The sink named by init's path_suffix instead of the service name.
    by_suffix = QueueClient(cfg["url"], svc)
    by_suffix.set_token(cfg["token"])
    by_suffix.init(uid="sdk-uid", path_suffix="sink")
    a = attrs_of(by_suffix, "sink by path_suffix")
    expect(a["meta.name"] == svc + "/sink", "sink by path_suffix: meta.name", a["meta.name"])

    # put: the index and request id; the answer reaches the sink with the tags.
    index, rid = inq.put(b"hello", {"user": "u1"})
    expect(index.isdigit() and int(index) > 0 and len(rid) > 0, "put: index and request id", index, rid)
    got = sink.get(request_id=rid, timeout="20s", auto_delete=False)
    expect(len(got) == 1, "get by request id: frames", len(got))
    df = got[0]
    expect(df.data == b"hello", "get by request id: data (the echo's answer)", df.data)
    expect(df.tags["requestId"] == rid and df.tags["status"] == "200" and df.tags["user"] == "u1", "get by request id: tags", dict(df.tags))
    sidx = df.index
    got = sink.get(index=sidx, timeout="0s")  # auto_delete defaults to true
    expect(len(got) == 1 and got[0].index == sidx and got[0].data == b"hello", "get by index", [(f.index, f.data) for f in got])
    got = sink.get(request_id=rid, timeout="0s")
    expect(got == [], "get after auto_delete: the answer must be gone", [(f.index, f.data) for f in got])

    # watch with auto_commit and a tag filter: every answer, once, then gone.
    ids = {}
    for i in range(5):
        _, r = inq.put(("w%d" % i).encode(), {"batch": "w"})
        ids[r] = ("w%d" % i).encode()
    w, got = watch_n(sink, 5, auto_commit=True, tags={"batch": "w"})
    w.close()
    expect({df.tags["requestId"]: df.data for df in got} == ids, "watch auto_commit: answers",
           {df.tags["requestId"]: df.data for df in got}, "want", ids)
    expect(all(df.tags["batch"] == "w" for df in got), "watch tag filter")
    expect(attrs_of(sink, "sink")["stream.length"] == "0", "watch auto_commit: the sink must be empty", attrs_of(sink, "sink")["stream.length"])

    # watch without auto_commit, then commit: the entries go.
    put = [sink.put(("c%d" % i).encode(), {"batch": "c"}) for i in range(3)]
    w, got = watch_n(sink, 3, auto_commit=False)
    w.close()
    expect([df.data for df in got] == [b"c0", b"c1", b"c2"], "watch manual commit: data", [df.data for df in got])
    # closing the watcher gave them back; commit deletes them whoever holds them
    for df in got:
        sink.commit(df.index)
    expect(attrs_of(sink, "sink")["stream.length"] == "0", "commit: the sink must be empty", attrs_of(sink, "sink")["stream.length"])
    expect(int(attrs_of(sink, "sink")["stream.lastEntry"]) >= int(put[-1][0]), "stream.lastEntry")

    # delete: one index, then a list.
    i1, _ = sink.put(b"d1")
    i2, _ = sink.put(b"d2")
    i3, _ = sink.put(b"d3")
    sink.delete(int(i1))
    got = sink.get(index=int(i1), length=10, timeout="0s", auto_delete=False)
    expect([f.data for f in got] == [b"d2", b"d3"], "delete one: what is left", [f.data for f in got])
    sink.delete([int(i2), int(i3)])
    got = sink.get(index=int(i1), length=10, timeout="0s", auto_delete=False)
    expect(got == [], "delete a list: what is left", [f.data for f in got])

    # truncate: everything below the index goes.
    last = [sink.put(("t%d" % i).encode())[0] for i in range(3)]
    expect(attrs_of(sink, "sink")["stream.length"] == "3", "before truncate: stream.length", attrs_of(sink, "sink")["stream.length"])
    sink.truncate(int(last[1]) + 1)
    got = sink.get(index=0, length=10, timeout="0s", auto_delete=False)
    expect([f.data for f in got] == [b"t2"], "truncate: what is left", [f.data for f in got])
    sink.truncate(int(last[2]) + 1)
    expect(attrs_of(sink, "sink")["stream.length"] == "0", "truncate: stream.length", attrs_of(sink, "sink")["stream.length"])

    # search: where an entry stands.
    s = [sink.put(("s%d" % i).encode())[0] for i in range(3)]
    for k, idx in enumerate(s):
        r = sink.search(int(idx))
        expect(r.get("IsPending") is False and r.get("WaitCount") == k, "search %s (waiting, %d ahead)" % (idx, k), r)
    w = sink.watch(0, 1, auto_commit=False)
    first = next(w.run())
    expect(first.index == int(s[0]), "watch window 1: first entry", first.index)
    r = sink.search(int(s[0]))
    expect(r.get("IsPending") is True and r.get("WaitCount") == 0 and r.get("ConsumerId") == "eas.sdk-uid",
           "search of an entry a watcher holds", r)
    r = sink.search(int(s[1]))
    expect(r.get("IsPending") is False and r.get("WaitCount") == 0, "search: the next one is first in line now", r)
    w.close()
    deadline = time.time() + 10
    while sink.search(int(s[0])).get("IsPending") is not False and time.time() < deadline:
        time.sleep(0.05)  # the server sees the websocket close
    r = sink.search(int(s[0]))
    expect(r.get("IsPending") is False and r.get("WaitCount") == 0, "search after the watcher left: given back", r)
    expect(sink.search(int(s[2]) + 1000) == {}, "search of an index not in the queue", sink.search(int(s[2]) + 1000))
    sink.truncate(int(s[2]) + 1)


GROUPS = {
    "predict": [string_signed, string_content_type, string_raw_token, string_direct, string_wrong_token, tf_request, torch_request,
                onnx_request, framework_requests],
    "signed": [string_signed, string_content_type],
    "queue": [queue_calls],
}


def main():
    group, cfg_path = sys.argv[1], sys.argv[2]
    with open(cfg_path) as f:
        cfg = json.load(f)
    want_off = os.environ.get("EAS_SDK_UTC_OFFSET")
    if want_off is not None and time.localtime().tm_gmtoff != int(want_off):
        # A zone the C library does not know is silently UTC: that would
        # test nothing.
        print("FAIL setup [TZ=%s]: the local UTC offset is %ds, want %ss (is tzdata installed?)"
              % (os.environ.get("TZ", ""), time.localtime().tm_gmtoff, want_off))
        sys.exit(1)
    for case in GROUPS[group]:
        try:
            case(cfg)
        except Disagreement as e:
            print("FAIL %s [TZ=%s]: %s" % (case.__name__, os.environ.get("TZ", ""), e))
            sys.exit(1)
        except Exception:
            print("FAIL %s [TZ=%s]: the SDK raised" % (case.__name__, os.environ.get("TZ", "")))
            traceback.print_exc(file=sys.stdout)
            sys.exit(1)
        print("ok", case.__name__)


if __name__ == "__main__":
    main()
