"""jsonschema is imported without building rfc3987-syntax's grammar (seconds of CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_jsonschema_loads_without_the_iri_grammar_and_still_validates() -> None:
    pytest.importorskip("rfc3987_syntax")
    out = _run(
        "import sys\nfrom ftmanifest.jsonschema_lib import jsonschema\nmod = jsonschema()\n"
        "print('GRAMMAR', 'rfc3987_syntax' in sys.modules)\n"
        "v = mod.Draft202012Validator({'type': 'object', 'required': ['a']})\n"
        "print('ERRORS', len(list(v.iter_errors({}))), len(list(v.iter_errors({'a': 1}))))\n"
        "import rfc3987_syntax\nprint('IMPORTABLE', rfc3987_syntax.__name__)\n"
    )
    assert "GRAMMAR False" in out
    assert "ERRORS 1 0" in out
    assert "IMPORTABLE rfc3987_syntax" in out


def test_a_plain_import_of_jsonschema_does_build_the_grammar() -> None:
    # the control: without the helper, jsonschema loads the package (what the helper avoids)
    pytest.importorskip("rfc3987_syntax")
    out = _run("import sys, jsonschema\nprint('GRAMMAR', 'rfc3987_syntax' in sys.modules)\n")
    assert "GRAMMAR True" in out


def test_a_process_that_loaded_jsonschema_first_keeps_its_module() -> None:
    out = _run(
        "import jsonschema\nfrom ftmanifest.jsonschema_lib import jsonschema as load\n"
        "print('SAME', load() is jsonschema)\n"
    )
    assert "SAME True" in out
