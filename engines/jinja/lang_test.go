package jinja

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eas-server/eas-server/internal/pyvenv"
)

// langCase is one template rendered by both jinja2 (testdata/ref_lang.py)
// and this package; vars is JSON (key order kept on both sides).
type langCase struct {
	name, tmpl, vars string
}

const chatVars = `{"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Hi {{x}}"}, {"role": "assistant", "content": "  yo \n"}, {"role": "user", "content": "ok"}], "bos_token": "<s>", "n": 7, "f": 2.5, "s": "  Hello, World!  ", "xs": [3, 1, 2], "d": {"b": 1, "a": [1, 2], "c": {"x": null}}, "t": true, "u": "ünï", "none": null, "empty": [], "words": ["b", "A", "c", "a"]}`

var langCases = []langCase{
	// text and whitespace control under trim_blocks and lstrip_blocks
	{"text", "hello\nworld\n", `{}`},
	{"trailing_newlines", "a\n\n", `{}`},
	{"crlf", "a\r\nb\rc\r\n", `{}`},
	{"trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", `{}`},
	{"lstrip_blocks", "x\n    {% if true %}\n    in\n    {% endif %}\ny", `{}`},
	{"lstrip_not_after_text", "x {% if true %}in{% endif %}\ny", `{}`},
	{"lstrip_first_line", "   {% if true %}a{% endif %}", `{}`},
	{"lstrip_var_untouched", "  {{ 1 }}\n  {{ 2 }}", `{}`},
	{"minus_both", "a   \n  {%- if true -%}  \n  b  \n  {%- endif -%}\n  c", `{}`},
	{"minus_var", "a  {{- 'x' -}}  b", `{}`},
	{"plus_keeps", "x\n    {%+ if true %}in{% endif +%}\nafter", `{}`},
	{"comment", "a {# c\nmulti #} b\n  {# own line #}\nc", `{}`},
	{"comment_minus", "a  {#- c -#}  b", `{}`},
	{"raw", "{% raw %}{{ not }} {% evaluated %}{% endraw %}", `{}`},
	{"raw_minus", "a {%- raw -%}  {{x}}  {%- endraw -%}  b", `{}`},
	{"raw_lstrip", "x\n  {% raw %}\n  {{y}}\n  {% endraw %}\nz", `{}`},
	{"tabs_lstrip", "\t\t{% set x = 1 %}\n\t{{ x }}", `{}`},
	{"nested_braces", "{{ {'a': {'b': 1}} }}|{{ {'a': {'b': 1}}['a']['b'] }}", `{}`},

	// literals and printing of Python values
	{"literals", "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1e3 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 'a' 'b' }} {{ \"q\" }}", `{}`},
	{"print_values", "{{ none }} {{ true }} {{ False }} {{ [1, 'a', none, true, 1.0] }} {{ (1,) }} {{ (1, 'b') }} {{ {'k': [1, {'z': 'y'}]} }} {{ () }}", `{}`},
	{"print_floats", "{{ 0.1 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 2.0 ** 70 }} {{ -0.0 }} {{ 3.0 }}", `{}`},
	{"print_repr_quotes", "{{ [\"it's\", 'say \"x\"', 'both \\' \"', 'nl\\n', 'tab\\t', '\\x01', 'ü'] }}", `{}`},
	{"string_escapes", "{{ 'a\\nb' }}|{{ 'a\\tb' }}|{{ '\\u00e9\\x41' }}|{{ '\\d\\w' }}|{{ \"\\\"\" }}", `{}`},
	{"print_vars", "{{ n }} {{ f }} {{ t }} {{ none }} {{ xs }} {{ d }} {{ u }} {{ empty }}", chatVars},
	{"print_tuple", "{{ 1, 2 }}", `{}`},

	// arithmetic and operators
	{"arith", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ 2 ** -1 }}", `{}`},
	{"arith_float", "{{ 7.5 + 1 }} {{ 1 - 0.5 }} {{ 0.1 + 0.2 }} {{ 7.0 // 2 }} {{ -7.5 % 2 }} {{ 10 / 4 }}", `{}`},
	{"arith_bool", "{{ true + 1 }} {{ true * 3 }} {{ false - 1 }}", `{}`},
	{"precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 * 3 ~ 4 }} {{ 1 ~ 2 ~ 3 }} {{ not 1 == 2 }} {{ -1 | abs }} {{ 1 + 2 | string }}", `{}`},
	{"err_concat_binds_tighter", "{{ 1 ~ 2 + 3 }}", `{}`},
	{"str_ops", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ 'a' ~ 1 ~ none ~ true }} {{ [1] + [2, 3] }} {{ [0] * 3 }} {{ (1,) + (2,) }}", `{}`},
	{"percent_format", "{{ '%s-%d-%05.2f-%x-%r-%%' % ('a', 42, 3.14159, 255, 'q') }} {{ '%(a)s/%(b)i' % {'a': 1, 'b': 2} }} {{ '%-5s|%5s' % ('l', 'r') }}", `{}`},
	{"compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 4 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 != '1' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ none == none }} {{ true == 1 }}", `{}`},
	{"logic", "{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ '' or [] }} {{ not none }} {{ not [1] }} {{ none or 0 }}", `{}`},
	{"in", "{{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ 2 in [1, 2] }} {{ 'b' in {'b': 1} }} {{ 1 in (1, 2) }} {{ 'x' in empty }} {{ 'q' in missing }}", chatVars},
	{"condexpr", "{{ 'y' if t else 'n' }} {{ 'y' if none else 'n' }} [{{ 'y' if false }}] {{ 1 if false else 2 if true else 3 }}", chatVars},

	// attribute, item and slice access
	{"getattr_item", "{{ d.b }} {{ d['a'][1] }} {{ d.a.0 }} {{ d.c.x }} {{ messages[1].content }} {{ messages[-1]['role'] }}", chatVars},
	{"missing_keys", "[{{ d.zz }}][{{ d['zz'] }}][{{ xs[10] }}][{{ d.c.y }}]{{ d.zz is defined }}{{ xs[10] is defined }}", chatVars},
	{"slices", "{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }} {{ xs[5:] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ u[::-1] }} {{ u[1] }} {{ 'abc'[-1] }} {{ xs[-10:10] }} {{ 'abcdef'[4:1:-1] }}", chatVars},
	{"dict_methods", "{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d['items'] is defined }}", chatVars},
	{"dict_iter", "{% for k in d %}{{ k }},{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", chatVars},
	{"list_methods", "{{ xs.index(1) }} {{ xs.count(3) }}", chatVars},

	// string methods
	{"strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\\n\\nhi\\n'.lstrip('\\n') }}][{{ 'abcba'.rstrip('ab') }}]", chatVars},
	{"split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a b  c'.rsplit(None, 1) }} {{ '</think>x</think>y'.split('</think>')[-1] }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }}", `{}`},
	{"startswith", "{{ s.strip().startswith('Hello') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('a') }}", chatVars},
	{"case", "{{ 'hello world'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hello wORLD foo-bar'.title() }} {{ 'hELLO'.capitalize() }} {{ 'straße'.upper() }} {{ 'ΟΔΟΣ'.lower() }} {{ 'Hello'.swapcase() }}", `{}`},
	{"find_count", "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ 'héllo'.find('l') }} {{ 'hello'.index('e') }} {{ 'abc'.find('c', 1) }}", `{}`},
	{"replace_join", "{{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }} {{ ', '.join(['x', 'y']) }} {{ 'ab'.replace('', '.') }}", `{}`},
	{"str_format", "{{ '{} and {}'.format('a', 1) }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='bob') }} {{ '{:>6}|{:<4}|{:^7}'.format('r', 'l', 'c') }} {{ '{:.2f} {:5d} {:+d} {:,}'.format(3.14159, 42, 7, 1234567) }} {{ '{{}} {!r}'.format('q') }}", `{}`},
	{"str_misc", "{{ 'abc'.isalpha() }} {{ '123'.isdigit() }} {{ '  '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }} {{ '5'.zfill(3) }} {{ 'a=b=c'.partition('=') }} {{ 'pre_x'.removeprefix('pre_') }} {{ 'ab'.center(6, '*') }}", `{}`},

	// statements
	{"if_elif_else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %} {% endfor %}", `{}`},
	{"for_loop_vars", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}", chatVars},
	{"for_prev_next", "{% for x in xs %}[{{ loop.previtem }}|{{ x }}|{{ loop.nextitem }}|{{ loop.previtem is defined }}]{% endfor %}", chatVars},
	{"for_cycle_changed", "{% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x) }} {% endfor %}", `{}`},
	{"for_else", "{% for x in empty %}{{ x }}{% else %}none{% endfor %}|{% for x in xs %}{{ x }}{% else %}none{% endfor %}", chatVars},
	{"for_if", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}:{{ loop.length }} {% endfor %}", chatVars},
	{"for_unpack", "{% for a, b in [(1, 2), [3, 4]] %}{{ a }}{{ b }} {% endfor %}{% for (k, v) in {'x': 1}.items() %}{{ k }}{{ v }}{% endfor %}", `{}`},
	{"for_string", "{% for c in 'héllo' %}{{ c }}.{% endfor %}", `{}`},
	{"for_undefined", "{% for x in missing %}{{ x }}{% else %}empty{% endfor %}", `{}`},
	{"loop_break_continue", "{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", `{}`},
	{"nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}", `{}`},
	{"range", "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }} {{ range(-3) | list }} {{ range(9223372036854775800, 9223372036854775807, 3) | list }}", `{}`},
	{"set_scope", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }} {% endfor %}{{ x }}", `{}`},
	{"set_in_if", "{% if true %}{% set y = 'set' %}{% endif %}{{ y }}", `{}`},
	{"set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = [3, 4] %}{{ c + d }}", `{}`},
	{"namespace", "{% set ns = namespace(count=0, found=false) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.count = ns.count + 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }} {{ ns.missing is defined }}", chatVars},
	{"set_block", "{% set x %}\n  hello {{ 1 + 1 }}\n{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}", `{}`},
	{"macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }} [{{ greet() }}]", `{}`},
	{"macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", `{}`},
	{"macro_scope", "{% set g = 'outer' %}{% macro m() %}{% set g = 'inner' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}", `{}`},
	{"macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(5) }}", `{}`},
	{"call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ 1 }}{% endcall %}", `{}`},
	{"call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}[{{ item }}]{% endcall %}", `{}`},
	{"filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% filter trim | title %}  a b  {% endfilter %}", `{}`},
	{"with", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", `{}`},
	{"generation", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}", chatVars},
	{"print_stmt", "{% print 'x' ~ 1 %}", `{}`},

	// tests
	{"tests_defined", "{{ n is defined }} {{ missing is defined }} {{ missing is undefined }} {{ none is none }} {{ n is not none }} {{ d.zz is defined }}", chatVars},
	{"tests_types", "{{ 's' is string }} {{ 1 is string }} {{ d is mapping }} {{ xs is mapping }} {{ xs is iterable }} {{ 's' is iterable }} {{ 1 is iterable }} {{ xs is sequence }} {{ d is sequence }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 's' is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 0 is boolean }}", chatVars},
	{"tests_truth", "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ t is true }}", chatVars},
	{"tests_num", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 10 is divisibleby(3) }} {{ 4.0 is even }}", `{}`},
	{"tests_compare", "{{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 1 is lt 1 }} {{ 1 is ne 2 }} {{ 'a' is in 'abc' }} {{ 2 is in [1, 2] }} {{ none is sameas none }} {{ 'x' is equalto 'x' }} {{ 2 is ge 2 }} {{ 2 is le 1 }}", `{}`},
	{"tests_misc", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ range is callable }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'x' | safe is escaped }} {{ missing is iterable }} {{ missing is sequence }} {{ none is iterable }}", `{}`},
	{"test_not_precedence", "{{ not 1 is odd }} {{ 2 is not odd }} {{ not n is none }}", chatVars},

	// filters
	{"f_trim", "[{{ s | trim }}][{{ 'xxhixx' | trim('x') }}][{{ missing | trim }}]", chatVars},
	{"f_length", "{{ xs | length }} {{ 'héllo' | length }} {{ d | count }} {{ missing | length }} {{ empty | length }}", chatVars},
	{"f_case", "{{ 'hello World' | upper }} {{ 'Hello' | lower }} {{ 'hello wORLD-foo (bar' | title }} {{ 'hELLO world' | capitalize }} {{ missing | upper }}", chatVars},
	{"f_string_int_float", "{{ 1 | string }} {{ [1] | string }} {{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(5) }} {{ 3.9 | int }} {{ '0x1A' | int(0, 16) }} {{ '2.5' | float }} {{ 'y' | float }} {{ 3 | float }} {{ ' 12 ' | int }}", `{}`},
	{"f_round_abs", "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3.14159 | round(3) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 7 | round }} {{ -3 | abs }} {{ -2.5 | abs }} {{ 1234 | round(-2) }}", `{}`},
	{"f_join", "{{ xs | join(', ') }} {{ ['a', 'b'] | join }} {{ messages | join('|', attribute='role') }} {{ [1, none, true] | join('-') }}", chatVars},
	{"f_first_last", "{{ xs | first }} {{ xs | last }} {{ 'abc' | first }} [{{ empty | first }}] {{ d | first }}", chatVars},
	{"f_list", "{{ 'abc' | list }} {{ d | list }} {{ (1, 2) | list }} {{ missing | list }}", chatVars},
	{"f_default", "{{ missing | default('dflt') }} {{ none | default('x') }} {{ none | default('x', true) }} {{ '' | d('e', boolean=true) }} {{ n | default(0) }} {{ missing | d }}", chatVars},
	{"f_items", "{% for k, v in d | items %}{{ k }}:{{ v }} {% endfor %}{{ missing | items | list }}", chatVars},
	{"f_replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ s | replace(' ', '') }}", chatVars},
	{"f_selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ messages | rejectattr('role', 'eq', 'user') | list | length }} {{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list }}", chatVars},
	{"f_map", "{{ xs | map('string') | join('+') }} {{ words | map('upper') | list }} {{ messages | map(attribute='role') | unique | list }} {{ [{'a': {'b': 5}}] | map(attribute='a.b') | list }} {{ [{}, {'x': 1}] | map(attribute='x', default=0) | list }}", chatVars},
	{"f_select", "{{ [0, 1, 2, 3, 4] | select('odd') | list }} {{ [0, 1, 2, none, ''] | select | list }} {{ [1, 2, 3] | reject('even') | list }} {{ [1, 5, 9] | select('gt', 3) | list }}", `{}`},
	{"f_unique_sort", "{{ words | unique | list }} {{ words | unique(case_sensitive=true) | list }} {{ words | sort }} {{ words | sort(case_sensitive=true) }} {{ xs | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='content') | list }}", chatVars},
	{"f_reverse", "{{ xs | reverse | list }} {{ 'abc' | reverse }} {{ u | reverse }}", chatVars},
	{"f_indent", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}|{{ 'x\\n' | indent(first=true) }}", `{}`},
	{"f_safe_escape", "{{ '<a & \"b\">' | escape }} {{ '<b>' | safe }} {{ '<i>' | e }} {{ ('<x>' | safe) + '<y>' }} {{ '<x>' | safe | escape }}", `{}`},
	{"f_min_max_sum", "{{ xs | min }} {{ xs | max }} {{ xs | sum }} {{ words | min }} {{ words | max(case_sensitive=true) }} {{ [{'v': 2}, {'v': 5}] | sum(attribute='v') }} {{ [[1], [2]] | sum(start=[]) }}", chatVars},
	{"f_dictsort", "{{ d | dictsort }} {{ {'b': 2, 'A': 1, 'a': 3} | dictsort }} {{ {'b': 2, 'a': 3} | dictsort(by='value', reverse=true) }}", chatVars},
	{"f_misc", "{{ 'hi %s %d' | format('x', 3) }} {{ 'a b  c' | wordcount }} {{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ 'x' | center(5) }} [{{ d | attr('b') }}] {{ d | attr('keys') is callable }}", chatVars},
	{"f_chain_args", "{{ messages | map(attribute='content') | map('trim') | select | join(',') | upper }}", chatVars},

	// tojson: transformers' json.dumps(ensure_ascii=False)
	{"tojson_basic", "{{ d | tojson }} {{ xs | tojson }} {{ 'ü \"q\" \\\\ \\n\\t\\x01 <>&' | tojson }} {{ none | tojson }} {{ 1.0 | tojson }} {{ (1, 'a') | tojson }} {{ {} | tojson }} {{ [] | tojson }}", chatVars},
	{"tojson_indent", "{{ d | tojson(indent=2) }}|{{ messages[:2] | tojson(indent=4) }}|{{ {'a': [], 'b': {}} | tojson(indent=0) }}|{{ [1] | tojson(indent='\\t') }}", chatVars},
	{"tojson_options", "{{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }} {{ 'ü😀' | tojson(ensure_ascii=true) }} {{ {'z': 1, 'a': 2} | tojson(sort_keys=true, indent=1) }}", chatVars},
	{"tojson_floats", "{{ [1e16, 0.1, -0.0, 1e-7, 123456789.0, 2.5e-5] | tojson }}", `{}`},

	// globals
	{"raise_exception_ok", "{% if false %}{{ raise_exception('no') }}{% endif %}ok", `{}`},
	{"dict_global", "{{ dict(a=1, b='x') }} {{ dict([('k', 'v')]) }}", `{}`},

	// chat-template shaped
	{"chatml", "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}", `{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}`},
	{"llama2_style", "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}", `{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": " u1 "}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}], "bos_token": "<s>", "eos_token": "</s>"}`},
	{"multiline_indented", "{%- for m in messages %}\n    {%- if m.role == 'user' %}\n        {{- 'U: ' + m.content }}\n    {%- else %}\n        {{- 'O: ' + m.content }}\n    {%- endif %}\n    {{- '\\n' }}\n{%- endfor %}\n", chatVars},
	{"undefined_tolerance", "{{ missing }}|{{ missing ~ 'x' }}|{{ missing | default('') }}|{% if missing %}y{% else %}n{% endif %}|{{ missing == missing }}|{{ missing is none }}", `{}`},

	// patterns of widely used chat templates
	{"reverse_range", "{% for i in range(messages | length - 1, -1, -1) %}{{ messages[i].role[0] }}{% endfor %}", chatVars},
	{"reverse_messages", "{% for m in messages | reverse %}{{ m.role }}{{ loop.index0 }} {% endfor %}{% for m in messages[::-1] %}{{ loop.last }}{% endfor %}", chatVars},
	{"select_in", "{{ messages | selectattr('role', 'in', ['user', 'system']) | map(attribute='content') | join('|') }} {{ not messages | selectattr('role', 'equalto', 'tool') | list }}", chatVars},
	{"tools_map_tojson", "{{ tools | map('tojson') | join('\n') }}|{% for t in tools %}{{ t | tojson(indent=4) }}{% endfor %}", `{"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "enum": ["a", "b"]}}, "required": ["x"]}}}]}`},
	{"outer_loop_alias", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [3] %}{{ outer.index }}{{ loop.index }}{% endfor %}{% endfor %}", `{}`},
	{"items_last", "{% for k, v in d.items() %}{{ k }}{{ ',' if not loop.last }}{% endfor %}", chatVars},
	{"macro_defaults_chain", "{% macro m(a, b=a * 2, c='x' ~ b) %}{{ a }}/{{ b }}/{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 5) }} {{ m(a=2, c='z') }}", `{}`},
	{"macro_type_render", "{% macro render_type(spec) %}{% if spec.type == 'array' %}{{ render_type(spec['items']) }}[]{% elif spec.type == 'object' %}{ {% for k, v in spec.properties | dictsort %}{{ k }}: {{ render_type(v) }}{{ '; ' if not loop.last }}{% endfor %} }{% elif spec.enum is defined %}{{ spec.enum | map('tojson') | join(' | ') }}{% else %}{{ spec.type }}{% endif %}{% endmacro %}{{ render_type(p) }}", `{"p": {"type": "object", "properties": {"b": {"type": "array", "items": {"type": "string"}}, "a": {"type": "string", "enum": ["x", "y"]}, "c": {"type": "integer"}}}}`},
	{"dict_items_method_attr", "{{ d.items is callable }} {{ d['items'] is defined }} {{ x.items is defined }}", `{"d": {"items": 5}, "x": {"a": 1}}`},
	{"string_compare_unicode", "{{ 'é' > 'z' }} {{ ['b', 'a', 'é', 'Z'] | sort }} {{ 'ä' | upper }}", `{}`},
	{"format_bool_num", "{{ '{}|{:d}|{:>5}|{:.3}'.format(true, true, 1.5, 2.0) }} {{ '%s %s' % (none, [1]) }} {{ '%.1f%%' % 12.345 }}", `{}`},
	{"string_list", "{{ 10 | string | list }} {{ 123 | string | length }} {{ none | string }} {{ missing | string }}|", `{}`},
	{"conditional_defined_and", "{{ 'a' if x is defined and x else 'b' }}{{ 'a' if y is defined and y else 'b' }}", `{"y": 1}`},
	{"multiline_expr", "{{ [\n  1,\n  2\n] | join(\n  ','\n) }}", `{}`},
	{"namespace_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{% set ns.c = [ns.a] %}{{ ns.c }}", `{}`},
	{"loop_length_if", "{% for x in range(10) if x % 3 == 0 %}{{ x }}:{{ loop.revindex }}{{ loop.last }} {% endfor %}", `{}`},
	{"undefined_iter_length", "{{ missing | list | length }} {{ missing | join(',') }}[{{ missing | first }}] {{ missing | default([]) | length }}", `{}`},
	{"none_attr", "[{{ none.x }}]{{ none.x is defined }}", `{}`},
	{"int_attr", "[{{ (5).real }}]{{ 5.x is defined }}", `{}`},
	{"deep_get", "{{ d.c.get('x') is none }} {{ d.get('c', {}).get('zz', 'dflt') }}", chatVars},
	{"whitespace_mix", "{%- set x = 1 -%}\n\n  {{ x }}  \n\n{%- if x %}\n\tyes\n{%- endif %}\n{#- c -#}\n  end", `{}`},
	{"block_set_whitespace", "{%- set sys %}\n  You are helpful.\n  {% if t %}Extra.{% endif %}\n{% endset -%}\n[{{ sys | trim }}]", chatVars},
	{"escape_in_string", `{{ '<|im_start|>\n' }}{{ "tab\there" }}{{ '\\n' }}`, `{}`},
	{"unicode_escape_u", `{{ '\u4e16\U0001F600\N' }}`, `{}`},
	{"slice_negative_step_bounds", "{{ xs[10:-10:-1] }} {{ xs[-1:0:-1] }} {{ 'abc'[::-2] }} {{ xs[::3] }}", chatVars},
	{"chained_filters_tests", "{{ (messages | length) is even }} {{ messages | map(attribute='role') | select('equalto', 'user') | list | length > 1 }}", chatVars},
	{"set_messages_top", "{% set messages = messages[1:] %}{{ messages | length }}{% for m in messages %}{% set messages = [] %}{% endfor %}{{ messages | length }}", chatVars},

	// errors jinja2 raises (Go must fail too)
	{"err_raise", "{{ raise_exception('boom') }}", `{}`},
	{"err_undefined_attr", "{{ missing.attr }}", `{}`},
	{"err_undefined_item", "{{ missing['x'] }}", `{}`},
	{"err_undefined_attr_of_missing_key", "{{ d.zz.y }}", chatVars},
	{"err_undefined_add", "{{ missing + 1 }}", `{}`},
	{"err_undefined_call", "{{ missing() }}", `{}`},
	{"err_undefined_compare", "{{ missing < 1 }}", `{}`},
	{"err_type_add", "{{ 'a' + 1 }}", `{}`},
	{"err_type_compare", "{{ 'a' < 1 }}", `{}`},
	{"err_div_zero", "{{ 1 / 0 }}", `{}`},
	{"err_mod_zero", "{{ 1 % 0 }}", `{}`},
	{"err_not_callable", "{{ n() }}", chatVars},
	{"err_append", "{% set l = [1] %}{{ l.append(2) }}", `{}`},
	{"err_update", "{{ d.update({'x': 1}) }}", chatVars},
	{"err_pop", "{{ xs.pop() }}", chatVars},
	{"err_dunder", "{{ ''.__class__() }}", `{}`},
	{"err_in_int", "{{ 1 in 2 }}", `{}`},
	{"err_in_str_int", "{{ 1 in 'abc' }}", `{}`},
	{"err_tojson_undefined", "{{ missing | tojson }}", `{}`},
	{"err_items_list", "{{ xs | items | list }}", chatVars},
	{"err_int_undefined", "{{ missing | int }}", `{}`},
	{"err_range_too_big", "{{ range(100001) | length }}", `{}`},
	{"err_range_args", "{{ range(0, 0, 0, 0) }}", `{}`},
	{"err_range_step_zero", "{{ range(0, 5, 0) }}", `{}`},
	{"err_unpack", "{% set a, b = [1, 2, 3] %}", `{}`},
	{"err_ns_assign", "{% set x = 1 %}{% set x.y = 2 %}", `{}`},
	{"err_macro_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", `{}`},
	{"err_split_empty", "{{ 'a'.split('') }}", `{}`},
	{"err_index_missing", "{{ 'abc'.index('z') }}", `{}`},
	{"err_join_int", "{{ ','.join([1, 2]) }}", `{}`},
	{"err_format_missing", "{{ '{} {}'.format('a') }}", `{}`},
	{"err_neg_str", "{{ -'a' }}", `{}`},
	{"err_syntax_unclosed_if", "{% if true %}x", `{}`},
	{"err_syntax_unclosed_var", "{{ x ", `{}`},
	{"err_syntax_unknown_tag", "{% frobnicate %}", `{}`},
	{"err_syntax_unknown_filter", "{{ 1 | nosuchfilter }}", `{}`},
	{"err_syntax_unknown_test", "{{ 1 is nosuchtest }}", `{}`},
	{"err_syntax_do", "{% do x %}", `{}`},
	{"err_syntax_endfor", "{% endfor %}", `{}`},
	{"err_syntax_bad_expr", "{{ 1 + }}", `{}`},
	{"err_syntax_unclosed_comment", "{# x", `{}`},
	{"err_syntax_unclosed_string", "{{ 'abc }}", `{}`},
	{"err_syntax_else_elif", "{% if x %}{% else %}{% elif y %}{% endif %}", `{}`},
	{"err_syntax_break_outside", "{% break %}", `{}`},
	{"err_syntax_assign_const", "{% set true = 1 %}", `{}`},
	{"err_syntax_unbalanced", "{{ (1 }}", `{}`},
	{"err_line_runtime", "line1\n{% for m in messages %}\n{{ m.content }}\n{% if loop.last %}\n{{ m.content + 1 }}\n{% endif %}\n{% endfor %}", chatVars},
	{"err_line_raise", "a\nb\n{%- if true %}\n  {{ raise_exception('at four') }}\n{% endif %}", `{}`},
	{"err_line_syntax", "a\n\n{{ 1 +\n + }}", `{}`},
	{"err_line_unclosed_for", "{% for x in y %}\n\nx", `{}`},
	{"err_line_macro", "{% macro m(x) %}\n{{ x.y.z }}\n{% endmacro %}\n\n{{ m(1) }}", `{}`},
	{"err_line_filter", "x\n{{ 'a' | int + 'b' }}", `{}`},
}

