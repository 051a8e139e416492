"""GGUF files are judged as GGUF: every real one used to be ``pickle.disguised``.

Files are written with the real ``gguf`` library (llama.cpp's) and read back
with its reader.  A chat template that reaches ``__globals__`` is proved to
reach ``os`` by rendering it with plain Jinja, as a renderer without a sandbox
would; Jinja's sandbox refuses it.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from ftmanifest.scan.engine import scan_paths

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
jinja2 = pytest.importorskip("jinja2")

CHAT = (
    "{% set ns = namespace(system='') %}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set ns.system = messages[0]['content'] %}{% endif %}"
    "{% for m in messages %}{% if m['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role') }}{% endif %}"
    "<|{{ m['role'] }}|>{{ m['content'] | trim }}{{ m.content.strip() }}\n{% endfor %}"
)
ESCAPE = "{{ cycler.__init__.__globals__.os.getcwd() }}"
TOKEN = "ghp_" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb6"


def _write(path: Path, *, template: str = CHAT, description: str = "a tiny model") -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny")
    writer.add_description(description)
    writer.add_chat_template(template)
    writer.add_token_list(["<s>", "</s>", "hello", "world"])
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones((8,), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _rules(path: Path) -> dict[str, str]:
    return {f.rule: f.severity for f in scan_paths([path]).findings}


def test_a_real_gguf_is_clean(tmp_path: Path) -> None:
    path = _write(tmp_path / "model.gguf")
    reader = gguf.GGUFReader(str(path))  # the real reader takes it
    assert [t.name for t in reader.tensors] == ["token_embd.weight", "output_norm.weight"]
    assert _rules(path) == {}


def test_a_template_that_reaches_globals_is_an_error(tmp_path: Path) -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    assert jinja2.Environment().from_string(ESCAPE).render() == os.getcwd()  # it reaches os
    with pytest.raises(SecurityError):
        ImmutableSandboxedEnvironment().from_string(ESCAPE).render()
    path = _write(tmp_path / "model.gguf", template=ESCAPE)
    assert _rules(path)["gguf.chat-template-escape"] == "error"


def test_a_template_that_calls_something_else_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "model.gguf", template="{{ lipsum(1) }}{{ m.content.encode() }}")
    found = [f for f in scan_paths([path]).findings if f.rule == "gguf.chat-template-call"]
    assert sorted(f.observed for f in found) == ["it calls .encode()", "it calls lipsum()"]
    assert {f.severity for f in found} == {"warning"}


def test_metadata_strings_are_scanned_for_secrets(tmp_path: Path) -> None:
    path = _write(tmp_path / "model.gguf", description=f"uploaded with {TOKEN}")
    assert any(f.kind == "secret" for f in scan_paths([path]).findings)


def test_a_truncated_gguf_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "model.gguf")
    data = path.read_bytes()
    path.write_bytes(data[:40])
    assert _rules(path) == {"gguf.unreadable": "error"}


def test_a_pickle_named_gguf_is_still_a_disguised_pickle(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    assert "pickle.disguised" in _rules(path)


@pytest.mark.parametrize(
    "template",
    [
        "{{ (cycler|attr('__init__')|attr('__globals__')).os.getcwd() }}",
        "{{ (cycler|attr('__init__'))['__globals__'] }}",
        "{{ [cycler]|map(attribute='__init__')|list }}",
    ],
)
def test_filters_that_name_the_attribute_are_judged_too(tmp_path: Path, template: str) -> None:
    if "getcwd" in template:
        assert jinja2.Environment().from_string(template).render() == os.getcwd()
    path = _write(tmp_path / "model.gguf", template=template)
    assert _rules(path)["gguf.chat-template-escape"] == "error"
