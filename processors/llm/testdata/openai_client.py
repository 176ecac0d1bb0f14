"""Drives a generative service with the official openai client, for
processors/llm's acceptance test: the requests of a JSON file, all at once
(one thread each), streamed or not, greedy with ignore_eos. Each answer's
token ids come from its logprobs (vLLM's return_tokens_as_token_ids).

usage: python openai_client.py REQUESTS.json > ANSWERS.json
REQUESTS.json: {"base_url", "api_key", "model", "requests": [{"kind": "chat"
or "completion", "messages" or "prompt", "max_tokens", "stream"}]}
"""
import concurrent.futures
import json
import sys

import openai


def ids_of(tokens):
    return [int(t.split(":", 1)[1]) for t in tokens]


def run(client, model, r):
    common = dict(model=model, max_tokens=r["max_tokens"], temperature=0,
                  extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
    out = {"ids": [], "text": "", "finish": None, "usage": None, "prompt_tokens": None, "chunks": 0}
    if r["kind"] == "chat":
        if r["stream"]:
            for chunk in client.chat.completions.create(messages=r["messages"], stream=True, logprobs=True,
                                                         stream_options={"include_usage": True}, **common):
                out["chunks"] += 1
                if chunk.usage is not None:
                    out["usage"], out["prompt_tokens"] = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
                for ch in chunk.choices:
                    out["text"] += ch.delta.content or ""
                    if ch.logprobs is not None and ch.logprobs.content:
                        out["ids"] += ids_of(t.token for t in ch.logprobs.content)
                    if ch.finish_reason:
                        out["finish"] = ch.finish_reason
        else:
            c = client.chat.completions.create(messages=r["messages"], logprobs=True, **common)
            ch = c.choices[0]
            out.update(text=ch.message.content, finish=ch.finish_reason, usage=c.usage.completion_tokens,
                       prompt_tokens=c.usage.prompt_tokens,
                       ids=ids_of(t.token for t in ch.logprobs.content))
    else:
        if r["stream"]:
            for chunk in client.completions.create(prompt=r["prompt"], stream=True, logprobs=0,
                                                   stream_options={"include_usage": True}, **common):
                out["chunks"] += 1
                if chunk.usage is not None:
                    out["usage"], out["prompt_tokens"] = chunk.usage.completion_tokens, chunk.usage.prompt_tokens
                for ch in chunk.choices:
                    out["text"] += ch.text
                    if ch.logprobs is not None and ch.logprobs.tokens:
                        out["ids"] += ids_of(ch.logprobs.tokens)
                    if ch.finish_reason:
                        out["finish"] = ch.finish_reason
        else:
            c = client.completions.create(prompt=r["prompt"], logprobs=0, **common)
            ch = c.choices[0]
            out.update(text=ch.text, finish=ch.finish_reason, usage=c.usage.completion_tokens,
                       prompt_tokens=c.usage.prompt_tokens,
                       ids=ids_of(ch.logprobs.tokens))
    return out


def main():
    cfg = json.load(open(sys.argv[1]))
    client = openai.OpenAI(base_url=cfg["base_url"], api_key=cfg["api_key"], max_retries=0, timeout=600)
    reqs = cfg["requests"]
    with concurrent.futures.ThreadPoolExecutor(len(reqs)) as ex:
        answers = list(ex.map(lambda r: run(client, cfg["model"], r), reqs))
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
