"""ref_chat.py renders the chat templates of the real tokenizer_config.json
files (scripts/fetch-tokenizers.sh) with transformers' apply_chat_template
(tokenize=False) over a set of conversations, for engines/jinja's parity
test. Run with the llm venv of scripts/python-venv.sh:

    python ref_chat.py CACHE_DIR OUT.json

OUT.json: {"models": {name: {"special_tokens_map": {...}}},
           "cases": [{"model", "name", "messages", "tools", "kwargs",
                      "add_generation_prompt", "output" | "error"}]}
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers import AutoTokenizer  # noqa: E402

MODELS = ["llama2", "llama3", "qwen3", "gemma3"]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Météo actuelle — current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "", "parameters": {"type": "object", "properties": {}}}},
]

UNICODE = "Grüße, 世界! Ça va? Привет 👋🏽 — «quotes» ‘single’ \u00a0nbsp\tTab 🇫🇷 אבג"
BRACES = "Render {{ this }} and {% if x %}that{% endif %} {# not a comment #} {'a': \"b\"} \\n \\\\ it's \"quoted\""


def conversations():
    """(name, messages, tools, kwargs, models) for each case; models None means all."""
    sys_user = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hello!"}]
    multi = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 is 4."},
        {"role": "user", "content": "  And 3+3?  \n"},
        {"role": "assistant", "content": "\n6.\n"},
        {"role": "user", "content": "Thanks"},
    ]
    yield "system_user", sys_user, None, {}, None
    yield "user_only", [{"role": "user", "content": "Hi"}], None, {}, None
    yield "multi_turn", multi, None, {}, None
    yield "system_multi_turn", [sys_user[0]] + multi, None, {}, None
    yield "unicode", [{"role": "system", "content": UNICODE}, {"role": "user", "content": UNICODE + "\n" + UNICODE}], None, {}, None
    yield "braces_quotes", [{"role": "user", "content": BRACES}, {"role": "assistant", "content": BRACES}, {"role": "user", "content": "'\"\\"}], None, {}, None
    yield "empty_content", [{"role": "user", "content": ""}], None, {}, None
    yield "whitespace_content", [{"role": "user", "content": " \n\t x \n "}, {"role": "assistant", "content": "\n\n"}, {"role": "user", "content": "y"}], None, {}, None
    yield "empty_conversation", [], None, {}, None
    # gemma3: roles must alternate, content may be a list of parts
    yield "not_alternating", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], None, {}, None
    yield "assistant_first", [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}], None, {}, None
    yield "content_parts", [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What is this? "}]},
    ], None, {}, ["gemma3"]
    # qwen3: thinking, tools, tool calls, tool responses
    yield "no_thinking", sys_user, None, {"enable_thinking": False}, ["qwen3"]
    yield "thinking_true", sys_user, None, {"enable_thinking": True}, ["qwen3"]
    yield "tools", sys_user, TOOLS, {}, ["qwen3", "llama3", "gemma3"]
    yield "tools_no_system", [{"role": "user", "content": "Weather in Paris?"}], TOOLS, {}, ["qwen3"]
    yield "reasoning", [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1", "reasoning_content": "thinking about Q1\n"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "\nA2", "reasoning_content": "\nthinking about Q2"},
    ], None, {}, ["qwen3"]
    yield "think_in_content", [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "<think>\nfirst thoughts\n</think>\n\nAnswer one"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "<think>\nmore thoughts\n</think>\n\nAnswer two"},
    ], None, {}, ["qwen3"]
    yield "tool_calls", [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 2}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"東京\"}"}},
        ]},
        {"role": "tool", "content": "{\"temp\": 21.5}"},
        {"role": "tool", "content": "晴れ 25°C"},
        {"role": "assistant", "content": "Paris 21.5°C, Tokyo 25°C.", "reasoning_content": "combine"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [{"name": "now", "arguments": {}}]},
        {"role": "tool", "content": "12:00"},
    ], TOOLS, {}, ["qwen3"]
    yield "tool_response_user", [
        {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
        {"role": "assistant", "content": "<think>t</think>ok"},
    ], None, {}, ["qwen3"]


def main():
    cache, out_path = sys.argv[1], sys.argv[2]
    out = {"models": {}, "cases": []}
    for model in MODELS:
        tok = AutoTokenizer.from_pretrained(os.path.join(cache, model))
        out["models"][model] = {"special_tokens_map": tok.special_tokens_map}
        for name, messages, tools, kwargs, only in conversations():
            if only is not None and model not in only:
                continue
            for agp in (False, True):
                case = {"model": model, "name": name, "messages": messages, "tools": tools,
                        "kwargs": kwargs, "add_generation_prompt": agp}
                try:
                    case["output"] = tok.apply_chat_template(
                        messages, tools=tools, add_generation_prompt=agp, tokenize=False, **kwargs)
                except Exception as e:  # the Go side must fail too
                    case["error"] = "%s: %s" % (type(e).__name__, e)
                out["cases"].append(case)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
