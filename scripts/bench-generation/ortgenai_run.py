"""Peer (d) of issue 39's generation benchmark: onnxruntime-genai's own
generate loop, in-process, on the SAME optimum export eas-server serves
(model.onnx with input_ids, attention_mask, position_ids,
past_key_values.{i}.key/.value -> logits, present.{i}.key/.value), run over a
generation workload (JSONL of {"prompt": [ids], "max_tokens": N}) greedily,
end-of-text ignored as far as onnxruntime-genai allows (below). Run it with
the onnxruntime-genai venv (scripts/python-venv.sh onnxruntime-genai).

onnxruntime-genai reads a genai_config.json beside the graph. Its model
builder writes one for the graphs it builds (GroupQueryAttention with a
shared past/present buffer); this script writes one for optimum's graph
instead, in a work directory that links the export's files (the export is
not touched): model type "llama" (its generic decoder-only model; type
"gpt2" expects ONNX Runtime's own GPT-2 layout with combined past_{i}
inputs, and fails with "Model input was not found"), the decoder's input and
output names as optimum writes them, the head, layer and key/value-head
counts from config.json, past_present_share_buffer false (optimum's present
is past plus the new tokens, a new tensor each step, which is what the graph
computes), greedy search, intra-op threads --threads.

Two ways of batching, both onnxruntime-genai's own (--api):
  generator  og.Generator over static batches of --batch requests in
             workload order: prompts right-padded with pad_token_id to the
             longest (onnxruntime-genai masks the pads and continues each
             row from its own last token), max_length the longest prompt
             plus the batch's largest max_tokens; every row runs until the
             batch is done (a static batch), and a request's answer is its
             first max_tokens tokens. Output tokens counted: the ones asked
             for, not the ones a static batch computes past them.
  engine     og.Engine, its static batching (engine.static_batching.
             max_batch_size --batch): every request submitted at once with
             its own max_generated_tokens, the engine schedules them.

End-of-text: onnxruntime-genai has no ignore_eos and requires eos_token_id
inside the vocabulary, so eos and pad are set to the last id of the
vocabulary, which the workload's prompts never hold (ids below 50000): a row
ends early only where its argmax is that id; such answers are counted
"short", as the load generator counts them.

Output (-o, and the last line of stdout): one JSON object shaped as the load
generator's GenResult (mode "closed", clients = --batch, output tokens/s
over the whole run, TTFT and inter-token latency from each request's start:
its batch's start for the generator, the run's start for the engine,
server_cpu_cores this process's CPU over the run), for
scripts/bench-generation.sh's add_row.

--reference REF.json (reference.py's output) checks instead: each reference
request alone, then all of them in one batch, compared with transformers'
greedy tokens (check_peer.compare: a differing token within float
tolerance is a tie); exit status 1 on a mismatch.

Usage: ortgenai_run.py --model ONNX_DIR --workload W.jsonl [--batch 32]
           [--api generator|engine] [--requests N] [--threads 2] [-o OUT.json]
       ortgenai_run.py --model ONNX_DIR --reference REF.json [--api ...]"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import onnxruntime_genai as og

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_peer import compare  # noqa: E402


def genai_dir(export, work, threads, batch):
    """A directory linking the export's files, with a genai_config.json
    describing optimum's graph. Returns (dir, vocab, pad)."""
    with open(os.path.join(export, "config.json")) as f:
        cfg = json.load(f)
    layers = cfg.get("num_hidden_layers") or cfg["n_layer"]
    heads = cfg.get("num_attention_heads") or cfg["n_head"]
    hidden = cfg.get("hidden_size") or cfg["n_embd"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_size = cfg.get("head_dim") or hidden // heads
    ctx = cfg.get("max_position_embeddings") or cfg.get("n_positions") or cfg["n_ctx"]
    vocab = cfg["vocab_size"]
    sess = ort.InferenceSession(os.path.join(export, "model.onnx"), providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    outs = {o.name for o in sess.get_outputs()}
    del sess
    need = {"input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"}
    if not need <= names or not {"logits", "present.0.key"} <= outs:
        sys.exit(f"ortgenai_run: {export}/model.onnx is not optimum's layout: inputs {sorted(names)}")
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask",
              "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    if "position_ids" in names:
        inputs["position_ids"] = "position_ids"
    pad = vocab - 1
    conf = {
        "model": {
            "type": "llama", "vocab_size": vocab, "context_length": ctx,
            "bos_token_id": cfg.get("bos_token_id") if isinstance(cfg.get("bos_token_id"), int) else 0,
            "eos_token_id": pad, "pad_token_id": pad,
            "decoder": {
                "filename": "model.onnx",
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": [],
                                    "intra_op_num_threads": threads, "inter_op_num_threads": 1},
                "head_size": head_size, "hidden_size": hidden, "num_attention_heads": heads,
                "num_key_value_heads": kv_heads, "num_hidden_layers": layers,
                "inputs": inputs,
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
            },
        },
        "search": {"do_sample": False, "num_beams": 1, "top_k": 1, "max_length": ctx, "min_length": 0,
                   "past_present_share_buffer": False, "num_return_sequences": 1},
        "engine": {"static_batching": {"max_batch_size": batch}},
    }
    d = os.path.join(work, "model")
    os.makedirs(d)
    for entry in os.listdir(export):
        if entry != "genai_config.json":
            os.symlink(os.path.abspath(os.path.join(export, entry)), os.path.join(d, entry))
    with open(os.path.join(d, "genai_config.json"), "w") as f:
        json.dump(conf, f, indent=1)
    return d, vocab, pad


class Timeline:
    """Per-request token arrival times, for the GenResult's latencies."""

    def __init__(self, n):
        self.start = [0.0] * n
        self.arrivals = [[] for _ in range(n)]

    def result(self, reqs, answers, seconds, batch):
        ttft, itl, tpot = [], [], []
        ok = short = out = 0
        for i, r in enumerate(reqs):
            a = self.arrivals[i]
            got = len(answers[i])
            out += got
            ok += 1
            short += got < r["max_tokens"]
            if a:
                ttft.append(1000 * (a[0] - self.start[i]))
                itl.extend(1000 * (y - x) for x, y in zip(a, a[1:]))
                if len(a) > 1:
                    tpot.append(1000 * (a[-1] - a[0]) / (len(a) - 1))

        def pct(v, p):
            if not v:
                return 0.0
            v = sorted(v)
            return float(v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))])

        return {"mode": "closed", "clients": batch, "seconds": seconds, "requests": len(reqs), "ok": ok,
                "short": short, "by_status": {"200": ok}, "output_tokens": out,
                "prompt_tokens": sum(len(r["prompt"]) for r in reqs),
                "output_tokens_per_s": out / seconds, "requests_per_s": len(reqs) / seconds,
                "ttft_p50_ms": pct(ttft, 50), "ttft_p99_ms": pct(ttft, 99),
                "itl_p50_ms": pct(itl, 50), "itl_p99_ms": pct(itl, 99),
                "tpot_mean_ms": float(np.mean(tpot)) if tpot else 0.0}