var strftimeFormats = []string{"%Y-%m-%d %H:%M:%S", "%d %b %Y", "%A %B %-d, %y", "%I:%M %p", "%j %w %U %W", "%e|%%|%f", "%c", "%x %X", "%D %F %T %R"}

func varsOf(t *testing.T, js string) map[string]any {
	t.Helper()
	v, err := DecodeJSON([]byte(js))
	if err != nil {
		t.Fatalf("vars %s: %v", js, err)
	}
	m := v.(*Map)
	out := make(map[string]any, m.Len())
	for _, k := range m.Keys() {
		out[k] = m.vals[k]
	}
	return out
}

type refResult struct {
	Output *string `json:"output"`
	Error  *string `json:"error"`
	Line   int     `json:"line"`
}

// jinja2Render renders cases with testdata/ref_lang.py, and Python's
// strftime of at for each of formats.
func jinja2Render(t *testing.T, cases []langCase, at time.Time, formats []string) ([]refResult, []string) {
	t.Helper()
	py := pyvenv.Python(t, "llm")
	type refIn struct {
		Template string          `json:"template"`
		Vars     json.RawMessage `json:"vars"`
	}
	in := struct {
		Cases    []refIn `json:"cases"`
		Strftime struct {
			At      []int    `json:"at"`
			Formats []string `json:"formats"`
		} `json:"strftime"`
	}{}
	for _, c := range cases {
		in.Cases = append(in.Cases, refIn{c.tmpl, json.RawMessage(c.vars)})
	}
	in.Strftime.At = []int{at.Year(), int(at.Month()), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond() / 1000}
	in.Strftime.Formats = formats
	if formats == nil {
		in.Strftime.Formats = []string{}
	}
	dir := t.TempDir()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	inPath, outPath := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json")
	if err := os.WriteFile(inPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, filepath.Join("testdata", "ref_lang.py"), inPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("ref_lang.py: %v\n%s", err, out)
	}
	ob, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Cases    []refResult `json:"cases"`
		Strftime []string    `json:"strftime"`
	}
	if err := json.Unmarshal(ob, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Cases) != len(cases) {
		t.Fatalf("%d reference results for %d cases", len(out.Cases), len(cases))
	}
	return out.Cases, out.Strftime
}

