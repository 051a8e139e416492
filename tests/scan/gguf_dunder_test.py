"""Every route to a dunder attribute in a GGUF chat template is an error; real templates stay clean.

Each attack is proved with real Jinja: plain ``Environment`` (a renderer without a
sandbox) leaks or runs, ``ImmutableSandboxedEnvironment`` refuses.  The benign
templates follow the published structure of Llama 3, Qwen2, Mistral and Gemma chat
templates (written here, not copied).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftmanifest.scan.artifacts.gguf_model import judge_template
from tests.scan.gguf_test import _rules, _write

jinja2 = pytest.importorskip("jinja2")
pytest.importorskip("gguf")

FORMAT_LEAKS = [
    "{{ '{0.__init__.__globals__[os].environ[FTM_DUNDER_SECRET]}'.format(cycler) }}",
    "{{ '{c.__init__.__globals__[os].environ[FTM_DUNDER_SECRET]}'.format_map({'c': cycler}) }}",
]
POPEN = ".os.popen('echo ran').read() }}"
BUILT = [
    "{{ (cycler|attr('_'*2 ~ 'init' ~ '_'*2)|attr('_'*2 ~ 'globals' ~ '_'*2))" + POPEN,
    "{% set u = '%c%c'|format(95, 95) %}{{ (cycler|attr(u ~ 'init' ~ u)|attr(u ~ 'globals' ~ u))"
    + POPEN,
    "{{ (cycler|attr(['_','_','init','_','_']|join)|attr(['_','_','globals','_','_']|join))"
    + POPEN,
    "{% for u in ['_'] %}{{ (cycler|attr(u~u~'init'~u~u)|attr(u~u~'globals'~u~u))"
    + POPEN[:-3]
    + " }}{% endfor %}",
]
LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)
QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _errors(template: str) -> list[str]:
    return [f.observed or "" for f in judge_template("m.gguf", "tokenizer.chat_template", template)
            if f.severity == "error"]  # fmt: skip


@pytest.mark.parametrize("template", FORMAT_LEAKS)
def test_a_format_string_that_leaks_the_environment_is_an_error(
    template: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    monkeypatch.setenv("FTM_DUNDER_SECRET", "leaked-value")
    assert jinja2.Environment().from_string(template).render() == "leaked-value"
    with pytest.raises(SecurityError):
        ImmutableSandboxedEnvironment().from_string(template).render()
    assert any("format string" in why for why in _errors(template))


@pytest.mark.parametrize("template", BUILT)
def test_a_name_built_at_run_time_that_reaches_popen_is_an_error(template: str) -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert jinja2.Environment().from_string(template).render().strip() == "ran"
    with pytest.raises(jinja2.exceptions.UndefinedError):  # the sandbox hides the dunder
        ImmutableSandboxedEnvironment().from_string(template).render()
    assert _errors(template)


def test_a_built_name_in_a_gguf_file_fails_the_scan(tmp_path: Path) -> None:
    path = _write(tmp_path / "model.gguf", template=BUILT[1])
    assert _rules(path)["gguf.chat-template-escape"] == "error"


@pytest.mark.parametrize("template", [LLAMA3, QWEN2, MISTRAL, GEMMA])
def test_real_chat_templates_stay_clean(tmp_path: Path, template: str) -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment()
    env.globals["raise_exception"] = lambda m: (_ for _ in ()).throw(ValueError(m))
    rendered = env.from_string(template).render(
        messages=MESSAGES, bos_token="<s>", eos_token="</s>", add_generation_prompt=True
    )
    assert "hello" in rendered
    assert _errors(template) == []
    assert _rules(_write(tmp_path / "model.gguf", template=template)) == {}


def test_a_plain_format_string_is_clean() -> None:
    assert _errors("{{ '{0} says {1}'.format(message['role'], message['content']) }}") == []