def run_generator(model, reqs, batch, pad, tl):
    answers = [None] * len(reqs)
    for b0 in range(0, len(reqs), batch):
        chunk = list(range(b0, min(b0 + batch, len(reqs))))
        longest = max(len(reqs[i]["prompt"]) for i in chunk)
        steps = max(reqs[i]["max_tokens"] for i in chunk)
        ids = np.full((len(chunk), longest), pad, dtype=np.int32)
        for row, i in enumerate(chunk):
            p = reqs[i]["prompt"]
            ids[row, :len(p)] = p
        t0 = time.perf_counter()
        for i in chunk:
            tl.start[i] = t0
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=longest + steps, batch_size=len(chunk))
        gen = og.Generator(model, params)
        gen.append_tokens(ids)
        step = 0
        while not gen.is_done():
            gen.generate_next_token()
            now = time.perf_counter()
            step += 1
            for i in chunk:
                if step <= reqs[i]["max_tokens"]:
                    tl.arrivals[i].append(now)
        for row, i in enumerate(chunk):
            seq = gen.get_sequence(row)[longest:].tolist()
            answers[i] = seq[:reqs[i]["max_tokens"]]
            del tl.arrivals[i][len(answers[i]):]
        del gen
    return answers


def run_engine(model, reqs, tl):
    eng = og.Engine(model)
    answers = [[] for _ in reqs]
    keep = []  # the requests stay alive until the run ends
    t0 = time.perf_counter()
    for i, r in enumerate(reqs):
        req = eng.create_request()
        opts = og.TurnOptions(req)
        opts.set_do_sample(False)
        opts.set_max_generated_tokens(r["max_tokens"])
        req.begin_turn(np.array(r["prompt"], dtype=np.int32), opts)
        keep.append((i, req))
        tl.start[i] = t0
    buf = eng.create_event_buffer(4 * len(reqs) + 64)
    while eng.has_pending_requests():
        events = eng.run(buf) or []
        now = time.perf_counter()
        for ev in events:
            i = _request_index(ev.request, keep)
            if int(ev.flags) & 1:  # a token
                answers[i].append(int(ev.token))
                tl.arrivals[i].append(now)
    for _, req in keep:
        req.close()
    return answers


