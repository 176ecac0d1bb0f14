"""Peer (b) of issue 39's generation benchmark: batch-inference's GPT-2
completion approach behind a small OpenAI-compatible HTTP shim, so the same
streaming load generator drives it.

The approach is the one of batch-inference's docs/examples/gpt2_completion.py
(that example is not in the PyPI package, so this file follows it rather than
importing it; what it does import is batch-inference's own machinery: the
@batching decorator, its Batcher base class and ModelHost with its published
defaults, max_batch_size 32, wait_n 8, wait_ms 5):

  - a Batcher that right-pads the batch's prompts with token 0 to the longest
    and builds the attention mask (1 for prompt tokens, 0 for padding);
  - predict_batch runs the whole static batch to completion: one forward pass
    per step with transformers' key/value cache, the next token of every row
    the argmax of the logits at the LAST position, rows that are finished
    dropped from the batch (their cache rows cut out), the mask grown by one
    column per step. A request that arrives meanwhile waits for the next batch.

As published, the batcher reads the last position's logits of right-padded
prompts and passes no position ids: a prompt shorter than the longest in its
batch continues from a pad token, at shifted positions, so its answer changes
with what it was batched with (scripts/bench-generation/check-peer.py
--batching measures how many workload answers differ from the unbatched
ones). This peer is measured as published, not corrected.

Departures, each stated: the example stops a row at end-of-text after a fixed
64 tokens; here each request brings its max_tokens and ignore_eos (vLLM's
field: generate exactly max_tokens), and the batch runs until its longest
request is done. Steps run under torch.no_grad() (the example builds the
autograd graph of the whole generation, which only slows it down). Any
causal-LM checkpoint transformers loads (GPT-2, Llama) is served the same way.

The shim: a threaded http.server; each request's handler thread calls
ModelHost.predict, which blocks until its batch is finished, so a stream's
tokens all arrive at once at the end (its time to first token is the whole
batch's time: what this approach does to new requests).

  POST /v1/completions   prompt: an array of token ids (or one such array in
                         an array, or a string, tokenized by the model's
                         tokenizer), max_tokens (default 16), stream,
                         stream_options.include_usage, ignore_eos,
                         return_token_ids (vLLM's: each choice also carries
                         its token ids), temperature only 0 or absent (this
                         peer is greedy), n only 1; other fields are ignored.
  GET  /v1/models        the model (readiness)

Usage: batch_inference_server.py --model HF_DIR [--port 8000]
           [--max-batch-size 32] [--threads 2]
--max-batch-size 1 is the unbatched baseline (one request at a time)."""

import argparse
import json
import os
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from batch_inference import batching
from batch_inference.batcher import Batcher
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

PAD = 0  # the example's pad token


class RightPadBatcher(Batcher):
    """The example's Gpt2Batcher: each request is (prompt ids, max_tokens,
    ignore_eos); prompts are right-padded with PAD to the longest and masked."""

    def batch(self, requests):
        longest = max(len(r[0]) for r in requests)
        ids, masks = [], []
        for prompt, _, _ in requests:
            pad = longest - len(prompt)
            ids.append(list(prompt) + [PAD] * pad)
            masks.append([1] * len(prompt) + [0] * pad)
        return [ids, masks, [r[1] for r in requests], [r[2] for r in requests]], None

    def unbatch(self, batched_response, unbatch_ctx):
        return batched_response


