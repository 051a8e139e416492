"""A chat template that takes an attribute's name from a constant container, or from
the data it renders, reaches a dunder as surely as one that writes it: each is an
error.  Proved with real Jinja: a renderer without a sandbox runs ``popen``.

The messages a renderer passes are the user's: an ``|attr`` whose name comes from them
hands the user the attribute.  Item access with a loop variable stays allowed
(``messages[loop.index0]``), as real templates use it.
"""

from __future__ import annotations

import pytest

from ftmanifest.scan.artifacts.gguf_model import judge_template
from tests.scan.gguf_dunder_test import LLAMA3, MESSAGES, QWEN2

jinja2 = pytest.importorskip("jinja2")

POPEN = ".os.popen('echo ran').read() }}"
FROM_CONTAINERS = [
    "{% set d = {'a': '__init__', 'b': '__globals__'} %}{{ (cycler|attr(d.a)|attr(d.b))" + POPEN,
    "{% set l = ['__init__', '__globals__'] %}{{ (cycler|attr(l[0])|attr(l[1]))" + POPEN,
    "{% set d = {'a': '__init__', 'b': '__globals__'} %}{{ cycler[d.a][d.b]" + POPEN,
    "{% set t = ('__init__', '__globals__') %}{{ (([cycler]|map('attr', t[0])|first)"
    "|attr(t[1]))" + POPEN,
]
FROM_MESSAGES = [
    "{{ (cycler|attr(messages[0]['content'])|attr(messages[1]['content']))" + POPEN,
    "{{ ([cycler]|map(attribute=messages[0]['content'])|first|attr(messages[1]['content']))"
    + POPEN,
    "{{ ([cycler]|map('attr', messages[0]['content'])|first|attr(messages[1]['content']))" + POPEN,
]
DUNDER_MESSAGES = [{"role": "user", "content": "__init__"},
                   {"role": "user", "content": "__globals__"}]  # fmt: skip


def _errors(template: str) -> list[str]:
    return [f.observed or "" for f in judge_template("m.gguf", "tokenizer.chat_template", template)
            if f.severity == "error"]  # fmt: skip


@pytest.mark.parametrize("template", FROM_CONTAINERS)
def test_a_name_kept_in_a_constant_container_is_an_error(template: str) -> None:
    assert jinja2.Environment().from_string(template).render().strip() == "ran"
    assert _errors(template), template


@pytest.mark.parametrize("template", FROM_MESSAGES)
def test_an_attribute_named_by_the_rendered_data_is_an_error(template: str) -> None:
    rendered = jinja2.Environment().from_string(template).render(messages=DUNDER_MESSAGES)
    assert rendered.strip() == "ran"
    assert _errors(template), template


def test_constant_containers_and_loop_indexes_of_real_templates_stay_clean() -> None:
    roles = (
        "{% set names = {'user': 'User', 'assistant': 'Assistant'} %}"
        "{% for message in messages %}{{ names[message['role']] }}: "
        "{{ messages[loop.index0]['content'] }}\n{% endfor %}"
    )
    out = jinja2.Environment().from_string(roles).render(messages=MESSAGES)
    assert "Assistant: hello" in out
    for template in (roles, LLAMA3, QWEN2):
        assert _errors(template) == [], template