def _request_index(req, keep):
    for i, r in keep:
        if r == req:
            return i
    raise RuntimeError("an engine event for an unknown request")


def read_workload(path, n):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
            if n and len(out) == n:
                break
    return out


def main():
    ap = argparse.ArgumentParser(description="onnxruntime-genai's generate loop on optimum's export")
    ap.add_argument("--model", required=True, help="optimum's export directory (model.onnx, config.json)")
    ap.add_argument("--workload")
    ap.add_argument("--reference")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--api", choices=("generator", "engine"), default="generator")
    ap.add_argument("--requests", type=int, default=0, help="only the workload's first N requests")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--out")
    args = ap.parse_args()
    if bool(args.workload) == bool(args.reference):
        sys.exit("ortgenai_run: give --workload or --reference")
    with tempfile.TemporaryDirectory() as work:
        d, vocab, pad = genai_dir(args.model, work, args.threads, args.batch)
        model = og.Model(d)
        if args.reference:
            sys.exit(check(model, args, pad))
        reqs = read_workload(args.workload, args.requests)
        if any(pad in r["prompt"] for r in reqs):
            sys.exit(f"ortgenai_run: a prompt holds id {pad}, used here as pad and end-of-text")
        tl = Timeline(len(reqs))
        c0 = os.times()
        t0 = time.perf_counter()
        if args.api == "generator":
            answers = run_generator(model, reqs, args.batch, pad, tl)
        else:
            answers = run_engine(model, reqs, tl)
        seconds = time.perf_counter() - t0
        c1 = os.times()
        res = tl.result(reqs, answers, seconds, args.batch)
        # This process's CPU over the run, in cores (the load generator's
        # server_cpu_cores for a server).
        cpu = (c1.user - c0.user) + (c1.system - c0.system)
        res.update(api=args.api, threads=args.threads, server_cpu_cores=cpu / seconds)
    line = json.dumps(res)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")
    print(line)


def check(model, args, pad):
    with open(args.reference) as f:
        refs = json.load(f)["requests"]
    reqs = [{"prompt": r["prompt"], "max_tokens": r["max_tokens"]} for r in refs]
    run = (lambda rs, tl: run_generator(model, rs, args.batch, pad, tl)) if args.api == "generator" else \
        (lambda rs, tl: run_engine(model, rs, tl))
    alone = [run([r], Timeline(1))[0] for r in reqs]
    together = run(reqs, Timeline(len(reqs)))
    failures, changed = 0, 0
    for label, answers in (("alone", alone), ("batched", together)):
        counts = {}
        for ref, got, a in zip(refs, answers, alone):
            status, detail = compare(ref, got)
            counts[status] = counts.get(status, 0) + 1
            failures += status == "mismatch"
            differs = label == "batched" and got != a
            changed += differs
            print(f"{label:7} request {ref['index']} (prompt {len(ref['prompt'])} tokens): {status}: {detail}"
                  + ("; differs from its answer alone" if differs else ""))
        print(f"{label}: {len(refs)} requests ({args.api}, batch {args.batch}): "
              + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print(f"{changed} of {len(refs)} answers changed with batching")
    print("ortgenai_run: " + ("FAILED" if failures else "ok") + f" ({failures} failing answers)")
    return 1 if failures else 0


if __name__ == "__main__":
    main()
