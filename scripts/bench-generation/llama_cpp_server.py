"""llama-cpp-python's OpenAI-compatible server (python -m llama_cpp.server,
the same arguments), accepting token-id prompts on /v1/completions, for issue
39's llama.cpp peer (llama-cpp.sh start python).

The server's request model types `prompt` as a string or a list of strings
and answers a list of token ids 422, although the Llama.create_completion it
calls takes a list of token ids. This launcher widens that one field before
the server's app is imported: a list of ints is accepted and handed on as the
one prompt it is (the endpoint unwraps a one-element list). Nothing else of
the server changes."""

import sys
from typing import Annotated, List, Union

from pydantic import BeforeValidator
from pydantic.fields import FieldInfo

import llama_cpp.server.types as types


def _wrap_token_ids(v):
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return [v]
    return v


old = types.CreateCompletionRequest.model_fields["prompt"]
types.CreateCompletionRequest.model_fields["prompt"] = FieldInfo.from_annotated_attribute(
    Annotated[Union[str, List[str], List[List[int]]], BeforeValidator(_wrap_token_ids)],
    FieldInfo(default=old.default, description=old.description),
)
types.CreateCompletionRequest.model_rebuild(force=True)

from llama_cpp.server.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "llama_cpp.server"
    main()
