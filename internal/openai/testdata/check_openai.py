"""Checks internal/openai's answers against the official openai Python client.

usage: check_openai.py SAMPLES.json BASE_URL MODEL

1. Every sample (answers the Go test recorded from a live server) is
   validated, in pydantic's strict mode, by the client's own model of its
   kind, and must hold no field that model does not know (the models allow
   extra fields, so this is checked apart; vLLM's max_model_len on a Model is
   the one extension).
2. The client then talks to the server at BASE_URL: lists the models, asks
   a completion and a streamed chat (greedy), and provokes a 404 and a 400;
   what it saw is printed as one JSON object for the Go test to compare.
"""
import json
import sys

import openai
import pydantic
from openai.types import Completion, CompletionUsage, ErrorObject, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk

EXTENSIONS = {("Model", "max_model_len")}


def no_extra(m, path):
    if isinstance(m, pydantic.BaseModel):
        for k in m.model_extra or {}:
            if (type(m).__name__, k) not in EXTENSIONS:
                raise SystemExit(f"{path}: field {k!r} is not in openai's {type(m).__name__}")
        for name in type(m).model_fields:
            no_extra(getattr(m, name), f"{path}.{name}")
    elif isinstance(m, list):
        for i, x in enumerate(m):
            no_extra(x, f"{path}[{i}]")
    elif isinstance(m, dict):
        for k, x in m.items():
            no_extra(x, f"{path}[{k!r}]")


def check(cls, obj, path):
    try:
        m = cls.model_validate(obj, strict=True)
    except pydantic.ValidationError as e:
        raise SystemExit(f"{path}: not a valid {cls.__name__}: {e}\n{json.dumps(obj)}")
    no_extra(m, path)
    return m


def completion_chunk(obj, path):
    # The API sends finish_reason null until a choice's last chunk, and the
    # client builds stream chunks without validating them; its Completion
    # model types finish_reason as required, so a null one is checked as
    # absent-but-allowed: it must be null exactly, and the rest must validate.
    obj = json.loads(json.dumps(obj))
    for ch in obj["choices"]:
        if ch["finish_reason"] is None:
            ch["finish_reason"] = "stop"
    check(Completion, obj, path)


def model_list(obj, path):
    if set(obj) != {"object", "data"} or obj["object"] != "list":
        raise SystemExit(f"{path}: not a model list: {obj}")
    for i, m in enumerate(obj["data"]):
        check(Model, m, f"{path}.data[{i}]")


def error(obj, path):
    if set(obj) != {"error"}:
        raise SystemExit(f"{path}: not an error answer: {obj}")
    check(ErrorObject, obj["error"], path + ".error")


KINDS = {
    "completion": lambda o, p: check(Completion, o, p),
    "completion_chunk": completion_chunk,
    "chat": lambda o, p: check(ChatCompletion, o, p),
    "chat_chunk": lambda o, p: check(ChatCompletionChunk, o, p),
    "usage": lambda o, p: check(CompletionUsage, o, p),
    "model": lambda o, p: check(Model, o, p),
    "model_list": model_list,
    "error": error,
}


def main():
    samples_path, base, model = sys.argv[1:4]
    with open(samples_path) as f:
        samples = json.load(f)
    n = 0
    for kind, objs in samples.items():
        for i, obj in enumerate(objs):
            KINDS[kind](obj, f"{kind}[{i}]")
            n += 1

    client = openai.OpenAI(base_url=base + "/v1", api_key="test-token", max_retries=0)
    out = {"validated": n, "models": [m.id for m in client.models.list()]}
    c = client.completions.create(model=model, prompt="The cat", max_tokens=12, temperature=0, logprobs=2)
    out["completion"] = c.choices[0].text
    out["completion_tokens"] = c.usage.completion_tokens
    text, usage, roles = "", None, 0
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Tell me"}], max_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.total_tokens
        for ch in chunk.choices:
            roles += ch.delta.role == "assistant"
            text += ch.delta.content or ""
    out["chat_stream"], out["chat_stream_total_tokens"], out["chat_stream_roles"] = text, usage, roles
    try:
        client.completions.create(model="no-such-model", prompt="x")
        raise SystemExit("a wrong model was accepted")
    except openai.NotFoundError as e:
        out["not_found_code"] = e.code
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}], temperature=5)
        raise SystemExit("temperature 5 was accepted")
    except openai.BadRequestError as e:
        out["bad_request_param"] = e.param
    print(json.dumps(out))


main()