// checkCase renders c here and compares with jinja2's result.
func checkCase(t *testing.T, c langCase, ref refResult, at time.Time) {
	t.Helper()
	got, err := renderString(c.tmpl, varsOf(t, c.vars), at)
	if ref.Error != nil {
		if err == nil {
			t.Fatalf("rendered %q, jinja2 failed: %s", got, *ref.Error)
		}
		t.Logf("jinja2: %s (line %d); here: %v", *ref.Error, ref.Line, err)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%#v is not an *Error", err)
		}
		if ref.Line != 0 && e.Line != ref.Line {
			t.Errorf("error on line %d, jinja2 says line %d", e.Line, ref.Line)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v; jinja2 rendered %q", err, *ref.Output)
	}
	if got != *ref.Output {
		t.Fatalf("got\n%q\njinja2\n%q", got, *ref.Output)
	}
}

// TestLanguageParity renders langCases with jinja2 in transformers'
// environment (testdata/ref_lang.py, run now) and with this package, and
// demands the same bytes, or an error from both on the same line.
func TestLanguageParity(t *testing.T) {
	at := time.Date(2024, 3, 5, 9, 7, 3, 123456000, time.Local)
	refs, stamps := jinja2Render(t, langCases, at, strftimeFormats)
	for i, c := range langCases {
		t.Run(c.name, func(t *testing.T) { checkCase(t, c, refs[i], at) })
	}
	for i, f := range strftimeFormats {
		if got := strftime(at, f); got != stamps[i] {
			t.Errorf("strftime %q = %q, Python %q", f, got, stamps[i])
		}
	}
}

