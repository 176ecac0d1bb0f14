"""check_peer.py --url http://HOST:PORT --reference REF.json [--concurrent]
checks that an OpenAI-compatible server answers issue 39's workload greedily
as transformers does: each request of REF.json (reference.py's output) is sent
to POST /v1/completions as the load generator sends it (token-id prompt,
stream, include_usage, temperature 0, ignore_eos, max_tokens) and its answer
compared with transformers'. Standard library only: any python3 runs it.

An answer's tokens are read from the chunks' "token_ids" (vLLM's
return_token_ids, asked for; --fields '{"return_token_ids": null}' leaves it
out) when the server gives them, and compared token by token; otherwise its
text is compared with the tokenizer's decoding of transformers' tokens.

Token comparison: the first differing token is a tie, not a mismatch, when
transformers' gap between its best and second-best logit at that step is
within float tolerance: 2 * (atol + rtol * max|logit|), the project's
float32-reformulated tolerance (tensor.F32Reformulated: rtol 1e-4, atol 1e-5)
on each of the two logits. After a tie the rest is not compared (the contexts
differ).

--concurrent sends every request at once (a batching server batches them)
after sending each alone, and reports which answers changed with batching.
--expect-batching-changes does not count those as failures (the
batch-inference peer, whose batcher changes answers, is measured as
published). Exit status 1 when any answer mismatches."""

import argparse
import json
import sys
import threading
import urllib.request

RTOL, ATOL = 1e-4, 1e-5


def compare(ref, got):
    """(status, detail) of an answer's tokens against a reference request:
    status "match", "tie" or "mismatch"."""
    want = ref["tokens"]
    for k, w in enumerate(want):
        if k >= len(got):
            return "mismatch", f"only {len(got)} of {len(want)} tokens"
        if got[k] != w:
            bound = 2 * (ATOL + RTOL * ref["maxabs"][k])
            if ref["gaps"][k] <= bound:
                return "tie", f"token {k}: {got[k]} for {w}, gap {ref['gaps'][k]:.3g} <= {bound:.3g}"
            return "mismatch", f"token {k}: {got[k]} for {w}, gap {ref['gaps'][k]:.3g} > {bound:.3g}"
    return "match", f"{len(want)} tokens"


def complete(url, body, timeout):
    """One streamed completion: (token ids or None, text, completion tokens
    from usage)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    ids, text, usage, saw_ids = [], [], None, False
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            if ev.get("error"):
                raise RuntimeError(f"stream error: {ev['error']}")
            if ev.get("usage"):
                usage = ev["usage"].get("completion_tokens")
            for ch in ev.get("choices") or []:
                text.append(ch.get("text") or "")
                if ch.get("token_ids") is not None:
                    saw_ids = True
                    ids.extend(ch["token_ids"])
    return (ids if saw_ids else None), "".join(text), usage


def check(ref, ids, text, compare_mode):
    if ids is not None and compare_mode != "text":
        return compare(ref, ids)
    if compare_mode == "tokens":
        return "mismatch", "the server gave no token ids"
    if text == ref["text"]:
        return "match", f"text of {len(ref['tokens'])} tokens"
    k = next((i for i, (a, b) in enumerate(zip(text, ref["text"])) if a != b), min(len(text), len(ref["text"])))
    return "mismatch", f"text differs at character {k}: {text[k:k + 20]!r} for {ref['text'][k:k + 20]!r}"


def main():
    ap = argparse.ArgumentParser(description="a generation peer's greedy answers against transformers'")
    ap.add_argument("--url", required=True, help="the server's base URL (http://HOST:PORT); /v1/completions is added")
    ap.add_argument("--reference", required=True)
    ap.add_argument("--model", default=None, help="the request's model field")
    ap.add_argument("--fields", default="{}", help="JSON merged over each body; null removes a field")
    ap.add_argument("--compare", choices=("auto", "tokens", "text"), default="auto")
    ap.add_argument("--concurrent", action="store_true")
    ap.add_argument("--expect-batching-changes", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    with open(args.reference) as f:
        refs = json.load(f)["requests"]
    url = args.url.rstrip("/") + "/v1/completions"
    extra = json.loads(args.fields)

    def body(ref):
        b = {"prompt": ref["prompt"], "max_tokens": ref["max_tokens"], "stream": True,
             "stream_options": {"include_usage": True}, "temperature": 0, "ignore_eos": True,
             "return_token_ids": True}
        if args.model:
            b["model"] = args.model
        for k, v in extra.items():
            if v is None:
                b.pop(k, None)
            else:
                b[k] = v
        return b

    failures = 0
    alone = []
    counts = {}
    for ref in refs:
        ids, text, usage = complete(url, body(ref), args.timeout)
        alone.append((ids, text))
        status, detail = check(ref, ids, text, args.compare)
        counts[status] = counts.get(status, 0) + 1
        failures += status == "mismatch"
        print(f"alone  request {ref['index']} (prompt {len(ref['prompt'])} tokens): {status}: {detail}; usage {usage}")
    print(f"alone: {len(refs)} requests: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.concurrent:
        results = [None] * len(refs)

        def run(i):
            try:
                results[i] = complete(url, body(refs[i]), args.timeout)[:2]
            except Exception as e:  # reported below
                results[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(refs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counts, changed = {}, 0
        for ref, res, (aids, atext) in zip(refs, results, alone):
            if isinstance(res, Exception):
                print(f"batched request {ref['index']}: error {res}")
                failures += 1
                continue
            ids, text = res
            status, detail = check(ref, ids, text, args.compare)
            counts[status] = counts.get(status, 0) + 1
            differs = (ids, text) != (aids, atext)
            changed += differs
            if status == "mismatch" and not (differs and args.expect_batching_changes):
                failures += 1
            print(f"batched request {ref['index']} (prompt {len(ref['prompt'])} tokens): {status}: {detail}"
                  + ("; differs from its answer alone" if differs else ""))
        print(f"batched: {len(refs)} requests at once: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
              + f"; {changed} of {len(refs)} answers changed with batching")
    print("check_peer: " + ("FAILED" if failures else "ok") + f" ({failures} failing answers)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