class Completion:
    def __init__(self, model_dir):
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
        eos = None
        try:
            eos = GenerationConfig.from_pretrained(model_dir).eos_token_id
        except OSError:
            pass
        if eos is None:
            eos = self.model.config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        self.batches = 0
        self.rows = 0

    def predict_batch(self, input_ids, attention_masks, max_tokens, ignore_eos):
        n = len(input_ids)
        self.batches += 1
        self.rows += n
        x = torch.tensor(input_ids, dtype=torch.long)
        mask = torch.tensor(attention_masks, dtype=torch.long)
        results = [[] for _ in range(n)]
        running = list(range(n))  # the request each batch row answers
        past = None
        with torch.no_grad():
            for _ in range(max(max_tokens)):
                out = self.model(x, attention_mask=mask, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tokens = out.logits[:, -1, :].argmax(dim=-1).tolist()
                keep = []
                for row, req in enumerate(running):
                    results[req].append(tokens[row])
                    done = len(results[req]) >= max_tokens[req] or (not ignore_eos[req] and tokens[row] in self.eos)
                    if not done:
                        keep.append(row)
                if not keep:
                    break
                if len(keep) < len(running):
                    idx = torch.tensor(keep, dtype=torch.long)
                    past = tuple(tuple(t.index_select(0, idx) for t in layer) for layer in past)
                    mask = mask.index_select(0, idx)
                    running = [running[r] for r in keep]
                    tokens = [tokens[r] for r in keep]
                x = torch.tensor(tokens, dtype=torch.long).unsqueeze(1)
                mask = torch.cat([mask, torch.ones((len(running), 1), dtype=mask.dtype)], dim=1)
        return results


class BadRequest(Exception):
    pass


def context_length(cfg):
    for k in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = getattr(cfg, k, None)
        if v:
            return int(v)
    return 1 << 30


def parse(req, tok, ctx, vocab):
    prompt = req.get("prompt")
    if isinstance(prompt, str):
        prompt = tok(prompt)["input_ids"]
    elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        raise BadRequest("prompt must be a non-empty array of token ids (or one such array, or a string)")
    if any(t < 0 or t >= vocab for t in prompt):
        raise BadRequest("prompt has a token id outside the vocabulary")
    max_tokens = req.get("max_tokens")
    max_tokens = 16 if max_tokens is None else max_tokens
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest("max_tokens must be a positive integer")
    if len(prompt) + max_tokens > ctx:
        raise BadRequest(f"prompt ({len(prompt)} tokens) and max_tokens ({max_tokens}) exceed the context ({ctx})")
    if req.get("temperature") not in (None, 0, 0.0):
        raise BadRequest("this peer is greedy: temperature must be 0 or absent")
    if req.get("n") not in (None, 1):
        raise BadRequest("n must be 1")
    return prompt, max_tokens, bool(req.get("ignore_eos", False))


def pieces(tok, ids):
    """Incremental detokenization: the text each token adds, holding back an
    incomplete UTF-8 character until a later token completes it, so the
    pieces join to the decoding of the whole answer."""
    out, shown = [], ""
    for i in range(1, len(ids) + 1):
        text = tok.decode(ids[:i], skip_special_tokens=False)
        if text.endswith("\ufffd") and i < len(ids):
            out.append("")
            continue
        out.append(text[len(shown):])
        shown = text
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a transformers checkpoint directory")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--max-batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--served-model-name", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.model)
    model_cls = batching(batcher=RightPadBatcher(), max_batch_size=args.max_batch_size)(Completion)
    host = model_cls.host(args.model)
    model = host.model_obj
    vocab = max(len(tok), int(model.model.config.vocab_size))
    ctx = context_length(model.model.config)
    name = args.served_model_name or os.path.basename(os.path.normpath(args.model))
    host.start()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, code, msg):
            self.send_json(code, {"error": {"message": msg, "type": "invalid_request_error", "param": None, "code": None}})

        def do_GET(self):
            if self.path.rstrip("/") in ("/v1/models", "/health"):
                self.send_json(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "batch-inference", "max_model_len": ctx}]})
            else:
                self.error(404, "unknown path")

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/completions":
                self.error(404, "unknown path")
                return
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                if not isinstance(req, dict):
                    raise BadRequest("the body must be a JSON object")
                prompt, max_tokens, ignore_eos = parse(req, tok, ctx, vocab)
            except (BadRequest, ValueError) as e:
                self.error(400, str(e))
                return
            rid = "cmpl-" + uuid.uuid4().hex
            created = int(time.time())
            tokens = host.predict(prompt, max_tokens, ignore_eos)
            finish = "length" if len(tokens) >= max_tokens else "stop"
            usage = {"prompt_tokens": len(prompt), "completion_tokens": len(tokens), "total_tokens": len(prompt) + len(tokens)}
            with_ids = bool(req.get("return_token_ids"))
            if not req.get("stream"):
                choice = {"index": 0, "text": tok.decode(tokens, skip_special_tokens=False), "logprobs": None, "finish_reason": finish}
                if with_ids:
                    choice["token_ids"] = tokens
                self.send_json(200, {"id": rid, "object": "text_completion", "created": created, "model": name,
                                     "choices": [choice], "usage": usage})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def event(obj):
                data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

            texts = pieces(tok, tokens)
            for i, (t, text) in enumerate(zip(tokens, texts)):
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish if i == len(tokens) - 1 else None}
                if with_ids:
                    choice["token_ids"] = [t]
                event({"id": rid, "object": "text_completion", "created": created, "model": name, "choices": [choice]})
            if (req.get("stream_options") or {}).get("include_usage"):
                event({"id": rid, "object": "text_completion", "created": created, "model": name, "choices": [], "usage": usage})
            event(b"[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    srv.daemon_threads = True
    srv.request_queue_size = 1024
    print(f"batch_inference_server: {name} on {args.host}:{args.port}, max_batch_size {args.max_batch_size}", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    finally:
        host.stop()


if __name__ == "__main__":
    main()