// TestWhitespaceParity renders random compositions of text, whitespace
// and tags with every whitespace-control marker, where trim_blocks and
// lstrip_blocks interact, and compares with jinja2.
func TestWhitespaceParity(t *testing.T) {
	texts := []string{"", " ", "  ", "\t", "\n", "\n\n", " \n ", "a", " a ", "a\n", "\n  b", "\r\n", "x y"}
	marks := []string{"", "-", "+"}
	rng := rand.New(rand.NewPCG(38, 1))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	tag := func(depth int) string {
		l, r := pick(marks), pick(marks)
		switch rng.IntN(6) {
		case 0:
			return "{{" + pick([]string{"", "-"}) + " 'v' " + pick([]string{"", "-"}) + "}}"
		case 1:
			return "{#" + l + " c " + r + "#}"
		case 2:
			return "{%" + l + " set x = 1 " + r + "%}"
		case 3:
			return "{%" + l + " raw " + pick([]string{"", "-"}) + "%}" + pick(texts) + "{{ r }}" + pick(texts) + "{%" + pick(marks) + " endraw " + pick(marks) + "%}"
		}
		return ""
	}
	var gen func(depth int) string
	gen = func(depth int) string {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			b.WriteString(pick(texts))
			switch {
			case depth < 2 && rng.IntN(3) == 0:
				b.WriteString("{%" + pick(marks) + " if true " + pick(marks) + "%}" + gen(depth+1) + "{%" + pick(marks) + " else " + pick(marks) + "%}no{%" + pick(marks) + " endif " + pick(marks) + "%}")
			case depth < 2 && rng.IntN(4) == 0:
				b.WriteString("{%" + pick(marks) + " for i in [1, 2] " + pick(marks) + "%}" + gen(depth+1) + "{%" + pick(marks) + " endfor " + pick(marks) + "%}")
			default:
				b.WriteString(tag(depth))
			}
			b.WriteString(pick(texts))
		}
		return b.String()
	}
	var cases []langCase
	for i := range 400 {
		cases = append(cases, langCase{name: fmt.Sprint(i), tmpl: gen(0), vars: `{}`})
	}
	at := time.Now()
	refs, _ := jinja2Render(t, cases, at, nil)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("template %q", c.tmpl)
			checkCase(t, c, refs[i], at)
		})
	}
}

