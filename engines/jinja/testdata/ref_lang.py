"""ref_lang.py renders templates with transformers' own chat template
environment (jinja2's ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, loopcontrols, the generation tag, transformers' tojson,
raise_exception and strftime_now), for engines/jinja's language tests.
Run with the llm venv of scripts/python-venv.sh:

    python ref_lang.py IN.json OUT.json

IN.json:  {"cases": [{"template": str, "vars": {...}}],
           "strftime": {"at": [y, m, d, H, M, S, us], "formats": [str]}}
OUT.json: {"cases": [{"output": str} | {"error": "Type: message", "line": int}],
           "strftime": [str]}
(line: the template line jinja2 reports, 0 when it names none)
"""
import datetime
import json
import sys
import traceback

import jinja2

from transformers.utils.chat_template_utils import _compile_jinja_template


def error_line(e):
    """The template line of e: a syntax error's lineno, else the last
    frame of the template in the traceback jinja2 rewrote."""
    if isinstance(e, jinja2.TemplateSyntaxError):
        return e.lineno or 0
    line = 0
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == "<template>":
            line = lineno
    return line


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        inp = json.load(f)
    out = {"cases": [], "strftime": []}
    for case in inp["cases"]:
        try:
            out["cases"].append({"output": _compile_jinja_template(case["template"]).render(**case["vars"])})
        except Exception as e:  # the Go side must fail too
            out["cases"].append({"error": "%s: %s" % (type(e).__name__, e), "line": error_line(e)})
    at = datetime.datetime(*inp["strftime"]["at"])
    out["strftime"] = [at.strftime(fmt) for fmt in inp["strftime"]["formats"]]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
