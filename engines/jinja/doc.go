// Package jinja is a pure-Go Jinja2 for Hugging Face chat templates: it
// renders a model's chat_template from tokenizer_config.json byte for byte
// as transformers' apply_chat_template does, so that the server can build
// the prompt of an OpenAI chat completion without Python.
//
// The language is jinja2's as transformers configures it: the immutable
// sandbox with trim_blocks and lstrip_blocks, loop controls, the
// generation tag, transformers' tojson and the globals raise_exception and
// strftime_now. Values follow Python's semantics (truthiness, str() and
// repr(), comparison, slicing, str and dict methods) and jinja2's default
// Undefined. What it refuses fails with KindUnsupported; the README lists
// it.
//
// Parse once and render per request: a *Template is immutable and safe
// for concurrent use, and a render allocates only its scopes, the values
// it builds and the output.
package jinja