// renderString parses and renders src with the clock at now.
func renderString(src string, vars map[string]any, now time.Time) (string, error) {
	tmpl, err := Parse(src)
	if err != nil {
		return "", err
	}
	return tmpl.render(vars, func() time.Time { return now })
}

// TestConcurrentRender renders one Template from several goroutines (run
// under -race): a Template keeps no state between renders.
func TestConcurrentRender(t *testing.T) {
	src := "{% set ns = namespace(n=0) %}{% macro m(x) %}[{{ x }}]{% endmacro %}{% for msg in messages %}{% set ns.n = ns.n + 1 %}{{ m(msg.role) }}{{ loop.index }}{% endfor %}{{ ns.n }}"
	tmpl, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(varsOf(t, chatVars))
	if err != nil {
		t.Fatal(err)
	}
	if want != "[system]1[user]2[assistant]3[user]44" {
		t.Fatalf("rendered %q", want)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 50 {
				got, err := tmpl.Render(varsOf(t, chatVars))
				if err == nil && got != want {
					err = &Error{Msg: "got " + got}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnsupported checks that what the package refuses fails with
// KindUnsupported (the README lists these).
func TestUnsupported(t *testing.T) {
	for _, src := range []string{
		"{% extends 'base' %}",
		"{% include 'x' %}",
		"{% import 'x' as y %}",
		"{% block b %}{% endblock %}",
		"{% for x in y recursive %}{% endfor %}",
		"{{ f(*args) }}",
		"{{ {1: 'a'} }}",
		"{{ 'a'.encode() }}",
		"{{ cycler('a', 'b') }}",
		"{{ '\\N{BULLET}' }}",
		"{{ x[1:2, 3] }}",
	} {
		tmpl, err := Parse(src)
		if err == nil {
			_, err = tmpl.Render(map[string]any{"x": []any{1}})
		}
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindUnsupported {
			t.Errorf("%s: %v, want a KindUnsupported error", src, err)
		}
	}
}
